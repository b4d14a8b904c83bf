"""The real `gemini` binary, driven by a scripted Gemini API on loopback, edits a file.

pairbot's own argv for the default posture (`--approval-mode auto_edit`) runs the pinned gemini
against tests/agents/gemini_server.py: the model calls `write_file` once, gemini writes the file
in the repository, the model ends the turn, and gemini's real `stream-json`, rendered by
pairbot, shows the tool call and the usage (uncached input, output; no cost).
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
from tests.agents.gemini_server import (
    CACHED,
    CANDIDATES,
    FINAL_TEXT,
    PROMPT,
    ScriptedGemini,
    settings,
)
from tests.agents.real_cli import Expectation, installed, prepare, run_cli
from tests.support.loopback import serve

RESULT = Expectation(re.compile(r'^\{"type":"result"', re.MULTILINE), re.compile(r"(?!)"))


def test_gemini_writes_a_file_for_the_scripted_model() -> None:
    binary = installed("gemini")
    if binary is None:
        pytest.skip("gemini CLI not installed (python3 dev.py test installs it with npm)")
    with tempfile.TemporaryDirectory(prefix="pairbot-gemini-") as tmp:
        files = {".gemini/settings.json": settings()}
        env, repo = prepare(Path(tmp), "gemini", 9, files)
        target = repo / "hello.txt"
        call = {"name": "write_file", "args": {"file_path": str(target), "content": "hi\n"}}
        model = ScriptedGemini(call)
        resolved = resolve_settings(
            env={}, manifest=None, project=BatchSettings(agent=AgentSpecModel(name="gemini"))
        )
        argv = resolve_argv(resolved.agent_for("apply"), resolved, repo_root=str(repo))
        with serve(model.answer, name="gemini") as origin:
            env |= {"GOOGLE_GEMINI_BASE_URL": origin, "GEMINI_API_KEY": "loopback-key"}
            run = run_cli(
                "gemini",
                [str(binary), *argv.args],
                cwd=repo,
                env=env,
                prompt="Write hello.txt.\n",
                timeout=150,
                expect=RESULT,
            )
        written = target.read_text() if target.exists() else None
    assert run.reached, run.output[-3000:]
    assert written == "hi\n"
    lines: list[str] = []
    renderer = StreamJsonRenderer(lines.append)
    for line in run.output.splitlines():
        if line.startswith("{"):
            renderer.feed(line)
    renderer.close()
    assert f"▸ write_file {target}" in lines
    assert FINAL_TEXT in lines
    assert lines[-1].startswith("✓ success")
    # Two model calls, each PROMPT in (CACHED of them cached) and CANDIDATES out; no cost.
    assert renderer.usage == AgentUsage(
        input_tokens=2 * (PROMPT - CACHED), output_tokens=2 * CANDIDATES, cost_usd=None
    )
