"""Dispatch statistics: how often each kind of step was handed to an agent, and by whom. Pure.

`dispatch_stats(records)` reads one card's journal records (file order) and returns one
`DispatchStats` per transition, in the order each was first started:

    dispatches   `step-started` entries: every time the step was handed to an agent (or, for
                 pairbot's own steps, run), a failover's second agent included
    retries      runs that ended blocked or failed and were started again later
    failovers    `failover` entries: the step handed to the fallback agent after a quota,
                 auth or crash failure
    sentBack     `sent-back` outcomes: the engine refused the iteration and ran it again
    redirects    always unknown (None): the journal records no redirect, so it is never
                 reported as 0
    agents       each distinct `agent (model)` that ran the step, in the order they first
                 did (a failover shows both); a start that names no agent adds nothing

Nothing here reads a clock or raises on a malformed record (it is skipped).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

_ENDED_BADLY = frozenset({"blocked", "failed"})


@dataclass
class DispatchStats:
    """One transition's dispatch figures for a card."""

    transition: str
    dispatches: int = 0
    retries: int = 0
    failovers: int = 0
    sent_back: int = 0
    agents: list[str] = field(default_factory=list)
    redirects: int | None = None  # not journaled: unknown, never 0

    def to_json(self) -> dict[str, Any]:
        """Stable keys; `redirects` null while the journal cannot say."""
        return {
            "dispatches": self.dispatches,
            "retries": self.retries,
            "failovers": self.failovers,
            "sentBack": self.sent_back,
            "redirects": self.redirects,
            "agents": list(self.agents),
        }


def agent_label(data: Any) -> str | None:
    """`agent (model)` or `agent` from a `step-started` entry's data; None when it names none."""
    if not isinstance(data, Mapping):
        return None
    agent, model = data.get("agent"), data.get("model")
    if not isinstance(agent, str) or not agent:
        return None
    return f"{agent} ({model})" if isinstance(model, str) and model else agent


def dispatch_stats(records: Sequence[Mapping[str, Any]]) -> list[DispatchStats]:
    """Per-transition dispatch figures of one card's journal (see the module docstring)."""
    stats: dict[str, DispatchStats] = {}
    # Per key+transition: whether its last run ended blocked/failed and no start followed yet.
    pending_retry: dict[tuple[str, str], bool] = {}
    for record in records:
        if not isinstance(record, Mapping):
            continue
        transition = record.get("transition")
        if not isinstance(transition, str) or not transition:
            continue
        kind = record.get("kind")
        slot = (str(record.get("key") or ""), transition)
        if kind == "step-started":
            entry = stats.setdefault(transition, DispatchStats(transition))
            entry.dispatches += 1
            if pending_retry.pop(slot, False):
                entry.retries += 1
            label = agent_label(record.get("data"))
            if label is not None and label not in entry.agents:
                entry.agents.append(label)
        elif kind == "outcome":
            entry = stats.setdefault(transition, DispatchStats(transition))
            state = record.get("state")
            if state == "sent-back":
                entry.sent_back += 1
            pending_retry[slot] = state in _ENDED_BADLY
        elif kind == "failover":
            stats.setdefault(transition, DispatchStats(transition)).failovers += 1
            # The failed attempt's outcome is not a retry: its step goes on with the fallback.
            pending_retry[slot] = False
    return list(stats.values())
