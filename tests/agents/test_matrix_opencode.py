"""opencode in every posture, isolated, does a real plain-batch step and a real card step.

The scripted Chat Completions server (tests/agents/chat_server.py) asks opencode, as a model
would, to write the change's plan.md with its `write` tool and then to run the prompt's report
line with its `bash` tool; opencode's own permission checks decide, under the rules pairbot
ships for each posture (app/runtime/rules/opencode.py: an `OPENCODE_PERMISSION` map for the
bounded postures, `--auto` for full autonomy). The provider is the user's own, configured the
way a user does it under isolation: `OPENCODE_CONFIG_CONTENT` naming an
`@ai-sdk/openai-compatible` provider with its base URL, its key read from another variable
(`{env:…}`). Under a bounded posture the model first tries a shell command the posture does not
allow and a write outside the working tree: both must come back as opencode's own refusal by
pairbot's rules (opencode's default would allow the command and reject the write as an
unanswered "ask"). Each case asserts the file written, the report journaled, and the usage
journaled equal to what the server reported, as opencode counts it (input without the cached
part, output with reasoning; no price configured, so the cost is unknown: None, not 0).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from app.settings import Posture
from tests.agents.chat_server import ScriptedChat, ToolCall
from tests.agents.matrix import KINDS, PLAN, POSTURES, Kind, Outcome, Step, run_step
from tests.agents.real_cli import installed
from tests.agents.script import FINAL_TEXT, SUMMARY, report_command
from tests.support.loopback import serve

pytestmark = [
    pytest.mark.skipif(installed("opencode") is None, reason="opencode CLI not installed"),
    pytest.mark.xdist_group("opencode-matrix"),
]


def provider_config(origin: str) -> str:
    """A user's own opencode config: an OpenAI-compatible provider at `origin`."""
    config = {
        "$schema": "https://opencode.ai/config.json",
        "model": "loopback/m1",
        "small_model": "loopback/m1",
        "autoupdate": False,
        "share": "disabled",
        "provider": {
            "loopback": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "loopback",
                "options": {"baseURL": f"{origin}/v1", "apiKey": "{env:LOOPBACK_API_KEY}"},
                "models": {"m1": {"name": "m1"}},
            }
        },
    }
    return json.dumps(config)


def _write(step: Step) -> ToolCall:
    return ("write", lambda _body: {"filePath": str(step.target), "content": step.content})


def _report() -> ToolCall:
    return ("bash", lambda body: {"command": report_command(body), "description": "Report"})


class _Model:
    """The scripted server for one step (the calls before the edit and the report first), and
    what it answered."""

    def __init__(self, before: Callable[[Step], Sequence[ToolCall]] = lambda _step: ()) -> None:
        self.before = before
        self.model: ScriptedChat | None = None

    @contextmanager
    def __call__(self, step: Step) -> Iterator[Mapping[str, str]]:
        calls = [*self.before(step), _write(step), _report()]
        self.model = ScriptedChat(calls, final_text=FINAL_TEXT)
        with serve(self.model.answer, name="chat") as origin:
            yield {
                "OPENCODE_CONFIG_CONTENT": provider_config(origin),
                "LOOPBACK_API_KEY": "sk-loopback",
                "OPENCODE_DISABLE_MODELS_FETCH": "1",
                "OPENCODE_DISABLE_AUTOUPDATE": "1",
                "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
            }


def _assert_step(model: _Model, outcome: Outcome) -> ScriptedChat:
    """The plan written, one report journaled, the usage journaled as opencode reported it."""
    assert outcome.written == PLAN, outcome.explain()
    assert [r["message"] for r in outcome.reports] == [SUMMARY], outcome.explain()
    chat = model.model
    assert chat is not None
    # opencode reports a step's session answers only (not its title request): input without
    # the cached part, output with reasoning; no price is configured, so the cost is unknown.
    steps = [a for a in chat.answered if a.scripted]
    assert steps, outcome.explain()
    usage = outcome.usage
    assert usage is not None, outcome.explain()
    expected_in = sum(a.prompt - a.cached for a in steps)
    expected_out = sum(a.completion for a in steps)
    assert (usage["inputTokens"], usage["outputTokens"]) == (expected_in, expected_out)
    assert usage["costUsd"] is None
    return chat


DENIED = "The user has specified a rule which prevents you from using this specific tool call"
# What each bounded posture's rules must refuse (opencode's own deny, not an OS error): a shell
# command beyond the report (curated: any; sandboxed: one of the baseline deny list).
REFUSED: Mapping[Posture, str] = {
    "curated-allowlist": "touch stray.txt",
    "repo-sandboxed-permissive": "sudo true",
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("posture", POSTURES)
def test_opencode_edits_and_reports(shared_dir: Path, posture: Posture, kind: Kind) -> None:
    """Under a bounded posture the model first tries a command and a write outside the working
    tree: opencode refuses both by pairbot's rules, and the step still edits and reports."""
    outside = shared_dir / "outside.txt"
    command = REFUSED.get(posture)

    def before(_step: Step) -> list[ToolCall]:
        if command is None:
            return []
        return [
            ("bash", lambda _body: {"command": command, "description": "Other"}),
            ("write", lambda _body: {"filePath": str(outside), "content": "no\n"}),
        ]

    model = _Model(before)
    outcome = run_step(shared_dir, "opencode", posture, kind, model)
    chat = _assert_step(model, outcome)
    assert {"write", "bash"} <= set(chat.tools), chat.tools
    if command is None:
        return
    assert "webfetch" not in chat.tools, chat.tools  # a denied tool is not even offered
    refused, written, *_ = chat.results
    assert DENIED in refused, chat.results
    assert DENIED in written, chat.results
    assert not outside.exists()
    assert not list(shared_dir.rglob("stray.txt"))
