"""Azure DevOps SDK objects as host-neutral models, and the fixed mappings between them. Pure.

Nothing typed `Sdk` (the SDK ships no type information) leaves the adapter: these functions
turn work items, identities, pull requests and permission bits into `hosts.models` values.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

from hosts.errors import NotFound
from hosts.identities import is_service_identity
from hosts.models import Author, CheckState, HeadCheck, Permission, PullState, ReviewState

# The azure-devops SDK ships no type information: everything it hands back is `Sdk` (Any).
Sdk = Any

NEW_CARD_TYPE: Final = "User Story"
REVIEW_GENRE: Final = "pair"
# Azure DevOps caps a PR description at 4,000 characters (Pull Requests - Update).
MAX_PR_DESCRIPTION: Final = 4000
# The Git repositories security namespace and its permission bits:
# https://learn.microsoft.com/azure/devops/organizations/security/namespace-reference
GIT_NAMESPACE: Final = "2e9eb7ed-3c0a-47d4-87c1-0ffdd275fd87"
GIT_ADMINISTER: Final = 1
GIT_READ: Final = 2
GIT_CONTRIBUTE: Final = 4
GIT_EDIT_POLICIES: Final = 2048
GIT_MANAGE_PERMISSIONS: Final = 8192
GIT_PR_CONTRIBUTE: Final = 16384
GIT_PR_BYPASS_POLICY: Final = 32768

TO_AZURE_STATE: Final[Mapping[str, str]] = {
    "pending": "pending",
    "success": "succeeded",
    "failure": "failed",
    "error": "error",
}
# Someone else's PR status as a check state (GitPullRequestStatus.state): `notSet` has not
# reported yet; `notApplicable` did not apply (like a skipped check run).
CHECK_STATE: Final[Mapping[str, CheckState]] = {
    "succeeded": "success",
    "failed": "failure",
    "error": "failure",
    "pending": "pending",
    "notSet": "pending",
    "notApplicable": "skipped",
}
FROM_AZURE_STATE: Final[Mapping[str, ReviewState]] = {
    "pending": "pending",
    "succeeded": "success",
    "failed": "failure",
    "error": "error",
    "notSet": "pending",
    "notApplicable": "success",
    "partiallySucceeded": "failure",
}
PULL_STATE: Final[Mapping[str, PullState]] = {
    "active": "open",
    "abandoned": "closed",
    "completed": "merged",
}
MERGEABLE: Final[Mapping[str, bool]] = {
    "succeeded": True,
    "conflicts": False,
    "failure": False,
    "rejectedByPolicy": False,
}
MERGE_STRATEGY: Final[Mapping[str, str]] = {"squash": "squash", "merge": "noFastForward"}
CARD_REACTIONS: Final[Mapping[str, str]] = {"+1": "like", "-1": "dislike", "confused": "confused"}
# A work item in one of these state categories is a closed card: Resolved is where Azure
# DevOps' own completion of a linked pull request moves it (`transitionWorkItems`: "the next
# logical state, i.e. Active -> Resolved"), Completed is done, Removed is dropped.
CLOSED_CATEGORIES: Final = frozenset({"Resolved", "Completed", "Removed"})
# The relation that links a work item to a pull request (the Development section of the work
# item, the Work Items panel of the pull request): an artifact link to the PR's artifact URI.
PULL_LINK_REL: Final = "ArtifactLink"
PULL_LINK_NAME: Final = "Pull Request"


def pull_artifact(project_id: str, repository_id: str, pull: int) -> str:
    """The artifact URI of a pull request, as its work item link names it. Pure.

    `vstfs:///Git/PullRequestId/{project id}%2F{repository id}%2F{pull request id}`."""
    return f"vstfs:///Git/PullRequestId/{project_id}%2F{repository_id}%2F{pull}"


def permission_from_bits(allow: int) -> Permission:
    """Effective Git permission bits → the host-neutral level. Pure.

    An approximation, stated in the capability matrix: Administer or Manage permissions is
    `admin`; Contribute with Edit policies or Bypass policies on pull requests is `maintain`;
    Contribute (push) is `write`; Contribute to pull requests alone is `triage`; Read is `read`.
    The bits are the repository's with the base branch's overrides applied (`branch_bits`).
    """
    if allow & (GIT_ADMINISTER | GIT_MANAGE_PERMISSIONS):
        return "admin"
    if allow & GIT_CONTRIBUTE and allow & (GIT_EDIT_POLICIES | GIT_PR_BYPASS_POLICY):
        return "maintain"
    if allow & GIT_CONTRIBUTE:
        return "write"
    if allow & GIT_PR_CONTRIBUTE:
        return "triage"
    if allow & GIT_READ:
        return "read"
    return "none"


def branch_token(project_id: str, repo_id: str, branch: str) -> str:
    """The Git security namespace token of one branch. Pure.

    Each `/`-separated segment of the branch name is its UTF-16LE bytes in lowercase hex, the
    segments joined by `/` under `refs/heads/` (`main` → `…/refs/heads/6d00610069006e00`):
    https://learn.microsoft.com/azure/devops/organizations/security/namespace-reference
    """
    name = branch.removeprefix("refs/heads/")
    encoded = "/".join(part.encode("utf-16-le").hex() for part in name.split("/"))
    return f"repoV2/{project_id}/{repo_id}/refs/heads/{encoded}"


def branch_bits(repo_allow: int, repo_deny: int, branch_allow: int, branch_deny: int) -> int:
    """The effective bits on a branch: the repository's, then the branch's own. Pure.

    A branch inherits the repository's ACL, and its own entries override it: an allow on the
    branch grants what the repository denied, and a deny on the branch (a locked or protected
    `main`) wins over an allow on the repository."""
    return ((repo_allow & ~repo_deny) | branch_allow) & ~branch_deny


def split_tags(value: object) -> tuple[str, ...]:
    """System.Tags (`"a; b"`) as a tuple of tags. Pure."""
    if not isinstance(value, str):
        return ()
    return tuple(tag.strip() for tag in value.split(";") if tag.strip())


def timestamp(value: object) -> str:
    """An SDK date as fixed-width UTC ISO text, so that text order is time order."""
    if isinstance(value, datetime):
        when = value if value.tzinfo else value.replace(tzinfo=UTC)
        return when.astimezone(UTC).isoformat(timespec="microseconds")
    return str(value or "")


def author_from(ref: Sdk) -> Author:
    """An IdentityRef (object or, inside work-item fields, a dict) as an Author; `is_bot` for
    service identities, apps and groups (`hosts.identities`)."""
    if ref is None:
        return Author(login="", id="")
    if isinstance(ref, Mapping):
        login = ref.get("uniqueName") or ref.get("displayName") or ""
        ident, descriptor = ref.get("id") or "", ref.get("descriptor") or ""
        name, container = ref.get("displayName") or "", bool(ref.get("isContainer"))
    else:
        login = ref.unique_name or ref.display_name or ""
        ident, descriptor = ref.id or "", ref.descriptor or ""
        name, container = ref.display_name or "", bool(ref.is_container)
    is_bot = is_service_identity(
        descriptor=str(descriptor), display_name=str(name), is_container=container
    )
    return Author(login=str(login), id=str(ident), is_bot=is_bot)


def identity_from(user: Sdk) -> Author:
    """ConnectionData.authenticatedUser as an Author (login = its Account, e.g. an e-mail)."""
    props = user.properties if isinstance(user.properties, Mapping) else {}
    account = props.get("Account")
    login = account.get("$value") if isinstance(account, Mapping) else None
    return Author(
        login=str(login or user.provider_display_name or ""),
        id=str(user.id or ""),
        is_bot=is_service_identity(
            descriptor=str(user.subject_descriptor or user.descriptor or ""),
            display_name=str(user.provider_display_name or ""),
            is_container=bool(user.is_container),
        ),
    )


def truncate_description(body: str) -> str:
    if len(body) <= MAX_PR_DESCRIPTION:
        return body
    notice = f"\n\n… (truncated by pairbot to Azure DevOps' {MAX_PR_DESCRIPTION} characters)"
    return body[: MAX_PR_DESCRIPTION - len(notice)] + notice


def branch(ref: object) -> str:
    return str(ref or "").removeprefix("refs/heads/")


def commit(ref: Sdk) -> str:
    return str(ref.commit_id) if ref is not None and ref.commit_id else ""


def pr_comment_id(thread: int, comment: int) -> str:
    """A PR comment's id: its thread and its id in the thread (`147/1`)."""
    return f"{thread}/{comment}"


