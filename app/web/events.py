"""The App's adapter: a verified delivery → the shared intake → the jobs it asks for.

    route_github(event, action, payload, policy, delivery) -> Routed
    route_azure(payload, policy, delivery)                 -> Routed

What a GitHub event asks for is decided once, for the App and the Action alike, by the pure
intake (`app.domain.intake.intake`: own comments, bots, commands, scope decisions, moved heads,
dispatches, installations — its docstring states the rules). This module only translates: the
intent becomes the store's jobs (`command`, `scope-decision`, `head-moved`), an installation
change, or an ignored delivery (`Routed.silent`: dropped before anything is written). Intents
only the Action acts on (ticks, the App's own `pair` dispatches) and malformed payloads are
"not for the App": 2xx and one log line, never a 500. `Routed.intent` keeps the intent, so a
test can hold the App's reading of a payload against the Action's.

Azure DevOps has no Action: its service hooks are read here into the same host-neutral
comment (`app.domain.intake.comment_intent`). PR comments
(`ms.vss-code.git-pullrequest-comment-event`) and work-item comments (`workitem.commented`)
route like issue comments; `git.pullrequest.updated` on a pairbot branch like `synchronize`.
A service hook names no identity for pairbot, so there a comment that opens with a pair marker
is pairbot's own; a PR comment event also fires on an edit, and an edited comment never acts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from app.domain.commands import Command
from app.domain.dispatch import PairRequest
from app.domain.intake import (
    BRANCH_PREFIX,
    OWN_MARKER,
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
    comment_intent,
    intake,
    positive_reason,
)
from app.domain.sanitize import html_paragraphs
from app.store.base import CommandRecord, InstallationChange, NewJob, TargetKind
from app.web.jobs import CommandJob, CommandProblem, Commenter, HeadMovedJob, ScopeDecisionJob
from hosts.models import Author

__all__ = [
    "AZURE",
    "AZURE_ROUTES",
    "GITHUB",
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
    """What a delivery asks for; `silent` means: ignore it before writing anything."""

    reason: str
    jobs: tuple[NewJob, ...] = ()
    silent: bool = False
    installation: InstallationChange | None = None
    intent: Intent | None = None  # the shared intake's reading (None for Azure DevOps' own)


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


def _marker_safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "-", text)


# -- intents → jobs (both sources) ---------------------------------------------------------------


@dataclass(frozen=True)
class _Where:
    """Where a comment or pull lives, which the intent does not say: the store's keys."""

    source: str
    repo: str
    installation: int | None
    delivery: str
    dedupe_id: str = ""  # what makes a comment unique when the host names no id for it


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
        job = NewJob(
            kind="scope-decision",
            source=where.source,
            repo=where.repo,
            installation=where.installation,
            target="pull",
            number=intent.pull,
            dedupe_key=f"{where.source}:{where.repo}:comment:{identity}",
            serial_key=serial_key(where.source, where.repo, "pull", intent.pull),
            request={"job": scope.to_payload(), "author": _commenter(author).to_json()},
        )
        label = _label(where, True, intent.pull)
        return Routed(f"scope decision on {label}", (job,), intent=intent)
    target: TargetKind = "pull" if intent.is_pull else "card"
    identity = intent.comment.id or where.dedupe_id
    commenter = _commenter(intent.author)
    first = intent.command
    record: CommandRecord | None = None
    if isinstance(first, Command):
        request = PairRequest.from_command(
            intent.card, first, comment=intent.comment, delivery=where.delivery
        )
        command = CommandJob(intent.card, intent.comment, commenter, request=request)
        record = CommandRecord(
            verb=request.verb,
            args=request.args,
            author_id=commenter.id,
            author_login=commenter.login,
            comment_id=identity,
            comment_url=intent.comment.url,
        )
        reason = f"/{policy.trigger} {request.verb} on {_label(where, intent.is_pull, intent.card)}"
    else:
        problem = CommandProblem(first.message, first.usage, first.raw)
        command = CommandJob(intent.card, intent.comment, commenter, problem=problem)
        reason = f"malformed command on {_label(where, intent.is_pull, intent.card)}"
    job = NewJob(
        kind="command",
        source=where.source,
        repo=where.repo,
        installation=where.installation,
        target=target,
        number=intent.card,
        dedupe_key=f"{where.source}:{where.repo}:comment:{identity}",
        serial_key=serial_key(where.source, where.repo, target, intent.card),
        request=command.to_json(),
        command=record,
    )
    return Routed(reason, (job,), intent=intent)


def _commenter(author: Author) -> Commenter:
    return Commenter(login=author.login or "ghost", id=author.id, is_bot=author.is_bot)


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
    """The jobs a verified GitHub delivery asks for: the shared intake, translated."""
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


def _installation_id(payload: Payload) -> int | None:
    return _int(_obj(payload.get("installation")).get("id"))


Handler = Callable[[Payload, Policy, str], Routed]


# -- Azure DevOps ---------------------------------------------------------------------------------


def html_to_text(text: str) -> str:
    """Work-item comments arrive as HTML: only their top-level paragraphs can hold a command.

    `app.domain.sanitize.html_paragraphs` reads the HTML in one linear pass: quoted, code,
    list, table and hidden text is left out, and the rest comes back escaped so the command
    grammar sees it as the plain text it is."""
    return html_paragraphs(text)


