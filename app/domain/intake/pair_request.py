"""The one request shape a command travels in: from the App to the Action, and to a worker. Pure.

A `/pair <verb>` comment the App accepted (signature, de-duplication, authorization) becomes a
`PairRequest`; under `execution: actions` it is sent as a `repository_dispatch` of type `pair`
whose `client_payload` is `to_payload()`, and the Action rebuilds it with `from_payload`. The
Action's own `issue_comment` path builds the same object, so everything after "a command was
accepted" has one code path. GitHub limits `client_payload` to 10 top-level keys, so the
payload is nested under at most five.

The comment body itself is not carried: the command was parsed where it was authorized, and
the parsed verb and arguments are what run. Answer and feedback text is carried as `text`
(quoted data for the agent, never instructions).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, cast, get_args

from app.domain.card.autonomy import GateCondition, parse_gate_condition
from app.domain.intake.comment_commands import Command, Verb

DISPATCH_EVENT_TYPE: Final = "pair"
PAYLOAD_VERSION: Final = 1
_GATE_KEYS: Final = ("merge", "prepare")
_TEXT_LIMIT: Final = 20_000


class PayloadError(ValueError):
    """A dispatch payload that is not a pairbot request; the message names the field."""


@dataclass(frozen=True)
class CommentRef:
    """The comment a command came from: where to react and whom to answer."""

    id: str
    author_login: str
    author_id: int
    url: str = ""
    on_pull: bool = False  # the comment sits on a pull request, not on an issue


@dataclass(frozen=True)
class PairRequest:
    """One accepted command for one card."""

    card: int
    verb: Verb
    args: Mapping[str, str] = field(default_factory=dict)  # gates as written: "when has:x"
    text: str | None = None
    comment: CommentRef | None = None
    delivery: str = ""  # the webhook delivery id (or the Actions run id) it came from

    @classmethod
    def from_command(
        cls, card: int, command: Command, *, comment: CommentRef | None, delivery: str = ""
    ) -> PairRequest:
        """A parsed command as a request; gate arguments keep their canonical written form."""
        args = {
            key: (value.text if isinstance(value, GateCondition) else value)
            for key, value in command.args.items()
        }
        return cls(
            card=card,
            verb=command.verb,
            args=args,
            text=command.text,
            comment=comment,
            delivery=delivery,
        )

    def gate(self, key: str) -> GateCondition | None:
        """`merge` / `prepare` parsed back into a GateCondition (None when not given)."""
        value = self.args.get(key)
        return parse_gate_condition(value) if value is not None else None

    def to_payload(self) -> dict[str, Any]:
        """The `client_payload` of a `repository_dispatch` (at most 10 top-level keys)."""
        payload: dict[str, Any] = {
            "version": PAYLOAD_VERSION,
            "card": self.card,
            "command": {"verb": self.verb, "args": dict(self.args), "text": self.text},
            "delivery": self.delivery,
        }
        if self.comment is not None:
            payload["comment"] = {
                "id": self.comment.id,
                "authorLogin": self.comment.author_login,
                "authorId": self.comment.author_id,
                "url": self.comment.url,
                "onPull": self.comment.on_pull,
            }
        return payload

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> PairRequest:
        """Rebuild and validate a request; `PayloadError` names what is wrong."""
        if not isinstance(payload, Mapping):
            raise PayloadError("client_payload must be an object")
        if payload.get("version") != PAYLOAD_VERSION:
            raise PayloadError(
                f"client_payload.version must be {PAYLOAD_VERSION}, got {payload.get('version')!r}"
            )
        card = payload.get("card")
        if not isinstance(card, int) or isinstance(card, bool) or card < 1:
            raise PayloadError(f"client_payload.card must be a positive integer, got {card!r}")
        command = payload.get("command")
        if not isinstance(command, Mapping):
            raise PayloadError("client_payload.command must be an object")
        verb = command.get("verb")
        if verb not in get_args(Verb):
            allowed = ", ".join(get_args(Verb))
            raise PayloadError(f"client_payload.command.verb {verb!r} is not one of: {allowed}")
        raw_args = command.get("args") or {}
        if not isinstance(raw_args, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in raw_args.items()
        ):
            raise PayloadError("client_payload.command.args must map names to strings")
        for key in _GATE_KEYS:
            if key in raw_args:
                try:
                    parse_gate_condition(raw_args[key])
                except ValueError as err:
                    raise PayloadError(f"client_payload.command.args.{key}: {err}") from None
        text = command.get("text")
        if text is not None and (not isinstance(text, str) or len(text) > _TEXT_LIMIT):
            raise PayloadError(
                f"client_payload.command.text must be a string of at most {_TEXT_LIMIT} characters"
            )
        return cls(
            card=card,
            verb=cast("Verb", verb),  # checked against get_args(Verb) above
            args=dict(raw_args),
            text=text,
            comment=_comment(payload.get("comment")),
            delivery=str(payload.get("delivery") or ""),
        )


def _comment(raw: object) -> CommentRef | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise PayloadError("client_payload.comment must be an object")
    author_id = raw.get("authorId")
    if not isinstance(author_id, int) or isinstance(author_id, bool):
        raise PayloadError(f"client_payload.comment.authorId must be an integer, got {author_id!r}")
    return CommentRef(
        id=str(raw.get("id") or ""),
        author_login=str(raw.get("authorLogin") or ""),
        author_id=author_id,
        url=str(raw.get("url") or ""),
        on_pull=bool(raw.get("onPull", False)),
    )
