"""The converge gate for a plain batch's change steps: the card vet's rules on the work line.

`batch_vetter(work)` is what the surfaces inject as `EngineDeps.work_vet`
(app/engine/batch_vet_seam.py). For each change step of a plain batch it holds the step's work — the
snapshot `parent..commit` on the batch's work line — to the rules a card step is held to
(app/cycle/card_vet.py, `app.domain.review.guarded.STAGE_POLICY`):

    propose        may not touch a protected file (an existing test, the runner's configuration,
                   a dependency manifest, `.pair/config.yaml`) nor write tests
    apply / fix    the same guard (new tests allowed); the tests run before and after, and a new
                   failure, or a test that passed and went missing or skipped, is refused
    red            the same guard; its tests must newly fail (there is nothing sealed in a
                   plain batch: sealing is the card cycle's)
    verify-red     changes nothing: a snapshot with any file in it is refused (the red
                   contract verifier is read-only, as in a card)
    verify, …      not vetted (a reviewer's and a decomposition's files are not code the gate
                   is about)

`tests.mayModifyTests` / `tests.mayModifyManifests` lift the guard as for a card. A refused step
is discarded — the checkout and the work line go back to where the step started, so the refused
work is neither carried by a PR group nor seen by the next agent — and its outcome becomes
`sent-back` naming each file or test; after `MAX_SENDBACKS` refusals in a row it is `failed`
(a blocked park `pairbot batch retry` clears). With no `tests.command` an accepted apply / red /
fix says "no test gate applies" at the start of its message, as a card step does.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from typing import Any

from app.cycle.card_vet import send_back, tree_listing
from app.cycle.testrun import run_tests
from app.cycle.work_line_git import GitWorkTree
from app.domain.review.guarded import (
    ChangedPath,
    guarded_violations,
    normalize_path,
    parse_name_status,
    stage_policy,
)
from app.domain.review.testgate import detect_test_commands, no_gate_note
from app.domain.review.testsets import NoTestCommand, TestRun, iteration_verdict
from app.engine import jsonl
from app.engine.batch_vet_seam import VettedWork, WorkVet, WorkVetFactory, WorkVetRequest
from app.engine.outcome import EngineStepOutcome
from app.engine.work_line import Snapshot
from hosts.git import run_git


def batch_vetter(work: GitWorkTree) -> WorkVetFactory:
    """The `EngineDeps.work_vet` of a checkout whose work line `work` keeps."""

    def factory(request: WorkVetRequest) -> WorkVet:
        return BatchVet(request, work)

    return factory


def _changed_by_verifier(changed: list[ChangedPath]) -> str:
    paths = ", ".join(c.path for c in changed)
    return f"the red verifier must not change the tree; it changed {paths}"


def sendbacks_in_a_row(records: list[dict[str, Any]], key: str) -> int:
    """How many of `key`'s last outcomes, counting back, were `sent-back`. Pure."""
    count = 0
    for record in reversed(records):
        if record.get("kind") != "outcome" or record.get("key") != key:
            continue
        if record.get("state") != "sent-back":
            break
        count += 1
    return count


@dataclass
class BatchVet:
    """One plain batch step's vet: the tests before, then the judgement of its snapshot."""

    request: WorkVetRequest
    work: GitWorkTree
    before_run: TestRun | None = None

    def _tests(self) -> TestRun:
        tests = self.request.tests
        request = self.request
        return run_tests(request.launcher, request.root, tests.command, tests.junit, request.env)

    async def before(self) -> None:
        if stage_policy(self.request.transition).runs_tests:
            self.before_run = await asyncio.to_thread(self._tests)

    async def vet(self, outcome: EngineStepOutcome, snap: Snapshot) -> VettedWork:
        request = self.request
        policy = stage_policy(request.transition)
        read_only = request.transition == "verify-red"
        if snap.parent is None or not (policy.guarded or policy.runs_tests or read_only):
            return VettedWork(outcome, keep=True)
        tests = request.tests
        junit = normalize_path(tests.junit) if tests.junit else None
        diff = run_git(
            ["diff", "--name-status", "-z", "-M", snap.parent, snap.commit],
            cwd=request.root,
            timeout_s=120,
        ).stdout
        # A report the agent's own test run left is not work the gate judges (a card step's
        # commit leaves it out the same way); it is never read as the engine's.
        changed = [c for c in parse_name_status(diff) if normalize_path(c.path) != junit]
        if read_only:
            problems = [_changed_by_verifier(changed)] if changed else []
        else:
            problems = [
                violation.reason
                for violation in guarded_violations(
                    changed,
                    may_modify=tests.may_modify_tests,
                    may_modify_manifests=tests.may_modify_manifests,
                    transition=request.transition,
                )
            ]
        verdict = None
        if policy.runs_tests and not problems:
            after = await asyncio.to_thread(self._tests)
            verdict = iteration_verdict(
                request.transition,  # type: ignore[arg-type]  # narrowed by the stage policy
                self.before_run or NoTestCommand(),
                after,
            )
            if not verdict.accepted:
                problems.append(verdict.reason)
        if problems:
            await self.work.discard(request.branch, snap)
            return VettedWork(self._send_back(outcome, problems), keep=False)
        if verdict is not None and not verdict.checked:
            note = no_gate_note(detect_test_commands(*tree_listing(request.root, snap.commit)))
            outcome = replace(outcome, message=f"{note}. {outcome.message}".strip())
        return VettedWork(outcome, keep=True)

    def _send_back(self, outcome: EngineStepOutcome, problems: list[str]) -> EngineStepOutcome:
        request = self.request
        earlier = sendbacks_in_a_row(jsonl.read_records(request.journal), request.change)
        remedy = (
            f"Run `pairbot batch retry {request.batch} --change {request.change}` "
            "(or `batch feedback`) to try again."
        )
        return send_back(outcome, request.transition, problems, earlier, remedy)
