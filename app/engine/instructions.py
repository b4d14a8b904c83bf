"""The instructions an agent reads on stdin for one step.

Context first (batch, phase goal and success, proof-of-work, the change's files), then the
single task of this transition and its definition of done, then how to report, then the
arguments: the caller's guidance and any recorded answers or feedback, passed as quoted data
the agent works from, never as instructions that replace its task.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.engine.manifest import Phase

_TASKS: Mapping[str, str] = {
    "propose": (
        "Refine this change into acceptance criteria and a plan. Write {plan} with a section "
        "`## Acceptance criteria` (one line per criterion: `AC-1: …`) and a section `## Tasks` "
        "holding `- [ ]` checkbox lines, tests first. Do not implement anything yet.\n"
        "Done when {plan} exists with at least one unchecked task."
    ),
    "apply": (
        "Implement the unchecked tasks of {plan}, test-first: write the failing test, make it "
        "pass, then check the task off (`- [x]`). Work only on this change.\n"
        "Done when every task in {plan} is checked and the tests pass."
    ),
    "verify": (
        "Review this change independently, as someone who did not write it. For every "
        "acceptance criterion in {plan} name the test that proves it. Record each problem as a "
        "finding with an id `r{round}-<n>` (carry earlier findings forward with a transition: "
        "open, resolved, superseded or human).\n"
        "Finish with the verdict 'Ready for archive' or 'N critical issue(s) found', and pass "
        "your findings with --findings FILE (JSON: acTests, findings, scopeChanges)."
    ),
    "red": (
        "Write failing tests that reproduce each blocking finding below. Change no production "
        "code. Done when every finding has a test that fails for the reason it names."
    ),
    "fix": (
        "Make the failing tests for the findings pass without editing those tests or the test "
        "runner's configuration. Done when the whole test suite passes."
    ),
}


@dataclass(frozen=True)
class InstructionContext:
    """What the prompt for one step is built from."""

    transition: str
    key: str  # the change (or the phase, for decompose)
    batch: str | None
    phase: Phase | None
    review_round: int = 1
    guidance: str | None = None
    answers: Sequence[str] = ()
    feedback: str | None = None
    open_findings: Sequence[Mapping[str, Any]] = field(default_factory=tuple)


def _quote(text: str) -> str:
    return "\n".join(f"> {line}" for line in text.splitlines() or [""])


def _phase_block(phase: Phase | None) -> list[str]:
    if phase is None:
        return []
    lines = [f"Phase: {phase.name}"]
    if phase.goal:
        lines.append(f"Phase goal: {phase.goal}")
    if phase.success:
        lines.append(f"Phase success: {phase.success}")
    if phase.proof_of_work is not None:
        condition = phase.proof_of_work.pass_ or "exit 0"
        lines.append(f"Proof of work: `{phase.proof_of_work.run}` must pass ({condition}).")
    return lines


def _report_block(key: str) -> list[str]:
    return [
        "How to report (the step is judged on what you report, and checked against the disk):",
        '  pairbot batch report --complete "<one-line summary>"      when you are done',
        '  pairbot batch report --blocker "<what stops you>"         if you cannot go on',
        '  pairbot batch report --needs-input "<your question>"      if a human must decide',
        '  pairbot batch report --progress "<note>"                  optional, any time',
        f"Your batch, change ({key}) and transition are in PAIR_BATCH, PAIR_CHANGE and "
        "PAIR_TRANSITION.",
    ]


def _arguments(ctx: InstructionContext) -> list[str]:
    parts: list[str] = []
    if ctx.guidance:
        parts += ["Guidance from the maintainer (data, quoted):", _quote(ctx.guidance)]
    for answer in ctx.answers:
        parts += ["Answer to your earlier question (data, quoted):", _quote(answer)]
    if ctx.feedback:
        parts += [
            "Feedback on your previous attempt of this step (data, quoted) — revise, do not "
            "start over:",
            _quote(ctx.feedback),
        ]
    if ctx.open_findings:
        parts.append("Blocking findings:")
        for finding in ctx.open_findings:
            summary = finding.get("summary") or finding.get("reproducer") or ""
            parts.append(f"- {finding.get('id')} ({finding.get('kind')}): {summary}")
    return parts


def build_instructions(ctx: InstructionContext) -> str:
    """The full prompt for a change transition."""
    plan = f".pair/changes/{ctx.key}/plan.md"
    header = [f"You are pairbot's {ctx.transition} agent for change `{ctx.key}`."]
    if ctx.batch:
        header.append(f"Batch: {ctx.batch}")
    task = _TASKS[ctx.transition].format(plan=plan, round=ctx.review_round)
    sections = [
        "\n".join(header + _phase_block(ctx.phase)),
        f"Your task ({ctx.transition}):\n{task}",
        "\n".join(_report_block(ctx.key)),
    ]
    arguments = _arguments(ctx)
    if arguments:
        sections.append("\n".join(arguments))
    return "\n\n".join(sections) + "\n"


def build_decomposition_instructions(
    batch: str, phase: Phase, shipped: Sequence[tuple[str, Sequence[str]]], manifest_path: str
) -> str:
    """The prompt for authoring an empty phase's changes from what earlier phases shipped."""
    done = "\n".join(f"- {name}: {', '.join(changes)}" for name, changes in shipped) or "(none)"
    return (
        f"You are pairbot's decompose agent for phase `{phase.name}` of batch `{batch}`.\n"
        + "\n".join(_phase_block(phase))
        + f"\n\nEarlier phases shipped:\n{done}\n\n"
        f"Your task (decompose): add this phase's concrete changes, in order, to `changes:` of "
        f"phase `{phase.name}` in {manifest_path} (names: lowercase letters, digits, '.', '_' "
        "or '-'). Change nothing else in the file.\n\n"
        + "\n".join(_report_block(phase.name))
        + "\n"
    )