def _azure_repo(repository: Payload) -> str:
    project = _text(_obj(repository.get("project")).get("name"))
    name = _text(repository.get("name"))
    return f"{project}/{name}" if project and name else ""


def _azure_identity(value: Any) -> Author:
    """An identity object, or the `Name <account>` text work-item fields hold."""
    if isinstance(value, dict):
        unique = _text(value.get("uniqueName")) or _text(value.get("displayName"))
        return Author(login=unique, id=_text(value.get("id")) or unique)
    text = _text(value)
    account = re.search(r"<([^<>]+)>\s*\Z", text)
    login = account.group(1) if account else text
    return Author(login=login, id=login)


def _thread_id(comment: Payload) -> str:
    href = _text(_obj(_obj(comment.get("_links")).get("threads")).get("href"))
    match = re.search(r"/threads/(\d+)(?:[/?#]|\Z)", href)
    return match.group(1) if match else ""


def _azure_pr_comment(payload: Payload, policy: Policy, delivery: str) -> Routed:
    resource = _obj(payload.get("resource"))
    comment, pull = _obj(resource.get("comment")), _obj(resource.get("pullRequest"))
    repo = _azure_repo(_obj(pull.get("repository")))
    number, comment_number = _int(pull.get("pullRequestId")), _int(comment.get("id"))
    thread = _thread_id(comment)
    if not repo or number is None or comment_number is None or not thread:
        return ignored("pull request comment without a repository, a pull, a thread or an id")
    body = _text(comment.get("content"))
    if body.lstrip().startswith(OWN_MARKER):
        return silent("pairbot's own comment (it opens with a pair marker)")
    if _text(comment.get("commentType")) == "system":
        return ignored("a system comment")
    published = _text(comment.get("publishedDate"))
    changed = _text(comment.get("lastContentUpdatedDate")) or published
    if published and changed != published:
        return ignored("an edited comment never acts")
    new = NewComment(
        target="pull",
        number=number,
        comment_id=f"{thread}/{comment_number}",
        url=_text(_obj(_obj(comment.get("_links")).get("self")).get("href")),
        body=body,
        author=_azure_identity(comment.get("author")),
    )
    return _comment_jobs(comment_intent(new, policy), _Where(AZURE, repo, None, delivery), policy)


def _azure_workitem_commented(payload: Payload, policy: Policy, delivery: str) -> Routed:
    resource = _obj(payload.get("resource"))
    fields = _obj(resource.get("fields"))
    number = _int(resource.get("id")) or _int(resource.get("workItemId"))
    project = _text(fields.get("System.TeamProject"))
    history = _text(fields.get("System.History"))
    if number is None or not project or not history:
        return ignored("work item comment without an id, a project or a comment")
    if OWN_MARKER in history.lstrip()[:64]:
        return silent("pairbot's own comment (it opens with a pair marker)")
    revision = _int(resource.get("rev"))
    new = NewComment(
        target="card",
        number=number,
        # The notification names no comment id (nothing to react to): the revision that
        # added the comment identifies it.
        comment_id="",
        url=_text(resource.get("url")),
        body=html_to_text(history),
        author=_azure_identity(fields.get("System.ChangedBy")),
    )
    # A work item belongs to a project; the worker's host names the repository.
    where = _Where(
        AZURE,
        project,
        None,
        delivery,
        dedupe_id=_marker_safe(f"rev{revision if revision is not None else delivery}"),
    )
    return _comment_jobs(comment_intent(new, policy), where, policy)


def _azure_pull_updated(payload: Payload, policy: Policy, delivery: str) -> Routed:
    resource = _obj(payload.get("resource"))
    repo = _azure_repo(_obj(resource.get("repository")))
    number = _int(resource.get("pullRequestId"))
    sha = _text(_obj(resource.get("lastMergeSourceCommit")).get("commitId"))
    if not repo or number is None or not sha:
        return ignored("git.pullrequest.updated without a repository, a pull or a source commit")
    problem = positive_reason(number, "git.pullrequest.updated: resource.pullRequestId")
    if problem is not None:
        return ignored(problem)
    if not _text(resource.get("sourceRefName")).startswith(f"refs/heads/{BRANCH_PREFIX}"):
        return ignored(f"{repo}!{number} is not on a pairbot branch ({BRANCH_PREFIX}…)")
    job = _head_moved(_Where(AZURE, repo, None, delivery), number=number, sha=sha)
    return Routed(f"head of {repo}!{number} moved to {sha[:12]}", (job,))


AZURE_ROUTES: Final[Mapping[str, Handler]] = {
    "ms.vss-code.git-pullrequest-comment-event": _azure_pr_comment,
    "workitem.commented": _azure_workitem_commented,
    "git.pullrequest.updated": _azure_pull_updated,
}


def route_azure(payload: Payload, policy: Policy, delivery: str) -> Routed:
    """The jobs a verified Azure DevOps service-hook notification asks for."""
    event = _text(payload.get("eventType"))
    handler = AZURE_ROUTES.get(event)
    if handler is not None:
        return handler(payload, policy, delivery)
    return ignored(f"{event or 'an event without eventType'} is not for pairbot")
