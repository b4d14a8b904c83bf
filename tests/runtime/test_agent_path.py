"""The agent reaches pairbot whatever its shell does to PATH (issue 25, item 3).

A login shell reads /etc/profile, and Debian's sets a PATH of its own (for a user who is not
root: /usr/local/bin:/usr/bin:/bin:/usr/local/games:/usr/games), so the bin directory pairbot
put first on the agent's PATH is gone by the time the agent runs `pairbot batch report`. codex
runs every command that way (`bash -lc`). Three things hold against it: the prompt names
pairbot by the path the agent can run (an absolute path for a local agent, shell-quoted), the
same path is in the agent's PAIRBOT, and an isolated agent's fresh HOME gets a `.profile` that
puts the bin directory back. The pure parts are checked here; the real part (root only; it skips
in one line elsewhere) runs, through the production launcher and swerex's local runtime, isolated
as pairbot-agent, `bash -lc` with the report command exactly as the prompt gives it.
"""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from app.engine.agent import AgentLaunch, AgentSpawnResult
from app.engine.instructions import (
    InstructionContext,
    build_decomposition_instructions,
    build_instructions,
)
from app.engine.journal import read_journal
from app.engine.manifest import Phase
from app.engine.runstate import RunLocus
from app.engine.step import EngineDeps, agent_pairbot
from app.runtime import isolation
from app.runtime.launcher import Launcher, login_profile
from app.runtime.process import ProcessRuntime
from app.settings import AgentSpecModel, BatchSettings, ResolvedSettings, resolve_settings

SPACED = "/opt/pair tools/bin/pairbot"
DELEGATE = Launcher(lambda _settings: ProcessRuntime()).delegate


def _settings(locus: str = "local", command: list[str] | None = None) -> ResolvedSettings:
    return resolve_settings(
        env={},
        manifest=None,
        project=BatchSettings.model_validate(
            {
                "agent": AgentSpecModel(name="command"),
                "agentCommand": command or ["true"],
                "locus": locus,
            }
        ),
    )


def _report_lines(prompt: str) -> list[str]:
    return [line.strip() for line in prompt.splitlines() if "batch report --" in line]


@pytest.mark.parametrize(
    ("locus", "expected"),
    [
        pytest.param("local", "/venv/bin/pairbot", id="local-absolute"),
        pytest.param("docker", "pairbot", id="docker-its-own-path"),
        pytest.param("remote", "pairbot", id="remote-its-own-path"),
    ],
)
def test_the_agent_runs_pairbot_by_the_path_its_locus_reaches(locus: str, expected: str) -> None:
    assert agent_pairbot("/venv/bin", locus) == expected
    deps = EngineDeps(launcher=Launcher(lambda _s: ProcessRuntime()), pairbot_bin_dir="/venv/bin")
    assert deps.pairbot(_settings(locus)) == expected


def test_every_report_command_in_the_prompt_names_pairbot_by_its_quoted_path() -> None:
    prompt = build_instructions(
        InstructionContext(transition="apply", key="alpha", batch="b", phase=None, pairbot=SPACED),
        DELEGATE,
    )
    lines = _report_lines(prompt)
    assert len(lines) == 4, prompt
    for line in lines:
        # A shell reads the quoted path back as one word: exactly pairbot's.
        assert shlex.split(line)[:3] == [SPACED, "batch", "report"], line
    # Nowhere else does the prompt say a bare `pairbot batch report`: the command block
    # points at the report block instead.
    assert prompt.count("batch report") == len(lines) + 1
    assert not re.search(r"(?<![/'])pairbot batch report", prompt)
    assert "PAIRBOT" in prompt


def test_the_decomposition_prompt_names_the_same_path() -> None:
    prompt = build_decomposition_instructions(
        "b", Phase(name="p1"), [], ".pair/batches/b/batch.yaml", delegate=DELEGATE, pairbot=SPACED
    )
    lines = _report_lines(prompt)
    assert lines and all(shlex.split(line)[0] == SPACED for line in lines)
    assert not re.search(r"(?<![/'])pairbot batch report", prompt)


def test_the_command_block_points_at_the_report_block_and_names_no_bare_pairbot() -> None:
    block = DELEGATE("codex", "verify", "alpha", [])
    assert "pairbot batch report" not in block
    assert '"How to report" below' in block


def test_the_login_profile_puts_pairbots_directory_back_first() -> None:
    profile = login_profile(SPACED)
    assert profile is not None
    # What a login shell does after /etc/profile reset PATH: read ~/.profile.
    done = subprocess.run(
        ["/bin/sh", "-c", f'{profile}\nprintf %s "$PATH"'],
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split(":") == ["/opt/pair tools/bin", "/usr/bin", "/bin"]


@pytest.mark.parametrize("pairbot", ["pairbot", "", "bin/pairbot"])
def test_no_profile_without_an_absolute_path(pairbot: str) -> None:
    assert login_profile(pairbot) is None


# --- a real isolated agent in a login shell -------------------------------------------------------


@pytest.mark.skipif(
    os.geteuid() != 0 or not Path("/etc/profile").is_file(),
    reason="runs the agent as pairbot-agent from root, in a login shell that reads /etc/profile",
)
def test_an_isolated_agent_in_a_login_shell_reports_with_the_prompts_command(
    shared_dir: Path,
) -> None:
    from app.runtime.rex import LocalLocus, RexRuntime  # swerex

    bin_dir = str(Path(sys.executable).parent)
    pairbot = agent_pairbot(bin_dir, "local")
    prompt = build_instructions(
        InstructionContext(
            transition="apply", key="alpha", batch=None, phase=None, pairbot=pairbot
        ),
        DELEGATE,
    )
    (complete,) = [line for line in _report_lines(prompt) if "--complete" in line]
    command = complete.split('"<', 1)[0] + '"the prompt\'s own command"'
    # Then the bare name, which only the HOME's .profile can make findable again; the guard
    # first proves /etc/profile did reset PATH (its games directories are nobody else's).
    script = (
        'case ":$PATH:" in *:/usr/games:*) ;; *) echo "no PATH reset: $PATH" >&2; exit 97;; esac\n'
        f"{command}\n"
        'pairbot batch report --progress "the bare name, through ~/.profile"\n'
    )
    root = shared_dir / "repo"
    (root / ".pair").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    journal = RunLocus.for_change(root, "alpha").journal
    journal.parent.mkdir(parents=True)
    journal.write_text("")
    launch = AgentLaunch(
        stage="apply",
        command="apply",
        settings=_settings(command=["/bin/bash", "-lc", script]),
        root=root,
        instructions=prompt,
        env={"PATH": "/usr/bin:/bin"},
        pair_env={
            "PAIR_CHANGE": "alpha",
            "PAIR_TRANSITION": "apply",
            "PAIR_ROOT": str(root),
            "PAIR_SESSION": "s-path",
            "PAIRBOT": pairbot,
            "PATH": f"{bin_dir}:/usr/bin:/bin",
        },
        writable=(journal,),
    )
    lines: list[str] = []
    launcher = Launcher(lambda _s: RexRuntime(LocalLocus()), host=isolation.probe_host)
    result = asyncio.run(launcher.launch(launch, lines.append))
    assert isinstance(result, AgentSpawnResult), result
    assert result.exit_code == 0, (result.stderr, lines)
    entries = read_journal(journal)
    assert [(e.kind, e.message, e.session) for e in entries] == [
        ("completion", "the prompt's own command", "s-path"),
        ("progress", "the bare name, through ~/.profile", "s-path"),
    ]
