"""`AzureWorkItems`: cards are Azure Boards work items, and their state labels are tags.

A card is a work item (System.Title, System.Description, System.Tags, System.AssignedTo), open
or closed by its state's category for its type (looked up once per type); a new card is a
`User Story`, closing moves it to its type's first Completed state. Tags are written whole, in
one JSON patch conditional on the revision they were read at. A card's pull request is linked
to it by an artifact link (`link_card`), which Azure DevOps' completion of the pull request
follows (`transitionWorkItems`) to move the work item to its resolved or done state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hosts.adapter import Labels
from hosts.azure_devops import convert
from hosts.azure_devops.project import AzureProject
from hosts.azure_devops.sdk import Sdk, models
from hosts.errors import HostUnavailable, Unsupported
from hosts.labels import LabelPlan
from hosts.models import Card


class AzureWorkItems(AzureProject):
    """Cards (work items) and their tags."""

    async def _work_item(self, number: int) -> Sdk:
        return await self._call(
            f"get_card #{number}",
            lambda c: c.wit.get_work_item(number, project=self.project),
        )

    async def _categories(self, item_type: str) -> dict[str, str]:
        """State name → state category for a work item type (looked up once per type)."""
        if item_type not in self._states:
            states = await self._call(
                f"states of {item_type!r}",
                lambda c: c.wit.get_work_item_type_states(self.project, item_type),
            )
            self._states[item_type] = {str(s.name): str(s.category) for s in states or []}
        return self._states[item_type]

    async def _card_from(self, item: Sdk) -> Card:
        fields: Mapping[str, Any] = item.fields or {}
        item_type = str(fields.get("System.WorkItemType") or convert.NEW_CARD_TYPE)
        state = str(fields.get("System.State") or "")
        category = (await self._categories(item_type)).get(state, "")
        assigned = fields.get("System.AssignedTo")
        return Card(
            number=int(item.id),
            title=str(fields.get("System.Title") or ""),
            body=str(fields.get("System.Description") or ""),
            labels=convert.split_tags(fields.get("System.Tags")),
            assignees=(convert.author_from(assigned).login,) if assigned else (),
            state="closed" if category in convert.CLOSED_CATEGORIES else "open",
            url=f"{self.organization_url}/{self.project}/_workitems/edit/{item.id}",
            author=convert.author_from(created)
            if (created := fields.get("System.CreatedBy"))
            else None,
        )

    async def get_card(self, number: int) -> Card:
        return await self._card_from(await self._work_item(number))

    @staticmethod
    def _patch(op: str, path: str, value: object) -> Sdk:
        _, wit = models()
        return wit.JsonPatchOperation(op=op, path=path, value=value)

    async def create_card(self, title: str, body: str, labels: tuple[str, ...] = ()) -> Card:
        ops = [self._patch("add", "/fields/System.Title", title)]
        if body:
            ops.append(self._patch("add", "/fields/System.Description", body))
        if labels:
            ops.append(self._patch("add", "/fields/System.Tags", "; ".join(dict.fromkeys(labels))))
        item = await self._call(
            "create_card",
            lambda c: c.wit.create_work_item(ops, self.project, convert.NEW_CARD_TYPE),
            write=True,
        )
        return await self._card_from(item)

    async def update_card(
        self, number: int, *, title: str | None = None, body: str | None = None
    ) -> Card:
        ops = []
        if title is not None:
            ops.append(self._patch("add", "/fields/System.Title", title))
        if body is not None:
            ops.append(self._patch("add", "/fields/System.Description", body))
        if not ops:
            return await self.get_card(number)
        item = await self._call(
            f"update_card #{number}",
            lambda c: c.wit.update_work_item(ops, number, project=self.project),
            write=True,
        )
        return await self._card_from(item)

    async def _close_card(self, number: int) -> None:
        """Move the work item to its type's first Completed-category state (a closed one stays)."""
        item = await self._work_item(number)
        fields: Mapping[str, Any] = item.fields or {}
        item_type = str(fields.get("System.WorkItemType") or convert.NEW_CARD_TYPE)
        categories = await self._categories(item_type)
        if categories.get(str(fields.get("System.State") or "")) in convert.CLOSED_CATEGORIES:
            return
        done = next((s for s, cat in categories.items() if cat == "Completed"), None)
        if done is None:
            raise Unsupported("close", f"work item type {item_type!r} has no Completed state")
        ops = [self._patch("add", "/fields/System.State", done)]
        await self._call(
            f"close card #{number}",
            lambda c: c.wit.update_work_item(ops, number, project=self.project),
            write=True,
        )

    # -- the link to a card's pull request ------------------------------------------------------

    async def _linked(self, number: int, artifact: str) -> bool:
        """Whether work item `number` already links the artifact `artifact`."""
        item = await self._call(
            f"links of work item #{number}",
            lambda c: c.wit.get_work_item(number, project=self.project, expand="Relations"),
        )
        return any(
            str(rel.rel) == convert.PULL_LINK_REL and str(rel.url).casefold() == artifact.casefold()
            for rel in item.relations or []
        )

    async def link_card(self, pull: int, card: int) -> None:
        """Link work item `card` to pull request `pull` (its Pull Request artifact link): the
        pull request's Work Items panel shows it, and completing the pull request with
        `transitionWorkItems` moves it on. Once: an existing link is left as it is; a write
        whose outcome is unknown counts when the link reads back."""
        repo = await self._repository()
        artifact = convert.pull_artifact(repo.project_id, repo.id, pull)
        if await self._linked(card, artifact):
            return
        link = {
            "rel": convert.PULL_LINK_REL,
            "url": artifact,
            "attributes": {"name": convert.PULL_LINK_NAME},
        }
        ops = [self._patch("add", "/relations/-", link)]
        try:
            await self._call(
                f"link work item #{card} to PR #{pull}",
                lambda c: c.wit.update_work_item(ops, card, project=self.project),
                write=True,
            )
        except HostUnavailable:

            async def landed() -> bool | None:
                return True if await self._linked(card, artifact) else None

            if await self._settle(f"link of work item #{card}", landed) is None:
                raise

    # -- tags (a card's state labels) -----------------------------------------------------------

    async def _card_tags(self, number: int) -> Labels:
        """The work item's tags, and the revision they were read at."""
        item = await self._work_item(number)
        tags = convert.split_tags((item.fields or {}).get("System.Tags"))
        return Labels(tags, version=item.rev)

    async def _write_card_tags(self, number: int, current: Labels, plan: LabelPlan) -> None:
        """The whole tag list in one PATCH, conditional on the revision it was read at (a
        tag changed meanwhile is a Conflict, and the base reads again)."""
        tags = [t for t in current.names if t not in plan.remove] + list(plan.add)
        # `add` on System.Tags merges; `replace` sets the whole list (and needs one to exist).
        op = "replace" if current.names else "add"
        ops = [
            self._patch("test", "/rev", current.version),
            self._patch(op, "/fields/System.Tags", "; ".join(tags)),
        ]
        await self._call(
            f"tags of card #{number}",
            lambda c: c.wit.update_work_item(ops, number, project=self.project),
            write=True,
        )
