"""What an Azure DevOps service-hook notification asks for: one pure reading for every surface.

    hook = read_azure_hook(payload, policy)   -> AzureHook(event, intent, repo, dedupe_id)

The App's webhook edge (`app.web.events.route_azure`: a notification POSTed to the App) and the
Azure Pipelines entry (`action.azure`: the same notification, delivered to a pipeline run by an
Incoming WebHook service connection) both read a notification here, so a project gets the same
decision whichever of the two runs it. The comment itself is decided by the shared
`app.domain.intake.intent.comment_intent`; this module only reads Azure DevOps' shapes:

- `ms.vss-code.git-pullrequest-comment-event` (a PR comment created or edited) and
  `workitem.commented` route like GitHub issue comments; a PR comment event also fires on an
  edit, and an edited comment never acts; a system comment never acts;
- `git.pullrequest.updated` on a pairbot branch (`BRANCH_PREFIX`) is a moved head;
- a pull request from a fork (`forkSource`) never acts: a command on it is answered with
  `FORK_REFUSAL`, a scope decision or a moved head is ignored;
- the commenter is read from what the notification carries (`azure_identities`: an
  IdentityRef, a work item's `revisedBy`, or `System.ChangedBy`'s `Name <account>` text);
  service identities, apps and groups are bots (`hosts.identities`): ignored unless their
  identity id or account is on the allowlist (`parse_identity_allowlist`), as on GitHub;
- a service hook names no identity for pairbot, so a comment that opens with a pair marker
  (`OWN_MARKER`) is pairbot's own and is dropped silently;
- work-item comments arrive as HTML: only their top-level paragraphs can hold a command
  (`app.domain.text.sanitize.html_paragraphs`: quoted, code, list, table and hidden text left out).

A notification without what its event carries is an `Ignore` with `repo` empty (the App answers
it "ignored", never a 500). No I/O, no environment, no clock.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from app.domain.intake.azure_identities import (
    commenter,
    parse_identity_allowlist,
    workitem_commenter,
)
from app.domain.intake.comment_commands import CommandError
from app.domain.intake.intent import (
    BRANCH_PREFIX,
    OWN_MARKER,
    Comment,
    HeadMoved,
    Ignore,
    Malformed,
    NewComment,
    Policy,
    ScopeDecision,
    comment_intent,
    positive_reason,
)
from app.domain.text.sanitize import html_paragraphs

__all__ = [
    "AZURE_EVENTS",
    "AzureHook",
    "HookIntent",
    "html_to_text",
    "parse_identity_allowlist",
    "read_azure_hook",
    "workitem_comment_key",
]

Payload = Mapping[str, Any]
HookIntent = Comment | ScopeDecision | HeadMoved | Ignore | Malformed


@dataclass(frozen=True)
class AzureHook:
    """One notification's reading: its event, what it asks for and where it lives.

    `repo` is `project/repository` for a pull request and the project for a work item (a work
    item belongs to a project, not a repository); empty when the notification is unreadable.
    `dedupe_id` is what makes a comment unique in `repo` (`workitem_comment_key` for a work
    item, `pr<N>:<thread>/<comment>` for a pull request's comment: both hosts number comments
    per work item or per pull request)."""

    event: str
    intent: HookIntent
    repo: str = ""
    dedupe_id: str = ""


# The reply a command on a fork's pull request gets (docs/azure-pipelines.md, "Forks"): a
# fork's branch is code from outside the project, which pairbot never runs with its secrets.
FORK_REFUSAL: Final = "pairbot does not act on pull requests from forks"
FORK_REMEDY: Final = (
    "A fork's branch is code from outside this repository: pairbot never reviews, runs or "
    "merges it with the project's credentials. Push the branch to this repository and open "
    "the pull request from there.\n"
)


def _obj(value: Any) -> Payload:
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _marker_safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "-", text)


def html_to_text(text: str) -> str:
    """A work-item comment's HTML → the plain text of its top-level paragraphs, escaped."""
    return html_paragraphs(text)


