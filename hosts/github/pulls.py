"""`GitHubPulls`: pull requests: opened once per head branch, read, and merged at the reviewed head.

`open_pull` returns the open pull of a head branch if there is one, and a create that failed
(stored before a 5xx, or opened meanwhile) is settled by reading that again. `merge` is pinned
to the reviewed head with `sha=`; a draft is marked ready first with GraphQL (REST cannot).
"""

from __future__ import annotations

from hosts.errors import Conflict, HostUnavailable
from hosts.github import payloads
from hosts.github.connection import GitHubConnection
from hosts.models import MergeMethod, MergeResult, Pull

_READY_FOR_REVIEW = (
    "mutation($id: ID!) { markPullRequestReadyForReview(input: {pullRequestId: $id}) "
    "{ pullRequest { isDraft } } }"
)


class GitHubPulls(GitHubConnection):
    """Open, read and merge pull requests."""

    async def _open_pull_for(self, head: str) -> Pull | None:
        response = await self._read(
            f"find the pull for {head}",
            lambda: self._gh.rest.pulls.async_list(
                self._owner, self._name, head=f"{self._owner}:{head}", state="open"
            ),
        )
        pulls = [payloads.pull(item) for item in payloads.objs(response)]
        return pulls[0] if pulls else None

    async def open_pull(
        self, head: str, base: str, title: str, body: str, *, draft: bool = True
    ) -> Pull:
        existing = await self._open_pull_for(head)
        if existing is not None:
            return existing
        op = f"open a pull for {head}"
        try:
            response = await self._write(
                op,
                lambda: self._gh.rest.pulls.async_create(
                    self._owner,
                    self._name,
                    data={"title": title, "head": head, "base": base, "body": body, "draft": draft},
                ),
            )
        except (HostUnavailable, Conflict):
            # Stored before a 5xx, or opened meanwhile ("A pull request already exists").
            found = await self._calls.settle(op, lambda: self._open_pull_for(head))
            if found is None:
                raise
            return found
        return payloads.pull(payloads.obj(response))

    async def get_pull(self, number: int) -> Pull:
        return payloads.pull(await self._pull_data(number))

    # -- merge -----------------------------------------------------------------------------

    async def merge_methods(self) -> frozenset[MergeMethod] | None:
        """What the repository's settings allow (`allow_squash_merge`, `allow_merge_commit`,
        `allow_rebase_merge`); None when the response carries none of them (GitHub leaves
        them out for a token that may not read the repository's settings)."""
        response = await self._read(
            f"read {self._owner}/{self._name}'s merge settings",
            lambda: self._gh.rest.repos.async_get(self._owner, self._name),
        )
        data = payloads.obj(response)
        fields: dict[MergeMethod, str] = {
            "squash": "allow_squash_merge",
            "merge": "allow_merge_commit",
            "rebase": "allow_rebase_merge",
        }
        if not any(isinstance(data.get(name), bool) for name in fields.values()):
            return None
        return frozenset(m for m, name in fields.items() if data.get(name, True) is not False)

    async def merge(self, pull: int, head_sha: str, method: MergeMethod) -> MergeResult:
        data = await self._pull_data(pull)
        current = payloads.pull(data)
        if current.merged and current.head_sha == head_sha:
            return MergeResult(merged=True, sha=payloads.text(data.get("merge_commit_sha")) or None)
        if current.state != "open":
            raise Conflict(f"merge PR #{pull}: it is {current.state}")
        if current.head_sha != head_sha:
            raise Conflict(
                f"merge PR #{pull}: the head moved from the reviewed {head_sha[:12]} "
                f"to {current.head_sha[:12]}"
            )
        if current.draft:
            await self._mark_ready(pull, payloads.text(data.get("node_id")))
        op = f"merge PR #{pull}"
        try:
            response = await self._write(
                op,
                lambda: self._gh.rest.pulls.async_merge(
                    self._owner,
                    self._name,
                    pull,
                    data={"sha": head_sha, "merge_method": method},
                ),
            )
        except HostUnavailable:
            after = await self._pull_data(pull)  # merged before the 5xx?
            if not payloads.pull(after).merged:
                raise
            return MergeResult(
                merged=True, sha=payloads.text(after.get("merge_commit_sha")) or None
            )
        result = payloads.obj(response)
        return MergeResult(
            merged=bool(result.get("merged")), sha=payloads.text(result.get("sha")) or None
        )

    async def _mark_ready(self, pull: int, node_id: str) -> None:
        """Draft → ready: REST cannot, GraphQL `markPullRequestReadyForReview` can."""
        await self._write(
            f"mark PR #{pull} ready for review",
            lambda: self._gh.async_graphql(_READY_FOR_REVIEW, {"id": node_id}),
        )
