"""The real `codex` binary against a scripted Responses API on loopback: text and usage.

pairbot's own argv for the default posture runs the pinned `codex exec --json`; the model
answers with one message; codex's real JSONL, rendered by pairbot, shows the message and the
usage (input without the cached part, output with reasoning; codex reports no cost). The
WebSocket attempts codex makes first are refused (404), and it falls back to HTTPS itself.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

from app.engine.agent import AgentUsage
from app.runtime.adapters import resolve_argv
from app.runtime.streamjson import StreamJsonRenderer
from app.settings import AgentSpecModel, BatchSettings, resolve_settings
from tests.agents.openai_server import CACHED, INPUT, OUTPUT, ScriptedResponses
from tests.agents.real_cli import Expectation, installed, prepare, run_cli
from tests.support.loopback import serve

TURN_END = Expectation(
    re.compile(r'^\{"type":"turn\.(completed|failed)"', re.MULTILINE), re.compile(r"(?!)")
)


def test_codex_streams_the_scripted_answer_and_its_usage() -> None:
    binary = installed("codex")
    if binary is None:
        pytest.skip("codex CLI not installed (python3 dev.py test installs it with npm)")
    model = ScriptedResponses("Nothing to change.")
    with (
        tempfile.TemporaryDirectory(prefix="pairbot-codex-") as tmp,
        serve(model.answer, name="openai") as origin,
    ):
        # The offline environment points codex's openai_base_url at this port: the server's.
        env, repo = prepare(Path(tmp), "codex", int(origin.rsplit(":", 1)[1]))
        env["OPENAI_API_KEY"] = "sk-loopback"
        resolved = resolve_settings(
            env={}, manifest=None, project=BatchSettings(agent=AgentSpecModel(name="codex"))
        )
        argv = resolve_argv(resolved.agent_for("apply"), resolved, repo_root=str(repo))
        run = run_cli(
            "codex", [str(binary), *argv.args], cwd=repo, env=env, timeout=120, expect=TURN_END
        )
    assert run.reached, run.output[-3000:]
    lines: list[str] = []
    renderer = StreamJsonRenderer(lines.append)
    for line in run.output.splitlines():
        if line.startswith("{"):
            renderer.feed(line)
    renderer.close()
    assert "Nothing to change." in lines
    assert lines[-1].startswith("✓ turn completed")
    assert renderer.usage == AgentUsage(input_tokens=INPUT - CACHED, output_tokens=OUTPUT)
    assert model.requests, "codex never reached the scripted model"
