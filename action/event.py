"""What a workflow event asks pairbot to do: a pure classification, then a pure authorization.

    intent = classify(ctx.event_name, payload, trigger=…, app_slug=…, batch=ctx.batch)
    match intent:
        Tick(batch)                 schedule / workflow_dispatch: the next runnable step
        Run(request)                an accepted command (repository_dispatch `pair` from the App)
        Comment(...)                a command in a new comment, author not yet authorized:
                                    look up the permission (I/O), then `authorize(...)` gives
                                    Run | Reply | Ignore
        ScopeDecision(pull, ref)    a maintainer's scope decision to read back and apply
        HeadMoved(pull, head)       a pairbot pull request's head moved: re-review as a delta
        Ignore(reason)              nothing to do; `reason` is one log line

The rules mirror the App's (DESIGN.md, "Commands" and "Security model"; app/web):

- pairbot's own comments are ignored before anything else: a body carrying a `<!-- pair:`
  marker written by `github-actions[bot]` or `<app-slug>[bot]`. With an App token pairbot's own
  comments *do* trigger workflows (a `GITHUB_TOKEN` comment does not), so without this rule
  every tracking-comment update would start another run.
- Only `issue_comment` `created` acts: an edit or a deletion never re-triggers a command.
- A comment's commands come from `app.domain.commands.parse_commands` (code blocks, quotes and
  hidden text never hold one); the first result is the one that counts. Whether its author may
  act is `may_act`'s decision, in `authorize`: other bots are ignored silently there unless
  their id is allowlisted.
- A scope decision is a pull request comment holding a fenced JSON block that names
  `"schemaVersion"` (`hosts.decisions.holds_scope_decision`, the same test the hosts use). It
  wins over a command line in the same comment: the decision is the comment's substance, and
  the maintainer check is `app.domain.scope`'s, after reading the comment back. A bot's
  decision is ignored here: only a User can be the maintainer.
- `pull_request` `synchronize` counts only for a branch pairbot pushes (`pair/…`) in this
  repository; a fork's pull request never runs anything with this repository's secrets.
- `repository_dispatch` of type `pair` comes from the App, which already verified, de-duplicated
  and authorized the command. Its `client_payload` is a `PairRequest` (no `kind`), or a
  `scope-decision` / `head-moved` notice.

A malformed event is an error, not an `Ignore`: `MalformedEventError` names the field. For a
`pair` dispatch this is deliberate: the App accepted a maintainer's command and acknowledged
it, so dropping it silently would lose the command while the comment says it runs; a red run
whose log names the field (version skew between App and Action, or a hand-made dispatch) is
what the operator needs. A dispatch of another type is not ours and is ignored.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from app.domain.commands import (
    DEFAULT_TRIGGER,
    Command,
    CommandError,
    may_act,
    parse_commands,
)
from app.domain.dispatch import DISPATCH_EVENT_TYPE, CommentRef, PairRequest, PayloadError
from app.engine.manifest import NAME_PATTERN
from app.errors import OperatorError, UserError
from hosts.decisions import holds_scope_decision

__all__ = [
    "ACTIONS_BOT_ID",
    "ACTIONS_BOT_LOGIN",
    "Comment",
    "HeadMoved",
    "Ignore",
    "Intent",
    "MalformedEventError",
    "Reply",
    "Run",
    "ScopeDecision",
    "Tick",
    "authorize",
    "classify",
    "needs_permission",
    "own_logins",
]

# The identity a GITHUB_TOKEN acts as (the same as hosts.github.ACTIONS_BOT, which is not
# imported here: that module loads githubkit, and classification runs before any API call).
ACTIONS_BOT_LOGIN: Final = "github-actions[bot]"
ACTIONS_BOT_ID: Final = 41898282
OWN_MARKER: Final = "<!-- pair:"
BRANCH_PREFIX: Final = "pair/"
PAYLOAD_VERSION: Final = 1
_SHA = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")  # SHA-1, or SHA-256 object format
_COMMENT_REF = re.compile(r"\S{1,200}")


class MalformedEventError(OperatorError, PayloadError):
    """An event payload that is not what GitHub (or the App) sends; the message names the field.

    Operator-facing (exit 1). It is also a `PayloadError`, so code that handles the App's
    dispatch errors catches it too.
    """


# -- intents -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tick:
    """Run the next runnable step: across the active batches, or of `batch` only."""

    batch: str | None = None


@dataclass(frozen=True)
class Run:
    """Run one accepted command."""

    request: PairRequest


@dataclass(frozen=True)
class Comment:
    """A new comment whose first command line is `command`; its author is not yet authorized.

    `card` is the issue (or pull request) number the comment sits on. `rest` holds the further
    command lines, which do not run (the caller may say so in its reply).
    """

    card: int
    comment: CommentRef
    command: Command | CommandError
    author_is_bot: bool
    rest: tuple[Command | CommandError, ...] = ()

    @property
    def is_pull(self) -> bool:
        return self.comment.on_pull

    @property
    def author_id(self) -> int:
        return self.comment.author_id

    @property
    def author_login(self) -> str:
        return self.comment.author_login


@dataclass(frozen=True)
class ScopeDecision:
    """Apply the scope decision in comment `comment_id` (an id or URL) on pull request `pull`."""

    pull: int
    comment_id: str


@dataclass(frozen=True)
class HeadMoved:
    """Pull request `pull` now has head `head_sha`."""

    pull: int
    head_sha: str


@dataclass(frozen=True)
class Ignore:
    """Nothing to do; `reason` says why, in one line for the log."""

    reason: str


@dataclass(frozen=True)
class Reply:
    """Answer the comment with `text` (Markdown) and run nothing."""

    card: int
    comment: CommentRef
    text: str = field(repr=False)


Intent = Tick | Run | Comment | ScopeDecision | HeadMoved | Ignore


# -- classification ------------------------------------------------------------------------


def own_logins(app_slug: str | None) -> frozenset[str]:
    """The logins pairbot writes as: the Actions bot, and the App's bot when there is one."""
    logins = {ACTIONS_BOT_LOGIN}
    if app_slug:
        logins.add(f"{app_slug.removesuffix('[bot]')}[bot]".lower())
    return frozenset(logins)


