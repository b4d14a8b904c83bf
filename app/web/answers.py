"""The webhook edges' answers (each built once: the constant ones are module constants or
cached), and the checks of a body's type and JSON that choose the refusals."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any, Final

import orjson

from app.web.asgi import Answer
from app.web.limits import Refused


def is_json_type(content_type: str | None) -> bool:
    """`application/json`, with or without parameters (GitHub and Azure DevOps send it)."""
    return (content_type or "").split(";", 1)[0].strip().lower() == "application/json"


def parse_json(body: bytes) -> Any:
    """The body's JSON value; ValueError or RecursionError when it is not JSON.

    orjson parses a delivery about three times faster than `json` (a comment delivery is 7-15 KB,
    and the edge parses every one). It is stricter in a few corners the standard library
    accepts — NaN and Infinity, a byte-order mark, UTF-16/32, a lone surrogate escape, nesting
    past 1024 — so whatever it refuses goes to `json.loads` before it counts as "not JSON":
    the 415 line does not move. (One difference remains: orjson reads an integer past 64 bits
    as a float; no webhook field is one.)
    """
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return json.loads(body)


def reply(status: int, outcome: str, **extra: Any) -> Answer:
    """A JSON answer `{"status": outcome, **extra}`."""
    return Answer(status, orjson.dumps({"status": outcome, **extra}))


DUPLICATE: Final = reply(200, "duplicate")
NOT_JSON_TYPE: Final = reply(
    415, "refused", reason="send application/json (the webhook's content type)"
)


@functools.lru_cache(maxsize=64)
def not_for_pairbot(event: str) -> str:
    return f"{event} is not for pairbot"


@functools.lru_cache(maxsize=256)
def ignored(reason: str) -> Answer:
    """The 200 of a delivery for no one; one answer per reason, built once (the reasons are
    pairbot's own sentences, a small set)."""
    return reply(200, "ignored", reason=reason)


@functools.lru_cache(maxsize=16)
def queued(jobs: int) -> Answer:
    return reply(202, "queued", jobs=jobs)


def closing(answer: Answer) -> Answer:
    """`answer`, closing the connection: the body it was sent before is never read."""
    return Answer(answer.status, answer.body, (*answer.headers, (b"connection", b"close")))


def refusal(refused: Refused) -> Answer:
    """A refused body's answer. It closes the connection: the rest of the body is not read."""
    headers = [(b"content-type", b"application/json"), (b"connection", b"close")]
    outcome = "refused"
    if refused.retry_after_s is not None:
        headers.append((b"retry-after", b"%d" % refused.retry_after_s))
        outcome = "unavailable"
    body = orjson.dumps({"status": outcome, "reason": refused.reason})
    return Answer(refused.status, body, tuple(headers))


def json_object(body: bytes) -> Mapping[str, Any] | Answer:
    """The body as a JSON object, or the 415 / 400 answer."""
    try:
        payload = parse_json(body)
    except (ValueError, RecursionError):
        return reply(415, "refused", reason="the body is not JSON")
    if not isinstance(payload, dict):
        return reply(400, "refused", reason="the body is not a JSON object")
    return payload
