"""Session-to-outcome mapping: what one agent session means for the step (docs/engine.md).

Pure. The branch order is the contract:

1. a reported blocker or needs-input                       → blocked
2. non-zero exit (or a signal) without a completion        → failed (stderr tail; model hint)
3. a completion, corroborated against the disk:
   a. the disk (or the verdict) disagrees with the claim   → blocked "Reported complete but …"
                                                              (failed for verify: a review that
                                                              cannot be trusted is a failure)
   b. completion but a non-zero exit or a signal           → blocked (fail closed)
   c. the approval gate parks this transition              → awaiting-approval
   d. otherwise                                            → advanced
4. zero exit without a completion                          → blocked (evidence cited, no advance)

The model-failure hint is added only when the stage's agent named an explicit model, the agent
wrote zero journal entries, and it exited with a real non-zero code (not a signal): the
signature of an agent CLI rejecting its argv. It never interprets stderr. A failure's message
(and so its blocker, park reason and journal entry) says the vendor's reason on its first line,
when the CLI reported one in its JSON stream (`SessionEvidence.reason`), and ends with the last
lines of stderr; `detail` holds the reason and the hint above the same tail for JSON consumers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from app.domain.review.verdict import Verdict, has_verdict
from app.engine.gates import Gate, StepKind, parks_for_approval
from app.engine.journal import JournalEntry
from app.engine.transition import ChangeDisk

# `sent-back`: the agent finished but the engine refused the result (new test failures, a
# sealed test edited); nothing is parked and the next step runs the transition again.
OutcomeState = Literal["advanced", "blocked", "awaiting-approval", "failed", "sent-back"]
StepState = Literal["advanced", "blocked", "awaiting-approval", "nothing-ready", "sent-back"]
STDERR_TAIL_LINES = 20


@dataclass(frozen=True)
class ModelHintContext:
    """Which stage, agent and explicit model ran, and the scope that supplied the model."""

    stage: str
    agent: str
    model: str
    scope: str


@dataclass(frozen=True)
class SessionEvidence:
    """Everything one session left behind."""

    transition: StepKind
    entries: Sequence[JournalEntry]  # this session's reports for the step's key
    exit_code: int | None
    signal: str | None
    stderr: str = ""
    # The vendor's own one-line error from the agent's JSON stream (agent_failures.vendor_reason)
    reason: str | None = None
    before: ChangeDisk | None = None
    after: ChangeDisk | None = None
    gate: Gate = "voluntary"
    model: ModelHintContext | None = None
    verdict: Verdict | None = None  # verify: the verdict read from the completion
    verdict_problems: Sequence[str] = ()  # verify: finding-id problems (fail closed)
    decomposed: bool | None = None  # decompose: the phase now lists changes


@dataclass(frozen=True)
class EngineStepOutcome:
    """The engine's conclusion about one step; `failed` surfaces as `blocked`."""

    state: OutcomeState
    message: str
    blocker: str | None = None
    approval_request: str | None = None
    needs_input: bool = False
    detail: str | None = None

    @property
    def public_state(self) -> StepState:
        """`failed` is internal: a crashed agent keeps the batch resumable as blocked."""
        return "blocked" if self.state == "failed" else self.state


def describe_exit(exit_code: int | None, signal: str | None) -> str:
    """'exit 3', 'signal SIGKILL' — how the process ended, in words."""
    if signal is not None:
        return f"signal {signal}"
    return f"exit {exit_code}"


def stderr_tail(stderr: str, lines: int = STDERR_TAIL_LINES) -> str:
    """The last lines of stderr, for a failure message."""
    return "\n".join(stderr.rstrip().splitlines()[-lines:])


def _title(transition: str) -> str:
    return transition[:1].upper() + transition[1:]


def _model_hint(ev: SessionEvidence) -> str | None:
    if ev.model is None or ev.entries or ev.signal is not None or ev.exit_code in (None, 0):
        return None
    where = "the batch manifest" if ev.model.scope == "manifest" else "the project config"
    if ev.model.scope == "env":
        where = "the environment"
    return (
        f"The {ev.model.stage} stage ran agent {ev.model.agent!r} with model {ev.model.model!r} "
        f"(set in {where}) and it exited before reporting anything: if this model id is "
        f"invalid, fix it in {where}."
    )


