"""The batches on this machine as the status pages show them (blocking file reads).

`local_batches(root)` reads the batches whose run-state lives under the served project
(`pairbot serve --dev`, or a worker's root), `worker_batches(root, checkouts)` those of every
checkout the worker runs steps on as well; a GitHub App whose steps run in Actions keeps its
run-state on the repositories' `pair-state` branches, so there its cards come from the job
queue instead (`app.web.pages.read`). A plain batch shows its phases in order (changes, gate,
proof-of-work); a card batch shows the card's own status, next step and reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from app.cycle.card_status import read_card_status
from app.engine.manifest import list_batches
from app.engine.render import describe_target
from app.engine.runner import batch_status
from app.web.checkouts import checkout_dirs

if TYPE_CHECKING:
    from app.cycle.card_status import CardStatus

# Reads a batch's card status: None for a plain batch (`read_card_status` by default).
CardStatusOf = Callable[[Path, str], "CardStatus | None"]


@dataclass(frozen=True)
class ChangeView:
    """One change of a plain batch: its phase, status, what runs next, and what holds it."""

    name: str
    status: str
    next: str
    phase: str = ""
    reason: str = ""  # a parked change: why it waits (then nothing runs next on its own)


@dataclass(frozen=True)
class PhaseView:
    """One phase of a plain batch: its changes, its gate and its proof-of-work."""

    name: str
    changes: tuple[str, ...]
    complete: bool
    gated_by: str = ""  # the phase whose gate holds this one
    proof_required: bool = False
    proof: str = ""  # the recorded proof's verdict, "" when none


@dataclass(frozen=True)
class BatchView:
    """A batch under the served project or a checkout, or the error that kept it from loading."""

    name: str
    done: bool = False
    next: str = ""
    why: str = ""
    changes: tuple[ChangeView, ...] = ()
    phases: tuple[PhaseView, ...] = ()
    error: str = ""
    checkout: str = ""  # the repository directory under PAIR_WORKER_CHECKOUTS; "" for the root
    card: int | None = None  # a card batch: its status, next and why are the card's own
    status: str = ""  # a card batch's `pr-state` status (what its tracking comment says)


def worker_batches(root: Path, checkouts: Path | None) -> list[BatchView]:
    """The batches of the root and of every checkout under `checkouts` (`<owner>/<name>`, the
    layout `PAIR_WORKER_CHECKOUTS` holds; see app.web.checkouts), each labelled with its
    repository directory."""
    views = local_batches(root)
    for repo in checkout_dirs(checkouts) if checkouts is not None else []:
        views += batches_of(repo, f"{repo.parent.name}/{repo.name}")
    return views


def batches_of(
    root: Path, checkout: str, card_status: CardStatusOf | None = None
) -> list[BatchView]:
    """`local_batches(root, card_status)`, each labelled with `checkout`."""
    return [replace(v, checkout=checkout) for v in local_batches(root, card_status)]


def _proof(proof: object) -> str:
    if not isinstance(proof, dict):
        return ""
    verdict = proof.get("verdict") or proof.get("state") or proof.get("result")
    return str(verdict) if verdict else "recorded"


def local_batches(root: Path, card_status: CardStatusOf | None = None) -> list[BatchView]:
    """Every batch under `root/.pair/batches` with its derived status. `card_status` reads a
    card batch's status (None for a plain batch): the status pages pass the one they already
    derived, so a card's journal is not read twice."""
    if not (root / ".pair" / "batches").is_dir():
        return []
    views: list[BatchView] = []
    for name in list_batches(root):
        try:
            card = (card_status or read_card_status)(root, name)
            if card is not None:
                views.append(
                    BatchView(
                        name=name,
                        done=card.done,
                        next=card.next_text,
                        why=card.why,
                        card=card.card,
                        status=card.status,
                    )
                )
                continue
            status = batch_status(root, name)
        except Exception as err:  # one broken manifest must not take the page down
            views.append(BatchView(name, error=str(err) or type(err).__name__))
            continue
        held = {p.name for p in status.phases if p.gated_by or status.next is None}
        views.append(
            BatchView(
                name=name,
                done=status.done,
                # A batch held by a park runs nothing on its own: "none", never the parked
                # change's own next transition beside "nothing runnable".
                next=describe_target(status.next) if status.next is not None else "none",
                why=status.why or "",
                changes=tuple(
                    ChangeView(
                        c.name,
                        c.status,
                        # Nothing runs while the batch is held, nor in a gated phase.
                        "" if c.reason or c.phase in held else (c.next or ""),
                        phase=c.phase,
                        reason=c.reason,
                    )
                    for c in status.changes.values()
                ),
                phases=tuple(
                    PhaseView(
                        name=p.name,
                        changes=p.changes,
                        complete=p.complete,
                        gated_by=p.gated_by or "",
                        proof_required=p.proof_required,
                        proof=_proof(p.proof),
                    )
                    for p in status.phases
                ),
            )
        )
    return views
