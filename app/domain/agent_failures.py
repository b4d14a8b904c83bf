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
the CLIs' own output as users report it. They are matched case-insensitively against the tail of
what the agent wrote (stderr, then stdout: claude and opencode report API errors in their JSON
stream). An agent pairbot has no table for (`command`, an in-house tool) is classified by the
crash rule alone.

A run pairbot itself stopped for the agent timeout is never a crash here: a hung agent is the
step's problem, and another agent would be given the same too-short time.
"""

from __future__ import annotations

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


# agent -> ((kind, pattern), ...), tried in order; the first that matches wins.
SIGNATURES: Final[Mapping[str, tuple[tuple[FailureKind, re.Pattern[str]], ...]]] = {
    "claude": (
        (
            "quota",
            _patterns(
                r"credit balance is too low",
                r"usage limit reached",
                r"\brate_limit_error\b",
                r"\boverloaded_error\b",
                r"API Error: 429\b",
                r"API Error: 529\b",
            ),
        ),
        (
            "auth",
            _patterns(
                r"invalid api key",
                r"not logged in",
                r"\bauthentication_error\b",
                r"API Error: 401\b",
                r"OAuth token has expired",
            ),
        ),
    ),
    "codex": (
        (
            "quota",
            _patterns(
                r"you've hit your usage limit",
                r"you have hit your usage limit",
                r"\binsufficient_quota\b",
                r"\brate_limit_exceeded\b",
                r"429 Too Many Requests",
                r"exceeded your current quota",
            ),
        ),
        (
            "auth",
            _patterns(
                r"401 Unauthorized",
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
                r"Quota exceeded",
                r"\bRESOURCE_EXHAUSTED\b",
                r"exceeded your current quota",
                r"Resource has been exhausted",
                r"429 Too Many Requests",
            ),
        ),
        (
            "auth",
            _patterns(
                r"API key not valid",
                r"API Key not found",
                r"\bAPI_KEY_INVALID\b",
                r"\bUNAUTHENTICATED\b",
                r"When using Gemini API, you must specify the GEMINI_API_KEY",
            ),
        ),
    ),
    "opencode": (
        (
            "quota",
            _patterns(
                r"The usage limit has been reached",
                r"\bFreeUsageLimitError\b",
                r"Rate limit exceeded",
                r"\brate_limit_exceeded\b",
                r"exceeded your current quota",
                r"Free usage exceeded",
            ),
        ),
        (
            "auth",
            _patterns(
                r"\bProviderAuthError\b",
                r"Missing API key",
                r"\bAuthError\b",
                r"Invalid API key",
                r"No auth credentials found",
                r"You didn't provide an API key",
            ),
        ),
    ),
}

# A shell reports "killed by signal N" as exit status 128+N.
_SIGNAL_EXIT_BASE: Final = 128


def classify_failure(
    agent: str, exit_code: int | None, signal: str | None, output: str
) -> FailureKind | None:
    """The signature a failed run matched, or None when it failed on its merits.

    `exit_code` is None when a signal ended the process (then `signal` names it); `output` is
    what the agent wrote (stderr and stdout). A successful exit is never a failure.
    """
    if exit_code == 0:
        return None
    tail = output[-TAIL_CHARS:]
    if TIMEOUT_NOTE in tail:
        return None
    for kind, pattern in SIGNATURES.get(agent, ()):
        if pattern.search(tail):
            return kind
    if exit_code is None or exit_code >= _SIGNAL_EXIT_BASE or signal is not None:
        return "crash"
    return None


def failover_line(failed: str, kind: FailureKind, used: str, transition: str) -> str:
    """One line for people: which agent failed how, and which took the step over."""
    return f"{transition}: {failed} failed ({kind}); retried once with {used}"


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
        lines.append(
            failover_line(str(data.get("failed")), kind, str(data.get("next")), transition)
        )
    return tuple(lines)
