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

`AzureDevOpsHost` is one class put together from a part per job, each a module beside this one:

    project.py      AzureProject: the SDK connection, identity, the repository, a PR as read
    work_items.py   AzureWorkItems: cards (work items) and their tags
    comments.py     AzureComments: work-item comments, PR threads, reactions
    pulls.py        AzurePullRequests: open, read, label, complete (merge) and abandon PRs
    statuses.py     AzurePullStatuses: the `pair-review` status and the other checks on a head
    permissions.py  AzurePermissions: a user's permission from the Git security ACLs
    host.py         AzureDevOpsHost: the parts together, plus push_branch and what dispatches
                    on card or pull (close, the state labels)

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

from pathlib import Path
from typing import TYPE_CHECKING

from hosts.adapter import Labels
from hosts.azure_devops.comments import AzureComments
from hosts.azure_devops.permissions import AzurePermissions
from hosts.azure_devops.pulls import AzurePullRequests
from hosts.azure_devops.push import local_head, push
from hosts.azure_devops.statuses import AzurePullStatuses
from hosts.azure_devops.work_items import AzureWorkItems
from hosts.errors import NotFound
from hosts.labels import LabelPlan
from hosts.models import Target

if TYPE_CHECKING:
    from hosts.base import Host

__all__ = ["AzureDevOpsHost"]


class AzureDevOpsHost(
    AzureWorkItems, AzureComments, AzurePullRequests, AzurePullStatuses, AzurePermissions
):
    """`Host` over one Azure DevOps project: its Boards for cards, one repository for code."""

    def __repr__(self) -> str:
        return (
            f"AzureDevOpsHost(organization_url={self.organization_url!r}, "
            f"project={self.project!r}, repository={self.repository!r})"
        )

    # -- what a card and a pull do differently --------------------------------------------------

    async def close(self, target: Target) -> None:
        if target.kind == "pull":
            await self._abandon_pull(target.number)
        else:
            await self._close_card(target.number)

    async def _read_labels(self, target: Target) -> Labels:
        if target.kind == "card":
            return await self._card_tags(target.number)
        return await self._pull_labels(target.number)

    async def _write_labels(self, target: Target, current: Labels, plan: LabelPlan) -> None:
        if target.kind == "card":
            await self._write_card_tags(target.number, current, plan)
        else:
            await self._write_pull_labels(target.number, plan)

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


if TYPE_CHECKING:  # AzureDevOpsHost is a Host: checked by mypy, costs nothing at run time.

    def _is_a_host(host: AzureDevOpsHost) -> Host:
        return host
