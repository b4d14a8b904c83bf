"""Session-to-outcome mapping: every branch of `app/engine/outcome.py`, in the documented order."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, get_args

import pytest

from app.domain.review.verdict import Verdict
from app.engine.gates import Gate, StepKind
from app.engine.journal import JournalEntry
from app.engine.outcome import (
    STDERR_TAIL_LINES,
    EngineStepOutcome,
    ModelHintContext,
    SessionEvidence,
    describe_exit,
    map_session_to_outcome,
    stderr_tail,
)
from app.engine.transition import ChangeDisk

NO_DIR = ChangeDisk()
DIR_ONLY = ChangeDisk(exists=True)
PLAN_0 = ChangeDisk(exists=True, has_plan=True, tasks_total=3, tasks_complete=0)
PLAN_1 = ChangeDisk(exists=True, has_plan=True, tasks_total=3, tasks_complete=1)
PLAN_2 = ChangeDisk(exists=True, has_plan=True, tasks_total=3, tasks_complete=2)
APPLIED = ChangeDisk(exists=True, has_plan=True, tasks_total=3, tasks_complete=3)
ARCHIVED = ChangeDisk(exists=True, has_plan=True, archived=True)

MODEL = ModelHintContext(stage="apply", agent="claude", model="claude-opus-9", scope="project")


def entry(kind: str, message: str = "") -> JournalEntry:
    return JournalEntry(kind=kind, key="alpha", at="t", message=message)


def done(message: str = "done") -> JournalEntry:
    return entry("completion", message)


BLOCKER = entry("blocker", "cannot find the module")
NEEDS = entry("needs-input", "which database?")
PROGRESS = entry("progress", "halfway")


def session(transition: StepKind = "propose", **fields: Any) -> SessionEvidence:
    """A session with sensible defaults: zero exit, no reports, no disk, voluntary gate."""
    base: dict[str, Any] = {"entries": (), "exit_code": 0, "signal": None}
    base.update(fields)
    return SessionEvidence(transition=transition, **base)


def blocked(text: str) -> EngineStepOutcome:
    return EngineStepOutcome(state="blocked", message=text, blocker=text)


def mismatch(reason: str) -> EngineStepOutcome:
    return blocked(f"Reported complete but disk disagrees: {reason}")


def verify_mismatch(reason: str) -> EngineStepOutcome:
    """A verify whose claim the disk or the verdict contradicts: failed (failed-verify)."""
    text = f"Reported complete but disk disagrees: {reason}"
    return EngineStepOutcome(state="failed", message=text, blocker=text)


def crash_after_completion(how: str) -> EngineStepOutcome:
    return blocked(
        f"Agent reported completion but exited {how} — the reported work may be incomplete; "
        "review and resume."
    )


def failed(title: str, how: str, stderr: str = "") -> EngineStepOutcome:
    text = f"{title} agent failed ({how}) without reporting completion"
    if stderr:
        text = f"{text}; stderr (last lines):\n{stderr}"
    return EngineStepOutcome(state="failed", message=text, blocker=text, detail=stderr or None)


def parked(title: str) -> EngineStepOutcome:
    text = f"{title} complete; awaiting approval."
    return EngineStepOutcome(state="awaiting-approval", message=text, approval_request=text)


def advanced(text: str) -> EngineStepOutcome:
    return EngineStepOutcome(state="advanced", message=text)


def silent(title: str, seen: str = "") -> EngineStepOutcome:
    on_disk = f" (on disk: {seen})" if seen else ""
    return blocked(
        f"{title} agent exited 0 without reporting completion{on_disk}; "
        "unreported work is never advanced — review, then retry or report"
    )


PROPOSED = {"before": NO_DIR, "after": PLAN_0}
APPLIED_NOW = {"before": PLAN_2, "after": APPLIED}

BRANCHES = [
    # 1. a reported blocker or needs-input
    pytest.param(
        session(entries=[BLOCKER]),
        EngineStepOutcome(
            state="blocked", message="Blocked: cannot find the module", blocker=BLOCKER.message
        ),
        id="1-blocker",
    ),
    pytest.param(
        session(entries=[NEEDS]),
        EngineStepOutcome(
            state="blocked",
            message="Needs input: which database?",
            blocker=NEEDS.message,
            needs_input=True,
        ),
        id="1-needs-input",
    ),
    pytest.param(
        session(entries=[done(), BLOCKER], **PROPOSED),
        EngineStepOutcome(
            state="blocked", message="Blocked: cannot find the module", blocker=BLOCKER.message
        ),
        id="1-blocker-wins-over-a-later-completion",
    ),
    pytest.param(
        session(entries=[BLOCKER, done()], **PROPOSED),
        EngineStepOutcome(
            state="blocked", message="Blocked: cannot find the module", blocker=BLOCKER.message
        ),
        id="1-blocker-wins-over-an-earlier-completion",
    ),
    pytest.param(
        session(entries=[BLOCKER, PROGRESS, NEEDS]),
        EngineStepOutcome(
            state="blocked",
            message="Needs input: which database?",
            blocker=NEEDS.message,
            needs_input=True,
        ),
        id="1-the-latest-of-several-blockers",
    ),
    pytest.param(
        session(entries=[BLOCKER], exit_code=2, stderr="boom"),
        EngineStepOutcome(
            state="blocked", message="Blocked: cannot find the module", blocker=BLOCKER.message
        ),
        id="1-blocker-wins-over-a-crash",
    ),
    # 2. non-zero exit without a completion
    pytest.param(session(exit_code=3), failed("Propose", "exit 3"), id="2-non-zero-exit"),
    pytest.param(
        session("verify", exit_code=None, signal="SIGKILL"),
        failed("Verify", "signal SIGKILL"),
        id="2-signal",
    ),
    pytest.param(
        session("apply", exit_code=1, entries=[PROGRESS], stderr="Traceback\nValueError: x\n"),
        failed("Apply", "exit 1", "Traceback\nValueError: x"),
        id="2-progress-only-with-stderr-tail",
    ),
    pytest.param(
        session("decompose", exit_code=None),
        failed("Decompose", "exit None"),
        id="2-no-exit-status-is-a-crash",
    ),
    pytest.param(
        session("pr", exit_code=0, signal="SIGTERM"),
        failed("Pr", "signal SIGTERM"),
        id="2-signal-even-with-exit-zero",
    ),
    # 3a. corroboration: propose
    pytest.param(
        session(entries=[done("proposed")], before=NO_DIR, after=NO_DIR),
        mismatch("propose must leave the change directory with a plan.md"),
        id="3a-propose-no-directory",
    ),
    pytest.param(
        session(entries=[done("proposed")], before=NO_DIR, after=DIR_ONLY),
        mismatch("propose must leave the change directory with a plan.md"),
        id="3a-propose-no-plan",
    ),
    pytest.param(
        session(entries=[done("proposed")]),
        mismatch("propose must leave the change directory with a plan.md"),
        id="3a-propose-no-disk-evidence",
    ),
    pytest.param(
        session(entries=[done("proposed")], **PROPOSED),
        advanced("proposed"),
        id="3d-propose-corroborated",
    ),
    pytest.param(
        session(entries=[done("proposed")], before=PLAN_0, after=PLAN_0),
        advanced("proposed"),
        id="3d-resumed-propose-over-an-existing-plan",
    ),
    # 3a. corroboration: apply
    pytest.param(
        session("apply", entries=[done()], before=PLAN_1, after=PLAN_1),
        mismatch("apply checked no task this session (1/3 checked, 1 before)"),
        id="3a-apply-checked-nothing",
    ),
    pytest.param(
        session("apply", entries=[done()], before=PLAN_0, after=ChangeDisk(exists=True)),
        mismatch("apply checked no task this session (0/0 checked, 0 before)"),
        id="3a-apply-plan-gone",
    ),
    pytest.param(
        session("apply", entries=[done("applied")], before=PLAN_0, after=PLAN_1),
        advanced("applied"),
        id="3d-apply-advanced-a-task",
    ),
    pytest.param(
        session("apply", entries=[done("applied")], **APPLIED_NOW),
        advanced("applied"),
        id="3d-apply-fully-applied",
    ),
    pytest.param(
        session("apply", entries=[done("applied")], before=APPLIED, after=APPLIED),
        advanced("applied"),
        id="3d-apply-already-applied",
    ),
    # 3a. corroboration: verify
    pytest.param(
        session("verify", entries=[done("Ready for archive")], before=PLAN_2, after=PLAN_2),
        verify_mismatch("verify ran on a change whose tasks are not all checked"),
        id="3a-verify-not-applied",
    ),
    pytest.param(
        session("verify", entries=[done("looks fine")], before=APPLIED, after=APPLIED),
        verify_mismatch(
            "the verify completion carries no verdict (expected 'Ready for archive', "
            "'N critical issue(s) found', or a --findings file)"
        ),
        id="3a-verify-without-verdict",
    ),
    pytest.param(
        session(
            "verify",
            entries=[done("Ready for archive")],
            before=APPLIED,
            after=APPLIED,
            verdict_problems=["finding r1-1 was dropped", "finding r1-9 is new"],
        ),
        verify_mismatch(
            "verification failed closed: finding r1-1 was dropped; finding r1-9 is new"
        ),
        id="3a-verify-verdict-problems-fail-closed",
    ),
    pytest.param(
        session("verify", entries=[done("Ready for archive")], before=APPLIED, after=APPLIED),
        advanced("Ready for archive"),
        id="3d-verify-ready",
    ),
    pytest.param(
        session("verify", entries=[done("2 critical issues found")], before=APPLIED, after=APPLIED),
        advanced("2 critical issues found"),
        id="3d-verify-critical-verdict-is-still-a-verdict",
    ),
    pytest.param(
        session(
            "verify",
            entries=[done("see findings")],
            before=APPLIED,
            after=APPLIED,
            verdict=Verdict(converged=False, blocking=1, source="findings"),
        ),
        advanced("see findings"),
        id="3d-verify-findings-verdict-without-text",
    ),
    pytest.param(
        session("verify", entries=[done("Ready for archive")], before=APPLIED, after=ARCHIVED),
        advanced("Ready for archive"),
        id="3d-verify-late-archival-counts-as-applied",
    ),
    # 3a. decompose, pr, red, fix
    pytest.param(
        session("decompose", entries=[done()], decomposed=False),
        mismatch("the phase still lists no changes in batch.yaml"),
        id="3a-decompose-no-changes",
    ),
    pytest.param(
        session("decompose", entries=[done("authored")], decomposed=True),
        advanced("authored"),
        id="3d-decompose-authored",
    ),
    pytest.param(
        session("decompose", entries=[done("authored")]),
        advanced("authored"),
        id="3d-decompose-unchecked",
    ),
    pytest.param(session("pr", entries=[done("opened")]), advanced("opened"), id="3d-pr"),
    pytest.param(session("red", entries=[done("red")]), advanced("red"), id="3d-red"),
    pytest.param(session("fix", entries=[done("fixed")]), advanced("fixed"), id="3d-fix"),
    # mismatch precedes crash; crash precedes the approval park
    pytest.param(
        session(entries=[done()], exit_code=1, before=NO_DIR, after=DIR_ONLY),
        mismatch("propose must leave the change directory with a plan.md"),
        id="3a-mismatch-precedes-crash",
    ),
    pytest.param(
        session(entries=[done()], exit_code=1, gate="after-propose", **PROPOSED),
        crash_after_completion("exit 1"),
        id="3b-crash-precedes-approval-park",
    ),
    pytest.param(
        session("apply", entries=[done()], exit_code=None, signal="SIGTERM", **APPLIED_NOW),
        crash_after_completion("signal SIGTERM"),
        id="3b-completion-then-signal",
    ),
    pytest.param(
        session(entries=[done()], gate="after-propose", before=NO_DIR, after=DIR_ONLY),
        mismatch("propose must leave the change directory with a plan.md"),
        id="3a-uncorroborated-propose-never-parks",
    ),
    # 3c. approval park
    pytest.param(
        session(entries=[done()], gate="after-propose", **PROPOSED),
        parked("Propose"),
        id="3c-after-propose-parks-propose",
    ),
    pytest.param(
        session("apply", entries=[done("applied")], gate="after-propose", **APPLIED_NOW),
        advanced("applied"),
        id="3c-after-propose-does-not-park-apply",
    ),
    pytest.param(
        session("apply", entries=[done()], gate="every-phase", **APPLIED_NOW),
        parked("Apply"),
        id="3c-every-phase-parks-apply",
    ),
    pytest.param(
        session(
            "verify",
            entries=[done("Ready for archive")],
            gate="every-phase",
            before=APPLIED,
            after=APPLIED,
        ),
        parked("Verify"),
        id="3c-every-phase-parks-verify",
    ),
    pytest.param(
        session("decompose", entries=[done("authored")], gate="every-phase", decomposed=True),
        advanced("authored"),
        id="3c-decompose-never-parks",
    ),
    pytest.param(
        session("pr", entries=[done("opened")], gate="every-phase"),
        advanced("opened"),
        id="3c-pr-never-parks",
    ),
    pytest.param(
        session(entries=[done("proposed")], gate="autonomous", **PROPOSED),
        advanced("proposed"),
        id="3c-autonomous-never-parks",
    ),
    # 3d. advanced
    pytest.param(
        session("apply", entries=[done("")], **APPLIED_NOW),
        advanced("Apply complete."),
        id="3d-empty-completion-message",
    ),
    pytest.param(
        session("apply", entries=[done("first"), PROGRESS, done("second")], **APPLIED_NOW),
        advanced("second"),
        id="3d-the-last-completion-speaks",
    ),
    # 4. zero exit without a completion
    pytest.param(session(), silent("Propose"), id="4-nothing"),
    pytest.param(session(entries=[PROGRESS]), silent("Propose"), id="4-progress-only"),
    pytest.param(session(**PROPOSED), silent("Propose", "plan.md appeared"), id="4-plan-appeared"),
    pytest.param(
        session("apply", before=PLAN_0, after=PLAN_2),
        silent("Apply", "tasks advanced 0→2"),
        id="4-tasks-advanced",
    ),
    pytest.param(
        session("apply", before=NO_DIR, after=PLAN_1),
        silent("Apply", "plan.md appeared, tasks advanced 0→1"),
        id="4-both",
    ),
    pytest.param(
        session("apply", before=PLAN_1, after=PLAN_1), silent("Apply"), id="4-disk-unchanged"
    ),
]


@pytest.mark.parametrize(("evidence", "expected"), BRANCHES)
def test_map_session_to_outcome(evidence: SessionEvidence, expected: EngineStepOutcome) -> None:
    assert map_session_to_outcome(evidence) == expected


# ---------------------------------------------------------------- the model-failure hint


def hint(model: ModelHintContext, where: str) -> str:
    return (
        f"The {model.stage} stage ran agent {model.agent!r} with model {model.model!r} "
        f"(set in {where}) and it exited before reporting anything: if this model id is "
        f"invalid, fix it in {where}."
    )


@pytest.mark.parametrize(
    ("scope", "where"),
    [
        pytest.param("project", "the project config", id="project"),
        pytest.param("manifest", "the batch manifest", id="manifest"),
        pytest.param("env", "the environment", id="env"),
    ],
)
@pytest.mark.parametrize("stage", ["apply", "decompose", "pr"])
def test_model_hint_names_stage_agent_model_and_scope(stage: str, scope: str, where: str) -> None:
    model = ModelHintContext(stage=stage, agent="codex", model="gpt-9-nope", scope=scope)
    outcome = map_session_to_outcome(
        session("apply", exit_code=2, model=model, stderr="error: unknown model\n")
    )
    text = hint(model, where)
    base = "Apply agent failed (exit 2) without reporting completion"
    assert outcome.state == "failed"
    assert outcome.public_state == "blocked"
    assert outcome.message == f"{text} {base}; stderr (last lines):\nerror: unknown model"
    assert outcome.blocker == outcome.message
    assert outcome.detail == f"{text}\nerror: unknown model"


def test_model_hint_without_stderr_is_the_whole_detail() -> None:
    outcome = map_session_to_outcome(session("apply", exit_code=1, model=MODEL))
    assert outcome.detail == hint(MODEL, "the project config")
    assert outcome.message.startswith(hint(MODEL, "the project config") + " Apply agent failed")


@pytest.mark.parametrize(
    "evidence",
    [
        pytest.param(session("apply", exit_code=1), id="no-explicit-model"),
        pytest.param(
            session("apply", exit_code=None, signal="SIGKILL", model=MODEL), id="signal-kill"
        ),
        pytest.param(
            session("apply", exit_code=137, signal="SIGKILL", model=MODEL),
            id="signal-with-exit-code",
        ),
        pytest.param(
            session("apply", exit_code=1, entries=[PROGRESS], model=MODEL),
            id="after-journal-progress",
        ),
        pytest.param(session("apply", exit_code=None, model=MODEL), id="no-exit-status"),
    ],
)
def test_model_hint_is_suppressed(evidence: SessionEvidence) -> None:
    outcome = map_session_to_outcome(replace(evidence, stderr="x"))
    assert outcome.state == "failed"
    assert "model id is invalid" not in outcome.message
    assert "model" not in (outcome.detail or "")
    assert outcome.detail == "x"
    assert outcome.message.endswith("without reporting completion; stderr (last lines):\nx")


@pytest.mark.parametrize(
    "evidence",
    [
        pytest.param(session("apply", model=MODEL), id="zero-exit-no-report"),
        pytest.param(session("apply", exit_code=1, entries=[BLOCKER], model=MODEL), id="blocker"),
        pytest.param(
            session("apply", exit_code=1, entries=[done()], model=MODEL, **APPLIED_NOW),
            id="completion-then-crash",
        ),
    ],
)
def test_model_hint_only_on_the_bare_failure_branch(evidence: SessionEvidence) -> None:
    outcome = map_session_to_outcome(evidence)
    assert outcome.state == "blocked"
    assert "model id" not in outcome.message
    assert outcome.detail is None


# ---------------------------------------------------------------- stderr tail


def test_failure_message_carries_only_the_last_stderr_lines() -> None:
    lines = [f"line {i}" for i in range(STDERR_TAIL_LINES + 5)]
    outcome = map_session_to_outcome(session("apply", exit_code=1, stderr="\n".join(lines)))
    tail = "\n".join(lines[-STDERR_TAIL_LINES:])
    assert outcome.message.endswith(f"; stderr (last lines):\n{tail}")
    assert "line 4\n" not in outcome.message
    assert outcome.detail == tail


@pytest.mark.parametrize(
    ("stderr", "lines", "tail"),
    [
        pytest.param("", 20, "", id="empty"),
        pytest.param("\n\n  \n", 20, "", id="blank"),
        pytest.param("a\nb\n", 20, "a\nb", id="trailing-newline-dropped"),
        pytest.param("a\nb\nc", 2, "b\nc", id="last-n"),
        pytest.param("  indented\n", 20, "  indented", id="leading-space-kept"),
    ],
)
def test_stderr_tail(stderr: str, lines: int, tail: str) -> None:
    assert stderr_tail(stderr, lines) == tail


@pytest.mark.parametrize(
    ("exit_code", "signal", "words"),
    [
        pytest.param(0, None, "exit 0", id="zero"),
        pytest.param(3, None, "exit 3", id="code"),
        pytest.param(None, "SIGKILL", "signal SIGKILL", id="signal"),
        pytest.param(137, "SIGKILL", "signal SIGKILL", id="signal-wins"),
    ],
)
def test_describe_exit(exit_code: int | None, signal: str | None, words: str) -> None:
    assert describe_exit(exit_code, signal) == words


@pytest.mark.parametrize(
    ("state", "public"),
    [
        pytest.param("failed", "blocked", id="failed-surfaces-as-blocked"),
        pytest.param("blocked", "blocked", id="blocked"),
        pytest.param("advanced", "advanced", id="advanced"),
        pytest.param("awaiting-approval", "awaiting-approval", id="awaiting-approval"),
    ],
)
def test_public_state(state: Any, public: str) -> None:
    assert EngineStepOutcome(state=state, message="m").public_state == public


@pytest.mark.parametrize("gate", get_args(Gate))
@pytest.mark.parametrize("transition", ["propose", "apply", "verify", "red", "fix"])
def test_every_change_transition_parks_only_when_the_gate_says_so(
    gate: Gate, transition: StepKind
) -> None:
    fields: dict[str, Any] = {"before": PLAN_2, "after": APPLIED}
    entries: Sequence[JournalEntry] = [done("Ready for archive")]
    outcome = map_session_to_outcome(session(transition, entries=entries, gate=gate, **fields))
    parks = gate == "every-phase" or (gate == "after-propose" and transition == "propose")
    assert outcome.state == ("awaiting-approval" if parks else "advanced")