def _repo(repository: Payload) -> str:
    project = _text(_obj(repository.get("project")).get("name"))
    name = _text(repository.get("name"))
    return f"{project}/{name}" if project and name else ""


def _thread_id(comment: Payload) -> str:
    href = _text(_obj(_obj(comment.get("_links")).get("threads")).get("href"))
    match = re.search(r"/threads/(\d+)(?:[/?#]|\Z)", href)
    return match.group(1) if match else ""


def _pr_comment(event: str, payload: Payload, policy: Policy, delivery: str) -> AzureHook:
    resource = _obj(payload.get("resource"))
    comment, pull = _obj(resource.get("comment")), _obj(resource.get("pullRequest"))
    repo = _repo(_obj(pull.get("repository")))
    number, comment_number = _int(pull.get("pullRequestId")), _int(comment.get("id"))
    thread = _thread_id(comment)
    if not repo or number is None or comment_number is None or not thread:
        return AzureHook(
            event, Ignore("pull request comment without a repository, a pull, a thread or an id")
        )
    body = _text(comment.get("content"))
    if body.lstrip().startswith(OWN_MARKER):
        return AzureHook(
            event, Ignore("pairbot's own comment (it opens with a pair marker)", silent=True)
        )
    if _text(comment.get("commentType")) == "system":
        return AzureHook(event, Ignore("a system comment"))
    published = _text(comment.get("publishedDate"))
    changed = _text(comment.get("lastContentUpdatedDate")) or published
    if published and changed != published:
        return AzureHook(event, Ignore("an edited comment never acts"))
    new = NewComment(
        target="pull",
        number=number,
        comment_id=f"{thread}/{comment_number}",
        url=_text(_obj(_obj(comment.get("_links")).get("self")).get("href")),
        body=body,
        author=commenter(comment.get("author")),
    )
    intent: HookIntent = comment_intent(new, policy)
    if _is_fork(pull):
        intent = _refuse_fork(intent, f"{repo}!{number}")
    return AzureHook(event, intent, repo, f"pr{number}:{thread}/{comment_number}")


def _is_fork(pull: Payload) -> bool:
    """Whether a pull request's source branch lives in a fork: Azure DevOps names the fork's
    repository in `forkSource` (absent, or null, for a branch of the repository itself)."""
    return bool(_obj(pull.get("forkSource")))


def _refuse_fork(intent: HookIntent, where: str) -> HookIntent:
    """A comment on a fork's pull request runs nothing: a command gets `FORK_REFUSAL` as its
    reply (after the usual authorization: a reader gets the refusal, a bot nothing), a scope
    decision is ignored."""
    if isinstance(intent, Comment):
        first = intent.command
        refusal = CommandError(first.line, first.raw, FORK_REFUSAL, FORK_REMEDY)
        return replace(intent, command=refusal, rest=())
    if isinstance(intent, ScopeDecision):
        return Ignore(f"a scope decision on {where}, a pull request from a fork: {FORK_REFUSAL}")
    return intent


def _workitem_commented(event: str, payload: Payload, policy: Policy, delivery: str) -> AzureHook:
    resource = _obj(payload.get("resource"))
    revision = _obj(resource.get("revision"))
    # The documented `workitem.commented` resource is the work item (`id`, `rev`, `fields`);
    # an update-shaped one names the item in `workItemId` (its `id` is the update's) and keeps
    # the item's fields under `revision`.
    fields = {**_obj(revision.get("fields")), **_obj(resource.get("fields"))}
    number = (
        _int(resource.get("workItemId")) or _int(revision.get("id")) or _int(resource.get("id"))
    )
    project = _text(fields.get("System.TeamProject"))
    history = _history(fields.get("System.History"))
    if number is None or not project or not history:
        return AzureHook(event, Ignore("work item comment without an id, a project or a comment"))
    if OWN_MARKER in history.lstrip()[:64]:
        return AzureHook(
            event, Ignore("pairbot's own comment (it opens with a pair marker)", silent=True)
        )
    ref = _obj(resource.get("commentVersionRef"))
    named = _int(ref.get("commentId"))
    named = named if named is not None and named > 0 else None
    new = NewComment(
        target="card",
        number=number,
        comment_id=str(named) if named is not None else "",
        url=_text(resource.get("url")),
        body=html_to_text(history),
        author=workitem_commenter(resource, fields),
    )
    revision_number = _int(resource.get("rev")) or _int(revision.get("rev"))
    dedupe = workitem_comment_key(
        number, named, _int(ref.get("version")), revision_number, delivery
    )
    return AzureHook(event, comment_intent(new, policy), project, dedupe)


