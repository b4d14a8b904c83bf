"""The work a delivery can ask for, and the payloads it is dispatched in. Pure.

Three kinds of job reach the Action (`execution: actions`, as a `repository_dispatch` of type
`pair`) or the App's worker (`execution: worker`, as a `Job` handed to the executor):

    PairRequest        an accepted `/pair <verb>` (app.domain.intake.pair_request): its
                       client_payload is `PairRequest.to_payload()` and carries no "kind" key:
                       {"version": 1, "card": 12, "command": {"verb", "args", "text"},
                        "delivery": "<X-GitHub-Delivery>", "comment": {"id", "authorLogin",
                        "authorId", "url", "onPull"}}
    ScopeDecisionJob   a maintainer's fenced-JSON scope decision on a pull request, to be read
                       back and applied by the cycle's validation:
                       {"version": 1, "kind": "scope-decision", "pull": 7,
                        "commentId": "123", "delivery": "…"}
    HeadMovedJob       a push moved the head of a pairbot pull request (`pull_request.synchronize`,
                       Azure DevOps `git.pullrequest.updated`): a reviewed head is no longer the
                       head, so the next step re-reviews the delta:
                       {"version": 1, "kind": "head-moved", "pull": 7, "head": "<40 hex>",
                        "delivery": "…"}

`job_from_payload` is the inverse (no "kind" means a PairRequest); the Action reads the same
keys (action/event.py). Who wrote a scope decision is not carried: the cycle reads the comment
back from the host and checks its author there. GitHub allows at most 10 top-level keys in a
client_payload; every shape here has at most five.

Before a command is a PairRequest it is a `CommandJob`: the comment, its author and either the
parsed request or the problem to answer with usage — what the worker authorizes first. A
GitHub comment reaches the worker one step earlier, as an `UnreadComment`: the edge screened
it (`screen_comment`) and the worker reads its command lines before anything else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from app.domain.intake.comment_commands import Command
from app.domain.intake.intent import Comment, Ignore, NewComment, read_commands
from app.domain.intake.pair_request import PAYLOAD_VERSION, CommentRef, PairRequest, PayloadError
from app.store.base import CommandRecord
from hosts.models import Author

ScopeKind: Final = "scope-decision"
HeadKind: Final = "head-moved"
_SHA_CHARS: Final = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class Commenter:
    """Who wrote a comment: login, the host's stable id (numeric on GitHub) and bot-ness."""

    login: str
    id: str
    is_bot: bool = False

    @property
    def numeric_id(self) -> int | None:
        """The GitHub user id, or None where ids are not numbers (Azure DevOps GUIDs)."""
        return int(self.id) if self.id.isascii() and self.id.isdigit() else None

    @classmethod
    def of(cls, author: Author) -> Commenter:
        """The host's author; one without a login is "ghost", as GitHub shows a deleted account."""
        return cls(login=author.login or "ghost", id=author.id, is_bot=author.is_bot)

    def to_json(self) -> dict[str, Any]:
        return {"login": self.login, "id": self.id, "isBot": self.is_bot}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Commenter:
        return cls(str(data["login"]), str(data["id"]), bool(data.get("isBot", False)))


@dataclass(frozen=True)
class CommandProblem:
    """A line addressed to pairbot that runs nothing: what was wrong, the usage to show, and
    the line itself (`raw`, echoed in the reply; "" in a job queued before it was kept)."""

    message: str
    usage: str
    raw: str = ""


@dataclass(frozen=True)
class CommandJob:
    """A comment addressed to pairbot, before authorization: a request or a problem."""

    card: int
    comment: CommentRef
    author: Commenter
    request: PairRequest | None = None
    problem: CommandProblem | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "card": self.card,
            "comment": _comment_json(self.comment),
            "author": self.author.to_json(),
            "request": self.request.to_payload() if self.request is not None else None,
            "problem": (
                {
                    "message": self.problem.message,
                    "usage": self.problem.usage,
                    "raw": self.problem.raw,
                }
                if self.problem is not None
                else None
            ),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CommandJob:
        problem = data.get("problem")
        request = data.get("request")
        return cls(
            card=int(data["card"]),
            comment=_comment_from_json(data["comment"]),
            author=Commenter.from_json(data["author"]),
            request=PairRequest.from_payload(request) if request is not None else None,
            problem=(
                CommandProblem(
                    str(problem["message"]), str(problem["usage"]), str(problem.get("raw") or "")
                )
                if problem is not None
                else None
            ),
        )


def command_of(
    intent: Comment, *, delivery: str, comment_id: str
) -> tuple[CommandJob, CommandRecord | None]:
    """A comment's first command line → the job the worker authorizes, and the record the
    status pages list (None for a line that runs nothing: it is answered with its usage).
    `comment_id` names the comment where the host gives it no id of its own."""
    commenter = Commenter.of(intent.author)
    first = intent.command
    if not isinstance(first, Command):
        problem = CommandProblem(first.message, first.usage, first.raw)
        return CommandJob(intent.card, intent.comment, commenter, problem=problem), None
    request = PairRequest.from_command(
        intent.card, first, comment=intent.comment, delivery=delivery
    )
    record = CommandRecord(
        verb=request.verb,
        args=request.args,
        author_id=commenter.id,
        author_login=commenter.login,
        comment_id=comment_id,
        comment_url=intent.comment.url,
    )
    return CommandJob(intent.card, intent.comment, commenter, request=request), record


