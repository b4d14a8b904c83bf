"""The named agents on the remote locus: a real CLI, started by a real `swerex-remote`, advances.

The same step as the local matrix (tests/agents/matrix.py: a plain batch's propose, and a card's
first step), with `locus: remote` pointing at a `swerex-remote` on 127.0.0.1
(tests/support/swerex_server.py). The server is set up as docs/runtime.md asks of one: the
agent CLI and `pairbot` on its PATH, the same checkout path as the engine, a HOME of its own.
No command file is written for the agent (the prompt carries the command inline,
app/runtime/commands.py); the scripted model drives the real CLI to write plan.md and report
with `pairbot batch report`, and the step advances. claude and codex run each bounded posture
and kind; gemini and opencode one of each (their tools on the server).

The server is the boundary on this locus (isolation's "Contained"), so the agent runs as the
server's user: root here. claude refuses full-autonomy as root unless told it runs in a
deliberate sandbox (`IS_SANDBOX=1`, what the docker locus sets for its container's root, and
what docs/runtime.md asks of a remote server that runs as root): the bounded postures run on a
plain server, full-autonomy on one started with IS_SANDBOX=1.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.settings import Posture
from tests.agents.matrix import KINDS, PLAN, Kind, ModelServer, Outcome, run_step
from tests.agents.real_cli import NODE_BIN, installed
from tests.agents.script import SUMMARY
from tests.agents.test_matrix_claude import _Model as ClaudeModel  # the same scripted model
from tests.agents.test_matrix_codex import _Model as CodexModel  # the same scripted model
from tests.agents.test_matrix_gemini import _Model as GeminiModel  # the same scripted model
from tests.agents.test_matrix_opencode import _assert_step as opencode_step_done
from tests.agents.test_matrix_opencode import _Model as OpencodeModel  # the same scripted model
from tests.support.swerex_server import swerex_server

BOUNDED: tuple[Posture, ...] = ("repo-sandboxed-permissive", "curated-allowlist")


def _remote_step(  # noqa: PLR0917 - run_step's arguments and the server's env
    base: Path,
    agent: str,
    posture: Posture,
    kind: Kind,
    model: ModelServer,
    server_env: dict[str, str] | None = None,
) -> Outcome:
    """One `run_step` with the project's locus set to a fresh server of its own."""
    home = base / "server-home"
    home.mkdir()
    env = {"HOME": str(home), **(server_env or {})}
    with swerex_server(base, path=[NODE_BIN], env=env) as server:
        remote = {"host": "127.0.0.1", "port": server.port, "authToken": server.token}
        locus = {"locus": "remote", "remote": remote}
        outcome = run_step(base, agent, posture, kind, model, locus=locus)
    # The agent was started through this server (swerex's REST calls), not on a local locus.
    assert '"POST /execute HTTP/1.1" 200' in server.log.read_text(), outcome.explain()
    return outcome


@pytest.mark.skipif(installed("claude") is None, reason="claude CLI not installed")
@pytest.mark.xdist_group("claude-matrix")
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("posture", BOUNDED)
def test_claude_on_a_remote_server_edits_and_reports(
    shared_dir: Path, posture: Posture, kind: Kind
) -> None:
    model = ClaudeModel()
    outcome = _remote_step(shared_dir, "claude", posture, kind, model)
    assert outcome.state == "advanced", outcome.explain()
    assert outcome.written is not None, outcome.explain()
    assert [r["message"] for r in outcome.reports] == [SUMMARY], outcome.explain()
    assert not any(shared_dir.glob("**/.claude/commands")), "no command file on the server's disk"


@pytest.mark.skipif(installed("claude") is None, reason="claude CLI not installed")
@pytest.mark.xdist_group("claude-matrix")
def test_claude_full_autonomy_runs_as_root_on_a_server_declared_a_sandbox(
    shared_dir: Path,
) -> None:
    """claude's `bypassPermissions` as root: refused on its own, run with IS_SANDBOX=1."""
    if os.geteuid() != 0:
        pytest.skip("the server runs as this user: claude's root check needs root")
    model = ClaudeModel()
    sandbox = {"IS_SANDBOX": "1"}
    outcome = _remote_step(shared_dir, "claude", "full-autonomy", "card", model, sandbox)
    assert outcome.state == "advanced", outcome.explain()
    assert [r["message"] for r in outcome.reports] == [SUMMARY], outcome.explain()


@pytest.mark.skipif(installed("codex") is None, reason="codex CLI not installed")
@pytest.mark.xdist_group("codex-matrix")
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("posture", BOUNDED)
def test_codex_on_a_remote_server_edits_and_reports(
    shared_dir: Path, posture: Posture, kind: Kind
) -> None:
    model = CodexModel(shared_dir)
    outcome = _remote_step(shared_dir, "codex", posture, kind, model)
    assert model.model is not None
    tools = f"{outcome.explain()}\n--- tools\n{model.model.tool_outputs}"
    assert outcome.state == "advanced", tools
    assert outcome.written is not None, tools
    assert [r["message"] for r in outcome.reports] == [SUMMARY], tools
    assert not any(shared_dir.glob("**/.agents/skills")), "no skill on the server's disk"


# gemini and opencode on the server: one posture and one kind each (the local matrix runs every
# combination; here what is proven is that the server starts them and their tools work there).
@pytest.mark.skipif(installed("gemini") is None, reason="gemini CLI not installed")
@pytest.mark.xdist_group("gemini-matrix")
def test_gemini_on_a_remote_server_edits_and_reports(shared_dir: Path) -> None:
    model = GeminiModel()
    outcome = _remote_step(shared_dir, "gemini", "curated-allowlist", "card", model)
    assert outcome.state == "advanced", outcome.explain()
    assert outcome.written == PLAN, outcome.explain()
    assert [r["message"] for r in outcome.reports] == [SUMMARY], outcome.explain()


@pytest.mark.skipif(installed("opencode") is None, reason="opencode CLI not installed")
@pytest.mark.xdist_group("opencode-matrix")
def test_opencode_on_a_remote_server_edits_and_reports(shared_dir: Path) -> None:
    model = OpencodeModel()
    outcome = _remote_step(shared_dir, "opencode", "repo-sandboxed-permissive", "batch", model)
    assert outcome.state == "advanced", outcome.explain()
    chat = opencode_step_done(model, outcome)
    assert {"write", "bash"} <= set(chat.tools), chat.tools
