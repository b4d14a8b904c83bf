"""Transition derivation and the single journal-aware done-rule.

`read_change_disk` reads a change's directory into `ChangeDisk` (the only I/O here); everything
else is pure. `derive_change` is the one place that says what a change needs next and whether
it is done; status, selection and `run_step` all ask it, so they cannot disagree.

    on disk / in the journal                          next         status
    archived                                          —            done
    feedback recorded after the last outcome          its step     in-progress
    no change directory                               propose      ready
    directory but no plan.md                          propose      in-progress
    plan.md with unchecked tasks                      apply        in-progress
    all checked, no accepted verify since the last
      propose/apply                                   verify       awaiting-verify
    last verify converged                             —            done
    last verify blocks, fix accepted since            verify       awaiting-verify (re-review)
    last verify blocks, red accepted since, no
      verify-red after it                             verify-red   in-progress
    last verify blocks, the verify-red after the
      last red accepted its contract                  fix          in-progress
    last verify blocks, that verify-red refused it    red          in-progress (red again)
    last verify blocks, fix rounds left               red          in-progress
    last verify blocks, maxFixRounds spent            —            failed-fix

"Accepted" means the engine's own outcome entry recorded the transition as corroborated
(advanced or awaiting-approval), not merely that an agent claimed completion.

`verify-red` is the red contract verifier (role `redVerifier`): an independent, read-only agent
that accepts or refuses red's contract before anything is sealed; its verdict is recorded as
the outcome's `converged`. The third refusal in a row parks the change
(`app.engine.change_step`, `app.domain.review.red_verdict`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from app.domain.card.plan import count_tasks
from app.engine.journal import KeyHistory

Transition = Literal["propose", "apply", "verify", "red", "verify-red", "fix"]
TRANSITIONS: tuple[Transition, ...] = ("propose", "apply", "verify", "red", "verify-red", "fix")
ChangeStatus = Literal[
    "ready",
    "in-progress",
    "awaiting-verify",
    "done",
    "failed-fix",
    "waiting",
    "blocked",
    "needs-input",
    "awaiting-approval",
    "awaiting-human",
]
RUNNABLE_STATUSES: frozenset[str] = frozenset({"ready", "in-progress", "awaiting-verify"})


@dataclass(frozen=True)
class ChangeDisk:
    """What a change's directory says: does it exist, has a plan, how many tasks are checked."""

    exists: bool = False
    has_plan: bool = False
    tasks_total: int = 0
    tasks_complete: int = 0
    archived: bool = False

    @property
    def applied(self) -> bool:
        """Every task checked (and there is one), or archived."""
        return self.archived or (self.tasks_total > 0 and self.tasks_complete == self.tasks_total)


def change_dir(root: Path, change: str) -> Path:
    """`.pair/changes/<change>/`."""
    return root / ".pair" / "changes" / change


def read_change_disk(root: Path, change: str) -> ChangeDisk:
    """Snapshot a change's directory (archived changes live in `.pair/changes/archive/`)."""
    if (root / ".pair" / "changes" / "archive" / change).is_dir():
        return ChangeDisk(exists=True, has_plan=True, archived=True)
    directory = change_dir(root, change)
    if not directory.is_dir():
        return ChangeDisk()
    plan = directory / "plan.md"
    if not plan.is_file():
        return ChangeDisk(exists=True)
    tasks = count_tasks(plan.read_text(encoding="utf-8", errors="replace"))
    return ChangeDisk(
        exists=True, has_plan=True, tasks_total=tasks.total, tasks_complete=tasks.complete
    )


@dataclass(frozen=True)
class Derivation:
    """A change's derived status and the transition it needs next (None when nothing runs)."""

    status: ChangeStatus
    next: Transition | None
    fix_rounds: int = 0
    review_round: int = 0  # the verify round the next verify would be


def _requested_rerun(history: KeyHistory) -> Transition | None:
    if history.feedback is None:
        return None
    return next((t for t in TRANSITIONS if t == history.feedback[0]), None)


def derive_change(disk: ChangeDisk, history: KeyHistory, max_fix_rounds: int) -> Derivation:
    """The single derivation of a change's next transition and status (see the module table)."""
    fix_rounds = history.accepted_count("fix")
    review_round = history.accepted_count("verify") + 1

    def result(status: ChangeStatus, nxt: Transition | None) -> Derivation:
        return Derivation(status, nxt, fix_rounds=fix_rounds, review_round=review_round)

    if disk.archived:
        return result("done", None)
    requested = _requested_rerun(history)
    if requested is not None:
        # A human asked for a step again with feedback: that request is the next step.
        return result("in-progress", requested)
    if not disk.exists:
        return result("ready" if not history.accepted else "in-progress", "propose")
    if not disk.has_plan:
        return result("in-progress", "propose")
    if not disk.applied:
        return result("in-progress", "apply")

    last_verify = next(
        (
            i
            for i in range(len(history.accepted) - 1, -1, -1)
            if history.accepted[i].transition == "verify"
        ),
        None,
    )
    if last_verify is None:
        return result("awaiting-verify", "verify")
    since = {a.transition for a in history.accepted[last_verify + 1 :]}
    if since & {"propose", "apply"}:
        return result("awaiting-verify", "verify")
    if history.accepted[last_verify].converged is not False:
        # Converged (or a legacy verify without a recorded verdict): the one definition of done.
        return result("done", None)
    if "fix" in since:
        return result("awaiting-verify", "verify")
    after = history.accepted[last_verify + 1 :]
    reds = [i for i, a in enumerate(after) if a.transition == "red"]
    if reds:
        checked = [a for a in after[reds[-1] + 1 :] if a.transition == "verify-red"]
        if not checked:
            return result("in-progress", "verify-red")
        if checked[-1].converged is not False:
            return result("in-progress", "fix")
        return result("in-progress", "red")  # the verifier refused the contract: red again
    if fix_rounds >= max_fix_rounds:
        return result("failed-fix", None)
    return result("in-progress", "red")
