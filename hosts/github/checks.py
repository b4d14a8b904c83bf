"""`GitHubChecks`: what is reported on a head: pairbot's `pair-review` status and everyone else's.

The review status is the commit status `pair-review` on the exact head SHA (set once, read
back). `head_checks` is the outside evidence a review weighs: the check runs and commit
statuses on the head, `required` from the base branch's protection.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, cast

from hosts.errors import Conflict, Forbidden, NotFound
from hosts.github import payloads
from hosts.github.connection import PAGE, GitHubConnection
from hosts.models import REVIEW_CONTEXT, HeadCheck, ReviewState, ReviewStatus

log = logging.getLogger(__name__)

STATUS_DESCRIPTION_MAX = 140  # GitHub truncates nothing: it refuses longer descriptions


def _bind_page(page_of: Callable[[int], Awaitable[Any]], page: int) -> Callable[[], Awaitable[Any]]:
    return lambda: page_of(page)


def _app_login(run: dict[str, Any]) -> str:
    """The bot login of the App that reported a check run (`<slug>[bot]`)."""
    app = run.get("app")
    slug = app.get("slug") if isinstance(app, dict) else None
    return f"{slug}[bot]" if isinstance(slug, str) and slug else ""


class GitHubChecks(GitHubConnection):
    """The review status on a head, and the other checks on it."""

    # -- review status ---------------------------------------------------------------------

    async def get_review_status(self, pull: int, head_sha: str) -> ReviewStatus | None:
        response = await self._read(
            f"read the status of {head_sha[:12]}",
            lambda: self._gh.rest.repos.async_get_combined_status_for_ref(
                self._owner, self._name, head_sha, per_page=PAGE
            ),
        )
        for status in payloads.obj(response).get("statuses") or ():
            if isinstance(status, dict) and status.get("context") == REVIEW_CONTEXT:
                return ReviewStatus(
                    head_sha=head_sha,
                    state=cast(ReviewState, status.get("state")),
                    description=payloads.text(status.get("description")),
                )
        return None

    async def set_review_status(
        self, pull: int, head_sha: str, state: ReviewState, description: str
    ) -> ReviewStatus:
        description = description[:STATUS_DESCRIPTION_MAX]
        wanted = ReviewStatus(head_sha=head_sha, state=state, description=description)
        async with self._status_lock:
            if await self.get_review_status(pull, head_sha) == wanted:
                return wanted
            await self._write(
                f"set {REVIEW_CONTEXT} on {head_sha[:12]}",
                lambda: self._gh.rest.repos.async_create_commit_status(
                    self._owner,
                    self._name,
                    head_sha,
                    data={"state": state, "description": description, "context": REVIEW_CONTEXT},
                ),
            )
            stored = await self.get_review_status(pull, head_sha)
        if stored != wanted:
            raise self._fail(Conflict, f"{REVIEW_CONTEXT} on {head_sha[:12]} reads back {stored}")
        return wanted

    # -- outside evidence ------------------------------------------------------------------

    async def head_checks(self, pull: int, head_sha: str) -> list[HeadCheck]:
        """Check runs and commit statuses on `head_sha`, `pair-review` and this App's own
        check runs left out; `required` from the base branch's protection.

        Both lists are paged by their body's `total_count`, never by a `Link` header: every
        read is conditional, and a page replayed from the cache (a 304) keeps the `Link` it
        was stored with, which can hide a page that appeared since.
        """
        base = payloads.pull(await self._pull_data(pull)).base_branch
        required = await self._required_checks(base)
        mine = await self._own_app_login()
        try:
            runs = await self._paged(
                f"list check runs on {head_sha[:12]}",
                "check_runs",
                lambda page: self._gh.rest.checks.async_list_for_ref(
                    self._owner, self._name, head_sha, filter_="latest", per_page=PAGE, page=page
                ),
            )
        except Forbidden:
            # A token without `checks: read` (an Actions workflow or an App installed before
            # pairbot asked for it): the statuses still count, and the operator is told.
            log.warning(
                "cannot read check runs on %s (grant checks: read); reading commit statuses only",
                self.repo,
            )
            runs = []
        statuses = await self._paged(
            f"list statuses on {head_sha[:12]}",
            "statuses",
            lambda page: self._gh.rest.repos.async_get_combined_status_for_ref(
                self._owner, self._name, head_sha, per_page=PAGE, page=page
            ),
        )
        checks = [
            payloads.check_run(run, required)
            for run in runs
            if mine is None or _app_login(run) != mine
        ]
        checks += [
            payloads.commit_status(status, required)
            for status in statuses
            if status.get("context") != REVIEW_CONTEXT
        ]
        return checks

    async def _own_app_login(self) -> str | None:
        """The App's bot login when pairbot acts as an App (its check runs are its own);
        None otherwise: a token's or the Actions bot's identity also runs others' CI."""
        return (await self.identity()).login if self._app is not None else None

    async def _required_checks(self, branch: str) -> frozenset[str]:
        """What `branch`'s protection requires; none known without protection (404) or
        without the right to read it (403)."""
        try:
            response = await self._read(
                f"read the required checks of {branch}",
                lambda: self._gh.rest.repos.async_get_status_checks_protection(
                    self._owner, self._name, branch
                ),
            )
        except (NotFound, Forbidden):
            return frozenset()
        return payloads.required_checks(payloads.obj(response))

    async def _paged(
        self, op: str, key: str, page_of: Callable[[int], Awaitable[Any]]
    ) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        page = 1
        while True:
            data = payloads.obj(await self._read(op, _bind_page(page_of, page)))
            chunk = [item for item in data.get(key) or () if isinstance(item, dict)]
            items.extend(chunk)
            total = data.get("total_count")
            if not chunk or not isinstance(total, int) or len(items) >= total:
                return items
            page += 1
