"""A whole card cycle with the real `claude` binary, driven by a scripted model on loopback.

`/pair implement` on the local host takes a card through propose → apply → verify → publish to
`ready-for-merge` with `agent: claude`: pairbot's claude adapter and posture argv, the
production launcher (`project_launcher`, swerex's local locus), and the claude CLI pinned in
tests/agents. Claude reaches the model through ANTHROPIC_BASE_URL and a dummy
ANTHROPIC_API_KEY in pairbot's own environment, which the agent environment passes through
(docs/runtime.md, "The agent's environment").

The model (`CardStepModel`) does each step's work the way tests/support/scripted_agent.py does
for the `command` adapter: on a step's first request it writes the instructions claude sent
(the prompt pairbot put on claude's stdin) to a file and answers one `Bash` tool call,
`<python> scripted_agent.py < <that file>`; claude runs it with the `PAIR_*` environment it
inherited, so the scripted agent edits the worktree and runs `pairbot batch report`. On the
tool result the model ends the turn. Each answer reports its own token figures in the stream
(`message_start` / `message_delta`), and the synthesis must show their sum.

Posture: the default, `repo-sandboxed-permissive`, whose empty allow list becomes
`--allowedTools Bash`, so claude runs the command without a prompt; claude accepts it as root
(`full-autonomy`'s `bypassPermissions` it refuses there).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from app.cycle.state import CycleEnv
from app.runtime.launcher import project_launcher
from tests.agents.anthropic_server import ScriptedModel
from tests.agents.real_cli import NODE_BIN, installed
from tests.support.card_project import CardProject
from tests.support.git import git
from tests.support.loopback import serve
from tests.support.project import AGENT

pytestmark = pytest.mark.slow

AGENT_TIMEOUT_MS = 120_000  # each claude spawn; the engine kills it after this
STEP_LIMIT = 8  # steps until the card is quiet; ready-for-merge needs 3 after implement
DONE = "Done: the step is reported."


def _instructions(body: Mapping[str, Any]) -> str:
    """The prompt claude was given: the first user message's last text block that claude did
    not add itself (its context arrives as `<system-reminder>` blocks before it)."""
    first = next(m for m in body["messages"] if m.get("role") == "user")
    content = first["content"]
    if isinstance(content, str):
        return str(content)
    texts = [
        block["text"]
        for block in content
        if block.get("type") == "text" and not block["text"].startswith("<system-reminder>")
    ]
    return str(texts[-1])


@dataclass
class CardStepModel(ScriptedModel):
    """One Bash call per step running the scripted agent on the step's instructions."""

    scratch: Path = Path()
    tool_name: str = "Bash"
    tool_input: Mapping[str, Any] = field(default_factory=dict)
    final_text: str = DONE
    tool_results: list[Any] = field(default_factory=list)

    def _blocks(self, body: Mapping[str, Any]) -> tuple[list[dict[str, Any]], str]:
        tools = {tool.get("name") for tool in body.get("tools") or [] if isinstance(tool, dict)}
        results = [
            block
            for message in body.get("messages") or []
            if isinstance(message.get("content"), list)
            for block in message["content"]
            if block.get("type") == "tool_result"
        ]
        if "Bash" in tools and not results:
            prompt = self.scratch / f"instructions-{len(self.requests):04d}.md"
            prompt.write_text(_instructions(body))
            command = shlex.join([sys.executable, str(AGENT)]) + f" < {shlex.quote(str(prompt))}"
            self.tool_input = {"command": command, "description": "Run the step's agent"}
        elif results:
            self.tool_results.append(results[-1])
        return super()._blocks(body)

    def usage_for(self, body: Mapping[str, Any]) -> tuple[int, int]:
        # Different figures for every answer, so a sum that drops or repeats one shows.
        n = len(self.reported) + 1
        return 1000 + 7 * n, 40 + n


@dataclass
class ClaudeCardProject(CardProject):
    """The card project with the production launcher: each step's locus picks the runtime."""

    lines: list[str] = field(default_factory=list)

    def env(self) -> CycleEnv:
        base = super().env()
        deps = dataclasses.replace(
            base.deps, launcher=project_launcher(self.root), on_line=self.lines.append
        )
        return dataclasses.replace(base, deps=deps)


