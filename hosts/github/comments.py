"""`GitHubComments`: issue comments (a pull's conversation is its issue's), and reactions.

`list_comments` reads every page (where the list ends is decided by the body, never by a cached
`Link`: its docstring says why); `_post_comment`, `_edit_comment` and `_fetch_comment` are the
single requests the shared `HostAdapter.upsert_comment` is made of, and a marker comment once
found is read by itself after that (`_known_comment`, the session's `KnownComments`). A scope
decision named by reference (a comment URL or id) is read here; discovery is the base's.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

from hosts.base import Reaction
from hosts.errors import NotFound
from hosts.github import payloads
from hosts.github.connection import PAGE, GitHubConnection
from hosts.markers import owned_comments
from hosts.models import Author, Comment, Target

_COMMENT_REF = re.compile(r"(?:#issuecomment-|/issues/comments/)(\d+)$|^(\d+)$")


class GitHubComments(GitHubConnection):
    """Issue comments, reactions and a scope decision by reference."""

    async def list_comments(self, target: Target) -> list[Comment]:
        """Every comment, read `PAGE` at a time; a full page always asks for the next one.

        Why the body and not the `Link` header decides where the list ends: every page is a
        conditional GET (`hosts.github.transport`), and a 304 is answered with the headers the
        page was stored with. Page 1 stored while it was the last page has no `rel="next"`, and
        it stays byte-identical (so 304) when comments 101 and 102 arrive on page 2: its `Link`
        would hide them, and every upsert of a marker living there would post it again. What a
        304 does certify is the body, and issue comments are fixed slices of `per_page` in
        ascending id (https://docs.github.com/en/rest/issues/comments#list-issue-comments): a
        page shorter than `PAGE` is the last one, a full page may have a successor. So the next
        page is read whenever this one is full (or a `Link` says there is one), and the list
        ends at the first short or empty page. Every page stays conditional, so an unchanged
        listing costs 304s, which GitHub does not count against the rate limit
        (https://docs.github.com/en/rest/using-the-rest-api/best-practices-for-using-the-rest-api#use-conditional-requests-if-appropriate);
        the price is one extra read (an empty page, then a free 304) when the count is an exact
        multiple of `PAGE`. Bypassing the cache after page 1, or re-reading the last page
        unconditionally, would pay a counted request on every listing instead.
        (https://docs.github.com/en/rest/using-the-rest-api/using-pagination-in-the-rest-api)
        """
        comments: list[Comment] = []
        page = 1
        while True:
            response = await self._read(
                f"list comments on #{target.number}", self._comments_page(target.number, page)
            )
            items = payloads.objs(response)
            comments.extend(payloads.comment(item) for item in items)
            more = len(items) >= PAGE or "next" in response.raw_response.links
            if not items or not more:
                return comments
            page += 1

    def _comments_page(self, number: int, page: int) -> Callable[[], Awaitable[Any]]:
        return lambda: self._gh.rest.issues.async_list_comments(
            self._owner, self._name, number, per_page=PAGE, page=page
        )

    async def _post_comment(self, target: Target, text: str) -> str:
        response = await self._write(
            f"comment on #{target.number}",
            lambda: self._gh.rest.issues.async_create_comment(
                self._owner, self._name, target.number, body=text
            ),
        )
        return str(payloads.obj(response).get("id", ""))

    async def _edit_comment(self, target: Target, comment_id: str, text: str) -> None:
        number = self._comment_number(comment_id)
        await self._write(
            f"edit comment {comment_id}",
            lambda: self._gh.rest.issues.async_update_comment(
                self._owner, self._name, number, body=text
            ),
        )

    async def _get_comment(self, target: Target, comment_id: str) -> Comment | None:
        """One conditional GET of the comment (a 304 when unchanged); None when it is gone or
        is not on `target`."""
        number = self._comment_number(comment_id)
        try:
            response = await self._read(
                f"read comment {number}",
                lambda: self._gh.rest.issues.async_get_comment(self._owner, self._name, number),
            )
        except NotFound:
            return None
        data = payloads.obj(response)
        if not payloads.text(data.get("issue_url")).endswith(f"/issues/{target.number}"):
            return None
        return payloads.comment(data)

    async def _fetch_comment(self, target: Target, comment_id: str) -> Comment | None:
        """The read-back of a write. A remembered comment is read by itself; any other (one
        just created) in the listing the next upsert reads, which warms that listing's ETags
        and settles which comment every writer keeps."""
        if self._session.known_comments.knows(comment_id):
            return await self._get_comment(target, comment_id)
        return await super()._fetch_comment(target, comment_id)

    async def _known_comment(self, target: Target, marker: str, me: Author) -> Comment | None:
        """The remembered comment, read by itself: on an issue of hundreds of comments every
        upsert would otherwise read every page (and its read-back all of them again)."""
        key = (self._owner, self._name, target.number, marker)
        known = self._session.known_comments
        comment_id = known.get(key)
        if comment_id is None:
            return None
        comment = await self._get_comment(target, comment_id)
        if comment is None or not owned_comments([comment], marker, me):
            known.forget(key)  # deleted, or its marker edited away: the listing decides again
            return None
        return comment

    def _remember_comment(self, target: Target, marker: str, comment_id: str) -> None:
        self._session.known_comments.keep(
            (self._owner, self._name, target.number, marker), comment_id
        )

    @staticmethod
    def _comment_number(comment_id: str) -> int:
        if not comment_id.isdigit():
            raise NotFound(f"{comment_id!r} is not a GitHub comment id")
        return int(comment_id)

    async def react(self, target: Target, comment_id: str | None, reaction: Reaction) -> None:
        if comment_id is None:
            await self._write(
                f"react to #{target.number}",
                lambda: self._gh.rest.reactions.async_create_for_issue(
                    self._owner, self._name, target.number, data={"content": reaction}
                ),
                lane="ack",  # an acknowledgement goes ahead of bulk writes (hosts.pacer)
            )
            return
        number = self._comment_number(comment_id)
        await self._write(
            f"react to comment {comment_id}",
            lambda: self._gh.rest.reactions.async_create_for_issue_comment(
                self._owner, self._name, number, data={"content": reaction}
            ),
            lane="ack",
        )

    async def read_scope_decision(
        self,
        pull: int,
        comment_ref: str | None = None,
        *,
        prefer: Callable[[Comment], bool] | None = None,
    ) -> Comment | None:
        if comment_ref is None:
            # Discovery is the rule every adapter shares (pairbot's own packet is skipped).
            return await super().read_scope_decision(pull, prefer=prefer)
        match = _COMMENT_REF.search(comment_ref.strip())
        if match is None:
            raise NotFound(f"{comment_ref!r} does not name a GitHub comment")
        number = match.group(1) or match.group(2)
        found = await self._get_comment(Target("pull", pull), number)
        if found is None:
            raise NotFound(f"comment {number} is not on PR #{pull}")
        return found
