"""A host or git failure ends the Action in one `::error::` line, never a traceback; a refused
👀 reaction loses nothing (the early one refused, it is owed: the command is recorded first,
the reaction retried at its checkpoints and by the next run).

`python -m action` as a subprocess against the fake GitHub (tests/e2e/action_harness.py), with
a fault queued on the fake or a hook on the bare repository: a 502 on a comment upsert, a push
the remote refuses. Each run exits 1 with exactly one `::error::`
line that names the failed call and what to do next, and no "Traceback" anywhere; with
GitHub's debug switch (`RUNNER_DEBUG=1`) the traceback is printed too.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from tests.e2e.action_harness import ActionRepo, Invocation, action_repo
from tests.support.git import run_git

pytestmark = pytest.mark.slow


def error_line(done: Invocation) -> str:
    """The run's one `::error::` line, after checking it failed without a traceback."""
    assert done.code == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    errors = [line for line in done.stdout.splitlines() if line.startswith("::error::")]
    assert len(errors) == 1, done.stdout
    assert done.outputs.get("status") == "error"
    return errors[0]


def _refuse_card_pushes(repo: ActionRepo) -> None:
    """A pre-receive hook on the served bare repository that refuses every card branch."""
    hook = repo.bare / "hooks" / "pre-receive"
    hook.write_text(
        "#!/bin/sh\n"
        "while read old new ref; do\n"
        '  case "$ref" in refs/heads/pair/*) echo "protected branch: $ref" >&2; exit 1;; esac\n'
        "done\n"
    )
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR)


REACTIONS = r"/issues/comments/\d+/reactions$"


def _eyes(repo: ActionRepo) -> list[tuple[str, int, str, str]]:
    return [r for r in repo.fake.reactions if r[2] == "eyes"]


def _owed(repo: ActionRepo) -> list[dict[str, object]]:
    shown = run_git(repo.bare, "show", "pair-state:.pair/acks.json")
    if shown.returncode != 0:  # never written: no run owed a reaction
        return []
    owed: list[dict[str, object]] = json.loads(shown.stdout)
    return owed


def _commands(repo: ActionRepo) -> list[str]:
    return [
        r["data"]["delivery"]
        for r in repo.state_journal()
        if r.get("kind") == "cycle" and r["data"].get("event") == "command"
    ]


def test_a_502_then_a_401_on_the_eyes_reaction_loses_nothing(tmp_path: Path) -> None:
    with action_repo(tmp_path) as repo:
        # Every reaction of the first run meets a 502 (its checkpoints retry it too).
        repo.fake.fail("POST", REACTIONS, "5xx", times=1000)
        event = repo.comment_event("/pair implement")
        comment = str(event[1]["comment"]["id"])
        first = repo.run(event)
        repo.fake.faults.clear()
        # The command was recorded before the reaction was tried, and it ran.
        assert first.code == 0, first.stdout + first.stderr
        assert first.outputs["transition"] == "propose"
        assert _commands(repo) == [f"comment-{comment}"]
        assert "the next run retries the 👀" in first.stdout
        assert not _eyes(repo)
        assert [a["comment_id"] for a in _owed(repo)] == [comment]
        # The next tick retries it and meets a 401: still owed, the tick's own step runs.
        refused = {"message": "Bad credentials"}
        repo.fake.fail("POST", REACTIONS, "canned", status=401, body=refused, times=1000)
        second = repo.run(repo.schedule_event())
        repo.fake.faults.clear()
        assert second.code == 0, second.stdout + second.stderr
        assert second.outputs["transition"] == "apply"
        assert not _eyes(repo)
        assert [(a["comment_id"], a["attempts"]) for a in _owed(repo)] == [
            (comment, 2)
        ]  # one per run
        # The one after posts it, once; the command never ran twice.
        third = repo.run(repo.schedule_event())
        assert third.code == 0, third.stdout + third.stderr
        assert len(_eyes(repo)) == 1 and _owed(repo) == []
        rerun = repo.run(event)  # "Re-run all jobs": recognised, nothing runs again
        assert rerun.code == 0, rerun.stdout + rerun.stderr
        assert _commands(repo) == [f"comment-{comment}"]
        assert len(_eyes(repo)) == 1 and _owed(repo) == []
        repo.assert_invariants()


def test_a_404_on_the_eyes_reaction_drops_the_reaction_not_the_command(tmp_path: Path) -> None:
    with action_repo(tmp_path) as repo:
        repo.fake.fail("POST", REACTIONS, "canned", status=404, body={"message": "Not Found"})
        event = repo.comment_event("/pair implement")
        done = repo.run(event)
        assert done.code == 0, done.stdout + done.stderr
        assert done.outputs["transition"] == "propose"
        assert "is gone; its 👀 is dropped" in done.stdout
        assert _owed(repo) == [] and not _eyes(repo)


def test_a_502_on_a_comment_upsert_is_one_error_line(tmp_path: Path) -> None:
    with action_repo(tmp_path) as repo:
        repo.fake.fail("POST", r"/issues/\d+/comments$", "5xx")
        event = repo.comment_event("/pair implement")
        line = error_line(repo.run(event))
        assert line.startswith("::error::the host is unavailable: ")
        assert "502" in line and "run again later" in line
        # GitHub's "Re-run with debug logging": the same line, and the traceback before it.
        repo.fake.fail("POST", r"/issues/\d+/comments$", "5xx")
        debug = repo.run(event, extra_env={"RUNNER_DEBUG": "1"})
        assert debug.code == 1
        assert "Traceback" in debug.stderr
        assert [x for x in debug.stdout.splitlines() if x.startswith("::error::")] == [line]


def test_a_refused_push_is_one_error_line(tmp_path: Path) -> None:
    with action_repo(tmp_path) as repo:
        _refuse_card_pushes(repo)
        line = error_line(repo.run(repo.comment_event("/pair implement")))
        assert "push pair/card-" in line, line
        assert "protected branch" in line
        assert "ghs_" not in line and "x-access-token" not in line
