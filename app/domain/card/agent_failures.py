"""Why an agent CLI failed, when the failure is not the step's own: the one failover table. Pure.

`classify_failure(agent, exit_code, signal, output)` says whether a failed agent run ended on a
recognised *quota*, *auth* or *crash* signature — a failure another agent may not share — or
`None`: the step failed on its merits (a non-zero exit nothing here recognises, a blocker, red
tests, review findings), and no other agent is tried.

    quota   the provider refused for money or rate: credits spent, a usage limit, HTTP 429,
            an overloaded provider
    auth    the CLI has no valid credential: an invalid or missing API key, HTTP 401
    crash   the process was killed by a signal (no exit code, or a shell's status 128+N)

Each CLI says these things in its own words, so the message patterns are per agent, taken from
the pinned CLIs' own sources (tests/agents/package.json; each row says where) and the APIs they
relay. They are matched case-insensitively against the vendor's reason and the tail of what the
agent wrote (stdout and stderr). An agent pairbot has no table for (`command`, an in-house tool)
is classified by the crash rule alone.

The vendor's reason (`vendor_reason`): every named CLI reports a failed turn as a JSON event on
stdout (codex's `turn.failed`, claude's `result` with `is_error`, gemini's `result` with status
`error`, opencode's `error`), not on stderr. The last such message, in one line with secrets
redacted (`one_line`), is what classification searches first and what the user is shown: in
the failed step's blocker, park reason and journal outcome, and on the failover line.

A run pairbot itself stopped for the agent timeout is never a crash here: a hung agent is the
step's problem, and another agent would be given the same too-short time.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

FailureKind = Literal["quota", "auth", "crash"]

# How much of the end of the output is searched: errors come last, and a long transcript must
# not cost a regex pass over megabytes.
TAIL_CHARS: Final = 8_000

# The line the runtime adds when it stopped the agent for the timeout (app/runtime/process.py).
TIMEOUT_NOTE: Final = "pairbot: agent timed out"


def _patterns(*texts: str) -> re.Pattern[str]:
    return re.compile("|".join(texts), re.IGNORECASE)


# agent -> ((kind, pattern), ...), tried in order; the first that matches wins. Every row says
# where its words come from: the pinned CLI (tests/agents/package.json) or the API it relays.
# An apostrophe is matched straight or curly (U+2019): codex and claude print the curly one.
_APOS = "['\u2019]"

SIGNATURES: Final[Mapping[str, tuple[tuple[FailureKind, re.Pattern[str]], ...]]] = {
    "claude": (
        (
            "quota",
            _patterns(
                # Anthropic API error types (docs.anthropic.com/en/api/errors), which claude's
                # stream-json `result` carries as `api_error_type`.
                r"\brate_limit_error\b",
                r"\boverloaded_error\b",
                # claude 2.1.332 (its bundled cli.js): the `result` text of an API error.
                r"credit balance is too low",  # "Credit balance is too low"
                r"API Error: 429\b",
                r"API Error: 529\b",  # "API Error: 529 Overloaded. This is a server-side ..."
                r"Request rejected \(429\)",  # "API Error: Request rejected (429) · <message>"
                r"Server is temporarily limiting requests",
                r"spend limit reached",
                # claude's plan-limit texts (its list of usage-limit messages in cli.js).
                r"usage limit reached",
                rf"You{_APOS}ve (?:hit|reached) your\b[^.\n]{{0,40}}\blimit",
                rf"You{_APOS}re out of (?:extra )?usage",
                r"Your org is out of usage",
            ),
        ),
        (
            "auth",
            _patterns(
                r"\bauthentication_error\b",  # Anthropic API error type (HTTP 401)
                # claude 2.1.332 (cli.js): "Invalid API key · Fix external API key",
                # "Failed to authenticate. API Error: 403 ...", "Not logged in · Please run
                # /login", "OAuth token revoked · Please run /login".
                r"invalid api key",
                r"Failed to authenticate",
                r"not logged in",
                r"Please run /login",
                r"OAuth token has expired",
                r"OAuth token revoked",
                r"API Error: 401\b",
            ),
        ),
    ),
    "codex": (
        (
            "quota",
            _patterns(
                # codex 0.171.0 (codex-rs/core/src/error.rs, CodexErr's messages; run against a
                # scripted Responses API in tests/agents/test_failover_vendors.py):
                # 429 insufficient_quota, usage_limit_reached, usage_not_included, 503, 500.
                r"Quota exceeded\. Check your plan and billing details",
                rf"you{_APOS}ve hit your usage limit",
                r"you have hit your usage limit",
                r"To use Codex with your ChatGPT plan, upgrade to Plus",
                r"Selected model is at capacity",
                rf"We{_APOS}re currently experiencing high demand",
                r"429 Too Many Requests",  # "exceeded retry limit, last status: 429 Too Many ..."
                # OpenAI API error codes (platform.openai.com/docs/guides/error-codes).
                r"\binsufficient_quota\b",
                r"\brate_limit_exceeded\b",
                r"exceeded your current quota",
            ),
        ),
        (
            "auth",
            _patterns(
                r"401 Unauthorized",  # codex: "unexpected status 401 Unauthorized: <body>"
                # codex 0.171.0 (codex-rs login/src/auth/manager.rs): a ChatGPT login it could
                # not refresh.
                r"Your access token could not be refreshed",
                r"Your authentication session could not be refreshed",
                # OpenAI API 401 bodies.
                r"Missing bearer or basic authentication",
                r"invalid_api_key",
                r"Incorrect API key provided",
            ),
        ),
    ),
    "gemini": (
        (
            "quota",
            _patterns(
                # gemini-cli 0.61.0 (bundle, classifyGoogleError / parseAndFormatApiError):
                # "You have exhausted your daily quota on this model.", the Gemini API's 429
                # "You exceeded your current quota ..." with status RESOURCE_EXHAUSTED, and the
                # capacity errors it treats as terminal.
                r"Quota exceeded",
                r"\bRESOURCE_EXHAUSTED\b",
                r"exceeded your current quota",
                r"exhausted your daily quota",
                r"exhausted your capacity",
                r"\bMODEL_CAPACITY_EXHAUSTED\b",
                r"\bTerminalQuotaError\b",
                r"Resource has been exhausted",
                r"429 Too Many Requests",
            ),
        ),
        (
            "auth",
            _patterns(
                # Gemini API 400/401 bodies (reason API_KEY_INVALID, status UNAUTHENTICATED).
                r"API key not valid",
                r"API Key not found",
                r"\bAPI_KEY_INVALID\b",
                r"\bUNAUTHENTICATED\b",
                # gemini-cli 0.61.0 (validateAuthMethod; FatalAuthenticationError).
                r"Please set an Auth method",
                r"Manual authorization is required but the current session is non-interactive",
                r"When using Gemini API, you must specify the GEMINI_API_KEY",
            ),
        ),
    ),
    "opencode": (
        (
            "quota",
            _patterns(
                # opencode 1.18.33 (its binary's session retry and provider error code): the
                # final `error` event is an APIError whose data carries the provider's own
                # message, its statusCode and responseBody.
                r"The usage limit has been reached",
                r"\bFreeUsageLimitError\b",
                r"\bGoUsageLimitError\b",
                r"Free usage exceeded",
                r"Quota exceeded\. Check your plan and billing details",
                r'"statusCode":\s*(?:429|529)\b',
                r"Rate limit exceeded",
                r"\brate_limit_exceeded\b",
                # What its providers relay (OpenAI, Anthropic).
                r"\binsufficient_quota\b",
                r"exceeded your current quota",
                r"credit balance is too low",
                r"\brate_limit_error\b",
                r"\boverloaded_error\b",
            ),
        ),
        (
            "auth",
            _patterns(
                r"\bProviderAuthError\b",
                r'"statusCode":\s*401\b',
                r"Missing API key",
                r"\bAuthError\b",
                r"Invalid API key",
                r"No auth credentials found",
                r"You didn't provide an API key",
                r"Incorrect API key provided",
                r"\bauthentication_error\b",
            ),
        ),
    ),
}

# A shell reports "killed by signal N" as exit status 128+N.
_SIGNAL_EXIT_BASE: Final = 128


def classify_failure(
    agent: str,
    exit_code: int | None,
    signal: str | None,
    output: str,
    reason: str | None = None,
) -> FailureKind | None:
    """The signature a failed run matched, or None when it failed on its merits.

    `exit_code` is None when a signal ended the process (then `signal` names it); `output` is
    what the agent wrote (stderr and stdout); `reason` is the vendor's own error line read from
    its JSON stream (`vendor_reason`), searched first: a long stderr must not push it out of
    the tail. A successful exit is never a failure.
    """
    if exit_code == 0:
        return None
    tail = output[-TAIL_CHARS:]
    if TIMEOUT_NOTE in tail:
        return None
    for kind, pattern in SIGNATURES.get(agent, ()):
        if (reason and pattern.search(reason)) or pattern.search(tail):
            return kind
    if exit_code is None or exit_code >= _SIGNAL_EXIT_BASE or signal is not None:
        return "crash"
    return None


# --- the vendor's reason: the error an agent CLI reported in its JSON stream -------------------

# How much of the end of stdout is read for the error event: the CLIs end their stream with
# it, and an opencode error event carries the provider's whole response (headers and body).
REASON_SCAN_CHARS: Final = 64_000
REASON_MAX_CHARS: Final = 300
REDACTED: Final = "***"  # as the live log writes a hidden value (app/engine/livelog.py)
# Token shapes a provider may echo back (OpenAI / Anthropic `sk-`, Google `AIza`, GitHub,
# AWS key ids, Slack, bearer headers): redacted even when pairbot did not pass the value.
_SECRET_SHAPES: Final = re.compile(
    r"\b(?:sk-[A-Za-z0-9_-]{16,}|AIza[0-9A-Za-z_-]{30,}|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,}|AKIA[0-9A-Z]{16}|xox[abprs]-[A-Za-z0-9-]{10,})"
    r"|(?i:bearer)\s+[A-Za-z0-9._~+/=-]{16,}"
)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _event_reason(event: Mapping[str, Any]) -> str | None:
    """The error message one JSON event carries, by each CLI's own shape; None for any other.

    codex `exec --json` (codex-rs/exec/src/exec_events.rs): `{"type":"turn.failed","error":
    {"message"}}` and `{"type":"error","message"}`. claude (and cursor) stream-json: the
    `result` event with `is_error: true`, whose `result` is claude's one-line error ("API
    Error: Request rejected (429) · ...", "Credit balance is too low"), or `errors` for the
    error subtypes. gemini stream-json: `{"type":"result","status":"error","error":{"message"}}`
    and `{"type":"error","severity":"error","message"}`. opencode `run --format json`:
    `{"type":"error","error":{"name","data":{"message"}}}`.
    """
    kind = event.get("type")
    error = event.get("error")
    if kind == "turn.failed" and isinstance(error, Mapping):
        return _text(error.get("message"))
    if kind == "result":
        if event.get("status") == "error" and isinstance(error, Mapping):  # gemini
            return _text(error.get("message"))
        failed = event.get("is_error") is True or event.get("subtype") not in (None, "success")
        if not failed:
            return None
        errors = event.get("errors")
        said = [e for e in errors if _text(e)] if isinstance(errors, list) else []
        subtype = event.get("subtype")
        return _text(event.get("result")) or ("; ".join(said) if said else _text(subtype))
    if kind == "error":
        if isinstance(error, Mapping):  # opencode
            data = error.get("data")
            message = _text(data.get("message")) if isinstance(data, Mapping) else None
            message = message or _text(error.get("message"))
            name = _text(error.get("name"))
            words = [w for w in (name, message) if w]
            return ": ".join(words) if words else None
        if event.get("severity") == "warning":  # gemini's warnings are not the failure
            return None
        return _text(event.get("message"))
    return None


def _unwrap_json(text: str) -> str:
    """`[API Error: {"error":{"message":"API key not valid."}}]` → `[API Error: API key not
    valid.]`: an API error body embedded in the text is replaced by its message."""
    start = text.find("{")
    if start < 0:
        return text
    try:
        body, end = json.JSONDecoder().raw_decode(text, start)
    except ValueError:
        return text
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    if not isinstance(message, str) or not message.strip():
        return text
    return text[:start] + message + text[end:]


def one_line(text: str, hide: Sequence[str] = ()) -> str:
    """`text` as one line for people: an embedded API error body reduced to its message, the
    `hide` values and token-shaped strings redacted, whitespace collapsed, at most
    REASON_MAX_CHARS characters."""
    for secret in sorted((h for h in hide if h), key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    text = _SECRET_SHAPES.sub(REDACTED, _unwrap_json(text))
    line = " ".join(text.split())
    if len(line) > REASON_MAX_CHARS:
        line = line[: REASON_MAX_CHARS - 1] + "…"
    return line


def vendor_reason(stdout: str, hide: Sequence[str] = ()) -> str | None:
    """The last error the agent CLI reported in its JSON stdout, in one line (`one_line`), or
    None when it reported none. Lines that are not JSON objects are skipped."""
    for raw in reversed(stdout[-REASON_SCAN_CHARS:].splitlines()):
        line = raw.strip()
        if not line.startswith("{"):
            continue
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(event, dict):
            reason = _event_reason(event)
            if reason is not None:
                return one_line(reason, hide)
    return None


def failover_line(
    failed: str, kind: FailureKind, used: str, transition: str, reason: str | None = None
) -> str:
    """One line for people: which agent failed how (in its vendor's words, when it said), and
    which took the step over."""
    line = f"{transition}: {failed} failed ({kind}); retried once with {used}"
    return f"{line}: {reason}" if reason else line


FAILOVER_KIND: Final = "failover"  # the journal entry of a step handed to the fallback agent


def failover_lines(records: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """`failover_line` for each `failover` journal entry in `records`, in journal order."""
    lines: list[str] = []
    for record in records:
        data = record.get("data")
        if record.get("kind") != FAILOVER_KIND or not isinstance(data, Mapping):
            continue
        kind = data.get("signature")
        if kind not in ("quota", "auth", "crash"):
            continue
        transition = str(record.get("transition") or "step")
        reason = data.get("reason")
        lines.append(
            failover_line(
                str(data.get("failed")),
                kind,
                str(data.get("next")),
                transition,
                reason if isinstance(reason, str) else None,
            )
        )
    return tuple(lines)
