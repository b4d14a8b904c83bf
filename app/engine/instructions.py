"""The prompt an agent reads on stdin for one step: context, one delegated command, arguments.

    context      batch, phase goal / success / proof-of-work, the change's plan, the review
                 round (verify)
    command      pairbot's command for the step, its shared definition inline (no agent CLI
                 expands a command invoked in the middle of a prompt), with the arguments
                 glued to it as one contiguous block
    arguments    the caller's guidance, recorded answers and feedback, open findings: quoted
                 data, stripped of hidden content, never instructions that replace the task
    reporting    how to report, so any agent can

The command block comes from the injected launcher (`AgentLauncher.delegate`, passed in as a
`Delegate`): the form each agent reads a command in, and the command text itself, belong to
the runtime, which has the one definition of each command.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.domain.sanitize import strip_hidden
from app.engine.agent import CommandId, Delegate
from app.engine.manifest import Phase


@dataclass(frozen=True)
class InstructionContext:
    """What the prompt for one change step is built from."""

    transition: CommandId
    key: str  # the change
    batch: str | None
    phase: Phase | None
    agent: str = "command"
    review_round: int = 1
    guidance: str | None = None
    answers: Sequence[str] = ()
    feedback: str | None = None
    open_findings: Sequence[Mapping[str, Any]] = field(default_factory=tuple)


def _quote(text: str) -> str:
    return "\n".join(f"> {line}" for line in strip_hidden(text).splitlines() or [""])


def _phase_block(phase: Phase | None) -> list[str]:
    if phase is None:
        return []
    lines = [f"Phase: {phase.name}"]
    if phase.goal:
        lines.append(f"Phase goal: {strip_hidden(phase.goal)}")
    if phase.success:
        lines.append(f"Phase success: {strip_hidden(phase.success)}")
    if phase.proof_of_work is not None:
        condition = phase.proof_of_work.pass_ or "exit 0"
        lines.append(f"Proof of work: `{phase.proof_of_work.run}` must pass ({condition}).")
    return lines


def _report_block(key: str) -> str:
    return "\n".join(
        [
            "How to report (the step is judged on what you report, checked against the disk):",
            '  pairbot batch report --complete "<one-line summary>"      when you are done',
            '  pairbot batch report --blocker "<what stops you>"         if you cannot go on',
            '  pairbot batch report --needs-input "<your question>"      if a human must decide',
            '  pairbot batch report --progress "<note>"                  optional, any time',
            f"Your batch, change ({key}) and transition are in PAIR_BATCH, PAIR_CHANGE and "
            "PAIR_TRANSITION.",
        ]
    )


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
            parts.append(f"- {finding.get('id')} ({finding.get('kind')}): {strip_hidden(summary)}")
    return parts


def build_instructions(ctx: InstructionContext, delegate: Delegate) -> str:
    """The full prompt for a change transition; `delegate` writes its command block."""
    context = [f"You are pairbot's {ctx.transition} agent for change `{ctx.key}`."]
    if ctx.batch:
        context.append(f"Batch: {ctx.batch}")
    context += _phase_block(ctx.phase)
    context.append(f"Plan: .pair/changes/{ctx.key}/plan.md")
    if ctx.transition == "verify":
        context.append(
            f"Review round {ctx.review_round}: new findings are `r{ctx.review_round}-<n>`."
        )
    sections = [
        "\n".join(context),
        delegate(ctx.agent, ctx.transition, ctx.key, _arguments(ctx)),
        _report_block(ctx.key),
    ]
    return "\n\n".join(sections) + "\n"


def build_decomposition_instructions(
    batch: str,
    phase: Phase,
    shipped: Sequence[tuple[str, Sequence[str]]],
    manifest_path: str,
    *,
    delegate: Delegate,
    agent: str = "command",
) -> str:
    """The prompt for authoring an empty phase's changes from what earlier phases shipped."""
    done = [f"- {name}: {', '.join(changes)}" for name, changes in shipped] or ["(none)"]
    context = [
        f"You are pairbot's decompose agent for phase `{phase.name}` of batch `{batch}`.",
        *_phase_block(phase),
        "Earlier phases shipped:",
        *done,
    ]
    sections = [
        "\n".join(context),
        delegate(agent, "decompose-phase", f"{phase.name} {manifest_path}", []),
        _report_block(phase.name),
    ]
    return "\n\n".join(sections) + "\n"
