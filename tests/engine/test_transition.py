"""Transition derivation and the single done-rule: every row of the table in transition.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine.journal import JournalEntry, KeyHistory, fold_journal
from app.engine.transition import (
    ChangeDisk,
    ChangeStatus,
    Derivation,
    Transition,
    derive_change,
    read_change_disk,
)

KEY = "alpha"

NO_DIR = ChangeDisk()
DIR_ONLY = ChangeDisk(exists=True)
PLAN_NO_TASKS = ChangeDisk(exists=True, has_plan=True)
PLAN_OPEN = ChangeDisk(exists=True, has_plan=True, tasks_total=3, tasks_complete=0)
PLAN_PARTIAL = ChangeDisk(exists=True, has_plan=True, tasks_total=3, tasks_complete=2)
APPLIED = ChangeDisk(exists=True, has_plan=True, tasks_total=3, tasks_complete=3)
ARCHIVED = ChangeDisk(exists=True, has_plan=True, archived=True)


def history(*steps: str, feedback: str | None = None, key: str = KEY) -> KeyHistory:
    """A key's history from compact steps, folded from real journal entries.

    `propose` … `fix`: an accepted (advanced) outcome; `verify+` / `verify-`: a verify whose
    recorded verdict converged / blocks (`verify` alone records no verdict, like a legacy
    entry); `verify-red+` / `verify-red-`: the red contract verifier accepted / refused the
    contract;
    `~apply`: an outcome accepted as awaiting-approval; `!apply`: a blocked (not accepted) one.
    """
    entries: list[JournalEntry] = []
    for step in steps:
        state = {"~": "awaiting-approval", "!": "blocked"}.get(step[0], "advanced")
        name = step.lstrip("~!")
        verdict = None
        if name in ("verify+", "verify-", "verify-red+", "verify-red-"):
            verdict = {"converged": name.endswith("+")}
        entries.append(
            JournalEntry(
                kind="outcome",
                key=key,
                at="t",
                transition=name.rstrip("+-"),
                state=state,
                verdict=verdict,
            )
        )
    if feedback is not None:
        entries.append(
            JournalEntry(kind="feedback", key=key, at="t", transition=feedback, message="again")
        )
    return fold_journal(entries).history(key)


def derived(
    status: ChangeStatus, nxt: Transition | None, fix_rounds: int = 0, review_round: int = 1
) -> Derivation:
    return Derivation(status, nxt, fix_rounds=fix_rounds, review_round=review_round)


ROWS = [
    # archived
    pytest.param(ARCHIVED, history(), 3, derived("done", None), id="archived"),
    pytest.param(
        ARCHIVED,
        history("propose", "apply", "verify-", feedback="apply"),
        3,
        derived("done", None, review_round=2),
        id="archived-beats-feedback-and-blocking-verify",
    ),
    # feedback recorded after the last outcome
    pytest.param(
        APPLIED,
        history("propose", "apply", "verify+", feedback="apply"),
        3,
        derived("in-progress", "apply", review_round=2),
        id="feedback-reopens-a-done-change",
    ),
    pytest.param(
        NO_DIR,
        history(feedback="verify"),
        3,
        derived("in-progress", "verify"),
        id="feedback-overrides-the-disk",
    ),
    pytest.param(
        APPLIED,
        history(
            "propose",
            "apply",
            "verify-",
            "red",
            "fix",
            "verify-",
            "red",
            "fix",
            "verify-",
            "red",
            "fix",
            "verify-",
            feedback="fix",
        ),
        3,
        derived("in-progress", "fix", fix_rounds=3, review_round=5),
        id="feedback-overrides-failed-fix",
    ),
    pytest.param(
        PLAN_OPEN,
        history("propose", feedback="decompose"),
        3,
        derived("in-progress", "apply"),
        id="feedback-for-a-non-change-step-is-ignored",
    ),
    pytest.param(
        APPLIED,
        fold_journal(
            [
                JournalEntry(
                    kind="outcome", key=KEY, at="t", transition="propose", state="advanced"
                ),
                JournalEntry(kind="feedback", key=KEY, at="t", transition="propose", message="x"),
                JournalEntry(
                    kind="outcome", key=KEY, at="t", transition="propose", state="blocked"
                ),
            ]
        ).history(KEY),
        3,
        derived("awaiting-verify", "verify"),
        id="feedback-consumed-by-the-next-outcome",
    ),
    # no change directory
    pytest.param(NO_DIR, history(), 3, derived("ready", "propose"), id="no-dir-fresh"),
    pytest.param(
        NO_DIR, history("!propose"), 3, derived("ready", "propose"), id="no-dir-after-a-block"
    ),
    pytest.param(
        NO_DIR,
        history("propose"),
        3,
        derived("in-progress", "propose"),
        id="no-dir-though-propose-was-accepted",
    ),
    # directory but no plan.md
    pytest.param(DIR_ONLY, history(), 3, derived("in-progress", "propose"), id="dir-no-plan"),
    # plan.md with unchecked tasks
    pytest.param(PLAN_OPEN, history("propose"), 3, derived("in-progress", "apply"), id="plan-open"),
    pytest.param(
        PLAN_PARTIAL,
        history("propose", "apply"),
        3,
        derived("in-progress", "apply"),
        id="plan-partial",
    ),
    pytest.param(
        PLAN_NO_TASKS,
        history("propose"),
        3,
        derived("in-progress", "apply"),
        id="plan-without-tasks-is-not-applied",
    ),
    # all checked, no accepted verify since the last propose/apply
    pytest.param(
        APPLIED,
        history("propose", "apply"),
        3,
        derived("awaiting-verify", "verify"),
        id="applied-never-verified",
    ),
    pytest.param(
        APPLIED,
        history(),
        3,
        derived("awaiting-verify", "verify"),
        id="applied-without-any-journal",
    ),
    pytest.param(
        APPLIED,
        history("propose", "apply", "!verify"),
        3,
        derived("awaiting-verify", "verify"),
        id="blocked-verify-is-not-accepted",
    ),
    pytest.param(
        APPLIED,
        history("propose", "apply", "verify+", "apply"),
        3,
        derived("awaiting-verify", "verify", review_round=2),
        id="re-verify-after-a-later-apply",
    ),
    pytest.param(
        APPLIED,
        history("propose", "apply", "verify+", "propose"),
        3,
        derived("awaiting-verify", "verify", review_round=2),
        id="re-verify-after-a-later-propose",
    ),
    pytest.param(
        APPLIED,
        history("propose", "apply", "verify-", "red", "apply"),
        3,
        derived("awaiting-verify", "verify", review_round=2),
        id="re-verify-after-apply-even-when-blocking",
    ),
    # last verify converged
    pytest.param(
        APPLIED,
        history("propose", "apply", "verify+"),
        3,
        derived("done", None, review_round=2),
        id="verify-converged",
    ),
    pytest.param(
        APPLIED,
        history("propose", "apply", "~verify+"),
        3,
        derived("done", None, review_round=2),
        id="verify-awaiting-approval-counts-as-accepted",
    ),
    pytest.param(
        APPLIED,
        history("propose", "apply", "verify"),
        3,
        derived("done", None, review_round=2),
        id="legacy-verify-without-verdict",
    ),
    pytest.param(
        APPLIED,
        history("propose", "apply", "verify-", "red", "fix", "verify+"),
        3,
        derived("done", None, fix_rounds=1, review_round=3),
        id="converged-after-a-fix-round",
    ),
    pytest.param(
        APPLIED,
        history("propose", "apply", "verify+", "red"),
        3,
        derived("done", None, review_round=2),
        id="red-after-a-converged-verify-changes-nothing",
    ),
    # last verify blocks
    pytest.param(
        APPLIED,
        history("propose", "apply", "verify-", "red", "fix"),
        3,
        derived("awaiting-verify", "verify", fix_rounds=1, review_round=2),
        id="blocks-fix-accepted-since",
    ),
    pytest.param(
        APPLIED,
        history("propose", "apply", "verify-", "fix"),
        3,
        derived("awaiting-verify", "verify", fix_rounds=1, review_round=2),
        id="blocks-fix-without-red",
    ),
    pytest.param(
        APPLIED,
        history("propose", "apply", "verify-", "red"),
        3,
        derived("in-progress", "verify-red", review_round=2),
        id="blocks-red-accepted-since",
    ),
    pytest.param(
        APPLIED,
        history("propose", "apply", "verify-", "red", "verify-red+"),
        3,
        derived("in-progress", "fix", review_round=2),
        id="blocks-contract-accepted",
    ),
    pytest.param(
        APPLIED,
        history("propose", "apply", "verify-", "red", "verify-red-"),
        3,
        derived("in-progress", "red", review_round=2),
        id="blocks-contract-refused-red-again",
    ),
    pytest.param(
        APPLIED,
        history("propose", "apply", "verify-", "red", "verify-red-", "red"),
        3,
        derived("in-progress", "verify-red", review_round=2),
        id="blocks-red-again-verified-again",
    ),
    pytest.param(
        APPLIED,
        history("propose", "apply", "verify-", "red", "!verify-red"),
        3,
        derived("in-progress", "verify-red", review_round=2),
        id="blocks-verifier-failed-runs-again",
    ),
    pytest.param(
        APPLIED,
        history("propose", "apply", "verify-", "red", "verify-red+", "!fix"),
        3,
        derived("in-progress", "fix", review_round=2),
        id="blocks-red-accepted-fix-blocked",
    ),
    pytest.param(
        APPLIED,
        history("propose", "apply", "verify-"),
        3,
        derived("in-progress", "red", review_round=2),
        id="blocks-fix-rounds-left",
    ),
    pytest.param(
        APPLIED,
        history("propose", "apply", "verify-", "red", "fix", "verify-", "red", "fix", "verify-"),
        3,
        derived("in-progress", "red", fix_rounds=2, review_round=4),
        id="blocks-last-round-left",
    ),
    pytest.param(
        APPLIED,
        history(
            "propose",
            "apply",
            "verify-",
            "red",
            "fix",
            "verify-",
            "red",
            "fix",
            "verify-",
            "red",
            "fix",
            "verify-",
        ),
        3,
        derived("failed-fix", None, fix_rounds=3, review_round=5),
        id="blocks-max-fix-rounds-spent",
    ),
    pytest.param(
        APPLIED,
        history("propose", "apply", "verify-", "red", "fix", "verify-"),
        1,
        derived("failed-fix", None, fix_rounds=1, review_round=3),
        id="blocks-custom-bound-spent",
    ),
    pytest.param(
        APPLIED,
        history("propose", "apply", "verify-"),
        0,
        derived("failed-fix", None, review_round=2),
        id="blocks-zero-fix-rounds-allowed",
    ),
    pytest.param(
        APPLIED,
        history("propose", "apply", "verify-", "red", "fix", "verify-", "red", "fix", "verify-"),
        5,
        derived("in-progress", "red", fix_rounds=2, review_round=4),
        id="blocks-higher-bound-leaves-rounds",
    ),
    pytest.param(
        APPLIED,
        history("propose", "apply", "verify-", "red", "verify-red+", "!fix", "!fix"),
        1,
        derived("in-progress", "fix", review_round=2),
        id="blocked-fixes-do-not-spend-rounds",
    ),
]


@pytest.mark.parametrize(("disk", "hist", "max_fix_rounds", "expected"), ROWS)
def test_derive_change(
    disk: ChangeDisk, hist: KeyHistory, max_fix_rounds: int, expected: Derivation
) -> None:
    assert derive_change(disk, hist, max_fix_rounds) == expected


@pytest.mark.parametrize(
    ("disk", "applied"),
    [
        pytest.param(NO_DIR, False, id="no-dir"),
        pytest.param(PLAN_NO_TASKS, False, id="no-tasks"),
        pytest.param(PLAN_PARTIAL, False, id="partial"),
        pytest.param(APPLIED, True, id="all-checked"),
        pytest.param(ARCHIVED, True, id="archived"),
    ],
)
def test_applied(disk: ChangeDisk, applied: bool) -> None:
    assert disk.applied is applied


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        pytest.param({}, NO_DIR, id="nothing"),
        pytest.param({"changes/alpha/notes.md": "x"}, DIR_ONLY, id="dir-no-plan"),
        pytest.param(
            {"changes/alpha/plan.md": "- [x] a\n- [ ] b\n```\n- [ ] example\n```\n"},
            ChangeDisk(exists=True, has_plan=True, tasks_total=2, tasks_complete=1),
            id="plan-with-tasks",
        ),
        pytest.param({"changes/archive/alpha/plan.md": "- [ ] a\n"}, ARCHIVED, id="archived"),
        pytest.param(
            {"changes/alpha/plan.md": "- [ ] a\n", "changes/archive/alpha/plan.md": ""},
            ARCHIVED,
            id="archive-wins-over-a-stale-dir",
        ),
        pytest.param({"changes/beta/plan.md": "- [x] a\n"}, NO_DIR, id="another-change-only"),
    ],
)
def test_read_change_disk(tmp_path: Path, files: dict[str, str], expected: ChangeDisk) -> None:
    for rel, text in files.items():
        path = tmp_path / ".pair" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert read_change_disk(tmp_path, KEY) == expected


def test_plan_md_that_is_a_directory_is_no_plan(tmp_path: Path) -> None:
    (tmp_path / ".pair" / "changes" / KEY / "plan.md").mkdir(parents=True)
    assert read_change_disk(tmp_path, KEY) == DIR_ONLY
