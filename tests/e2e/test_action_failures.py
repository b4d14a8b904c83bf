"""A host or git failure ends the Action in one `::error::` line, never a traceback.

`python -m action` as a subprocess against the fake GitHub (tests/e2e/action_harness.py), with
a fault queued on the fake or a hook on the bare repository: a 404 on the 👀 reaction, a 502
on a comment upsert, a push the remote refuses. Each run exits 1 with exactly one `::error::`
line that names the failed call and what to do next, and no "Traceback" anywhere; with
GitHub's debug switch (`RUNNER_DEBUG=1`) the traceback is printed too.
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tests.e2e.action_harness import ActionRepo, Invocation, action_repo

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


def test_a_404_on_the_eyes_reaction_is_one_error_line(tmp_path: Path) -> None:
    with action_repo(tmp_path) as repo:
        reactions = r"/issues/comments/\d+/reactions$"
        repo.fake.fail("POST", reactions, "canned", status=404, body={"message": "Not Found"})
        event = repo.comment_event("/pair implement")
        line = error_line(repo.run(event))
        assert line.startswith("::error::not found on the host: ")
        assert "react to comment" in line and "404" in line
        assert "check that it still exists" in line
        # GitHub's "Re-run with debug logging": the same line, and the traceback before it.
        repo.fake.fail("POST", reactions, "canned", status=404, body={"message": "Not Found"})
        debug = repo.run(event, extra_env={"RUNNER_DEBUG": "1"})
        assert debug.code == 1
        assert "Traceback" in debug.stderr
        assert [x for x in debug.stdout.splitlines() if x.startswith("::error::")] == [line]


def test_a_502_on_a_comment_upsert_is_one_error_line(tmp_path: Path) -> None:
    with action_repo(tmp_path) as repo:
        repo.fake.fail("POST", r"/issues/\d+/comments$", "5xx")
        line = error_line(repo.run(repo.comment_event("/pair implement")))
        assert line.startswith("::error::the host is unavailable: ")
        assert "502" in line and "run again later" in line


def test_a_refused_push_is_one_error_line(tmp_path: Path) -> None:
    with action_repo(tmp_path) as repo:
        _refuse_card_pushes(repo)
        line = error_line(repo.run(repo.comment_event("/pair implement")))
        assert "push pair/card-" in line, line
        assert "protected branch" in line
        assert "ghs_" not in line and "x-access-token" not in line
