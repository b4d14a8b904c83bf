"""Each command the Action runs counts once: its delivery id is the comment (or the dispatch).

`python -m action` as a subprocess against the fake GitHub (tests/e2e/action_harness.py): a
re-run of the same workflow run (the same event) is a repeat that only refreshes the card's
status; a second comment on the card is a new command and acts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.e2e.action_harness import action_repo

pytestmark = pytest.mark.slow


def commands(journal: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The `command` cycle entries of a card's journal: one per command that acted."""
    return [
        r["data"]
        for r in journal
        if r.get("kind") == "cycle" and r.get("data", {}).get("event") == "command"
    ]


def test_a_rerun_is_a_repeat_and_another_comment_acts(tmp_path: Path) -> None:
    with action_repo(tmp_path) as repo:
        event = repo.comment_event("/pair implement")
        first = repo.run(event)
        assert first.code == 0, first.stdout + first.stderr
        comment = event[1]["comment"]["id"]
        assert [c["delivery"] for c in commands(repo.state_journal())] == [f"comment-{comment}"]
        again = repo.run(event)  # "Re-run all jobs": the same event, the same comment
        assert again.code == 0, again.stdout + again.stderr
        assert "status refreshed" in again.stdout
        assert len(commands(repo.state_journal())) == 1
        status = repo.comment_event("/pair abandon")
        done = repo.run(status)
        assert done.code == 0, done.stdout + done.stderr
        recorded = commands(repo.state_journal())
        assert [c["verb"] for c in recorded] == ["implement", "abandon"]
        assert recorded[-1]["delivery"] == f"comment-{status[1]['comment']['id']}"
        repo.assert_invariants()
