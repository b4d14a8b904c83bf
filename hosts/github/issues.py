"""`GitHubIssues`: cards are GitHub issues, and the state labels are their labels.

A card is an issue, read and written whole; a create that may have been stored is looked for by
title and body among pairbot's newest issues before it is an error. The state labels are the
issue's labels (a pull's are its issue's): `_read_labels` and `_write_labels` are the primitives
of the shared `HostAdapter.set_state_label`, removing before adding.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, cast

from hosts.adapter import Labels
from hosts.errors import HostUnavailable, NotFound
from hosts.github import payloads
from hosts.github.connection import GitHubConnection
from hosts.labels import LabelPlan
from hosts.markers import same_text
from hosts.models import Card, Target

log = logging.getLogger(__name__)


class GitHubIssues(GitHubConnection):
    """Cards (issues) and state labels."""

    # -- cards -----------------------------------------------------------------------------

    async def get_card(self, number: int) -> Card:
        return payloads.card(await self._issue(number))

    async def create_card(self, title: str, body: str, labels: tuple[str, ...] = ()) -> Card:
        op = "create a card"
        try:
            response = await self._write(
                op,
                lambda: self._gh.rest.issues.async_create(
                    self._owner,
                    self._name,
                    data={"title": title, "body": body, "labels": list(labels)},
                ),
            )
        except HostUnavailable:
            found = await self._calls.settle(op, lambda: self._find_created_card(title, body))
            if found is None:
                raise
            log.warning("%s: GitHub failed after storing #%s; using it", op, found.number)
            return found
        return payloads.card(payloads.obj(response))

    async def _find_created_card(self, title: str, body: str) -> Card | None:
        me = await self.identity()
        response = await self._read(
            "find a created card",
            lambda: self._gh.rest.issues.async_list_for_repo(
                self._owner, self._name, state="all", sort="created", direction="desc", per_page=30
            ),
        )
        for data in payloads.objs(response):
            card = payloads.card(data)
            mine = payloads.author(data.get("user")).id == me.id
            if mine and card.title == title and same_text(card.body, body):
                return card
        return None

    async def update_card(
        self, number: int, *, title: str | None = None, body: str | None = None
    ) -> Card:
        fields: dict[str, str] = {}
        if title is not None:
            fields["title"] = title
        if body is not None:
            fields["body"] = body
        if not fields:
            return await self.get_card(number)
        response = await self._write(
            f"update #{number}",
            lambda: self._gh.rest.issues.async_update(
                self._owner, self._name, number, data=cast(Any, fields)
            ),
        )
        return payloads.card(payloads.obj(response))

    # -- state labels ----------------------------------------------------------------------

    async def _read_labels(self, target: Target) -> Labels:
        return Labels(payloads.labels(await self._issue(target.number)))

    async def _write_labels(self, target: Target, current: Labels, plan: LabelPlan) -> None:
        number = target.number
        for label in plan.remove:  # first: never two state labels at once
            with contextlib.suppress(NotFound):  # removed meanwhile: the goal holds
                await self._write(f"unlabel #{number}", self._remove_label(number, label))
        if plan.add:
            await self._write(
                f"label #{number}",
                lambda: self._gh.rest.issues.async_add_labels(
                    self._owner, self._name, number, data={"labels": list(plan.add)}
                ),
            )

    def _remove_label(self, number: int, label: str) -> Callable[[], Awaitable[Any]]:
        return lambda: self._gh.rest.issues.async_remove_label(
            self._owner, self._name, number, label
        )
