"""The engine's check of an agent's result before it is recorded, and the push that follows.

`Vetter.measure_before()` runs the tests on the tree the step starts from; `Vetter.vet` is the
hook `run_change_step` calls with an accepted outcome, before the outcome is journaled:

    propose        stamp the plan's metadata (`app.cycle.propose_stamp`), commit the plan;
                   refuse touching protected files or writing tests; push the branch (no PR
                   yet: nothing to review)
    apply / fix    commit; refuse touching protected files — existing and sealed tests, the
                   test runner's configuration, dependency manifests (`app.domain.review.guarded`,
                   unless `tests.mayModifyTests` / `tests.mayModifyManifests` allows the path);
                   run the tests and refuse new failures and passing tests that went missing
                   or skipped (fix: every sealed red test must pass); then push
    red            commit; the same guard (a red-spec revision may rewrite its own seal group,
                   a red after a refused contract its own round's tests); the tests red wrote
                   must fail; its contract is held to the findings (sent back) and the sealer
                   refuses a narrowed fixScope (failed-seal); push; the would-be seal is
                   journaled (`red-contract`, `app.cycle.sealing`)
    verify-red     the red contract verifier changes nothing (a result that changed a file is
                   sent back), judges every contract row; accepted: the seal is journaled;
                   refused: red again with its reasons, the third refusal in a row
                   `failed-contract` (`app.cycle.red_verifier`)
    verify         the reviewer changes nothing: its edits are discarded; the reviewed head is
                   the pushed head the step started from. Its findings are held to what only
                   the cycle knows (a verification that fails any of these fails closed):
                   a history-rewrite finding cannot be closed on the head it was raised on;
                   the card's required findings are re-proved on this exact head; every
                   regression-risk ledger event the review implies is accepted by the one
                   authority (`app.domain.review.regression`), then journaled before the outcome
    fix            also held to the sealed fixScope (sent back); records its remediation batch
                   (`fix-<round>`, the head it produced) and a repair of every active
                   regression risk

Which stage is guarded, runs the tests, may add tests and seals is the table
`app.domain.review.guarded.STAGE_POLICY`. With no `tests.command`, an accepted apply / red / fix
says so at the start of its message ("no test gate applies", with the runner the project's files
point to: `app.domain.review.testgate`), so the step history never shows an unchecked step as
checked.

A refused result is reset away (the branch stays at the step's start, nothing is pushed) and
the outcome becomes `sent-back`, naming each file or test, so the next step runs the transition
again with the reason in its prompt; after `MAX_SENDBACKS` in a row it is `failed` (a blocked
park a maintainer clears with `/pair retry`). The push happens before the outcome is recorded:
a run killed in between re-runs the step on the pushed tip, and nothing of an accepted result
lives only on a runner that is gone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from app.cycle import worktree as wt
from app.cycle.propose_stamp import write_stamp
from app.cycle.red_verifier import contract_entry, judge_verdict, red_since
from app.cycle.sealing import (
    RedJudgement,
    contract_text,
    judge_red,
    scope_problems,
    unsealed_for,
)
from app.cycle.state import CardState, last_review_findings, rewrite_escalation, risk_ledger
from app.cycle.testrun import run_tests
from app.domain.review.guarded import guarded_violations, stage_policy
from app.domain.review.regression import ReviewFacts, RiskEvent, plan_repairs, plan_review
from app.domain.review.routing import Routing
from app.domain.review.seal import Seal
from app.domain.review.testgate import detect_test_commands, no_gate_note
from app.domain.review.testsets import (
    IterationVerdict,
    JUnitResult,
    NoTestCommand,
    TestRun,
    iteration_verdict,
)
from app.domain.review.verdict import (
    ACTIVE_TRANSITIONS,
    FindingsReport,
    required_problems,
    rewrite_closure_problems,
)
from app.engine import jsonl
from app.engine.outcome import EngineStepOutcome
from app.engine.transition import Transition
from app.settings import ResolvedSettings
from hosts.models import Card

MAX_SENDBACKS = 3


@dataclass
class Vetter:
    """One step's vetting: what the tests said before, and what the vet decided."""

    state: CardState
    tree: wt.Worktree
    transition: Transition
    card: Card
    base: str
    settings: ResolvedSettings
    before: TestRun = field(default_factory=NoTestCommand)
    after: TestRun = field(default_factory=NoTestCommand)
    verdict: IterationVerdict | None = None
    pushed: str | None = None
    refused: str | None = None
    routing: Routing | None = None  # where the review sent the card (green-fix, red-spec, …)

    def _tests(self) -> TestRun:
        tests = self.state.project.tests
        deps = self.state.env.deps
        return run_tests(deps.launcher, self.tree.path, tests.command, tests.junit, deps.env)

    def measure_before(self) -> None:
        """The failing set the iteration is judged against (apply, red and fix only).

        `red` is judged against the reviewed head — the code its findings are about — not the
        branch tip: a red killed after pushing its tests, before its outcome was recorded,
        left them on the tip, and measured there they would no longer "newly fail".
        """
        if not stage_policy(self.transition).runs_tests:
            return
        reviewed = self.state.rec.reviewed_head
        if self.transition == "red" and reviewed is not None and reviewed != self.tree.start:
            path = self.tree.path
            wt.git(path, "checkout", "--quiet", "--force", "--detach", reviewed)
            try:
                self.before = self._tests()
            finally:
                wt.git(
                    path, "checkout", "--quiet", "--force", "-B", self.tree.branch, self.tree.start
                )
                wt.reset(path, self.tree.start)
            return
        self.before = self._tests()

    async def vet(self, outcome: EngineStepOutcome) -> EngineStepOutcome:
        """Check, commit and push an accepted result; or send it back, naming why."""
        path, start = self.tree.path, self.tree.start
        if self.transition == "verify":
            wt.reset(path, start)  # a reviewer's edits are not part of the PR
            return self._judge_review(outcome)
        if self.transition == "verify-red":
            return self._judge_verifier(outcome)
        tests = self.state.project.tests
        junit = tests.junit
        if self.transition == "propose":  # the plan's metadata, committed with it
            records = jsonl.read_records(self.state.locus.journal)
            write_stamp(path, records, self.state.key, self.state.rec.run_id)
        end = wt.commit_all(
            path,
            f"pair: {self.transition} for card #{self.card.number}",
            exclude=[junit] if junit else [],
        )
        policy = stage_policy(self.transition)
        rec = self.state.rec
        # A red after a refused contract revises its own round's tests: measured from the
        # reviewed head, they are new files, not existing tests.
        since = red_since(self.state, self.tree) if self.transition == "red" else start
        problems = [
            violation.reason
            for violation in guarded_violations(
                wt.changed_paths(path, since, end),
                sealed_paths=unsealed_for(self.state, self.routing),
                may_modify=tests.may_modify_tests,
                may_modify_manifests=tests.may_modify_manifests,
                junit=junit,
                transition=self.transition,
            )
        ]
        if policy.runs_tests and not problems:
            self.after = await asyncio.to_thread(self._tests)  # off the loop: it may be long
            self.verdict = iteration_verdict(
                self.transition,  # type: ignore[arg-type]  # narrowed by the stage policy
                self.before,
                self.after,
                rec.sealed_ids,
            )
            if not self.verdict.accepted:
                problems.append(self.verdict.reason)
        judged = RedJudgement() if problems else self._contract(end)
        problems += judged.problems
        if judged.refused is not None:  # the sealer refused: no retry makes it sealable
            wt.reset(path, start)
            self.refused = judged.refused
            return replace(outcome, state="failed", message=judged.refused, blocker=judged.refused)
        if problems:
            wt.reset(path, start)
            return self._send_back(outcome, problems)
        if end != start or self.state.rec.pushed != end:
            self.pushed = await self.state.env.hosts.code.push_branch(path, self.tree.branch)
            self.state.pub.record("pushed", sha=self.pushed, transition=self.transition)
            self.state.rec.pushed = self.pushed
        if self.transition == "fix":
            self._record_remediation(self.pushed or end)
        if policy.seals and judged.seal is not None:
            self._record_red_contract(judged.seal)
        if self.verdict is not None and not self.verdict.checked:
            # Never silently nothing: the step's message (its row in the tracking comment)
            # says that no test gate held it, and what would make one.
            note = no_gate_note(detect_test_commands(*tree_listing(path, end)))
            outcome = replace(outcome, message=f"{note}. {outcome.message}".strip())
        return outcome

    def _record_red_contract(self, seal: Seal) -> None:
        """Red's would-be seal, for the red contract verifier: sealed once it accepts. Only the
        files red created (and a revised group's own): an existing file it may have touched
        under an allowance is not its test, and sealing it would bar fix from the code under
        test."""
        after = self.after
        entry = contract_entry(
            seal,
            round_=self.state.history.accepted_count("red") + 1,
            messages=after.messages if isinstance(after, JUnitResult) else {},
            contract=contract_text(self.tree.path, self.state.key),
        )
        self.state.pub.record("red-contract", **entry)

    def _contract(self, end: str) -> RedJudgement:
        """What the contract path holds an otherwise accepted result to (`app.cycle.sealing`):
        a fix, the sealed fixScope; a red, the red verifier and the sealer on its commit."""
        if self.transition == "fix":
            return RedJudgement(
                problems=scope_problems(self.state, self.tree.path, self.tree.start, end)
            )
        if self.transition != "red" or self.verdict is None:
            return RedJudgement()
        return self._judge_red(end, self.verdict)

    def _judge_red(self, end: str, verdict: IterationVerdict) -> RedJudgement:
        """The red verifier and the sealer on red's commit (`app.cycle.sealing`)."""
        return judge_red(
            self.state,
            self.tree.path,
            routing=self.routing,
            base=self.base,
            start=self.tree.start,
            end=end,
            failing=frozenset(verdict.seal),
            errored=self.after.errored if isinstance(self.after, JUnitResult) else frozenset(),
        )

    def _judge_verifier(self, outcome: EngineStepOutcome) -> EngineStepOutcome:
        """The red contract verifier's result (`app.cycle.red_verifier`): sent back when it
        changed the tree or its verdict does not fit the contract; an accepted contract is
        sealed; a refused one sends the card to red again (the engine parks the third in a
        row: `failed-contract`)."""
        judged = judge_verdict(self.state, self.tree)
        if judged.problems:
            return self._send_back(outcome, list(judged.problems))
        if judged.sealed is not None:
            self.state.pub.record("sealed", **judged.sealed)
            return replace(outcome, message=f"contract accepted and sealed: {outcome.message}")
        reasons = "; ".join(judged.refused)
        return replace(outcome, message=f"contract refused ({reasons}): red runs again")

    def _reported(self) -> FindingsReport | None:
        """The findings this verify reported (its completion, the newest for the card)."""
        for record in reversed(jsonl.read_records(self.state.locus.journal)):
            if record.get("kind") == "completion" and record.get("key") == self.state.key:
                raw = record.get("findings")
                return FindingsReport.model_validate(raw) if isinstance(raw, Mapping) else None
        return None  # pragma: no cover - an accepted verify always has its completion

    def _judge_review(self, outcome: EngineStepOutcome) -> EngineStepOutcome:
        report = self._reported()
        if report is None:
            return outcome  # a verdict line only: nothing carried, nothing to re-check
        state, head = self.state, self.tree.start
        rec = state.rec
        problems = rewrite_closure_problems(
            rewrite_escalation(state), report, same_head=rec.reviewed_head == head
        )
        required = state.project.review.required_for(state.card)
        problems += required_problems([(r.id, r.observed_head) for r in required], report, head)
        facts = ReviewFacts(
            subject=state.key,
            run=rec.run_id or "run",
            head=head,
            remediations=rec.remediations,
            reviewed_heads=frozenset(rec.reviewed_heads),
            remediated=rec.remediated,
        )
        planned, more = plan_review(risk_ledger(rec), report, facts)
        problems += more
        if problems:
            message = "verification failed closed: " + "; ".join(problems)
            return replace(outcome, state="failed", message=message, blocker=message)
        for event in planned:
            self._record_risk(event)
        return outcome

    def _record_risk(self, event: RiskEvent) -> None:
        data = event.to_json()
        data.pop("event")
        self.state.pub.record("risk", **data)

    def _record_remediation(self, head: str) -> None:
        """The batch this fix is, the head it produced and what it remediated; every active
        regression risk is repaired by it (the authority checks each)."""
        state = self.state
        batch = f"fix-{state.history.accepted_count('fix') + 1}"
        findings = [
            str(f.get("id"))
            for f in last_review_findings(state.history)
            if f.get("blocking") and f.get("transition", "open") in ACTIVE_TRANSITIONS
        ]
        state.pub.record("remediation", batch=batch, head=head, findings=findings)
        run = state.rec.run_id or "run"
        ledger = risk_ledger(state.rec)
        for event in plan_repairs(ledger, subject=state.key, run=run, repair=batch, head=head):
            self._record_risk(event)

    def _send_back(self, outcome: EngineStepOutcome, problems: list[str]) -> EngineStepOutcome:
        self.refused = "; ".join(problems)
        remedy = "Comment `/pair retry` (or `/pair feedback <text>`) to try again."
        return send_back(outcome, self.transition, problems, self.state.rec.sendbacks, remedy)


def send_back(
    outcome: EngineStepOutcome,
    transition: str,
    problems: list[str],
    earlier: int,
    remedy: str,
) -> EngineStepOutcome:
    """A refused step: `sent-back` naming each problem, or `failed` (with `remedy`, how a
    person tries again) when `earlier` refusals in a row make this one the last allowed."""
    reason = "; ".join(problems)
    if earlier + 1 >= MAX_SENDBACKS:
        message = (
            f"{transition} was refused {MAX_SENDBACKS} times in a row; last: {reason}. {remedy}"
        )
        return replace(outcome, state="failed", message=message, blocker=message)
    return replace(
        outcome,
        state="sent-back",
        message=f"{transition} sent back: {reason}",
        approval_request=None,
    )


def tree_listing(path: Path, commit: str) -> tuple[list[str], str | None]:
    """The files of `commit` and the root `package.json`'s text, for the test-command detection."""
    files = wt.git(path, "ls-tree", "-r", "-z", "--name-only", commit, strip=False)
    names = [name for name in files.split("\0") if name]
    package = path / "package.json"
    text = package.read_text(errors="replace") if "package.json" in names else None
    return names, text
