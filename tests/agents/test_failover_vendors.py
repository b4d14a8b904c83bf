"""The real CLIs against their vendor's real error bodies: failover recognises what they print.

Each pinned CLI (tests/agents/package.json) runs pairbot's own argv against a loopback server
that answers every model request with one of its vendor's documented error bodies. What the CLI
prints (its JSON stdout, its log) goes through pairbot's pure pieces as a real step's output
would: `vendor_reason` reads the CLI's own error event, `classify_failure` names the signature,
and the failed outcome shows the reason on its first line. Retries are cut where the CLI has a
setting for it (codex's provider `request_max_retries`, claude's CLAUDE_CODE_MAX_RETRIES), and
gemini is given an error it treats as terminal (a per-day quota), so each run takes about a
second. opencode is left out here: it retries a 429 five times with backoff (about a minute);
its final `error` event is covered with the captured line in tests/domain.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

import pytest

from app.domain.card.agent_failures import FailureKind, classify_failure, vendor_reason
from app.engine.outcome import SessionEvidence, map_session_to_outcome
from app.runtime.adapters import resolve_argv
from app.settings import AgentSpecModel, BatchSettings, resolve_settings
from tests.agents.gemini_server import settings as gemini_settings
from tests.agents.real_cli import Expectation, installed, prepare, run_cli
from tests.support.loopback import Request, Response, serve

# OpenAI's 429 for spent credit (platform.openai.com/docs/guides/error-codes).
OPENAI_QUOTA = (
    b'{"error":{"message":"You exceeded your current quota, please check your plan and billing '
    b'details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}'
)
# ChatGPT's 429 for a spent plan, the body codex reads as its usage limit.
CHATGPT_LIMIT = (
    b'{"error":{"type":"usage_limit_reached","message":"The usage limit has been reached"}}'
)
# Anthropic's error bodies (docs.anthropic.com/en/api/errors).
ANTHROPIC_RATE = (
    b'{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed '
    b'the rate limit for your organization of 50 input tokens per minute."}}'
)
ANTHROPIC_KEY = (
    b'{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}'
)
# The Gemini API's 429 for a spent per-day free-tier quota
# (ai.google.dev/gemini-api/docs/rate-limits).
GEMINI_DAILY = (
    b'{"error":{"code":429,"message":"You exceeded your current quota, please check your plan '
    b'and billing details.","status":"RESOURCE_EXHAUSTED","details":[{"@type":'
    b'"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":'
    b'"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":'
    b'"GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]}]}}'
)

TURN_FAILED = Expectation(
    re.compile(r'^\{"type":"turn\.failed"', re.MULTILINE), re.compile(r"(?!)")
)
RESULT = Expectation(re.compile(r'^\{.*"type":"result"', re.MULTILINE), re.compile(r"(?!)"))


def answering(status: int, body: bytes) -> Callable[[Request], Awaitable[Response]]:
    async def answer(request: Request) -> Response:
        del request
        return Response.of(status, body, {"content-type": "application/json"})

    return answer


def run_failing(agent: str, status: int, body: bytes, extra_env: Mapping[str, str]) -> str:
    """What `agent` printed for a turn every model request of which is answered `body`."""
    binary = installed(agent)
    if binary is None:
        pytest.skip(f"{agent} CLI not installed (python3 dev.py test installs it with npm)")
    files = {".gemini/settings.json": gemini_settings()} if agent == "gemini" else None
    with (
        tempfile.TemporaryDirectory(prefix=f"pairbot-{agent}-") as tmp,
        serve(answering(status, body), name=agent) as origin,
    ):
        port = int(origin.rsplit(":", 1)[1])
        env, repo = prepare(Path(tmp), agent, port, files)
        if agent == "codex":
            # A provider of its own on the loopback: no WebSocket attempts, no retries.
            (Path(env["CODEX_HOME"]) / "config.toml").write_text(
                'model_provider = "loopback"\n[model_providers.loopback]\nname = "loopback"\n'
                f'base_url = "{origin}/v1"\nwire_api = "responses"\nenv_key = "OPENAI_API_KEY"\n'
                "supports_websockets = false\nrequest_max_retries = 0\nstream_max_retries = 0\n"
            )
        elif agent == "claude":
            env["ANTHROPIC_BASE_URL"] = origin
        elif agent == "gemini":
            env["GOOGLE_GEMINI_BASE_URL"] = origin
        env |= extra_env
        resolved = resolve_settings(
            env={}, manifest=None, project=BatchSettings(agent=AgentSpecModel(name=agent))
        )
        argv = resolve_argv(resolved.agent_for("apply"), resolved, repo_root=str(repo))
        expect = TURN_FAILED if agent == "codex" else RESULT
        run = run_cli(
            agent, [str(binary), *argv.args], cwd=repo, env=env, timeout=60, expect=expect
        )
    assert run.reached, run.output[-3000:]
    return run.output


@pytest.mark.parametrize(
    ("agent", "answer", "env", "kind", "said"),
    [
        pytest.param(
            "codex",
            (429, OPENAI_QUOTA),
            {"OPENAI_API_KEY": "sk-loopback"},
            "quota",
            "Quota exceeded. Check your plan and billing details.",
            id="codex-insufficient-quota",
        ),
        pytest.param(
            "codex",
            (429, CHATGPT_LIMIT),
            {"OPENAI_API_KEY": "sk-loopback"},
            "quota",
            "You\u2019ve hit your usage limit.",
            id="codex-usage-limit",
        ),
        pytest.param(
            "claude",
            (429, ANTHROPIC_RATE),
            {"ANTHROPIC_API_KEY": "sk-ant-loopback", "CLAUDE_CODE_MAX_RETRIES": "0"},
            "quota",
            "API Error: Request rejected (429) \u00b7 This request would exceed the rate limit",
            id="claude-rate-limit",
        ),
        pytest.param(
            "claude",
            (401, ANTHROPIC_KEY),
            {"ANTHROPIC_API_KEY": "sk-ant-loopback", "CLAUDE_CODE_MAX_RETRIES": "0"},
            "auth",
            "Invalid API key",
            id="claude-invalid-key",
        ),
        pytest.param(
            "gemini",
            (429, GEMINI_DAILY),
            {"GEMINI_API_KEY": "loopback-key"},
            "quota",
            # gemini's own words for a per-day QuotaFailure (classifyGoogleError).
            "[API Error: You have exhausted your daily quota on this model.] Please wait",
            id="gemini-daily-quota",
        ),
    ],
)
def test_a_vendors_real_error_is_recognised_and_shown(
    agent: str, answer: tuple[int, bytes], env: dict[str, str], kind: FailureKind, said: str
) -> None:
    output = run_failing(agent, *answer, env)
    reason = vendor_reason(output, hide=tuple(env.values()))
    assert reason is not None and reason.startswith(said), output[-3000:]
    assert "\n" not in reason
    assert classify_failure(agent, 1, None, output, reason) == kind
    outcome = map_session_to_outcome(
        SessionEvidence(
            transition="apply", entries=(), exit_code=1, signal=None, stderr="", reason=reason
        )
    )
    assert outcome.blocker == (
        f"Apply agent failed (exit 1) without reporting completion: {reason}"
    )