@dataclass(frozen=True)
class UnreadComment:
    """A comment the App's edge queued as a `command` job without reading its command lines
    (`app.domain.intake.intent.screen_comment` let it through): the worker reads it
    (`read_commands`) under the `trigger` and `app_slug` it was screened with, so an App that
    learns its slug meanwhile reads it as the edge did."""

    comment: NewComment
    trigger: str
    app_slug: str | None

    def to_json(self) -> dict[str, Any]:
        comment = self.comment
        return {
            "unread": {
                "target": comment.target,
                "number": comment.number,
                "commentId": comment.comment_id,
                "url": comment.url,
                "body": comment.body,
                "author": {
                    "login": comment.author.login,
                    "id": comment.author.id,
                    "isBot": comment.author.is_bot,
                },
                "trigger": self.trigger,
                "appSlug": self.app_slug,
            }
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> UnreadComment | None:
        """The unread comment a job's request holds; None for a request read at the edge."""
        unread = data.get("unread")
        if unread is None:
            return None
        author = unread["author"]
        slug = unread.get("appSlug")
        return cls(
            NewComment(
                target="pull" if unread["target"] == "pull" else "card",
                number=int(unread["number"]),
                comment_id=str(unread["commentId"]),
                url=str(unread.get("url") or ""),
                body=str(unread["body"]),
                author=Author(
                    login=str(author["login"]),
                    id=str(author["id"]),
                    is_bot=bool(author.get("isBot", False)),
                ),
            ),
            trigger=str(unread["trigger"]),
            app_slug=str(slug) if slug is not None else None,
        )


def read_comment(
    unread: UnreadComment, *, delivery: str
) -> tuple[CommandJob, CommandRecord | None] | Ignore:
    """The worker's reading of a comment queued unread: its first command line as a job and a
    record (`command_of`), or why it runs nothing (no command line the grammar accepts)."""
    intent = read_commands(unread.comment, unread.trigger, unread.app_slug)
    if isinstance(intent, Ignore):
        return intent
    return command_of(intent, delivery=delivery, comment_id=unread.comment.comment_id)


@dataclass(frozen=True)
class ScopeDecisionJob:
    """A scope decision to read back from comment `comment_id` on pull `pull` and apply."""

    pull: int
    comment_id: str
    delivery: str = ""

    def to_payload(self) -> dict[str, Any]:
        return {
            "version": PAYLOAD_VERSION,
            "kind": ScopeKind,
            "pull": self.pull,
            "commentId": self.comment_id,
            "delivery": self.delivery,
        }


@dataclass(frozen=True)
class HeadMovedJob:
    """The head of pull `pull` is now `head_sha`."""

    pull: int
    head_sha: str
    delivery: str = ""

    def to_payload(self) -> dict[str, Any]:
        return {
            "version": PAYLOAD_VERSION,
            "kind": HeadKind,
            "pull": self.pull,
            "head": self.head_sha,
            "delivery": self.delivery,
        }


Job = PairRequest | ScopeDecisionJob | HeadMovedJob


def dispatch_payload(job: Job) -> dict[str, Any]:
    """The `client_payload` of the `repository_dispatch` that carries `job`."""
    return job.to_payload()


def job_from_payload(payload: Mapping[str, Any]) -> Job:
    """Rebuild a dispatched job; `PayloadError` names the field that is wrong."""
    if not isinstance(payload, Mapping):
        raise PayloadError("client_payload must be an object")
    kind = payload.get("kind")
    if kind is None:
        return PairRequest.from_payload(payload)
    if payload.get("version") != PAYLOAD_VERSION:
        raise PayloadError(
            f"client_payload.version must be {PAYLOAD_VERSION}, got {payload.get('version')!r}"
        )
    pull = payload.get("pull")
    if not isinstance(pull, int) or isinstance(pull, bool) or pull < 1:
        raise PayloadError(f"client_payload.pull must be a positive integer, got {pull!r}")
    delivery = str(payload.get("delivery") or "")
    if kind == ScopeKind:
        comment = payload.get("commentId")
        if not isinstance(comment, str) or not comment or len(comment) > 200:
            raise PayloadError("client_payload.commentId must be a comment id (a short string)")
        return ScopeDecisionJob(pull=pull, comment_id=comment, delivery=delivery)
    if kind == HeadKind:
        sha = payload.get("head")
        if not isinstance(sha, str) or len(sha) not in (40, 64) or not set(sha) <= _SHA_CHARS:
            raise PayloadError("client_payload.head must be a full lowercase commit SHA")
        return HeadMovedJob(pull=pull, head_sha=sha, delivery=delivery)
    raise PayloadError(
        f"client_payload.kind {kind!r} is not one of: {ScopeKind}, {HeadKind} (or absent)"
    )


def _comment_json(comment: CommentRef) -> dict[str, Any]:
    return {
        "id": comment.id,
        "authorLogin": comment.author_login,
        "authorId": comment.author_id,
        "url": comment.url,
        "onPull": comment.on_pull,
    }


def _comment_from_json(data: Mapping[str, Any]) -> CommentRef:
    return CommentRef(
        id=str(data["id"]),
        author_login=str(data["authorLogin"]),
        author_id=int(data["authorId"]),
        url=str(data.get("url") or ""),
        on_pull=bool(data.get("onPull", False)),
    )
