"""The failover table: each CLI's own quota and auth messages, the crash rule, and the failures
that are the step's own (never another agent's job)."""

from __future__ import annotations

import pytest

from app.domain.card.agent_failures import (
    SIGNATURES,
    TAIL_CHARS,
    FailureKind,
    classify_failure,
    failover_line,
    failover_lines,
    one_line,
    vendor_reason,
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
    # The pinned CLIs' own answers, captured from each against a scripted model server
    # answering the vendor's real error body (tests/agents/test_failover_vendors.py).
    pytest.param(
        "codex",
        1,
        '{"type":"turn.failed","error":{"message":"Quota exceeded. Check your plan and billing '
        'details."}}',
        "quota",
        id="codex-0.171-insufficient-quota",
    ),
    pytest.param(
        "codex",
        1,
        "You\u2019ve hit your usage limit. Visit https://chatgpt.com/settings/usage to purchase "
        "more credits or try again at Mar 17th, 2030 5:46 PM.",
        "quota",
        id="codex-0.171-usage-limit-curly-apostrophe",
    ),
    pytest.param(
        "codex",
        1,
        "Selected model is at capacity. Please try a different model.",
        "quota",
        id="codex-0.171-503-capacity",
    ),
    pytest.param(
        "codex",
        1,
        "We\u2019re currently experiencing high demand, which may cause temporary errors.",
        "quota",
        id="codex-0.171-500-high-demand",
    ),
    pytest.param(
        "codex",
        1,
        "To use Codex with your ChatGPT plan, upgrade to Plus: https://chatgpt.com/explore/plus.",
        "quota",
        id="codex-0.171-usage-not-included",
    ),
    pytest.param(
        "codex",
        1,
        "Your access token could not be refreshed because your refresh token was revoked. "
        "Please log out and sign in again.",
        "auth",
        id="codex-0.171-refresh-revoked",
    ),
    pytest.param(
        "claude",
        1,
        "API Error: Request rejected (429) \u00b7 This request would exceed the rate limit for "
        "your organization of 50 input tokens per minute.",
        "quota",
        id="claude-2.1.332-request-rejected-429",
    ),
    pytest.param(
        "claude",
        1,
        "Failed to authenticate. API Error: 403 Your API key does not have permission to use "
        "the specified resource.",
        "auth",
        id="claude-2.1.332-403",
    ),
    pytest.param(
        "claude", 1, "You\u2019ve hit your limit \u00b7 resets 3pm", "quota", id="claude-plan-limit"
    ),
    pytest.param(
        "gemini",
        1,
        "TerminalQuotaError: You have exhausted your daily quota on this model.",
        "quota",
        id="gemini-0.61-daily-quota",
    ),
    pytest.param(
        "gemini",
        41,
        "Please set an Auth method in your /home/u/.gemini/settings.json or specify one of the "
        "following environment variables before running: GEMINI_API_KEY",
        "auth",
        id="gemini-0.61-no-auth",
    ),
    pytest.param(
        "opencode",
        1,
        '{"type":"error","error":{"name":"APIError","data":{"message":"Overloaded",'
        '"statusCode":529,"isRetryable":true}}}',
        "quota",
        id="opencode-1.18-status-529",
    ),
    pytest.param(
        "opencode",
        1,
        '{"type":"error","error":{"name":"APIError","data":{"message":"invalid x-api-key",'
        '"statusCode":401,"isRetryable":false}}}',
        "auth",
        id="opencode-1.18-status-401",
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


def test_the_reason_is_searched_even_when_a_long_stderr_fills_the_tail() -> None:
    output = "x" * (2 * TAIL_CHARS)
    reason = "Quota exceeded. Check your plan and billing details."
    assert classify_failure("codex", 1, None, output) is None
    assert classify_failure("codex", 1, None, output, reason) == "quota"


def test_a_failover_line_carries_the_vendors_reason() -> None:
    assert failover_line("codex", "quota", "claude", "apply", "Quota exceeded.") == (
        "apply: codex failed (quota); retried once with claude: Quota exceeded."
    )
    record = {
        "kind": "failover",
        "transition": "fix",
        "data": {"failed": "codex", "signature": "quota", "next": "claude", "reason": "Nope."},
    }
    assert failover_lines([record]) == (
        "fix: codex failed (quota); retried once with claude: Nope.",
    )


# The last lines each pinned CLI printed on stdout for a failed turn (captured against scripted
# model servers answering the vendor's real error bodies).
CODEX_STDOUT = (
    '{"type":"thread.started","thread_id":"01a2"}\n'
    '{"type":"turn.started"}\n'
    '{"type":"error","message":"Reconnecting... 2/5 (unexpected status 404 Not Found)"}\n'
    '{"type":"item.completed","item":{"id":"item_0","type":"error","message":"Falling back"}}\n'
    '{"type":"error","message":"Quota exceeded. Check your plan and billing details."}\n'
    '{"type":"turn.failed","error":{"message":"Quota exceeded. Check your plan and billing '
    'details."}}\n'
)
CLAUDE_STDOUT = (
    '{"type":"system","subtype":"init","session_id":"5c6b"}\n'
    '{"type":"assistant","message":{"content":[{"type":"text","text":"Credit balance is too '
    'low"}]},"error":"billing_error","is_api_error_message":true}\n'
    '{"total_cost_usd":0,"is_error":true,"subtype":"success","api_error_status":400,'
    '"api_error_type":"invalid_request_error","result":"Credit balance is too low",'
    '"type":"result"}\n'
)
GEMINI_STDOUT = (
    '{"type":"init","session_id":"s","model":"auto"}\n'
    '{"type":"result","status":"error","error":{"type":"unknown","message":"[API Error: '
    '{\\"error\\":{\\"code\\":400,\\"message\\":\\"API key not valid. Please pass a valid '
    'API key.\\",\\"status\\":\\"INVALID_ARGUMENT\\"}}]"},"stats":{"input_tokens":0}}\n'
)
OPENCODE_STDOUT = (
    '{"type":"error","timestamp":1796367879480,"sessionID":"ses_dc02","error":{"name":'
    '"APIError","data":{"message":"You exceeded your current quota, please check your plan and '
    'billing details.","statusCode":429,"isRetryable":true,"responseBody":"{\\"error\\":'
    '{\\"type\\":\\"insufficient_quota\\"}}"}}}\n'
)


@pytest.mark.parametrize(
    ("stdout", "reason"),
    [
        pytest.param(
            CODEX_STDOUT, "Quota exceeded. Check your plan and billing details.", id="codex"
        ),
        pytest.param(CLAUDE_STDOUT, "Credit balance is too low", id="claude"),
        pytest.param(
            GEMINI_STDOUT,
            "[API Error: API key not valid. Please pass a valid API key.]",
            id="gemini-json-body-unwrapped",
        ),
        pytest.param(
            OPENCODE_STDOUT,
            "APIError: You exceeded your current quota, please check your plan and billing "
            "details.",
            id="opencode",
        ),
        pytest.param(
            '{"type":"result","subtype":"error_max_turns","is_error":true}\n',
            "error_max_turns",
            id="claude-error-subtype",
        ),
        pytest.param(
            '{"type":"error","severity":"warning","message":"slow"}\nplain text\n{oops\n',
            None,
            id="no-error-event",
        ),
        pytest.param(
            '{"type":"result","subtype":"success","is_error":false,"result":"Done."}\n',
            None,
            id="a-success-says-nothing",
        ),
    ],
)
def test_vendor_reason_reads_each_clis_error_event(stdout: str, reason: str | None) -> None:
    assert vendor_reason(stdout) == reason


def test_the_reason_is_one_line_capped_and_redacted() -> None:
    event = (
        '{"type":"turn.failed","error":{"message":"unexpected status 401 Unauthorized:\\n'
        "key my-own-secret-value, sk-proj-abcdefghijklmnopqrstuvwx and Bearer "
        "abcdefghijklmnopqrstuvwxyz012345 refused" + " and more" * 60 + '"}}'
    )
    reason = vendor_reason(event, hide=("my-own-secret-value",))
    assert reason is not None
    assert reason.startswith("unexpected status 401 Unauthorized: key ***, *** and *** refused")
    assert "\n" not in reason
    assert len(reason) == 300 and reason.endswith("…")
    assert one_line("  a\n\tb  ") == "a b"
