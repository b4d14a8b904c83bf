"""The public JSON shapes of `batch status` and `batch apply`, and their text renderings.

The JSON shapes are a contract (docs/cli.md); the text is for people.
"""

from __future__ import annotations

from typing import Any

from app.engine.selection import (
    ApplyTarget,
    BatchStatus,
    ChangeTarget,
    PhaseState,
    PrTarget,
)


def target_json(target: ApplyTarget | None) -> dict[str, Any] | None:
    """`next` in `batch status --json`."""
    if target is None:
        return None
    data: dict[str, Any] = {"kind": target.kind, "phase": target.phase}
    if isinstance(target, ChangeTarget):
        data["change"] = target.change
        data["transition"] = target.transition
    elif isinstance(target, PrTarget):
        data["key"] = target.key
        if target.boundary is not None:
            data["group"] = target.boundary.group_id
    return data


def _proof_json(phase: PhaseState) -> dict[str, Any] | None:
    if phase.proof is None:
        return None
    keys = ("passed", "gatePassed", "policy", "exitCode", "detail", "at")
    return {k: phase.proof.get(k) for k in keys}


def status_json(status: BatchStatus) -> dict[str, Any]:
    """The documented `batch status --json` object."""
    return {
        "batch": status.batch,
        "done": status.done,
        "next": target_json(status.next),
        "why": status.why,
        "changes": {
            name: {
                "status": state.status,
                "phase": state.phase,
                "next": state.next,
                **({"reason": state.reason} if state.reason else {}),
            }
            for name, state in status.changes.items()
        },
        "phases": {
            phase.name: {
                "gated": phase.gated,
                **({"gatedBy": phase.gated_by} if phase.gated_by else {}),
                "proofRequired": phase.proof_required,
                "proof": _proof_json(phase),
            }
            for phase in status.phases
        },
    }


def describe_target(target: ApplyTarget | None) -> str:
    """One line: what runs next."""
    if target is None:
        return "nothing runnable"
    if isinstance(target, ChangeTarget):
        return f"{target.transition} {target.change} (phase {target.phase})"
    if isinstance(target, PrTarget):
        return f"open PR {target.key}"
    return f"{target.kind} for phase {target.phase}"


def status_text(status: BatchStatus) -> str:
    """`batch status` for people."""
    state = "done" if status.done else "in progress"
    lines = [f"batch {status.batch}: {state}", f"next: {describe_target(status.next)}"]
    if status.why:
        lines.append(f"held: {status.why}")
    for phase in status.phases:
        proof = "no proof-of-work"
        if phase.proof_required:
            proof = "proof not run"
        if phase.proof is not None:
            verdict = "passed" if phase.proof.get("passed") else "failed"
            proof = f"proof {verdict} ({phase.proof.get('policy')}): {phase.proof.get('detail')}"
        gate = f"  [gated: {phase.gated_by}]" if phase.gated else ""
        lines.append(f"phase {phase.name}: {proof}{gate}")
        for name in phase.changes:
            change = status.changes[name]
            nxt = f" → {change.next}" if change.next else ""
            why = f" ({change.reason})" if change.reason else ""
            lines.append(f"  {name:<28} {change.status}{nxt}{why}")
    return "\n".join(lines)