def classify(
    event_name: str,
    payload: Mapping[str, Any],
    *,
    trigger: str = DEFAULT_TRIGGER,
    app_slug: str | None = None,
    own_id: int | None = None,
    batch: str | None = None,
) -> Intent:
    """What `payload` (the event named `event_name`) asks for. Pure.

    `app_slug` is the App's slug when the Action acts as an App (it adds `@<slug>[bot]` as a
    command address and `<slug>[bot]` as one of pairbot's own logins); `own_id` is pairbot's
    bot user id when known; `batch` is the Action's `batch` input, the tick's batch unless the
    event names one. Raises `MalformedEventError` for a payload that lacks what its event
    always carries, and `UserError` for a `workflow_dispatch` batch that is not a batch name.
    """
    if event_name == "schedule":
        return Tick(batch)
    if event_name == "workflow_dispatch":
        inputs = payload.get("inputs") or {}
        if not isinstance(inputs, Mapping):
            raise MalformedEventError("workflow_dispatch: inputs must be an object")
        named = inputs.get("batch")
        if named in (None, ""):
            return Tick(batch)
        if not isinstance(named, str) or not NAME_PATTERN.match(named.strip()):
            raise UserError(
                f"workflow_dispatch input batch={named!r} is not a batch name; allowed: "
                "lowercase letters, digits, '.', '_' and '-', starting with a letter or digit"
            )
        return Tick(named.strip())
    if event_name == "repository_dispatch":
        return _dispatch(payload)
    if event_name == "issue_comment":
        return _issue_comment(payload, trigger=trigger, app_slug=app_slug, own_id=own_id)
    if event_name == "pull_request":
        return _pull_request(payload)
    return Ignore(f"event {event_name!r} is not one pairbot handles")


def _dispatch(payload: Mapping[str, Any]) -> Intent:
    # In the payload GitHub delivers, `action` carries the dispatch's `event_type`.
    event_type = payload.get("action")
    if event_type != DISPATCH_EVENT_TYPE:
        return Ignore(
            f"repository_dispatch of type {event_type!r} is not pairbot's ({DISPATCH_EVENT_TYPE!r})"
        )
    client = payload.get("client_payload")
    if not isinstance(client, Mapping):
        raise MalformedEventError(
            f"repository_dispatch {DISPATCH_EVENT_TYPE!r}: client_payload must be an object"
        )
    kind = client.get("kind")
    try:
        if kind is None:
            return Run(PairRequest.from_payload(client))
        _version(client)
        if kind == "scope-decision":
            ref = client.get("commentId")
            if not isinstance(ref, str) or not _COMMENT_REF.fullmatch(ref):
                raise PayloadError(
                    "client_payload.commentId must be a comment id or URL (a string without "
                    f"spaces), got {ref!r}"
                )
            return ScopeDecision(_positive(client, "pull"), ref)
        if kind == "head-moved":
            head = client.get("head")
            if not isinstance(head, str) or not _SHA.fullmatch(head):
                raise PayloadError(
                    f"client_payload.head must be a full lowercase commit SHA, got {head!r}"
                )
            return HeadMoved(_positive(client, "pull"), head)
    except PayloadError as err:
        raise MalformedEventError(f"repository_dispatch {DISPATCH_EVENT_TYPE!r}: {err}") from None
    raise MalformedEventError(
        f"repository_dispatch {DISPATCH_EVENT_TYPE!r}: client_payload.kind {kind!r} is not one of:"
        " scope-decision, head-moved (or no kind, for a command)"
    )


def _version(client: Mapping[str, Any]) -> None:
    if client.get("version") != PAYLOAD_VERSION:
        raise PayloadError(
            f"client_payload.version must be {PAYLOAD_VERSION}, got {client.get('version')!r}"
        )


def _positive(client: Mapping[str, Any], key: str) -> int:
    value = client.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise PayloadError(f"client_payload.{key} must be a positive integer, got {value!r}")
    return value