def test_a_card_reaches_ready_for_merge_with_real_claude_and_its_tokens(tmp_path: Path) -> None:
    binary = installed("claude")
    if binary is None:
        pytest.skip("claude CLI not installed (python3 dev.py test installs it with npm)")
    base = CardProject.create(
        tmp_path, config={"batch": {"agent": "claude", "agentTimeoutMs": AGENT_TIMEOUT_MS}}
    )
    project = ClaudeCardProject(**{f.name: getattr(base, f.name) for f in dataclasses.fields(base)})
    home = tmp_path / "home"
    (home / "tmp").mkdir(parents=True)
    model = CardStepModel(scratch=project.scratch)
    with serve(model.answer, name="anthropic") as origin:
        project.env_extra.update(
            {
                # pairbot's own environment; the agent environment passes ANTHROPIC_* through.
                "ANTHROPIC_BASE_URL": origin,
                "ANTHROPIC_API_KEY": "sk-ant-loopback",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "DISABLE_AUTOUPDATER": "1",
                "HOME": str(home),
                "TMPDIR": str(home / "tmp"),
                "PATH": f"{Path(sys.executable).parent}{os.pathsep}{NODE_BIN}{os.pathsep}"
                f"{os.environ.get('PATH', '')}",
            }
        )
        first = project.command("implement")
        steps = [first, *project.until_quiet(limit=STEP_LIMIT)]
    output = "\n".join(project.lines)
    transitions = [s.result.transition for s in steps if s.result.transition]
    assert transitions == ["propose", "apply", "verify", "publish"], (transitions, output[-4000:])
    assert steps[-1].status == "ready-for-merge"
    assert project.labels(project.card) == ["pr-state:ready-for-merge"]
    pull = project.pull()
    assert pull is not None
    # The pull request holds the card's work, not the command files rendered for claude.
    branch = f"pair/card-{project.card}"
    changed = git(project.forge.repo, "diff", "--name-only", "main", branch).split()
    assert f"card-{project.card}.txt" in changed, changed
    assert not [path for path in changed if path.startswith(".claude/")], changed

    # Claude ran every agent step: a Bash call each, run to the end (the scripted agent
    # reported from inside claude's shell), and the journal names claude.
    assert len(model.tool_results) == 3, model.tool_results
    assert not any(result.get("is_error") for result in model.tool_results), model.tool_results
    # ...with the instructions pairbot gave claude on stdin, and pairbot's PAIR_* keys.
    log = (project.scratch / "agent-log.jsonl").read_text().splitlines()
    calls = [json.loads(line) for line in log]
    assert [c["transition"] for c in calls] == ["propose", "apply", "verify"]
    assert all(
        c["instructions"].startswith(f"You are pairbot's {c['transition']} agent") for c in calls
    )
    assert "Implement the unchecked tasks" in calls[1]["instructions"]
    assert all({"PAIR_SESSION", "PAIR_ROOT", "PAIR_STATE_ROOT"} <= set(c["env"]) for c in calls)
    journal = project.journal()
    started = [r for r in journal if r["kind"] == "step-started"]
    assert [(r["transition"], r.get("data")) for r in started] == [
        (stage, {"agent": "claude"}) for stage in ("propose", "apply", "verify")
    ]
    outcomes = [r for r in journal if r["kind"] == "outcome"]
    agent_steps = [r for r in outcomes if r["session"] in {s["session"] for s in started}]
    assert [(r["transition"], r["state"]) for r in agent_steps] == [
        (stage, "advanced") for stage in ("propose", "apply", "verify")
    ]

    # The synthesis shows the tokens the real stream carried: what the model reported.
    expected = sum(i + o for _, i, o in model.reported)
    assert all(r.get("usage") for r in agent_steps), agent_steps
    journaled = sum(r["usage"]["inputTokens"] + r["usage"]["outputTokens"] for r in agent_steps)
    assert journaled == expected
    synthesis = next(
        c["body"] for c in project.comments(pull) if "pair:synthesis" in c["body"].splitlines()[0]
    )
    assert f"{expected:,} tokens (known: 3 steps)" in synthesis, synthesis

    # No traceback on any surface: the agents' output, the journal, the forge's comments.
    texts = [output, *(str(r) for r in journal)]
    texts += [c["body"] for n in (project.card, pull) for c in project.comments(n)]
    assert not any("Traceback" in text for text in texts)
