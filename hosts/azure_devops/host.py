"""`AzureDevOpsHost`: Azure Boards work items and Azure Repos pull requests, via the SDK.

`AzureDevOpsHost` implements `hosts.base.Host` with the azure-devops SDK (7.1, msrest over
requests). It only translates; every decision (which comment, which label, when to merge) is
made by the pure modules beside it, and the upsert, the state labels and the scope-decision
discovery are the shared algorithms of `hosts.adapter.HostAdapter`, fed by this class's
primitives. What each operation maps to:

    identity            Location ConnectionData: the PAT's authenticated user
    get_card …          work item: System.Title, System.Description, System.Tags ("a; b"),
                        System.AssignedTo; open/closed from the state's category (Completed and
                        Removed are closed) for the item's type
    create_card         a `User Story` (JSON patch)
    update_card         JSON patch of System.Title / System.Description
    list_comments       card: work-item comments (Markdown); pull: the text comments of every
                        PR thread, system comments left out
    upsert_comment      card: a work-item comment; pull: a PR thread whose FIRST comment carries
                        the marker (created `closed`, so a "resolve all comments" branch policy
                        never blocks a merge on pairbot's own notes); read back by a GET of the
                        one comment
    react               work-item comments: +1/-1/confused as like/dislike/confused reactions;
                        PR comments: +1 as a like. Anything else is Unsupported("react"): there
                        are no eyes/rocket reactions, and none on a work item or PR itself
    permission          effective bits of the user on the repository and on its default branch
                        (Git security namespace ACLs with extended info; the branch's deny wins,
                        `branch_bits`), see `permission_from_bits`
    push_branch         `git push` over HTTPS, the PAT in a URL-scoped `http.extraheader` passed
                        through GIT_CONFIG_COUNT env vars (never argv, never a URL)
    open_pull           the active PR from the same source branch, else a new one (a create that
                        raced one, TF401179, or failed after being stored is re-read, not retried)
    get_pull            status active/abandoned/completed → open/closed/merged, isDraft,
                        mergeStatus, lastMergeSourceCommit (the head), reviewers as assignees
    set/get_review_st.  a PR status, context {genre: pair, name: pair-review}, posted on the
                        iteration whose sourceRefCommit is the reviewed head (none: Conflict);
                        statuses are per iteration, so a moved head has no status
    head_checks         the other services' PR statuses on the head's iterations (newest per
                        genre/name, `pair-review` left out) and, while it is the PR's head,
                        its build policy evaluations (required = the policy is blocking)
    set_state_label     card: System.Tags (replace, guarded by `test /rev`: a tag changed
                        meanwhile is a Conflict, and the shared loop reads again); pull: PR labels
    read_scope_decision the pull's comments, chosen by `hosts.decisions.scope_decision_in`
                        (pairbot's own packet is never the maintainer's answer)
    merge               PATCH status=completed with lastMergeSourceCommit = the reviewed head (the
                        server refuses a stale one too) and mergeStrategy squash/noFastForward;
                        a draft is published first; rebase is Unsupported("merge:rebase"); a
                        queued completion is polled a bounded number of times (still queued:
                        merged=False), and one already requested is polled, not requested again
    close               pull: abandon; card: the first Completed-category state of its type

Ids: a card is a work item id; a pull is a pull request id; a card comment's id is its
work-item comment id; a PR comment's id is `<thread id>/<comment id>` (`147/1`).

Transport rules (`hosts.azure_devops.connection`, for every requests session the SDK makes):
- the SDK is synchronous: every call runs in a worker thread (`asyncio.to_thread`);
- one requests adapter on every SDK session (`hosts.azure_devops.sdk`) — the SDK's internal
  resource-area discovery client included, reached through the credentials' `signed_session` —
  caps the timeout and never retries; the call discipline is `hosts.calls` (reads retried a
  bounded number of times with the injected sleep, writes one at a time and never retried; a
  comment create that failed after the server stored it is reconciled by marker, settled with
  `Calls.settle`);
- `Retry-After` is honoured on every response, a 200 included (Azure DevOps delays before it
  blocks: https://learn.microsoft.com/azure/devops/integrate/concepts/rate-limits): a response
  hook records the window and the next HTTP request (even within the same SDK call) first
  awaits the injectable sleep until it closes, or raises RateLimited when the wait is longer
  than `max_wait_s`;
- SDK exceptions are translated in `hosts.azure_devops.translate`; no token reaches a message,
  a log or a repr.

Known limits: System.Description is a rich-text (HTML) field and Azure DevOps may sanitise what
it stores (pairbot writes text as given; Markdown multiline fields are not used, as Azure DevOps
Server refuses them); work-item comments are written as Markdown so markers survive. The SDK
caches resource locations on disk for 12 hours, keyed by URL: `cache_dir` points that cache
elsewhere, process-wide (the SDK keeps it in module singletons, so the last host built wins).
The SDK is imported lazily, on the first call: importing `hosts` or another adapter never loads it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from hosts.adapter import HostAdapter, Labels
from hosts.azure_devops import convert
from hosts.azure_devops.connection import SdkConnection
from hosts.azure_devops.push import local_head, push
from hosts.azure_devops.sdk import Clients, Sdk, models
from hosts.errors import (
    Conflict,
    HostUnavailable,
    NotFound,
    Unsupported,
)
from hosts.labels import LabelPlan
from hosts.models import (
    REVIEW_CONTEXT,
    Author,
    Card,
    Comment,
    HeadCheck,
    MergeMethod,
    MergeResult,
    Permission,
    Pull,
    ReviewState,
    ReviewStatus,
    Target,
)
from hosts.secrets import Secret

if TYPE_CHECKING:
    from hosts.base import Host, Reaction

__all__ = ["AzureDevOpsHost"]

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class _Repo:
    """What pairbot needs of the repository, looked up once."""

    id: str
    project_id: str
    remote_url: str
    web_url: str
    default_branch: str = ""


class AzureDevOpsHost(HostAdapter):
    """`Host` over one Azure DevOps project: its Boards for cards, one repository for code."""

    name = "azure-devops"

    def __init__(
        self,
        organization_url: str,
        project: str,
        repository: str,
        token: str,
        *,
        timeout_s: float = 30,
        cache_dir: str | Path | None = None,
        sleep: Callable[[float], Coroutine[Any, Any, None]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        max_wait_s: float = 60.0,
        read_attempts: int = 3,
        backoff_s: float = 1.0,
        merge_polls: int = 10,
        push_timeout_s: float = 300.0,
    ) -> None:
        super().__init__()
        if not token:
            raise ValueError("an Azure DevOps personal access token is required")
        if not organization_url or not project or not repository:
            raise ValueError("organization_url, project and repository are required")
        self.organization_url = organization_url.rstrip("/")
        self.project = project
        self.repository = repository
        self._token = Secret(token)
        self._merge_polls = merge_polls
        self._push_timeout_s = push_timeout_s
        self._sleep = sleep
        self._sdk = SdkConnection(
            self.organization_url,
            self._token,
            timeout_s=timeout_s,
            cache_dir=Path(cache_dir) if cache_dir is not None else None,
            sleep=sleep,
            clock=clock,
            max_wait_s=max_wait_s,
            read_attempts=read_attempts,
            backoff_s=backoff_s,
        )
        self._me: Author | None = None
        self._repo: _Repo | None = None
        self._states: dict[str, dict[str, str]] = {}  # work item type → state → category

    def __repr__(self) -> str:
        return (
            f"AzureDevOpsHost(organization_url={self.organization_url!r}, "
            f"project={self.project!r}, repository={self.repository!r})"
        )

    async def _call(self, what: str, fn: Callable[[Clients], T], *, write: bool = False) -> T:
        """One SDK call in a worker thread, under the shared discipline (`hosts.calls`)."""
        return await self._sdk.call(what, fn, write=write)

    # -- identity and repository ----------------------------------------------------------------

    async def identity(self) -> Author:
        if self._me is None:
            data = await self._call("identity", lambda c: c.location.get_connection_data())
            self._me = convert.identity_from(data.authenticated_user)
        return self._me

    async def _repository(self) -> _Repo:
        if self._repo is None:
            repo = await self._call(
                "repository",
                lambda c: c.git.get_repository(self.repository, project=self.project),
            )
            project_id = str(repo.project.id) if repo.project is not None else ""
            web = repo.web_url or f"{self.organization_url}/{self.project}/_git/{repo.name}"
            self._repo = _Repo(
                id=str(repo.id),
                project_id=project_id,
                remote_url=str(repo.remote_url),
                web_url=web,
                default_branch=convert.branch(repo.default_branch),
            )
        return self._repo

    # -- cards ----------------------------------------------------------------------------------

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

    # -- comments -------------------------------------------------------------------------------

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

    async def list_comments(self, target: Target) -> list[Comment]:
        if target.kind == "card":
            return await self._card_comments(target.number)
        return await self._pr_comments(target.number, first_only=False)

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

    async def _marker_candidates(self, target: Target) -> list[Comment]:
        """A card's comments; on a pull, only each thread's first comment (pairbot's marker
        opens a thread of its own; a reply quoting it is someone else's)."""
        if target.kind == "card":
            return await self._card_comments(target.number)
        return await self._pr_comments(target.number, first_only=True)

    async def _settle(self, op: str, find: Callable[[], Awaitable[T | None]]) -> T | None:
        return await self._sdk.calls.settle(op, find)

    async def _pause(self, seconds: float) -> None:
        await self._sleep(seconds)

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

    # -- people ---------------------------------------------------------------------------------

    async def permission(self, user: str) -> Permission:
        """The user's effective permission on the repository's default branch — the base of
        pairbot's pull requests — with that branch's overrides (see `permission_from_bits`)."""
        identities = await self._call(
            f"identity {user!r}",
            lambda c: c.identity.read_identities(search_filter="General", filter_value=user),
        )
        found = list(identities or [])

        def account(identity: Sdk) -> str:
            props = identity.properties if isinstance(identity.properties, Mapping) else {}
            value = props.get("Account")
            return str(value.get("$value", "")) if isinstance(value, Mapping) else ""

        exact = [i for i in found if account(i).casefold() == user.casefold()]
        chosen = exact or found
        if len(chosen) != 1:
            log.info("permission: %d identities match %r; treating as none", len(chosen), user)
            return "none"
        descriptor = str(chosen[0].descriptor)
        repo = await self._repository()
        allow, deny = await self._bits(user, descriptor, f"repoV2/{repo.project_id}/{repo.id}")
        if not repo.default_branch:  # an empty repository has no branch to override anything
            return convert.permission_from_bits(allow & ~deny)
        token = convert.branch_token(repo.project_id, repo.id, repo.default_branch)
        on_branch, denied_on_branch = await self._bits(user, descriptor, token)
        return convert.permission_from_bits(
            convert.branch_bits(allow, deny, on_branch, denied_on_branch)
        )

    async def _bits(self, user: str, descriptor: str, token: str) -> tuple[int, int]:
        """The identity's effective (allow, deny) bits on one Git security token."""
        acls = await self._call(
            f"permissions of {user!r}",
            lambda c: c.security.query_access_control_lists(
                convert.GIT_NAMESPACE,
                token=token,
                descriptors=descriptor,
                include_extended_info=True,
            ),
        )
        allow = deny = 0
        for acl in acls or []:
            for key, ace in (acl.aces_dictionary or {}).items():
                if str(key).casefold() != descriptor.casefold():
                    continue
                info = ace.extended_info
                allow |= int((info.effective_allow if info else None) or ace.allow or 0)
                deny |= int((info.effective_deny if info else None) or ace.deny or 0)
        return allow, deny

    # -- code -----------------------------------------------------------------------------------

    async def push_branch(self, repo_dir: Path, branch: str, *, force: bool = False) -> str:
        if not branch or branch.startswith(("-", "refs/")):
            raise NotFound(f"{branch!r} is not a branch name")
        head = await local_head(repo_dir, branch)
        if head is None:
            raise NotFound(f"branch {branch!r} does not exist in {repo_dir}")
        remote = (await self._repository()).remote_url
        await self._sdk.calls.await_window(f"push of {branch!r}")
        await push(
            repo_dir,
            remote,
            branch,
            self._token.reveal(),
            force=force,
            timeout_s=self._push_timeout_s,
        )
        return head

    def _pull_from(self, pr: Sdk, web_url: str) -> Pull:
        mergeable = convert.MERGEABLE.get(
            str(pr.merge_status or "")
        )  # queued / notSet: not known yet
        reviewers = [r for r in pr.reviewers or [] if not r.is_container]
        return Pull(
            number=int(pr.pull_request_id),
            head_branch=convert.branch(pr.source_ref_name),
            head_sha=convert.commit(pr.last_merge_source_commit),
            base_branch=convert.branch(pr.target_ref_name),
            state=convert.PULL_STATE.get(str(pr.status), "open"),
            draft=bool(pr.is_draft),
            mergeable=mergeable,
            title=str(pr.title or ""),
            body=str(pr.description or ""),
            url=f"{web_url}/pullrequest/{pr.pull_request_id}",
            labels=tuple(str(lb.name) for lb in pr.labels or [] if lb.active is not False),
            assignees=tuple(convert.author_from(r).login for r in reviewers),
        )

    async def _pr(self, number: int) -> Sdk:
        return await self._call(
            f"get_pull #{number}",
            lambda c: c.git.get_pull_request(self.repository, number, project=self.project),
        )

    async def get_pull(self, number: int) -> Pull:
        pr = await self._pr(number)
        return self._pull_from(pr, (await self._repository()).web_url)

    async def _active_pull_for(self, head: str) -> Sdk | None:
        git, _ = models()
        criteria = git.GitPullRequestSearchCriteria(
            source_ref_name=f"refs/heads/{head}", status="active"
        )
        found = await self._call(
            f"pull requests from {head!r}",
            lambda c: c.git.get_pull_requests(self.repository, criteria, project=self.project),
        )
        mine = sorted(found or [], key=lambda pr: int(pr.pull_request_id))
        return mine[0] if mine else None

    async def open_pull(
        self, head: str, base: str, title: str, body: str, *, draft: bool = True
    ) -> Pull:
        web_url = (await self._repository()).web_url
        existing = await self._active_pull_for(head)
        if existing is not None:
            return self._pull_from(existing, web_url)
        if head == base:
            raise Conflict(f"a pull request needs two branches; head and base are {head!r}")
        git, _ = models()
        new = git.GitPullRequest(
            source_ref_name=f"refs/heads/{head}",
            target_ref_name=f"refs/heads/{base}",
            title=title,
            description=convert.truncate_description(body),
            is_draft=draft,
        )
        try:
            pr = await self._call(
                f"open_pull {head!r}",
                lambda c: c.git.create_pull_request(new, self.repository, project=self.project),
                write=True,
            )
        except (Conflict, HostUnavailable):
            # Opened meanwhile (TF401179), or stored before a 5xx: return that one.
            existing = await self._active_pull_for(head)
            if existing is None:
                raise
            pr = existing
        return self._pull_from(pr, web_url)

    # -- review status --------------------------------------------------------------------------

    async def _iterations_of(self, pull: int, head_sha: str) -> list[int]:
        """The ids of the pull's iterations whose source commit is `head_sha`, newest first."""
        iterations = await self._call(
            f"iterations of PR #{pull}",
            lambda c: c.git.get_pull_request_iterations(
                self.repository, pull, project=self.project
            ),
        )
        sha = head_sha.lower()
        ids = [
            int(it.id)
            for it in iterations or []
            if convert.commit(it.source_ref_commit).lower() == sha
        ]
        return sorted(ids, reverse=True)

    async def _iteration_statuses(self, pull: int, iteration: int) -> list[Sdk]:
        statuses = await self._call(
            f"statuses of PR #{pull} iteration {iteration}",
            lambda c: c.git.get_pull_request_iteration_statuses(
                self.repository, pull, iteration, project=self.project
            ),
        )
        return list(statuses or [])

    async def _our_statuses(self, pull: int, iteration: int) -> list[Sdk]:
        statuses = await self._iteration_statuses(pull, iteration)
        ours = [
            s
            for s in statuses or []
            if s.context is not None
            and s.context.genre == convert.REVIEW_GENRE
            and s.context.name == REVIEW_CONTEXT
        ]
        return sorted(ours, key=lambda s: int(s.id or 0))

    async def set_review_status(
        self, pull: int, head_sha: str, state: ReviewState, description: str
    ) -> ReviewStatus:
        if state not in convert.TO_AZURE_STATE:
            raise ValueError(f"{state!r} is not a review state")
        iterations = await self._iterations_of(pull, head_sha)
        if not iterations:
            raise Conflict(f"PR #{pull} has no iteration with head {head_sha[:12]}: it moved")
        iteration = iterations[0]
        wanted = ReviewStatus(head_sha=head_sha, state=state, description=description)
        ours = await self._our_statuses(pull, iteration)
        if ours and (str(ours[-1].state), ours[-1].description or "") == (
            convert.TO_AZURE_STATE[state],
            description,
        ):
            return wanted  # already so: re-setting the same status writes nothing
        git, _ = models()
        status = git.GitPullRequestStatus(
            state=convert.TO_AZURE_STATE[state],
            description=description,
            context=git.GitStatusContext(genre=convert.REVIEW_GENRE, name=REVIEW_CONTEXT),
        )
        await self._call(
            f"set pair-review on PR #{pull}",
            lambda c: c.git.create_pull_request_iteration_status(
                status, self.repository, pull, iteration, project=self.project
            ),
            write=True,
        )
        return wanted

    async def get_review_status(self, pull: int, head_sha: str) -> ReviewStatus | None:
        for iteration in await self._iterations_of(pull, head_sha):
            ours = await self._our_statuses(pull, iteration)
            if ours:
                latest = ours[-1]
                return ReviewStatus(
                    head_sha=head_sha,
                    state=convert.FROM_AZURE_STATE.get(str(latest.state), "error"),
                    description=str(latest.description or ""),
                )
        return None

    # -- outside evidence -----------------------------------------------------------------------

    async def head_checks(self, pull: int, head_sha: str) -> list[HeadCheck]:
        """The other services' PR statuses on the iterations whose head is `head_sha`, the
        newest per name; `pair-review` left out. A status posted on the pull request without
        an iteration is bound to no head and is not read. Azure DevOps does not say whether a
        status is required here (a branch policy does, elsewhere): `required` stays False."""
        latest: dict[str, tuple[int, HeadCheck]] = {}
        for iteration in await self._iterations_of(pull, head_sha):
            for status in await self._iteration_statuses(pull, iteration):
                if status.context is None or convert.is_review_status(status):
                    continue
                check = convert.head_check(status)
                rank = (iteration << 32) + int(status.id or 0)
                if check.name not in latest or latest[check.name][0] < rank:
                    latest[check.name] = (rank, check)
        checks = [check for _, check in sorted(latest.values(), key=lambda item: item[1].name)]
        return checks + await self._build_checks(pull, head_sha)

    async def _build_checks(self, pull: int, head_sha: str) -> list[HeadCheck]:
        """The PR's build policy evaluations, while `head_sha` is the PR's head: they are
        the policy's state for the PR as it is now, so for an older head they say nothing."""
        pr = await self._pr(pull)
        if convert.commit(pr.last_merge_source_commit).lower() != head_sha.lower():
            return []
        repo = await self._repository()
        artifact = f"vstfs:///CodeReview/CodeReviewId/{repo.project_id}/{pull}"
        records = await self._call(
            f"policy evaluations of PR #{pull}",
            lambda c: c.policy.get_policy_evaluations(self.project, artifact),
        )
        web = f"{self.organization_url}/{self.project}"
        found = (convert.build_check(record, web) for record in records or [])
        return sorted((c for c in found if c is not None), key=lambda c: c.name)

    # -- labels ---------------------------------------------------------------------------------

    async def _read_labels(self, target: Target) -> Labels:
        if target.kind == "card":
            item = await self._work_item(target.number)
            tags = convert.split_tags((item.fields or {}).get("System.Tags"))
            return Labels(tags, version=item.rev)
        labels = await self._call(
            f"labels of PR #{target.number}",
            lambda c: c.git.get_pull_request_labels(
                self.repository, target.number, project=self.project
            ),
        )
        return Labels(tuple(str(lb.name) for lb in labels or [] if lb.active is not False))

    async def _write_labels(self, target: Target, current: Labels, plan: LabelPlan) -> None:
        if target.kind == "card":
            await self._write_card_tags(target.number, current, plan)
            return
        for name in plan.remove:
            await self._pull_label(target.number, name, add=False)
        for name in plan.add:
            await self._pull_label(target.number, name, add=True)

    async def _pull_label(self, pull: int, name: str, *, add: bool) -> None:
        if add:
            git, _ = models()
            await self._call(
                f"add label {name!r} to PR #{pull}",
                lambda c: c.git.create_pull_request_label(
                    git.WebApiCreateTagRequestData(name=name),
                    self.repository,
                    pull,
                    project=self.project,
                ),
                write=True,
            )
            return
        await self._call(
            f"remove label {name!r} from PR #{pull}",
            lambda c: c.git.delete_pull_request_labels(
                self.repository, pull, name, project=self.project
            ),
            write=True,
        )

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

    # -- merge and close ------------------------------------------------------------------------

    async def merge(self, pull: int, head_sha: str, method: MergeMethod) -> MergeResult:
        strategy = convert.MERGE_STRATEGY.get(method)
        if strategy is None:
            raise Unsupported(
                f"merge:{method}",
                "pairbot completes Azure DevOps pull requests by squash or merge only: a rebase "
                "completion rewrites the source branch, so the merged commits are not the reviewed",
            )
        pr = await self._pr(pull)
        same_head = convert.commit(pr.last_merge_source_commit).lower() == head_sha.lower()
        if str(pr.status) == "completed" and same_head:
            # Idempotent: a resumed merge of the same reviewed head gets the first result.
            return MergeResult(merged=True, sha=convert.commit(pr.last_merge_commit) or None)
        if str(pr.status) != "active":
            raise Conflict(f"PR #{pull} is {pr.status}, not active")
        if not same_head:
            raise Conflict(
                f"PR #{pull} head is {convert.commit(pr.last_merge_source_commit)[:12]}, "
                f"not the reviewed {head_sha[:12]}"
            )
        if pr.completion_options is not None and str(pr.merge_status) == "queued":
            # A completion an earlier call requested is still running: wait for it rather than
            # request it again (a write whose effect on a queued completion is not documented).
            return await self._await_completion(pull, pr)
        git, _ = models()
        if pr.is_draft:
            # Azure DevOps cannot complete a draft: publish it first (as GitHub marks it ready).
            await self._call(
                f"publish draft PR #{pull}",
                lambda c: c.git.update_pull_request(
                    git.GitPullRequest(is_draft=False), self.repository, pull, project=self.project
                ),
                write=True,
            )
        update = git.GitPullRequest(
            status="completed",
            last_merge_source_commit=git.GitCommitRef(commit_id=head_sha),
            completion_options=git.GitPullRequestCompletionOptions(merge_strategy=strategy),
        )
        done = await self._call(
            f"complete PR #{pull}",
            lambda c: c.git.update_pull_request(
                update, self.repository, pull, project=self.project
            ),
            write=True,
        )
        return await self._await_completion(pull, done)

    async def _await_completion(self, pull: int, done: Sdk) -> MergeResult:
        """Completion can be queued: poll a bounded number of times; merged=False when it is
        still running after them (the caller asks again later)."""
        for _ in range(self._merge_polls):
            if str(done.status) == "completed":
                return MergeResult(merged=True, sha=convert.commit(done.last_merge_commit) or None)
            if str(done.status) == "abandoned" or str(done.merge_status) in (
                "conflicts",
                "failure",
                "rejectedByPolicy",
            ):
                reason = done.merge_failure_message or done.merge_status or done.status
                raise Conflict(f"PR #{pull} did not complete: {reason}")
            await self._sleep(1.0)
            done = await self._pr(pull)
        if str(done.status) == "completed":
            return MergeResult(merged=True, sha=convert.commit(done.last_merge_commit) or None)
        return MergeResult(merged=False)

    async def close(self, target: Target) -> None:
        if target.kind == "pull":
            pr = await self._pr(target.number)
            if str(pr.status) == "completed":
                raise Conflict(f"PR #{target.number} is completed; it cannot be abandoned")
            if str(pr.status) == "abandoned":
                return
            git, _ = models()
            await self._call(
                f"abandon PR #{target.number}",
                lambda c: c.git.update_pull_request(
                    git.GitPullRequest(status="abandoned"),
                    self.repository,
                    target.number,
                    project=self.project,
                ),
                write=True,
            )
            return
        item = await self._work_item(target.number)
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
            f"close card #{target.number}",
            lambda c: c.wit.update_work_item(ops, target.number, project=self.project),
            write=True,
        )


if TYPE_CHECKING:  # AzureDevOpsHost is a Host: checked by mypy, costs nothing at run time.

    def _is_a_host(host: AzureDevOpsHost) -> Host:
        return host
