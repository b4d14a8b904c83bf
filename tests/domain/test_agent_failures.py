"""The failover table: each CLI's own quota and auth messages, the crash rule, and the failures
that are the step's own (never another agent's job)."""

from __future__ import annotations

import pytest

from app.domain.agent_failures import (
    SIGNATURES,
    TAIL_CHARS,
    FailureKind,
    classify_failure,
    failover_line,
    failover_lines,
)

CASES = [
    # claude
    pytest.param(
        "claude",
        1,
        "Credit balance is too low · Add funds: https://console.anthropic.com/settings/billing",
        "quota",
        id="claude-credit-balance",
    ),
    pytest.param(
        "claude",
        1,
        'API Error: 400 {"type":"error","error":{"type":"invalid_request_error","message":'
        '"Your credit balance is too low to access the Anthropic API."}}',
        "quota",
        id="claude-credit-balance-api-error",
    ),
    pytest.param(
        "claude",
        1,
        'API Error: 429 {"type":"error","error":{"type":"rate_limit_error","message":"x"}}',
        "quota",
        id="claude-429-rate-limit",
    ),
    pytest.param(
        "claude",
        1,
        'API Error: 529 {"type":"error","error":{"type":"overloaded_error","message":"x"}}',
        "quota",
        id="claude-overloaded",
    ),
    pytest.param(
        "claude", 1, "Claude AI usage limit reached|1760000000", "quota", id="claude-plan"
    ),
    pytest.param(
        "claude", 1, "Invalid API key · Please run /login", "auth", id="claude-invalid-key"
    ),
    pytest.param("claude", 1, "Not logged in · Please run /login", "auth", id="claude-no-login"),
    pytest.param(
        "claude",
        1,
        '{"type":"result","is_error":true,"result":"API Error: 401 {\\"type\\":\\"error\\",'
        '\\"error\\":{\\"type\\":\\"authentication_error\\"}}"}',
        "auth",
        id="claude-401-in-stream",
    ),
    # codex
    pytest.param(
        "codex",
        1,
        "■ You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing) or "
        "try again in 8 hours 30 minutes.",
        "quota",
        id="codex-usage-limit",
    ),
    pytest.param(
        "codex",
        1,
        "ERROR: exceeded retry limit, last status: 429 Too Many Requests",
        "quota",
        id="codex-429",
    ),
    pytest.param(
        "codex",
        1,
        "ERROR: exceeded retry limit, last status: 401 Unauthorized, request id: 9a4a",
        "auth",
        id="codex-401",
    ),
    pytest.param(
        "codex",
        1,
        'http 401 Unauthorized: {"error": {"message": "Missing bearer or basic authentication '
        'in header"}}',
        "auth",
        id="codex-missing-bearer",
    ),
    # gemini
    pytest.param(
        "gemini",
        1,
        '[API Error: {"error":{"code":429,"message":"You exceeded your current quota",'
        '"status":"RESOURCE_EXHAUSTED"}}]',
        "quota",
        id="gemini-resource-exhausted",
    ),
    pytest.param(
        "gemini",
        1,
        "Quota exceeded for quota metric 'Generate Content API requests per minute'",
        "quota",
        id="gemini-quota-exceeded",
    ),
    pytest.param(
        "gemini",
        1,
        "[API Error: API key not valid. Please pass a valid API key. (Status: INVALID_ARGUMENT)]",
        "auth",
        id="gemini-invalid-key",
    ),
    # opencode
    pytest.param(
        "opencode", 1, "The usage limit has been reached", "quota", id="opencode-usage-limit"
    ),
    pytest.param(
        "opencode",
        1,
        'Error: 429: {"type":"FreeUsageLimitError","message":"Rate limit exceeded. Please try '
        'again later."}',
        "quota",
        id="opencode-free-usage",
    ),
    pytest.param(
        "opencode",
        1,
        "ProviderAuthError: Missing API key.",
        "auth",
        id="opencode-provider-auth",
    ),
    # the crash rule, for every agent
    pytest.param("claude", 137, "", "crash", id="exit-137-is-sigkill"),
    pytest.param("command", None, "", "crash", id="no-exit-code-is-a-signal"),
    pytest.param("command", 139, "Segmentation fault", "crash", id="segfault"),
    # failures on the step's merits
    pytest.param("claude", 1, "tests failed: 3 errors", None, id="plain-failure"),
    pytest.param("command", 3, "boom", None, id="command-non-zero"),
    pytest.param("claude", 0, "Credit balance is too low", None, id="success-is-no-failure"),
    pytest.param(
        "command", 1, "Credit balance is too low", None, id="other-agents-words-do-not-count"
    ),
    pytest.param(
        "claude",
        None,
        "pairbot: agent timed out after 600000 ms; sent SIGTERM",
        None,
        id="a-timeout-is-the-steps-own",
    ),
]


@pytest.mark.parametrize(("agent", "exit_code", "output", "expected"), CASES)
def test_classify_failure(
    agent: str, exit_code: int | None, output: str, expected: FailureKind | None
) -> None:
    signal = "SIGKILL" if exit_code is None and "timed out" not in output else None
    assert classify_failure(agent, exit_code, signal, output) == expected


def test_only_the_tail_of_a_long_output_is_searched() -> None:
    early = "Credit balance is too low\n" + "x" * TAIL_CHARS
    assert classify_failure("claude", 1, None, early) is None
    assert classify_failure("claude", 1, None, early + "\nInvalid API key") == "auth"


def test_every_known_cli_has_both_a_quota_and_an_auth_signature() -> None:
    for agent, rows in SIGNATURES.items():
        assert {kind for kind, _ in rows} == {"quota", "auth"}, agent


def test_failover_line() -> None:
    assert failover_line("claude", "quota", "codex", "apply") == (
        "apply: claude failed (quota); retried once with codex"
    )


def test_failover_lines_read_the_journal_entries() -> None:
    records = [
        {"kind": "outcome", "key": "a", "transition": "apply", "state": "failed"},
        {
            "kind": "failover",
            "key": "a",
            "transition": "apply",
            "data": {"failed": "claude", "signature": "auth", "next": "codex"},
        },
        {"kind": "failover", "key": "a", "data": {"signature": "bogus"}},
        {"kind": "failover", "key": "a", "data": None},
    ]
    assert failover_lines(records) == ("apply: claude failed (auth); retried once with codex",)