def _history(value: Any) -> str:
    """`System.History` as the comment's HTML: the text itself, or an update's `newValue`."""
    return _text(value) or _text(_obj(value).get("newValue"))


def workitem_comment_key(
    number: int, comment: int | None, version: int | None, revision: int | None, delivery: str
) -> str:
    """What makes one work-item comment unique within its project. Pure.

    Comment ids and revisions are numbered per work item, so the item's id is always part of
    it: `wi12:c41:v1` when the notification names the comment (`commentVersionRef`), else
    `wi12:rev7` (the revision that added the comment: unique per item), else the notification's
    own id. Two comments on #11 and #12 at revision 7 are two commands, never one."""
    if comment is not None:
        tail = f"c{comment}" + (f":v{version}" if version is not None and version > 0 else "")
    elif revision is not None and revision > 0:
        tail = f"rev{revision}"
    else:
        tail = f"n{_marker_safe(delivery)}"
    return f"wi{number}:{tail}"


def _pull_updated(event: str, payload: Payload, policy: Policy, delivery: str) -> AzureHook:
    resource = _obj(payload.get("resource"))
    repo = _repo(_obj(resource.get("repository")))
    number = _int(resource.get("pullRequestId"))
    sha = _text(_obj(resource.get("lastMergeSourceCommit")).get("commitId"))
    if not repo or number is None or not sha:
        return AzureHook(
            event,
            Ignore("git.pullrequest.updated without a repository, a pull or a source commit"),
        )
    problem = positive_reason(number, "git.pullrequest.updated: resource.pullRequestId")
    if problem is not None:
        return AzureHook(event, Ignore(problem))
    if _is_fork(resource):
        return AzureHook(event, Ignore(f"{repo}!{number} comes from a fork ({FORK_REFUSAL})"), repo)
    if not _text(resource.get("sourceRefName")).startswith(f"refs/heads/{BRANCH_PREFIX}"):
        return AzureHook(
            event, Ignore(f"{repo}!{number} is not on a pairbot branch ({BRANCH_PREFIX}…)")
        )
    return AzureHook(event, HeadMoved(pull=number, head_sha=sha), repo)


_Reader = Callable[[str, Payload, Policy, str], AzureHook]
_READERS: Final[Mapping[str, _Reader]] = {
    "ms.vss-code.git-pullrequest-comment-event": _pr_comment,
    "workitem.commented": _workitem_commented,
    "git.pullrequest.updated": _pull_updated,
}
# The service-hook event types pairbot reads (docs/azure-pipelines.md subscribes to these).
AZURE_EVENTS: Final = frozenset(_READERS)


def read_azure_hook(payload: Payload, policy: Policy, delivery: str = "") -> AzureHook:
    """What a service-hook notification asks for. Pure.

    `delivery` names the notification (default: its `id`); a work-item comment without a
    revision is identified by it."""
    delivery = delivery or _text(payload.get("id"))
    event = _text(payload.get("eventType"))
    reader = _READERS.get(event)
    if reader is None:
        reason = f"{event or 'an event without eventType'} is not for pairbot"
        return AzureHook(event, Ignore(reason))
    return reader(event, payload, policy, delivery)
