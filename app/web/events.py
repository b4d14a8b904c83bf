"""The App's adapter: a verified delivery → the shared intake → the jobs it asks for.

    route_github(event, action, payload, policy, delivery) -> Routed
    route_azure(payload, policy, delivery)                 -> Routed

What a GitHub event asks for is decided once, for the App and the Action alike, by the pure
intake (`app.domain.intake.intent.intake`: own comments, bots, commands, scope decisions, moved
heads, dispatches, installations — its docstring states the rules). A GitHub comment goes through
the intake's own steps up to the command grammar (`read_issue_comment`, `screen_comment`): one
that may hold a command becomes a `command` job holding it unread (`app.web.jobs.UnreadComment`),
whose command lines the worker reads (`read_comment`) — the grammar is the edge's costliest
step, and the answer needs none of it. This module only translates: the
intent becomes the store's jobs (`command`, `scope-decision`, `head-moved`), an installation
change, an ignored delivery (`Routed.silent`: dropped before anything is written), or a refused
one (`Routed.refused`: an identifier no host would send, `app.domain.intake.identifiers`, checked
before anything else but whether a new comment asks anything at all (`unaddressed_comment`:
most deliveries, ignored unread); the edge answers it 422 and records it nowhere). Intents
only the Action acts on (ticks, the App's own `pair` dispatches) and malformed payloads are
"not for the App": 2xx and one log line, never a 500. `Routed.intent` keeps the intent, so a
test can hold the App's reading of a payload against the Action's.

An Azure DevOps service hook is read by `app.domain.intake.azure_hooks.read_azure_hook` (shared with
the Azure Pipelines entry, `action.azure`) into the same host-neutral comment
(`app.domain.intake.intent.comment_intent`): PR comments and work-item comments route like issue
comments, `git.pullrequest.updated` on a pairbot branch like `synchronize`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from app.domain.intake.azure_hooks import AZURE_EVENTS, html_to_text, read_azure_hook
from app.domain.intake.identifiers import Invalid, azure_invalid, github_invalid
from app.domain.intake.intent import (
    Comment,
    HeadMoved,
    Ignore,
    Installation,
    Intent,
    Malformed,
    NewComment,
    Policy,
    Run,
    ScopeDecision,
    Tick,
    intake,
    read_issue_comment,
    screen_comment,
    unaddressed_comment,
)
from app.store.base import CommandRecord, InstallationChange, NewJob, TargetKind
from app.web.jobs import (
    Commenter,
    HeadMovedJob,
    ScopeDecisionJob,
    UnreadComment,
    command_of,
)
from hosts.models import Author

__all__ = [
    "AZURE",
    "AZURE_ROUTES",
    "GITHUB",
    "GITHUB_EVENTS",
    "GITHUB_ROUTES",
    "Policy",
    "Routed",
    "html_to_text",
    "route_azure",
    "route_github",
]

Payload = Mapping[str, Any]

GITHUB: Final = "github"
AZURE: Final = "azure-devops"


@dataclass(frozen=True)
class Routed:
    """What a delivery asks for; `silent` means: ignore it before writing anything; `refused`:
    an identifier no host would send (`reason` names it), answered 422 and written nowhere."""

    reason: str
    jobs: tuple[NewJob, ...] = ()
    silent: bool = False
    installation: InstallationChange | None = None
    intent: Intent | None = None  # the shared intake's reading (None for Azure DevOps' own)
    refused: bool = False
    # A GitHub comment queued unread (its one job): `read_commands` gives its reading.
    unread: NewComment | None = None


def refused(invalid: Invalid) -> Routed:
    return Routed(invalid.reason, refused=True)


def ignored(reason: str) -> Routed:
    return Routed(reason)


def silent(reason: str) -> Routed:
    return Routed(reason, silent=True)


# -- small readers: untrusted shapes in, plain values out -----------------------------------------


def _obj(value: Any) -> Payload:
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def serial_key(source: str, repo: str, target: TargetKind, number: int) -> str:
    """The key whose jobs run one at a time. GitHub issues and PRs share one numbering."""
    if source == GITHUB:
        return f"{source}:{repo}#{number}"
    return f"{source}:{repo}:{target}#{number}"


# -- intents → jobs (both sources) ---------------------------------------------------------------


@dataclass(frozen=True)
class _Where:
    """Where a comment or pull lives, which the intent does not say: the store's keys."""

    source: str
    repo: str
    installation: int | None
    delivery: str
    # What makes a comment unique in `repo` when the host's comment ids are not (Azure DevOps
    # numbers comments per work item or pull request); empty: the comment's id is.
    dedupe_id: str = ""


def _label(where: _Where, pull: bool, number: int) -> str:
    return f"{where.repo}{'!' if pull else '#'}{number}"


