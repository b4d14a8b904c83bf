"""A verified delivery → the jobs it asks for, routed on (event, action). Pure.

    route_github(event, action, payload, policy, delivery) -> Routed
    route_azure(payload, policy, delivery)                 -> Routed

A small table per source maps (event, action) to a handler, as gidgethub's router does; an
unrouted pair is "not for pairbot" (2xx and one log line). Every field is read defensively:
a signed payload is GitHub's, but a missing field is an ignored delivery, never a 500.

What acts, and what is ignored before anything is written (`Routed.silent`):

- `issue_comment.created` only: an edited or deleted comment never acts.
- pairbot's own comments (its App id in `performed_via_github_app`, or its `<slug>[bot]` login)
  and any other bot not on the allowlist are ignored silently, before any store write or lock.
- A comment on a pull request holding a fenced scope-decision JSON (hosts.decisions) becomes a
  `scope-decision` job; otherwise the first command line (app.domain.commands.parse_commands)
  becomes a `command` job carrying the parsed request, or the problem to answer with usage.
- `pull_request.synchronize` on a pairbot branch (`pair/…`) of the repository itself (never
  a fork's) becomes a `head-moved` job.
- A bot's scope decision is ignored even when the bot is allowlisted: only a person decides
  scope (the same rules as the Action's, action/event.py).
- `installation` and `installation_repositories` keep the installation table.
- Azure DevOps: PR comments (`ms.vss-code.git-pullrequest-comment-event`) and work-item
  comments (`workitem.commented`) route like issue comments; `git.pullrequest.updated` on a
  pairbot branch like `synchronize`. An Azure DevOps PR comment event also fires on an edit:
  a comment whose content changed after it was published never acts.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from app.domain.commands import Command, CommandError, parse_commands
from app.domain.dispatch import CommentRef, PairRequest
from app.store.base import CommandRecord, InstallationChange, NewJob, TargetKind
from app.web.jobs import CommandJob, CommandProblem, Commenter, HeadMovedJob, ScopeDecisionJob
from hosts.decisions import holds_scope_decision

Payload = Mapping[str, Any]

GITHUB: Final = "github"
AZURE: Final = "azure-devops"
# The branches pairbot pushes (app.engine.phase_steps: `pair/<batch>[/<group>]`).
BRANCH_PREFIX: Final = "pair/"
_OWN_MARKER: Final = "<!-- pair:"


@dataclass(frozen=True)
class Policy:
    """What routing needs to know about this App."""

    trigger: str
    app_slug: str | None = None
    app_id: int | None = None
    allowlist: frozenset[int] = frozenset()

    @property
    def bot_login(self) -> str | None:
        return f"{self.app_slug}[bot]".lower() if self.app_slug else None


@dataclass(frozen=True)
class Routed:
    """What a delivery asks for; `silent` means: ignore it before writing anything."""

    reason: str
    jobs: tuple[NewJob, ...] = ()
    silent: bool = False
    installation: InstallationChange | None = None


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


# -- comments (shared by both sources) ------------------------------------------------------------


@dataclass(frozen=True)
class _Comment:
    source: str
    repo: str
    installation: int | None
    target: TargetKind
    number: int
    comment_id: str  # the host's id, "" when the notification names none
    url: str
    body: str
    author: Commenter
    delivery: str
    dedupe_id: str = ""  # what makes the comment unique when it has no id

    @property
    def identity(self) -> str:
        return self.comment_id or self.dedupe_id


def _comment_jobs(comment: _Comment, policy: Policy) -> Routed:
    """A new comment by someone who may be allowed to act → a scope-decision or command job."""
    author = comment.author
    decision = comment.target == "pull" and holds_scope_decision(comment.body)
    if author.is_bot and decision:
        return silent(f"scope decision by bot {author.login!r}: only a person decides scope")
    if author.is_bot and author.numeric_id not in policy.allowlist:
        return silent(f"comment by bot {author.login!r}, which is not on the allowlist")
    dedupe = f"{comment.source}:{comment.repo}:comment:{comment.identity}"
    serial = serial_key(comment.source, comment.repo, comment.target, comment.number)
    where = f"{comment.repo}{'!' if comment.target == 'pull' else '#'}{comment.number}"
    if decision:
        scope = ScopeDecisionJob(
            pull=comment.number,
            comment_id=comment.identity,
            delivery=comment.delivery,
        )
        job = NewJob(
            kind="scope-decision",
            source=comment.source,
            repo=comment.repo,
            installation=comment.installation,
            target="pull",
            number=comment.number,
            dedupe_key=dedupe,
            serial_key=serial,
            request={"job": scope.to_payload(), "author": author.to_json()},
        )
        return Routed(f"scope decision on {where}", (job,))
    results = parse_commands(comment.body, trigger=policy.trigger, app_slug=policy.app_slug)
    if not results:
        return ignored(f"comment on {where} holds no command for pairbot")
    ref = CommentRef(
        id=comment.comment_id,
        author_login=author.login,
        author_id=author.numeric_id or 0,
        url=comment.url,
        on_pull=comment.target == "pull",
    )
    first = results[0]
    record: CommandRecord | None = None
    if isinstance(first, Command):
        request = PairRequest.from_command(
            comment.number, first, comment=ref, delivery=comment.delivery
        )
        command = CommandJob(comment.number, ref, author, request=request)
        record = CommandRecord(
            verb=request.verb,
            args=request.args,
            author_id=author.id,
            author_login=author.login,
            comment_id=comment.identity,
            comment_url=comment.url,
        )
        reason = f"/{policy.trigger} {request.verb} on {where}"
    else:
        problem = _problem(first)
        command = CommandJob(comment.number, ref, author, problem=problem)
        reason = f"malformed command on {where}"
    job = NewJob(
        kind="command",
        source=comment.source,
        repo=comment.repo,
        installation=comment.installation,
        target=comment.target,
        number=comment.number,
        dedupe_key=dedupe,
        serial_key=serial,
        request=command.to_json(),
        command=record,
    )
    return Routed(reason, (job,))


def _problem(error: CommandError) -> CommandProblem:
    return CommandProblem(error.message, error.usage)


# -- GitHub ---------------------------------------------------------------------------------------


def _installation_id(payload: Payload) -> int | None:
    return _int(_obj(payload.get("installation")).get("id"))


def _is_own(user: Payload, via: Payload, policy: Policy) -> bool:
    if policy.app_id is not None and _int(via.get("id")) == policy.app_id:
        return True
    login = _text(user.get("login")).lower()
    return policy.bot_login is not None and login == policy.bot_login


def _commenter(user: Payload) -> Commenter:
    uid = _int(user.get("id"))
    return Commenter(
        login=_text(user.get("login")) or "ghost",
        id=str(uid) if uid is not None else "",
        is_bot=user.get("type") == "Bot",
    )


def _issue_comment_created(payload: Payload, policy: Policy, delivery: str) -> Routed:
    comment, issue = _obj(payload.get("comment")), _obj(payload.get("issue"))
    repo = _text(_obj(payload.get("repository")).get("full_name"))
    number, comment_id = _int(issue.get("number")), _int(comment.get("id"))
    if not repo or number is None or comment_id is None:
        return ignored("issue_comment without a repository, an issue number or a comment id")
    user = _obj(comment.get("user")) or _obj(payload.get("sender"))
    if _is_own(user, _obj(comment.get("performed_via_github_app")), policy):
        return silent("pairbot's own comment")
    return _comment_jobs(
        _Comment(
            source=GITHUB,
            repo=repo,
            installation=_installation_id(payload),
            target="pull" if isinstance(issue.get("pull_request"), dict) else "card",
            number=number,
            comment_id=str(comment_id),
            url=_text(comment.get("html_url")),
            body=_text(comment.get("body")),
            author=_commenter(user),
            delivery=delivery,
        ),
        policy,
    )


def _pull_synchronize(payload: Payload, policy: Policy, delivery: str) -> Routed:
    pull = _obj(payload.get("pull_request"))
    repo = _text(_obj(payload.get("repository")).get("full_name"))
    number = _int(payload.get("number")) or _int(pull.get("number"))
    head = _obj(pull.get("head"))
    sha = _text(head.get("sha")) or _text(payload.get("after"))
    if not repo or number is None or not sha:
        return ignored("pull_request.synchronize without a repository, a number or a head")
    sender = _obj(payload.get("sender"))
    if _is_own(sender, {}, policy):
        return silent(f"pairbot's own push to {repo}!{number}")
    author = _commenter(sender)
    if author.is_bot and author.numeric_id not in policy.allowlist:
        return silent(f"push by bot {author.login!r}, which is not on the allowlist")
    head_repo = _text(_obj(head.get("repo")).get("full_name"))
    if head_repo != repo:
        # A fork's pull request never runs anything with this repository's secrets.
        return ignored(f"{repo}!{number} comes from another repository ({head_repo or '?'})")
    if not _text(head.get("ref")).startswith(BRANCH_PREFIX):
        return ignored(f"{repo}!{number} is not on a pairbot branch ({BRANCH_PREFIX}…)")
    return _head_moved(
        GITHUB, repo, _installation_id(payload), number=number, sha=sha, delivery=delivery
    )


def _head_moved(
    source: str, repo: str, installation: int | None, *, number: int, sha: str, delivery: str
) -> Routed:
    moved = HeadMovedJob(pull=number, head_sha=sha, delivery=delivery)
    job = NewJob(
        kind="head-moved",
        source=source,
        repo=repo,
        installation=installation,
        target="pull",
        number=number,
        dedupe_key=f"{source}:{repo}:head:{number}:{sha}",
        serial_key=serial_key(source, repo, "pull", number),
        request={"job": moved.to_payload()},
    )
    return Routed(f"head of {repo}!{number} moved to {sha[:12]}", (job,))


def _repos(items: Any) -> tuple[str, ...]:
    if not isinstance(items, list):
        return ()
    return tuple(name for item in items if (name := _text(_obj(item).get("full_name"))))


def _installation(payload: Payload, action: str) -> Routed:
    installation = _obj(payload.get("installation"))
    ident = _int(installation.get("id"))
    if ident is None:
        return ignored(f"installation.{action} without an installation id")
    account = _text(_obj(installation.get("account")).get("login"))
    change = InstallationChange(
        id=ident,
        account=account,
        repos=_repos(payload.get("repositories")) if action == "created" else None,
        suspended={"suspend": True, "unsuspend": False, "created": False}.get(action),
        deleted=action == "deleted",
    )
    return Routed(f"installation {ident} ({account}) {action}", installation=change)


def _installation_repositories(payload: Payload, action: str) -> Routed:
    installation = _obj(payload.get("installation"))
    ident = _int(installation.get("id"))
    if ident is None:
        return ignored(f"installation_repositories.{action} without an installation id")
    change = InstallationChange(
        id=ident,
        account=_text(_obj(installation.get("account")).get("login")),
        added=_repos(payload.get("repositories_added")),
        removed=_repos(payload.get("repositories_removed")),
    )
    return Routed(f"installation {ident}: repositories {action}", installation=change)


Handler = Callable[[Payload, Policy, str], Routed]


def _installation_route(action: str) -> Handler:
    def handle(payload: Payload, _policy: Policy, _delivery: str) -> Routed:
        return _installation(payload, action)

    return handle


def _repositories_route(action: str) -> Handler:
    def handle(payload: Payload, _policy: Policy, _delivery: str) -> Routed:
        return _installation_repositories(payload, action)

    return handle


def _ping(payload: Payload, _policy: Policy, _delivery: str) -> Routed:
    return ignored(f"ping for hook {_int(payload.get('hook_id'))}")


_INSTALLATION_ACTIONS: Final = ("created", "deleted", "suspend", "unsuspend")

GITHUB_ROUTES: Final[Mapping[tuple[str, str | None], Handler]] = {
    ("issue_comment", "created"): _issue_comment_created,
    ("pull_request", "synchronize"): _pull_synchronize,
    **{("installation", a): _installation_route(a) for a in _INSTALLATION_ACTIONS},
    ("installation", "new_permissions_accepted"): _installation_route("new_permissions_accepted"),
    **{("installation_repositories", a): _repositories_route(a) for a in ("added", "removed")},
    ("ping", None): _ping,
}


def route_github(
    event: str, action: str | None, payload: Payload, policy: Policy, delivery: str
) -> Routed:
    """The jobs a verified GitHub delivery asks for (see the module docstring)."""
    handler = GITHUB_ROUTES.get((event, action))
    if handler is not None:
        return handler(payload, policy, delivery)
    if event == "issue_comment":
        return ignored(f"issue_comment.{action}: only a newly created comment acts")
    return ignored(f"{event}{f'.{action}' if action else ''} is not for pairbot")


# -- Azure DevOps ---------------------------------------------------------------------------------


def html_to_text(text: str) -> str:
    """Work-item comments arrive as HTML: line breaks kept, tags dropped, entities decoded."""
    text = re.sub(r"<!--.*?(?:-->|\Z)", "", text, flags=re.DOTALL)
    text = re.sub(r"(?i)<br\s*/?>|</(?:div|p|li|h[1-6]|pre|blockquote)\s*>", "\n", text)
    return html.unescape(re.sub(r"<[^>]*>", "", text))


def _azure_repo(repository: Payload) -> str:
    project = _text(_obj(repository.get("project")).get("name"))
    name = _text(repository.get("name"))
    return f"{project}/{name}" if project and name else ""


def _azure_identity(value: Any) -> Commenter:
    """An identity object, or the `Name <account>` text work-item fields hold."""
    if isinstance(value, dict):
        unique = _text(value.get("uniqueName")) or _text(value.get("displayName"))
        return Commenter(login=unique, id=_text(value.get("id")) or unique)
    text = _text(value)
    account = re.search(r"<([^<>]+)>\s*\Z", text)
    login = account.group(1) if account else text
    return Commenter(login=login, id=login)


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
    if body.lstrip().startswith(_OWN_MARKER):
        return silent("pairbot's own comment (it opens with a pair marker)")
    if _text(comment.get("commentType")) == "system":
        return ignored("a system comment")
    published = _text(comment.get("publishedDate"))
    changed = _text(comment.get("lastContentUpdatedDate")) or published
    if published and changed != published:
        return ignored("an edited comment never acts")
    return _comment_jobs(
        _Comment(
            source=AZURE,
            repo=repo,
            installation=None,
            target="pull",
            number=number,
            comment_id=f"{thread}/{comment_number}",
            url=_text(_obj(_obj(comment.get("_links")).get("self")).get("href")),
            body=body,
            author=_azure_identity(comment.get("author")),
            delivery=delivery,
        ),
        policy,
    )


def _azure_workitem_commented(payload: Payload, policy: Policy, delivery: str) -> Routed:
    resource = _obj(payload.get("resource"))
    fields = _obj(resource.get("fields"))
    number = _int(resource.get("id")) or _int(resource.get("workItemId"))
    project = _text(fields.get("System.TeamProject"))
    history = _text(fields.get("System.History"))
    if number is None or not project or not history:
        return ignored("work item comment without an id, a project or a comment")
    if _OWN_MARKER in history.lstrip()[:64]:
        return silent("pairbot's own comment (it opens with a pair marker)")
    revision = _int(resource.get("rev"))
    return _comment_jobs(
        _Comment(
            source=AZURE,
            repo=project,  # a work item belongs to a project; the worker's host names the repo
            installation=None,
            target="card",
            number=number,
            # The notification names no comment id (nothing to react to): the revision that
            # added the comment identifies it.
            comment_id="",
            dedupe_id=_marker_safe(f"rev{revision if revision is not None else delivery}"),
            url=_text(resource.get("url")),
            body=html_to_text(history),
            author=_azure_identity(fields.get("System.ChangedBy")),
            delivery=delivery,
        ),
        policy,
    )


def _azure_pull_updated(payload: Payload, policy: Policy, delivery: str) -> Routed:
    resource = _obj(payload.get("resource"))
    repo = _azure_repo(_obj(resource.get("repository")))
    number = _int(resource.get("pullRequestId"))
    sha = _text(_obj(resource.get("lastMergeSourceCommit")).get("commitId"))
    if not repo or number is None or not sha:
        return ignored("git.pullrequest.updated without a repository, a pull or a source commit")
    if not _text(resource.get("sourceRefName")).startswith(f"refs/heads/{BRANCH_PREFIX}"):
        return ignored(f"{repo}!{number} is not on a pairbot branch ({BRANCH_PREFIX}…)")
    return _head_moved(AZURE, repo, None, number=number, sha=sha, delivery=delivery)


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
