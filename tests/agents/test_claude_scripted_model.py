"""The real `claude` binary, driven by a scripted model on loopback, edits a file.

pairbot's own argv for the default posture (`repo-sandboxed-permissive`) runs the pinned claude
with ANTHROPIC_BASE_URL on tests/agents/anthropic_server.py: the model asks for one `Write`
tool call, claude performs it in the repository, the model ends the turn, and claude's real
stream-json, rendered by pairbot, shows the tool call and reports the tokens the server sent.
The second test takes the production path: `project_launcher` and the local locus (swerex).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import tempfile
from pathlib import Path

import pytest

from app.cycle import worktree as wt
from app.engine.agent import AgentLaunch, AgentSpawnResult, AgentUsage
from app.runtime.adapters import resolve_argv
from app.runtime.launcher import project_launcher
from app.runtime.streamjson import StreamJsonRenderer
from app.settings import AgentSpecModel, BatchSettings, resolve_settings
from tests.agents.anthropic_server import USAGE_IN, USAGE_OUT, ScriptedModel
from tests.agents.real_cli import NOBODY, Expectation, Run, installed, prepare, run_cli
from tests.support.git import git
from tests.support.loopback import serve

# The run is over once claude prints its closing `result` event.
RESULT = Expectation(re.compile(r'^\{.*"type":"result"', re.MULTILINE), re.compile(r"(?!)"))


def _claude_writes(
    env: dict[str, str], cwd: Path, target: Path, text: str
) -> tuple[Run, ScriptedModel]:
    """Real claude in its default posture, working in `cwd`, asked by the scripted model for
    one `Write` of `text` to `target`."""
    binary = installed("claude")
    assert binary is not None
    model = ScriptedModel("Write", {"file_path": str(target), "content": text})
    settings = resolve_settings(
        env={}, manifest=None, project=BatchSettings(agent=AgentSpecModel(name="claude"))
    )
    argv = resolve_argv(settings.agent_for("apply"), settings, repo_root=str(cwd))
    with serve(model.answer, name="anthropic") as origin:
        env = env | {"ANTHROPIC_BASE_URL": origin, "ANTHROPIC_API_KEY": "sk-ant-loopback"}
        run = run_cli(
            "claude",
            [str(binary), *argv.args],
            cwd=cwd,
            env=env,
            prompt=f"Write {target.name}.\n",
            timeout=150,
            expect=RESULT,
        )
    return run, model


needs_claude = pytest.mark.skipif(
    installed("claude") is None,
    reason="claude CLI not installed (python3 dev.py test installs it with npm)",
)


@needs_claude
def test_claude_writes_a_file_for_the_scripted_model() -> None:
    with tempfile.TemporaryDirectory(prefix="pairbot-model-") as tmp:
        env, repo = prepare(Path(tmp), "claude", 9)
        target = repo / "hello.txt"
        run, model = _claude_writes(env, repo, target, "hello, pairbot\n")
        written = target.read_text() if target.exists() else None
    assert run.reached, run.output[-3000:]
    assert written == "hello, pairbot\n"
    lines: list[str] = []
    renderer = StreamJsonRenderer(lines.append)
    for line in run.output.splitlines():
        if line.startswith("{"):
            renderer.feed(line)
    renderer.close()
    assert f"▸ Write {target}" in lines
    assert "Done: the file is written." in lines
    # Two model calls (the tool call, then the end of the turn), each USAGE_IN in, USAGE_OUT out.
    usage = renderer.usage
    assert (usage.input_tokens, usage.output_tokens) == (2 * USAGE_IN, 2 * USAGE_OUT)
    assert usage.cost_usd is not None and usage.cost_usd > 0
    assert usage != AgentUsage()
    tools_offered = [
        {tool["name"] for tool in request["body"].get("tools", [])} for request in model.requests
    ]
    assert any("Write" in offered for offered in tools_offered)


def _own(tree: Path, uid: int) -> None:
    gid = uid if uid == NOBODY else -1  # nobody's group is 65534 too; -1 leaves it
    for path in (tree, *tree.rglob("*")):
        os.chown(path, uid, gid, follow_symlinks=False)


@needs_claude
def test_claude_edits_in_a_cards_worktree_in_its_default_posture() -> None:
    # claude's acceptEdits refuses every path under .git/: a card's worktree must live where
    # its Write is accepted (app/cycle/worktree.py puts it in .pair/worktrees/).
    with tempfile.TemporaryDirectory(prefix="pairbot-model-") as tmp:
        env, repo = prepare(Path(tmp), "claude", 9)
        _own(repo, os.geteuid())  # pairbot's, as it makes the card's worktree
        git(repo, "checkout", "-q", "-b", "main")
        git(repo, "commit", "-q", "--allow-empty", "-m", "first")
        worktree = wt.prepare(repo, "card-1", "pair/card-1", "main").path
        _own(repo, NOBODY if os.geteuid() == 0 else os.geteuid())  # the CLI's, as prepare() left
        target = worktree / "hello.txt"
        run, _ = _claude_writes(env, worktree, target, "hello\n")
        written = target.read_text() if target.exists() else None
    assert run.reached, run.output[-3000:]
    assert written == "hello\n", run.output[-3000:]


def test_the_launcher_runs_real_claude_and_takes_usage_from_its_stream() -> None:
    # The production path: project_launcher, the local locus (swerex), pairbot's environment.
    binary = installed("claude")
    if binary is None:
        pytest.skip("claude CLI not installed (python3 dev.py test installs it with npm)")
    with tempfile.TemporaryDirectory(prefix="pairbot-launch-") as tmp:
        env, repo = prepare(Path(tmp), "claude", 9)
        target = repo / "greeting.txt"
        model = ScriptedModel("Write", {"file_path": str(target), "content": "hi\n"})
        settings = resolve_settings(
            env={}, manifest=None, project=BatchSettings(agent=AgentSpecModel(name="claude"))
        )
        launcher = project_launcher(repo)
        lines: list[str] = []
        with serve(model.answer, name="anthropic") as origin:
            env |= {"ANTHROPIC_BASE_URL": origin, "ANTHROPIC_API_KEY": "sk-ant-loopback"}
            request = AgentLaunch(
                stage="apply",
                command="apply",
                settings=settings,
                root=repo,
                instructions=launcher.delegate("claude", "apply", "alpha", []),
                env=env,
                pair_env={"PAIR_CHANGE": "alpha", "PAIR_TRANSITION": "apply"},
            )
            result = asyncio.run(asyncio.wait_for(launcher.launch(request, lines.append), 180))
        written = target.read_text() if target.exists() else None
        rendered = (repo / ".claude" / "commands" / "pair" / "apply.md").is_file()
    assert isinstance(result, AgentSpawnResult), result
    assert result.exit_code == 0, (lines, result.stderr[-2000:])
    assert written == "hi\n"
    assert rendered
    assert f"▸ Write {target}" in lines
    assert (result.usage.input_tokens, result.usage.output_tokens) == (
        2 * USAGE_IN,
        2 * USAGE_OUT,
    )
    # The prompt claude sent carries the command's text inline, not a `/pair:apply` token.
    first = json.dumps(model.requests[0]["body"]["messages"])
    assert "Implement the unchecked tasks" in first and "/pair:apply" not in first