def parse_pr_comment_id(value: str) -> tuple[int, int]:
    thread, _, comment = value.partition("/")
    if not thread.isdigit() or not comment.isdigit():
        raise NotFound(f"{value!r} is not an Azure DevOps PR comment id (<thread>/<comment>)")
    return int(thread), int(comment)


def status_name(status: Sdk) -> str:
    """A PR status's name as people see it: `genre/name`, or the name without a genre."""
    context = status.context
    name = str(getattr(context, "name", None) or "")
    genre = str(getattr(context, "genre", None) or "")
    return f"{genre}/{name}" if genre and name else name


def is_review_status(status: Sdk) -> bool:
    """pairbot's own `pair-review` status (genre `pair`)."""
    context = status.context
    return (
        getattr(context, "genre", None) == REVIEW_GENRE
        and getattr(context, "name", None) == "pair-review"
    )


def head_check(status: Sdk) -> HeadCheck:
    """Another service's PR status (a CI pipeline, a linter) as a check; an unknown state is
    a failure, never green."""
    return HeadCheck(
        name=status_name(status),
        source="status",
        state=CHECK_STATE.get(str(status.state), "failure"),
        url=str(status.target_url or ""),
        summary=str(status.description or ""),
    )


# The Build (validation) policy type: its evaluations are the build results of a PR's head.
# https://learn.microsoft.com/rest/api/azure/devops/policy/evaluations/list
BUILD_POLICY_TYPE: Final = "0609b952-1397-4640-95ec-e00a01b2c241"
EVALUATION_STATE: Final[Mapping[str, CheckState]] = {
    "approved": "success",
    "rejected": "failure",
    "broken": "failure",
    "queued": "pending",
    "running": "pending",
    "notApplicable": "skipped",
}


def build_check(record: Sdk, web_url: str) -> HeadCheck | None:
    """A build policy's evaluation on the PR as a check (None for any other policy, or a
    disabled one). A build that ran on an earlier head (`buildIsNotCurrent`) or has expired
    says nothing about this head yet: pending. `required` is the policy's `isBlocking`."""
    config = record.configuration
    kind = getattr(getattr(config, "type", None), "id", None)
    if config is None or str(kind) != BUILD_POLICY_TYPE or config.is_enabled is False:
        return None
    context = record.context if isinstance(record.context, dict) else {}
    settings = config.settings if isinstance(config.settings, dict) else {}
    name = str(settings.get("displayName") or f"build {settings.get('buildDefinitionId', '')}")
    state = EVALUATION_STATE.get(str(record.status), "failure")
    stale = context.get("buildIsNotCurrent") is True or context.get("isExpired") is True
    build = context.get("buildId")
    return HeadCheck(
        name=name.strip(),
        source="build",
        state="pending" if stale and state != "skipped" else state,
        url=f"{web_url}/_build/results?buildId={build}" if build else "",
        required=config.is_blocking is True,
        summary="the build ran on an earlier head or expired" if stale else "",
    )