def _mismatch(ev: SessionEvidence, completion: JournalEntry) -> str | None:
    before, after = ev.before or ChangeDisk(), ev.after or ChangeDisk()
    if ev.transition == "propose":
        if not (after.exists and after.has_plan):
            return "propose must leave the change directory with a plan.md"
    elif ev.transition == "apply":
        if not (after.applied or after.tasks_complete > before.tasks_complete):
            return (
                f"apply checked no task this session ({after.tasks_complete}/"
                f"{after.tasks_total} checked, {before.tasks_complete} before)"
            )
    elif ev.transition == "verify":
        if not after.applied:
            return "verify ran on a change whose tasks are not all checked"
        if ev.verdict is None and not has_verdict(completion.message):
            return (
                "the verify completion carries no verdict (expected 'Ready for archive', "
                "'N critical issue(s) found', or a --findings file)"
            )
        if ev.verdict_problems:
            return "verification failed closed: " + "; ".join(ev.verdict_problems)
    elif ev.transition == "verify-red":
        if ev.verdict_problems or ev.verdict is None:
            return "; ".join(ev.verdict_problems) or "the red verifier reported no verdict"
    elif ev.transition == "decompose" and ev.decomposed is False:
        return "the phase still lists no changes in batch.yaml"
    return None


def map_session_to_outcome(ev: SessionEvidence) -> EngineStepOutcome:
    """Map one session to the step's outcome, in the documented branch order."""
    # 1. a reported blocker or needs-input
    for entry in reversed(ev.entries):
        if entry.kind in ("blocker", "needs-input"):
            needs_input = entry.kind == "needs-input"
            label = "Needs input" if needs_input else "Blocked"
            return EngineStepOutcome(
                state="blocked",
                message=f"{label}: {entry.message}",
                blocker=entry.message,
                needs_input=needs_input,
            )
    completion = next((e for e in reversed(ev.entries) if e.kind == "completion"), None)
    crashed = ev.signal is not None or ev.exit_code != 0
    exit_words = describe_exit(ev.exit_code, ev.signal)
    # 2. non-zero exit without a completion
    if completion is None and crashed:
        tail = stderr_tail(ev.stderr)
        hint = _model_hint(ev)
        message = (
            f"{_title(ev.transition)} agent failed ({exit_words}) without reporting completion"
        )
        if ev.reason:
            # The vendor's reason is on the first line: a card or a log shows that line.
            message = f"{message}: {ev.reason}"
        if hint:
            message = f"{hint} {message}"
        if tail:
            # The public result carries only message/blocker: the tail must travel in them.
            message = f"{message}; stderr (last lines):\n{tail}"
        detail = "\n".join(part for part in (ev.reason, hint, tail) if part) or None
        return EngineStepOutcome(state="failed", message=message, blocker=message, detail=detail)
    if completion is not None:
        # 3a. corroborate the claim against the disk
        reason = _mismatch(ev, completion)
        if reason is not None:
            blocker = f"Reported complete but disk disagrees: {reason}"
            if ev.transition == "verify-red":
                # No usable verdict is a refusal of the step, never an accepted contract.
                blocker = f"verify-red gave no usable contract verdict: {reason}"
            # A verify whose verdict cannot be trusted (none, dropped or invented finding ids)
            # failed: the card shows `failed-verify`, not an agent's blocker.
            state: OutcomeState = (
                "failed" if ev.transition in ("verify", "verify-red") else "blocked"
            )
            return EngineStepOutcome(state=state, message=blocker, blocker=blocker)
        # 3b. completion + crash: fail closed
        if crashed:
            blocker = (
                f"Agent reported completion but exited {exit_words} — the reported work may be "
                "incomplete; review and resume."
            )
            return EngineStepOutcome(state="blocked", message=blocker, blocker=blocker)
        # 3c. approval park
        if parks_for_approval(ev.gate, ev.transition):
            request = f"{_title(ev.transition)} complete; awaiting approval."
            return EngineStepOutcome(
                state="awaiting-approval", message=request, approval_request=request
            )
        # 3d. advanced
        return EngineStepOutcome(
            state="advanced",
            message=completion.message or f"{_title(ev.transition)} complete.",
        )
    # 4. zero exit, nothing reported
    evidence = []
    before, after = ev.before or ChangeDisk(), ev.after or ChangeDisk()
    if after.has_plan and not before.has_plan:
        evidence.append("plan.md appeared")
    if after.tasks_complete > before.tasks_complete:
        evidence.append(f"tasks advanced {before.tasks_complete}→{after.tasks_complete}")
    seen = f" (on disk: {', '.join(evidence)})" if evidence else ""
    blocker = (
        f"{_title(ev.transition)} agent exited 0 without reporting completion{seen}; "
        "unreported work is never advanced — review, then retry or report"
    )
    return EngineStepOutcome(state="blocked", message=blocker, blocker=blocker)
