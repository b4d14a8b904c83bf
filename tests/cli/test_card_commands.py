"""`pairbot card` and `pairbot tick` through the installed console script, on the local host.

Every CLI run is its own command (a fresh delivery id), so a second command on a card acts
instead of being taken for a redelivery of the first; a command on a card that does not exist
is refused in one line and leaves nothing behind; a tick skips a card batch whose card has gone.
The steps between two CLI commands run in-process through the same cycle (`CardProject`).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from app.cli.entry import wants_debug
from app.cycle.batch import write_manifest
from tests.support.card_project import CardProject
from tests.support.project import cli

pytestmark = pytest.mark.slow


def _env(project: CardProject) -> dict[str, str]:
    return {
        "PAIR_LOCAL_FORGE": str(project.forge.root),
        "PAIR_TEST_AGENT_DIR": str(project.scratch),
    }


def _card(project: CardProject, *words: str) -> subprocess.CompletedProcess[str]:
    return cli("card", str(project.card), *words, cwd=project.root, env=_env(project))


def _no_traceback(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stdout + done.stderr, done.stderr


def test_two_cli_commands_on_one_card_both_act(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path)
    first = _card(project, "implement", "until:", "merged", "merge:", "always")
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("advanced:"), first.stdout
    steps = project.until_quiet()
    assert steps[-1].status == "awaiting-human"
    approve = _card(project, "approve")
    _no_traceback(approve)
    assert approve.returncode == 0, approve.stderr
    assert "status refreshed" not in approve.stdout
    assert "merged" in approve.stdout
    assert project.labels(project.card) == ["pr-state:merged"]
    deliveries = [e["delivery"] for e in project.cycle_events("command")]
    assert [e["verb"] for e in project.cycle_events("command")] == ["implement", "approve"]
    assert len(set(deliveries)) == 2 and all(d.startswith("cli-") for d in deliveries)


def test_a_command_on_a_missing_card_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path)
    done = cli("card", "99", "implement", cwd=project.root, env=_env(project))
    _no_traceback(done)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    # One line for the refusal, after the run's one line naming its hosts.
    binding, line = done.stderr.strip().splitlines()
    assert binding.startswith("pairbot: hosts pm=local code=local")
    assert line.startswith("pairbot: card #99 does not exist on the local host")
    assert "nothing was recorded" in line
    assert not (project.root / ".pair" / "batches" / "card-99").exists()
    # Nothing is left for a tick to trip on.
    tick = cli("tick", cwd=project.root, env=_env(project))
    _no_traceback(tick)
    assert tick.returncode == 0, tick.stderr


def test_a_tick_skips_a_card_batch_whose_card_has_gone(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path)
    write_manifest(project.root, 99)  # a cycle begun before its card was deleted
    done = cli("tick", cwd=project.root, env=_env(project))
    _no_traceback(done)
    assert done.returncode == 0, done.stderr
    skipped = [line for line in done.stderr.splitlines() if "skipped card-99" in line]
    assert len(skipped) == 1, done.stderr
    assert "card #99 no longer exists" in skipped[0]
    # Named, the batch's failure is one line (a host failure, exit 1); --debug adds the trace.
    named = cli("tick", "card-99", cwd=project.root, env=_env(project))
    _no_traceback(named)
    assert named.returncode == 1, named.stderr
    binding, line = named.stderr.strip().splitlines()
    assert binding.startswith("pairbot: hosts pm=local code=local")
    assert line.startswith("pairbot: not found on the host: ")
    assert "check that it still exists" in line
    debug = cli("--debug", "tick", "card-99", cwd=project.root, env=_env(project))
    assert debug.returncode == 1
    assert "Traceback" in debug.stderr
    assert debug.stderr.strip().splitlines()[-1] == line


@pytest.mark.parametrize(
    ("argv", "debug"),
    [
        pytest.param(["--debug", "tick"], True, id="first"),
        pytest.param(["--root", "/p", "--debug", "tick"], True, id="after-root"),
        pytest.param(["--root", "--debug", "tick"], False, id="a-root-named---debug"),
        pytest.param(["batch", "answer", "b", "--change", "c", "--debug"], False, id="a-message"),
        pytest.param(["tick"], False, id="absent"),
    ],
)
def test_only_pairbots_own_debug_option_turns_the_traceback_on(
    argv: list[str], debug: bool
) -> None:
    assert wants_debug(argv) is debug
