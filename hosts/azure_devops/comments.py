"""`AzureComments`: work-item comments on a card, PR threads on a pull, and their reactions.

A card's comments are its work-item comments (Markdown, paged by continuation token); a pull's
are the text comments of its threads, system comments left out. pairbot's own comment on a pull
opens a thread of its own (created `closed`, so a "resolve all comments" branch policy never
blocks a merge on it), so only each thread's first comment can carry a marker. These are the
primitives of the shared `HostAdapter.upsert_comment`; a comment is read back by a GET of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hosts.azure_devops import convert
from hosts.azure_devops.project import AzureProject
from hosts.azure_devops.sdk import Sdk, models
from hosts.errors import NotFound, Unsupported
from hosts.models import Comment, Target

if TYPE_CHECKING:
    from hosts.base import Reaction


class AzureComments(AzureProject):
    """Comments on cards and pulls, and reactions to them."""

    # -- a card's: work-item comments -----------------------------------------------------------

    def _card_comment(self, raw: Sdk) -> Comment:
        return Comment(
            id=str(raw.id),
            body=str(raw.text or ""),
            author=convert.author_from(raw.created_by),
            created_at=convert.timestamp(raw.created_date),
            url=str(raw.url or ""),
            updated_at=convert.timestamp(getattr(raw, "modified_date", None)),
        )

    async def _card_comment_page(self, number: int, token: str | None) -> Sdk:
        return await self._call(
            f"comments of card #{number}",
            lambda c: c.wit.get_comments(self.project, number, continuation_token=token),
        )

    async def _card_comments(self, number: int) -> list[Comment]:
        """Every comment of a work item: pages are followed until no continuation token is left.

        Only a page without `continuationToken` ends the list, never a count (a page's size, or
        `totalCount`, which moves while we read):
        https://learn.microsoft.com/rest/api/azure/devops/wit/comments/get-comments
        Comments come newest first, so one posted while we read can push one already read onto
        the next page: a comment met twice is kept once.
        """
        comments: dict[str, Comment] = {}
        token: str | None = None
        while True:
            page = await self._card_comment_page(number, token)
            for raw in page.comments or []:
                comment = self._card_comment(raw)
                comments.setdefault(comment.id, comment)
            token = page.continuation_token
            if not token:
                break
        return sorted(comments.values(), key=lambda c: (c.created_at, int(c.id)))

    # -- a pull's: the comments of its threads --------------------------------------------------

    async def _threads(self, pull: int) -> list[Sdk]:
        # One GET is every thread: "Retrieve all threads in a pull request" has no `$top`,
        # `$skip` or continuation token (unlike the PR list, which stops at 101 unless paged),
        # so there is no page whose end could be misread here.
        # https://learn.microsoft.com/rest/api/azure/devops/git/pull-request-threads/list
        threads = await self._call(
            f"threads of PR #{pull}",
            lambda c: c.git.get_threads(self.repository, pull, project=self.project),
        )
        return [t for t in threads or [] if not t.is_deleted]

    def _pr_comment(self, pull: int, thread: int, raw: Sdk, web_url: str) -> Comment:
        return Comment(
            id=convert.pr_comment_id(thread, int(raw.id)),
            body=str(raw.content or ""),
            author=convert.author_from(raw.author),
            created_at=convert.timestamp(raw.published_date),
            url=f"{web_url}/pullrequest/{pull}?discussionId={thread}",
            updated_at=convert.timestamp(getattr(raw, "last_content_updated_date", None)),
        )

    async def _pr_comments(self, pull: int, *, first_only: bool) -> list[Comment]:
        web_url = (await self._repository()).web_url
        out: list[Comment] = []
        for thread in await self._threads(pull):
            texts = [
                raw
                for raw in sorted(thread.comments or [], key=lambda r: int(r.id))
                if not raw.is_deleted and str(raw.comment_type or "text") != "system"
            ]
            if first_only:
                texts = texts[:1] if texts and int(texts[0].id) == 1 else []
            out += [self._pr_comment(pull, int(thread.id), raw, web_url) for raw in texts]
        return sorted(out, key=lambda c: (c.created_at, *convert.parse_pr_comment_id(c.id)))

    # -- the primitives of the shared upsert ----------------------------------------------------

    async def list_comments(self, target: Target) -> list[Comment]:
        if target.kind == "card":
            return await self._card_comments(target.number)
        return await self._pr_comments(target.number, first_only=False)

    async def _marker_candidates(self, target: Target) -> list[Comment]:
        """A card's comments; on a pull, only each thread's first comment (pairbot's marker
        opens a thread of its own; a reply quoting it is someone else's)."""
        if target.kind == "card":
            return await self._card_comments(target.number)
        return await self._pr_comments(target.number, first_only=True)

    async def _post_comment(self, target: Target, body: str) -> str:
        if target.kind == "card":
            _, wit = models()
            created = await self._call(
                f"comment on card #{target.number}",
                lambda c: c.wit.add_work_item_comment(
                    wit.CommentCreate(text=body), self.project, target.number, "markdown"
                ),
                write=True,
            )
            return str(created.id)
        git, _ = models()
        thread = git.GitPullRequestCommentThread(
            comments=[git.Comment(parent_comment_id=0, content=body, comment_type="text")],
            status="closed",
        )
        made = await self._call(
            f"thread on PR #{target.number}",
            lambda c: c.git.create_thread(thread, self.repository, target.number, self.project),
            write=True,
        )
        return convert.pr_comment_id(int(made.id), int(made.comments[0].id))

    async def _edit_comment(self, target: Target, comment_id: str, body: str) -> None:
        if target.kind == "card":
            _, wit = models()
            await self._call(
                f"edit comment {comment_id} on card #{target.number}",
                lambda c: c.wit.update_work_item_comment(
                    wit.CommentUpdate(text=body),
                    self.project,
                    target.number,
                    int(comment_id),
                    "markdown",
                ),
                write=True,
            )
            return
        git, _ = models()
        thread, comment = convert.parse_pr_comment_id(comment_id)
        await self._call(
            f"edit comment {comment_id} on PR #{target.number}",
            lambda c: c.git.update_comment(
                git.Comment(content=body),
                self.repository,
                target.number,
                thread,
                comment,
                project=self.project,
            ),
            write=True,
        )

    async def _fetch_comment(self, target: Target, comment_id: str) -> Comment | None:
        try:
            return await self._read_comment(target, comment_id)
        except NotFound:
            return None

    async def _read_comment(self, target: Target, comment_id: str) -> Comment:
        if target.kind == "card":
            raw = await self._call(
                f"read back comment {comment_id} on card #{target.number}",
                lambda c: c.wit.get_comment(self.project, target.number, int(comment_id)),
            )
            return self._card_comment(raw)
        thread, comment = convert.parse_pr_comment_id(comment_id)
        raw = await self._call(
            f"read back comment {comment_id} on PR #{target.number}",
            lambda c: c.git.get_comment(
                self.repository, target.number, thread, comment, project=self.project
            ),
        )
        web_url = (await self._repository()).web_url
        return self._pr_comment(target.number, thread, raw, web_url)

    # -- reactions ------------------------------------------------------------------------------

    async def react(self, target: Target, comment_id: str | None, reaction: Reaction) -> None:
        if comment_id is None:
            raise Unsupported("react", "Azure DevOps has no reactions on a work item or PR itself")
        if target.kind == "card":
            kind = convert.CARD_REACTIONS.get(reaction)
            if kind is None:
                raise Unsupported("react", f"work-item comments have no {reaction!r} reaction")
            await self._call(
                f"react to comment {comment_id} on card #{target.number}",
                lambda c: c.wit.create_comment_reaction(
                    self.project, target.number, int(comment_id), kind
                ),
                write=True,
            )
            return
        if reaction != "+1":
            raise Unsupported("react", f"PR comments can only be liked, not {reaction!r}")
        thread, comment = convert.parse_pr_comment_id(comment_id)
        await self._call(
            f"like comment {comment_id} on PR #{target.number}",
            lambda c: c.git.create_like(
                self.repository, target.number, thread, comment, project=self.project
            ),
            write=True,
        )