def _issue_comment(
    payload: Mapping[str, Any], *, trigger: str, app_slug: str | None, own_id: int | None
) -> Intent:
    comment = _object(payload, "comment", "issue_comment")
    body = comment.get("body") or ""
    if not isinstance(body, str):
        raise MalformedEventError("issue_comment: comment.body must be a string")
    user = _object(comment, "user", "issue_comment: comment")
    login = user.get("login")
    author_id = user.get("id")
    if not isinstance(login, str) or not isinstance(author_id, int) or isinstance(author_id, bool):
        raise MalformedEventError("issue_comment: comment.user needs a login and a numeric id")
    # First, before even looking at the action: pairbot's own comments.
    own = login.lower() in own_logins(app_slug) or author_id == own_id
    if own and OWN_MARKER in body:
        return Ignore(f"pairbot's own comment (by {login})")
    action = payload.get("action")
    if action != "created":
        return Ignore(f"issue_comment {action!r}: only a newly created comment acts")
    issue = _object(payload, "issue", "issue_comment")
    number = issue.get("number")
    if not isinstance(number, int) or isinstance(number, bool) or number < 1:
        raise MalformedEventError("issue_comment: issue.number must be a positive integer")
    comment_id = comment.get("id")
    if not isinstance(comment_id, int) or isinstance(comment_id, bool):
        raise MalformedEventError("issue_comment: comment.id must be an integer")
    on_pull = issue.get("pull_request") is not None
    is_bot = user.get("type") == "Bot"
    if on_pull and holds_scope_decision(body):
        if is_bot:
            return Ignore(f"scope decision by bot {login}: only a person can decide scope")
        return ScopeDecision(number, str(comment_id))
    results = parse_commands(body, trigger=trigger, app_slug=app_slug)
    if not results:
        return Ignore(f"comment {comment_id} holds no pairbot command")
    ref = CommentRef(
        id=str(comment_id),
        author_login=login,
        author_id=author_id,
        url=str(comment.get("html_url") or ""),
        on_pull=on_pull,
    )
    return Comment(number, ref, results[0], is_bot, tuple(results[1:]))


def _pull_request(payload: Mapping[str, Any]) -> Intent:
    action = payload.get("action")
    if action != "synchronize":
        return Ignore(f"pull_request {action!r}: only synchronize (a moved head) concerns pairbot")
    pull = _object(payload, "pull_request", "pull_request")
    number = pull.get("number", payload.get("number"))
    if not isinstance(number, int) or isinstance(number, bool) or number < 1:
        raise MalformedEventError("pull_request: number must be a positive integer")
    head = _object(pull, "head", "pull_request: pull_request")
    sha = head.get("sha")
    if not isinstance(sha, str) or not _SHA.fullmatch(sha):
        raise MalformedEventError("pull_request: pull_request.head.sha must be a commit SHA")
    ref = head.get("ref")
    head_repo = (head.get("repo") or {}).get("full_name")
    base_repo = (payload.get("repository") or {}).get("full_name")
    if head_repo is None or head_repo != base_repo:
        return Ignore(f"pull request #{number} comes from another repository ({head_repo})")
    if not isinstance(ref, str) or not ref.startswith(BRANCH_PREFIX):
        return Ignore(f"pull request #{number} head {ref!r} is not a pairbot branch")
    return HeadMoved(number, sha)


def _object(parent: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = parent.get(key)
    if not isinstance(value, Mapping):
        raise MalformedEventError(f"{where}: {key} must be an object")
    return value


# -- authorization -------------------------------------------------------------------------


def needs_permission(intent: Comment, *, allowlist: Collection[int]) -> bool:
    """Whether `authorize` needs the author's permission level (one API call) to decide.

    Bots and allowlisted ids are decided without it (`may_act` never reads it for them).
    """
    return not intent.author_is_bot and intent.author_id not in allowlist


def authorize(
    intent: Comment,
    *,
    permission: str | None,
    allowlist: frozenset[int],
    own_bot_id: int | None,
    delivery: str = "",
) -> Run | Reply | Ignore:
    """Who may act (`may_act`), then what the comment gets. Pure.

    Ignored silently: pairbot's own comments and bots that are not allowlisted. Refused with a
    reply: anyone else without write access. An allowed author's malformed command gets its
    usage; a well-formed one becomes a `Run` whose `delivery` is, e.g., the Actions run id.
    """
    decision = may_act(
        author_id=intent.author_id,
        author_login=intent.author_login,
        author_is_bot=intent.author_is_bot,
        permission=permission,
        allowlist=allowlist,
        own_bot_id=own_bot_id,
    )
    if decision.silent:
        return Ignore(decision.reason)
    if not decision.allowed:
        return Reply(intent.card, intent.comment, decision.reason)
    command = intent.command
    if isinstance(command, CommandError):
        usage = command.usage if "\n" in command.usage else _code(command.usage)
        text = f"{_code(command.raw)}: {command.message.rstrip('.')}.\n\nUsage: {usage}"
        return Reply(intent.card, intent.comment, text)
    request = PairRequest.from_command(
        intent.card, command, comment=intent.comment, delivery=delivery
    )
    return Run(request)


def _code(text: str) -> str:
    """`text` as inline code: echoed user text cannot mention, link or format anything."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"