def _comment_jobs(
    intent: Comment | ScopeDecision | Ignore | Malformed, where: _Where, policy: Policy
) -> Routed:
    """A comment's intent → its `command` or `scope-decision` job."""
    if isinstance(intent, Ignore):
        return Routed(intent.reason, silent=intent.silent, intent=intent)
    if isinstance(intent, Malformed):  # answered like GitHub's: "ignored", one log line
        return Routed(intent.reason, intent=intent)
    if isinstance(intent, ScopeDecision):
        author = intent.author or Author(login="", id="")
        identity = intent.comment_id or where.dedupe_id
        scope = ScopeDecisionJob(pull=intent.pull, comment_id=identity, delivery=where.delivery)
        unique = where.dedupe_id or identity
        job = NewJob(
            kind="scope-decision",
            source=where.source,
            repo=where.repo,
            installation=where.installation,
            target="pull",
            number=intent.pull,
            dedupe_key=f"{where.source}:{where.repo}:comment:{unique}",
            serial_key=serial_key(where.source, where.repo, "pull", intent.pull),
            request={"job": scope.to_payload(), "author": Commenter.of(author).to_json()},
        )
        label = _label(where, True, intent.pull)
        return Routed(f"scope decision on {label}", (job,), intent=intent)
    target: TargetKind = "pull" if intent.is_pull else "card"
    identity = intent.comment.id or where.dedupe_id
    command, record = command_of(intent, delivery=where.delivery, comment_id=identity)
    label = _label(where, intent.is_pull, intent.card)
    if command.request is not None:
        reason = f"/{policy.trigger} {command.request.verb} on {label}"
    else:
        reason = f"malformed command on {label}"
    unique = where.dedupe_id or identity
    job = _command_job(
        where,
        target=target,
        number=intent.card,
        unique=unique,
        request=command.to_json(),
        record=record,
    )
    return Routed(reason, (job,), intent=intent)


def _unread_job(comment: NewComment, where: _Where, policy: Policy) -> Routed:
    """A comment that may hold a command (`screen_comment` let it through) → a `command` job
    holding it unread: the worker reads its command lines (app.web.handling), so the answer
    waits for no grammar. Its keys are the ones its reading would have had."""
    unique = where.dedupe_id or comment.comment_id
    unread = UnreadComment(comment, policy.trigger, policy.app_slug).to_json()
    job = _command_job(
        where, target=comment.target, number=comment.number, unique=unique, request=unread
    )
    label = _label(where, comment.target == "pull", comment.number)
    return Routed(f"comment on {label} queued for the worker to read", (job,), unread=comment)


def _command_job(
    where: _Where,
    *,
    target: TargetKind,
    number: int,
    unique: str,
    request: dict[str, Any],
    record: CommandRecord | None = None,
) -> NewJob:
    """A comment's `command` job: one per comment (`unique` within the repository), run one
    at a time per card or pull."""
    return NewJob(
        kind="command",
        source=where.source,
        repo=where.repo,
        installation=where.installation,
        target=target,
        number=number,
        dedupe_key=f"{where.source}:{where.repo}:comment:{unique}",
        serial_key=serial_key(where.source, where.repo, target, number),
        request=request,
        command=record,
    )


def _head_moved(where: _Where, *, number: int, sha: str) -> NewJob:
    moved = HeadMovedJob(pull=number, head_sha=sha, delivery=where.delivery)
    return NewJob(
        kind="head-moved",
        source=where.source,
        repo=where.repo,
        installation=where.installation,
        target="pull",
        number=number,
        dedupe_key=f"{where.source}:{where.repo}:head:{number}:{sha}",
        serial_key=serial_key(where.source, where.repo, "pull", number),
        request={"job": moved.to_payload()},
    )


# -- GitHub ---------------------------------------------------------------------------------------


