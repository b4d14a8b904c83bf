"""What an event asks pairbot to do: one pure intake for the App and the Action.

    intent = intake(event, action, payload, policy)

The App's webhook edge (`app.web.events.route_github`: an HTTP delivery) and the Action
(`action.event.classify`: `GITHUB_EVENT_NAME` and the file at `GITHUB_EVENT_PATH`) both call
this, so a repository gets the same decision whichever of the two runs it. `Policy` carries what
differs by deployment, as plain values: the trigger word, pairbot's own identity, the
allowlists (numeric GitHub ids, Azure DevOps identity ids), the Action's default tick batch.
No I/O, no environment, no clock.

    Tick(batch)                     schedule / workflow_dispatch: the next runnable step
    Run(request)                    a `repository_dispatch` of type `pair`: a command the App
                                    already verified and authorized
    Comment(card, comment, ...)     a new comment whose first command line is `command` (a
                                    `Command`, or a `CommandError` to answer with usage); its
                                    author is not yet authorized (`decide`, after one lookup)
    ScopeDecision(pull, comment)    a person's fenced-JSON scope decision on a pull request
    HeadMoved(pull, head)           a pairbot pull request's head moved: re-review the delta
    Installation(...)               the App's installation bookkeeping (the Action ignores it)
    Ignore(reason, silent)          nothing to do; `silent`: drop it before writing anything
    Malformed(reason)               a payload without what its event always carries

The rules (docs/cycle.md, "Commands"; docs/security.md):

- Own events first, before the action is even read: anything authored by pairbot's own
  identity — its App (`performed_via_github_app.id`), its App's bot login `<slug>[bot]`, and
  `github-actions[bot]` when the Action writes with the run's GITHUB_TOKEN — is never a
  command, marker or not. A person who pastes a marker is still a person.
- Only `issue_comment.created` acts: an edit or a deletion never re-triggers a command.
- Another bot is ignored silently unless its id is allowlisted (a numeric GitHub id in
  `allowlist`, an Azure DevOps identity GUID in `identity_allowlist`); a bot's scope decision
  is ignored even then: only a person decides scope.
- A pull request comment holding a fenced scope decision (`hosts.decisions`) is a
  `ScopeDecision`, whatever command lines it also holds; otherwise the first result of
  `app.domain.intake.comment_commands.parse_commands` counts (code, quotes and hidden text never
  hold one).
- A comment over `MAX_COMMENT_CHARS` (GitHub's own limit) is not read: a bounded cost for
  anything a stranger can send.
- A new comment that cannot concern pairbot — no command a reading could find, no scope
  decision — is ignored before the rest of its payload is read (`unaddressed_comment`): it
  asks nothing, so neither its author nor its identifiers matter, and most comments are these.
- Every number that names something (an issue, a pull request, a comment, a user, an
  installation) is a positive integer — not 0, not -5, not `"5"`, not `5.0`, not `true` —
  or the event is `Malformed`, with one line naming the field, what is allowed and what came
  (`positive_reason`): nothing downstream ever sees a number no host would send.
- `pull_request.synchronize` counts only on a pairbot branch (`BRANCH_PREFIX`) of the
  repository itself (a fork's pull request never runs with this repository's secrets), and
  not when pairbot (or a bot off the allowlist) pushed it.
- A `pair` dispatch that is malformed is `Malformed`, not `Ignore`: the App acknowledged a
  command, so the Action fails loudly (`action.event.MalformedEventError`) instead of dropping
  it. The App answers any `Malformed` with "ignored" and one log line: never a 500.

`app.domain.intake.authors` (`decide`, `needs_permission`) is the "who may act" half, shared
the same way; the reply a comment gets instead of a run is
`app.domain.intake.answers.answer_comment`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeGuard

from app.domain.intake.authors import allowlisted, numeric_id
from app.domain.intake.comment_commands import (
    DEFAULT_TRIGGER,
    Command,
    CommandError,
    addresses_pairbot,
)
from app.domain.intake.comment_commands import parse_commands as _parse_commands
from app.domain.intake.pair_request import (
    DISPATCH_EVENT_TYPE,
    PAYLOAD_VERSION,
    CommentRef,
    PairRequest,
    PayloadError,
)
from hosts.decisions import holds_scope_decision
from hosts.models import Author

__all__ = [
    "ACTIONS_BOT_ID",
    "ACTIONS_BOT_LOGIN",
    "BRANCH_PREFIX",
    "MAX_COMMENT_CHARS",
    "OWN_MARKER",
    "Comment",
    "HeadMoved",
    "Ignore",
    "Installation",
    "Intent",
    "Malformed",
    "NewComment",
    "Policy",
    "Run",
    "ScopeDecision",
    "Tick",
    "comment_intent",
    "intake",
    "positive_reason",
    "read_commands",
    "read_issue_comment",
    "screen_comment",
    "unaddressed_comment",
]

# The branches pairbot pushes (`pair/<batch>[/<group>]`, `pair/card-<n>`).
BRANCH_PREFIX: Final = "pair/"
# How every comment pairbot writes opens (hosts.markers.make_marker). Only where a host names
# no identity for pairbot (Azure DevOps service hooks) does it stand for "pairbot wrote this".
OWN_MARKER: Final = "<!-- pair:"
# The identity the Actions GITHUB_TOKEN writes as (the same as hosts.github.ACTIONS_BOT, which
# is not imported: that module loads githubkit, and the intake runs before any API call).
ACTIONS_BOT_LOGIN: Final = "github-actions[bot]"
ACTIONS_BOT_ID: Final = 41898282
# GitHub refuses a longer comment body; anything longer is not GitHub's, so it is not read.
MAX_COMMENT_CHARS: Final = 65_536

_SHA = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")  # SHA-1, or SHA-256 object format
_COMMENT_REF = re.compile(r"\S{1,200}")
_BOT_SUFFIX = re.compile(r"\[bot\]\Z", re.IGNORECASE)
_INSTALLATION_ACTIONS: Final = frozenset(
    {"created", "deleted", "suspend", "unsuspend", "new_permissions_accepted"}
)

Payload = Mapping[str, Any]


@dataclass(frozen=True)
class Policy:
    """What differs by deployment, as plain values (built once by each surface's settings).

    `app_slug` / `app_id`: the GitHub App pairbot writes as, when it does (the App always;
    the Action when it minted an App token). `actions_token`: the Action writes with the run's
    GITHUB_TOKEN, so `github-actions[bot]` is pairbot. `own_id`: pairbot's bot user id, when
    known. `batch`: the Action's `batch` input, the tick's batch unless the event names one.
    """

    trigger: str = DEFAULT_TRIGGER
    app_slug: str | None = None
    app_id: int | None = None
    allowlist: frozenset[int] = frozenset()
    # Azure DevOps identity ids and accounts, case-folded: its allowlist
    # (`app.domain.intake.azure_identities.parse_identity_allowlist`).
    identity_allowlist: frozenset[str] = frozenset()
    actions_token: bool = False
    own_id: int | None = None
    batch: str | None = None

    # Cached: read for every comment the App takes, and a Policy never changes (frozen).
    @functools.cached_property
    def bot_login(self) -> str | None:
        """The App's bot login, lower-cased (`<slug>[bot]`), or None without an App."""
        return f"{_BOT_SUFFIX.sub('', self.app_slug)}[bot]".lower() if self.app_slug else None

    @functools.cached_property
    def own_logins(self) -> frozenset[str]:
        """Every login pairbot writes as in this deployment, lower-cased."""
        logins = {self.bot_login} if self.bot_login else set()
        if self.actions_token:
            logins.add(ACTIONS_BOT_LOGIN)
        return frozenset(logins)

    @functools.cached_property
    def own_ids(self) -> frozenset[int]:
        """Every user id pairbot writes as in this deployment (when known)."""
        ids = {self.own_id} if self.own_id is not None else set()
        if self.actions_token:
            ids.add(ACTIONS_BOT_ID)
        return frozenset(ids)


# -- intents -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tick:
    """Run the next runnable step: across the active batches, or of `batch` only."""

    batch: str | None = None


@dataclass(frozen=True)
class Run:
    """Run one command the App accepted (a `pair` repository_dispatch)."""

    request: PairRequest


@dataclass(frozen=True)
class Comment:
    """A new comment on #`card` whose first command line is `command`, author not authorized.

    `rest` holds the further command lines, which never run.
    """

    card: int
    comment: CommentRef
    command: Command | CommandError
    author: Author
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

    @property
    def author_is_bot(self) -> bool:
        return self.author.is_bot


@dataclass(frozen=True)
class ScopeDecision:
    """Apply the scope decision in comment `comment_id` (an id or URL) on pull request `pull`.

    `author` is who wrote it, when the event says (not for the App's dispatch, whose receiver
    reads the comment back and checks its author there).
    """

    pull: int
    comment_id: str
    author: Author | None = None


@dataclass(frozen=True)
class HeadMoved:
    """Pull request `pull` now has head `head_sha`."""

    pull: int
    head_sha: str


@dataclass(frozen=True)
class Installation:
    """The App was installed, removed, suspended or given repositories (`action` says which)."""

    event: str
    action: str
    id: int
    account: str
    repos: tuple[str, ...] | None = None  # every repository, on `installation.created`
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()


@dataclass(frozen=True)
class Ignore:
    """Nothing to do; `reason` is one log line. `silent`: drop before any write or lock."""

    reason: str
    silent: bool = False


@dataclass(frozen=True)
class Malformed:
    """The payload lacks what its event always carries; `reason` names the field."""

    reason: str


Intent = Tick | Run | Comment | ScopeDecision | HeadMoved | Installation | Ignore | Malformed


@dataclass(frozen=True)
class NewComment:
    """A newly created comment, host-neutral: what `comment_intent` reads."""

    target: Literal["card", "pull"]
    number: int
    comment_id: str  # the host's id; "" when the notification names none
    url: str
    body: str = field(repr=False)
    author: Author


# -- the intake ----------------------------------------------------------------------------


def intake(event: str, action: str | None, payload: Payload, policy: Policy) -> Intent:
    """What `payload` (an `event`, with its `action`) asks for (see the module docstring)."""
    if event == "schedule":
        return Tick(policy.batch)
    if event == "workflow_dispatch":
        return _workflow_dispatch(payload, policy)
    if event == "repository_dispatch":
        return _dispatch(payload)
    if event == "issue_comment":
        return _issue_comment(payload, action, policy)
    if event == "pull_request":
        return _pull_request(payload, action, policy)
    if event == "installation" and action in _INSTALLATION_ACTIONS:
        return _installation(event, action, payload)
    if event == "installation_repositories" and action in ("added", "removed"):
        return _installation(event, action, payload)
    if event == "ping":
        return Ignore(f"ping for hook {_int(payload.get('hook_id'))}")
    return Ignore(f"{event}{f'.{action}' if action else ''} is not for pairbot")


def comment_intent(
    comment: NewComment, policy: Policy
) -> Comment | ScopeDecision | Ignore | Malformed:
    """A new comment by someone other than pairbot → a command, a scope decision, or nothing.

    Shared by every host's comment (GitHub issue comments here, Azure DevOps PR and work-item
    comments in `app.web.events`); the caller has already dropped pairbot's own. It is
    `screen_comment`, then, for a comment that may hold a command, `read_commands`.
    """
    screened = screen_comment(comment, policy)
    if screened is not None:
        return screened
    return read_commands(comment, policy.trigger, policy.app_slug)


def screen_comment(
    comment: NewComment, policy: Policy
) -> ScopeDecision | Ignore | Malformed | None:
    """Everything `comment_intent` decides before the command grammar: a wrong number, a body
    over the cap, a scope decision, a bot, and a comment that addresses no one (the grammar's
    own cheap pre-check). None: it may hold a command, and `read_commands` says which.

    The App's edge stops here and queues the comment for its worker to read (app.web.events):
    the grammar is the costly part, and nothing it decides needs to come before the answer.
    """
    author, number = comment.author, comment.number
    kind = "pull request" if comment.target == "pull" else "issue"
    if type(number) is not int or number < 1:  # its line built only for a wrong number
        problem = positive_reason(number, f"the {kind} number of a comment")
        if problem is not None:
            return Malformed(problem)
    where = f"{kind} #{number}"
    if len(comment.body) > MAX_COMMENT_CHARS:
        return Ignore(f"the comment on {where} is over {MAX_COMMENT_CHARS} characters: not read")
    decision = comment.target == "pull" and holds_scope_decision(comment.body)
    if author.is_bot and decision:
        return Ignore(
            f"scope decision by bot {author.login!r}: only a person decides scope", silent=True
        )
    if author.is_bot and not allowlisted(author, policy.allowlist, policy.identity_allowlist):
        return Ignore(f"comment by bot {author.login!r}, which is not on the allowlist", True)
    if decision:
        return ScopeDecision(number, comment.comment_id, author)
    if not addresses_pairbot(comment.body, trigger=policy.trigger, app_slug=policy.app_slug):
        return _no_command(comment)
    return None


def read_commands(comment: NewComment, trigger: str, app_slug: str | None) -> Comment | Ignore:
    """The command lines of a comment `screen_comment` let through, read with the grammar
    (`parse_commands`) under the trigger and App slug it was screened with."""
    results = _parse_commands(comment.body, trigger=trigger, app_slug=app_slug)
    if not results:
        return _no_command(comment)
    author = comment.author
    ref = CommentRef(
        id=comment.comment_id,
        author_login=author.login,
        author_id=numeric_id(author.id) or 0,
        url=comment.url,
        on_pull=comment.target == "pull",
    )
    return Comment(comment.number, ref, results[0], author, tuple(results[1:]))


def _no_command(comment: NewComment) -> Ignore:
    return _holds_no_command(comment.target == "pull", comment.number)


def _holds_no_command(pull: bool, number: int) -> Ignore:
    kind = "pull request" if pull else "issue"
    return Ignore(f"the comment on {kind} #{number} holds no command for pairbot")


def unaddressed_comment(payload: Payload, action: str | None, policy: Policy) -> Ignore | None:
    """An `issue_comment.created` whose text cannot concern pairbot, ignored before anything
    else of the delivery is read; None: read it in full (`read_issue_comment`).

    Most comments a repository gets are these, and nothing is written, run or answered for
    one whatever else its payload holds, so its author, identifiers and other fields are not
    checked: a comment no reading can find a command in (the grammar's own pre-check,
    `addresses_pairbot`), nor on a pull request a scope decision, within `MAX_COMMENT_CHARS`,
    on an issue or pull request whose number is a positive integer. Its reason is the one the
    full reading gives a person's such comment. What is checked in full is every comment that
    may act, and every edit or deletion, as before.
    """
    if action != "created":
        return None
    comment, issue = payload.get("comment"), payload.get("issue")
    if type(comment) is not dict or type(issue) is not dict:
        return None
    body = comment.get("body") or ""
    number = issue.get("number")
    if type(body) is not str or type(number) is not int or number < 1:
        return None
    if len(body) > MAX_COMMENT_CHARS:
        return None
    pull = _is_mapping(issue.get("pull_request"))
    if pull and holds_scope_decision(body):
        return None
    if addresses_pairbot(body, trigger=policy.trigger, app_slug=policy.app_slug):
        return None
    return _holds_no_command(pull, number)


def _issue_comment(payload: Payload, action: str | None, policy: Policy) -> Intent:
    unaddressed = unaddressed_comment(payload, action, policy)
    if unaddressed is not None:
        return unaddressed
    new = read_issue_comment(payload, action, policy)
    return comment_intent(new, policy) if isinstance(new, NewComment) else new


def read_issue_comment(
    payload: Payload, action: str | None, policy: Policy
) -> NewComment | Ignore | Malformed:
    """An `issue_comment` delivery → the new comment it carries, host-neutral; or nothing to
    do (pairbot's own comment, an edit or a deletion), or the field it lacks."""
    comment = payload.get("comment")
    if not _is_mapping(comment):
        return Malformed("issue_comment: comment must be an object")
    user = comment.get("user")
    login = user.get("login") if _is_mapping(user) else None
    if not _is_mapping(user) or not isinstance(login, str):
        return Malformed("issue_comment: comment.user needs a login (a string) and a numeric id")
    problem = positive_reason(user.get("id"), "issue_comment: comment.user.id")
    if problem is not None:
        return Malformed(problem)
    user_id = int(user["id"])
    # First, before even the action: pairbot's own comments (a tracking-comment update must
    # not start another run, and an App token's comments do trigger workflows).
    if _is_own(login, user_id, _obj(comment.get("performed_via_github_app")), policy):
        return Ignore(f"pairbot's own comment (by {login})", silent=True)
    if action != "created":
        return Ignore(f"issue_comment.{action}: only a newly created comment acts")
    body = comment.get("body") or ""
    if not isinstance(body, str):
        return Malformed("issue_comment: comment.body must be a string")
    issue = payload.get("issue")
    if not _is_mapping(issue):
        return Malformed("issue_comment: issue must be an object")
    for value, name in ((issue.get("number"), "issue.number"), (comment.get("id"), "comment.id")):
        problem = positive_reason(value, f"issue_comment: {name}")
        if problem is not None:
            return Malformed(problem)
    number, comment_id = int(issue["number"]), int(comment["id"])
    return NewComment(
        target="pull" if _is_mapping(issue.get("pull_request")) else "card",
        number=number,
        comment_id=str(comment_id),
        url=_text(comment.get("html_url")),
        body=body,
        author=Author(login=login, id=str(user_id), is_bot=user.get("type") == "Bot"),
    )


def _pull_request(payload: Payload, action: str | None, policy: Policy) -> Intent:
    if action != "synchronize":
        return Ignore(f"pull_request.{action}: only synchronize (a moved head) concerns pairbot")
    pull = payload.get("pull_request")
    if not isinstance(pull, Mapping):
        return Malformed("pull_request: pull_request must be an object")
    given = pull.get("number", payload.get("number"))
    problem = positive_reason(given, "pull_request: pull_request.number")
    if problem is not None:
        return Malformed(problem)
    number = int(given)
    head = pull.get("head")
    if not isinstance(head, Mapping):
        return Malformed("pull_request: pull_request.head must be an object")
    sha = head.get("sha")
    if not isinstance(sha, str) or not _SHA.fullmatch(sha):
        return Malformed("pull_request: pull_request.head.sha must be a commit SHA")
    sender = _obj(payload.get("sender"))
    login = _text(sender.get("login"))
    if _is_own(login, _int(sender.get("id")), {}, policy):
        return Ignore(f"pairbot's own push to pull request #{number}", silent=True)
    if sender.get("type") == "Bot" and _int(sender.get("id")) not in policy.allowlist:
        return Ignore(f"push by bot {login!r}, which is not on the allowlist", silent=True)
    head_repo = _obj(head.get("repo")).get("full_name")
    if head_repo is None or head_repo != _obj(payload.get("repository")).get("full_name"):
        return Ignore(f"pull request #{number} comes from another repository ({head_repo})")
    ref = head.get("ref")
    if not isinstance(ref, str) or not ref.startswith(BRANCH_PREFIX):
        return Ignore(f"pull request #{number} head {ref!r} is not a pairbot branch")
    return HeadMoved(number, sha)


def _workflow_dispatch(payload: Payload, policy: Policy) -> Intent:
    inputs = payload.get("inputs") or {}
    if not isinstance(inputs, Mapping):
        return Malformed("workflow_dispatch: inputs must be an object")
    named = inputs.get("batch")
    if named in (None, ""):
        return Tick(policy.batch)
    if not isinstance(named, str):
        return Malformed("workflow_dispatch: inputs.batch must be a string")
    # Whether it is a batch *name* is the Action's check (a user error, with the remedy).
    return Tick(named.strip())


def _dispatch(payload: Payload) -> Intent:
    # In the payload GitHub delivers, `action` carries the dispatch's `event_type`.
    event_type = payload.get("action")
    where = f"repository_dispatch {DISPATCH_EVENT_TYPE!r}"
    if event_type != DISPATCH_EVENT_TYPE:
        return Ignore(
            f"repository_dispatch of type {event_type!r} is not pairbot's ({DISPATCH_EVENT_TYPE!r})"
        )
    client = payload.get("client_payload")
    if not isinstance(client, Mapping):
        return Malformed(f"{where}: client_payload must be an object")
    kind = client.get("kind")
    try:
        if kind is None:
            return Run(PairRequest.from_payload(client))
        if client.get("version") != PAYLOAD_VERSION:
            raise PayloadError(
                f"client_payload.version must be {PAYLOAD_VERSION}, got {client.get('version')!r}"
            )
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
        return Malformed(f"{where}: {err}")
    return Malformed(
        f"{where}: client_payload.kind {kind!r} is not one of: scope-decision, head-moved"
        " (or no kind, for a command)"
    )


def _installation(event: str, action: str, payload: Payload) -> Intent:
    installation = _obj(payload.get("installation"))
    problem = positive_reason(installation.get("id"), f"{event}.{action}: installation.id")
    if problem is not None:
        return Malformed(problem)
    ident = int(installation["id"])
    return Installation(
        event=event,
        action=action,
        id=ident,
        account=_text(_obj(installation.get("account")).get("login")),
        repos=_repos(payload.get("repositories")) if event == "installation" else None,
        added=_repos(payload.get("repositories_added")),
        removed=_repos(payload.get("repositories_removed")),
    )


# -- small readers: untrusted shapes in, plain values out -----------------------------------


def _is_own(login: str, user_id: int | None, via: Payload, policy: Policy) -> bool:
    if policy.app_id is not None and _int(via.get("id")) == policy.app_id:
        return True
    return login.lower() in policy.own_logins or (user_id is not None and user_id in policy.own_ids)


def _is_mapping(value: Any) -> TypeGuard[Payload]:
    # `type(...) is dict` and `None` first: parsed JSON is dicts (or null), and an ABC's
    # isinstance costs ten times a type test (this runs for every comment the App takes).
    return type(value) is dict or (value is not None and isinstance(value, Mapping))


def _obj(value: Any) -> Payload:
    return value if _is_mapping(value) else {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _positive(client: Payload, key: str) -> int:
    problem = positive_reason(client.get(key), f"client_payload.{key}")
    if problem is not None:
        raise PayloadError(problem)
    return int(client[key])


# The longest shown value in a refusal: the line names what came, never a payload's worth.
_SHOWN_CHARS: Final = 40


def positive_reason(value: Any, name: str) -> str | None:
    """Why `value` is not a positive integer (one line naming `name`), or None when it is.

    A JSON number only: a bool, a float (`5.0`), a string (`"5"`) are refused like 0 and -5.
    Pure.
    """
    if (type(value) is int or _int(value) is not None) and value >= 1:
        return None  # `type(...) is int` first: the common case, without an isinstance walk
    shown = repr(value)
    if len(shown) > _SHOWN_CHARS:
        shown = shown[: _SHOWN_CHARS - 1] + "…"
    return f"{name} must be a positive integer, got {shown}"


def _repos(items: Any) -> tuple[str, ...]:
    if not isinstance(items, list):
        return ()
    return tuple(name for item in items if (name := _text(_obj(item).get("full_name"))))