def route_github(
    event: str, action: str | None, payload: Payload, policy: Policy, delivery: str
) -> Routed:
    """The jobs a verified GitHub delivery asks for: the shared intake, translated. An
    identifier no host would send refuses the delivery first (`app.domain.intake.identifiers`),
    after only the check that a new comment asks anything at all (`unaddressed_comment`)."""
    if event == "issue_comment":
        # Most deliveries: a comment that asks nothing of pairbot, answered before its
        # identifiers are even checked (nothing is written or run for it either way).
        unaddressed = unaddressed_comment(payload, action, policy)
        if unaddressed is not None:
            return Routed(unaddressed.reason, intent=unaddressed)
    invalid = github_invalid(event, payload)
    if invalid is not None:
        return refused(invalid)
    if event == "issue_comment":
        return _github_comment(payload, action, policy, delivery)
    intent = intake(event, action, payload, policy)
    if isinstance(intent, Ignore):
        return Routed(intent.reason, silent=intent.silent, intent=intent)
    if isinstance(intent, Malformed):
        return Routed(intent.reason, intent=intent)
    if isinstance(intent, Tick):
        return Routed(f"{event}: a tick runs in the Action, not in the App", intent=intent)
    if isinstance(intent, Run):
        return Routed("a pair repository_dispatch is the Action's to run", intent=intent)
    if isinstance(intent, Installation):
        change = InstallationChange(
            id=intent.id,
            account=intent.account,
            repos=intent.repos if intent.action == "created" else None,
            suspended={"suspend": True, "unsuspend": False, "created": False}.get(intent.action),
            deleted=intent.action == "deleted",
            added=intent.added,
            removed=intent.removed,
        )
        what = "repositories " if intent.event == "installation_repositories" else ""
        return Routed(
            f"installation {intent.id} ({intent.account}) {what}{intent.action}",
            installation=change,
            intent=intent,
        )
    repo = _text(_obj(payload.get("repository")).get("full_name"))
    if not repo:
        return Routed(f"{event}.{action} without a repository", intent=intent)
    where = _Where(GITHUB, repo, _installation_id(payload), delivery)
    if isinstance(intent, HeadMoved):
        job = _head_moved(where, number=intent.pull, sha=intent.head_sha)
        label = _label(where, True, intent.pull)
        return Routed(f"head of {label} moved to {intent.head_sha[:12]}", (job,), intent=intent)
    return _comment_jobs(intent, where, policy)


def _github_comment(payload: Payload, action: str | None, policy: Policy, delivery: str) -> Routed:
    """An `issue_comment`: the intake's steps up to the command grammar (`read_issue_comment`,
    `screen_comment`); a comment that may hold a command is queued unread (`_unread_job`)."""
    read = read_issue_comment(payload, action, policy)
    screened = screen_comment(read, policy) if isinstance(read, NewComment) else read
    if isinstance(screened, Ignore):
        return Routed(screened.reason, silent=screened.silent, intent=screened)
    if isinstance(screened, Malformed):
        return Routed(screened.reason, intent=screened)
    repo = _text(_obj(payload.get("repository")).get("full_name"))
    if not repo:
        return Routed(f"issue_comment.{action} without a repository", intent=screened)
    where = _Where(GITHUB, repo, _installation_id(payload), delivery)
    if isinstance(read, NewComment) and screened is None:
        return _unread_job(read, where, policy)
    # A scope decision (`screened` is None only for a new comment, queued above).
    return _comment_jobs(screened or Ignore("nothing to read"), where, policy)


# The (event, action) pairs whose intents the App acts on (jobs or installation bookkeeping);
# app.yml subscribes to exactly these events (tests/packaging holds the two together).
GITHUB_ROUTES: Final[frozenset[tuple[str, str | None]]] = frozenset(
    {
        ("issue_comment", "created"),
        ("pull_request", "synchronize"),
        *(
            ("installation", a)
            for a in ("created", "deleted", "suspend", "unsuspend", "new_permissions_accepted")
        ),
        ("installation_repositories", "added"),
        ("installation_repositories", "removed"),
        ("ping", None),
    }
)


# The events whose deliveries can ask the App for anything: the edge answers any other event
# once its signature is verified, without parsing its body.
GITHUB_EVENTS: Final[frozenset[str]] = frozenset(event for event, _action in GITHUB_ROUTES)


def _installation_id(payload: Payload) -> int | None:
    return _int(_obj(payload.get("installation")).get("id"))


# -- Azure DevOps ---------------------------------------------------------------------------------


# The service-hook event types the App routes (docs/hosts.md lists them).
AZURE_ROUTES: Final = AZURE_EVENTS


def route_azure(payload: Payload, policy: Policy, delivery: str) -> Routed:
    """The jobs a verified Azure DevOps service-hook notification asks for: the shared reading
    (`app.domain.intake.azure_hooks`, the Azure Pipelines entry's too), translated; refused
    first for an identifier no host would send (`app.domain.intake.identifiers`)."""
    invalid = azure_invalid(payload)
    if invalid is not None:
        return refused(invalid)
    hook = read_azure_hook(payload, policy, delivery)
    intent = hook.intent
    if not hook.repo:  # unreadable, or not for pairbot: nothing of it is kept
        reason = intent.reason if isinstance(intent, Ignore | Malformed) else hook.event
        return Routed(reason, silent=isinstance(intent, Ignore) and intent.silent)
    where = _Where(AZURE, hook.repo, None, delivery, dedupe_id=hook.dedupe_id)
    if isinstance(intent, HeadMoved):
        job = _head_moved(where, number=intent.pull, sha=intent.head_sha)
        return Routed(f"head of {hook.repo}!{intent.pull} moved to {intent.head_sha[:12]}", (job,))
    return _comment_jobs(intent, where, policy)
