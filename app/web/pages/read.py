"""The run-state the status pages read on this machine: the served project and its checkouts.

    read_local(root, checkouts) -> Local   blocking file reads; call it from a worker thread
    card_views(local, jobs) -> list[CardView]   every card: local run-state first, then the
                                                 cards only the job queue knows
    cohort_of_local(local, viewer, root_repo)    `pairbot report cohort` over the cards the
                                                 viewer can read (each repository's own cards)

The served project (`pairbot serve --dev`, or a worker's root) and each checkout under
`PAIR_WORKER_CHECKOUTS` (`<owner>/<name>`) keep their batches under `.pair/batches`; a card
batch (`card-<n>`) holds the card's journal and parks, and the live log of its last agent
step (`run/live/<session>.log`), whose last lines a running step shows. A GitHub App whose
steps run in Actions keeps its run-state on the repositories' `pair-state` branches: those
cards come from the job queue only, with no status guessed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.engine.runstate import Park
from app.store.base import JobRecord
from app.web.dashboard import BatchView, batches_of
from app.web.pages.model import CardView, card_view, remote_card
from app.web.viewer import Viewer

if TYPE_CHECKING:
    from app.domain.cohort import Cohort


LIVE_LINES = 200  # the tail of a running step's output a card page shows


@dataclass(frozen=True)
class LocalCard:
    """One card batch's raw run-state, with the settings its views need."""

    checkout: str  # "<owner>/<name>" under PAIR_WORKER_CHECKOUTS; "" for the served project
    key: str
    records: tuple[Mapping[str, Any], ...]
    parks: Mapping[str, Park]
    max_fix_rounds: int = 3
    trigger: str = "pair"
    # The last lines of the batch's live log, by session (the output of its running step).
    live: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Local:
    """Everything on this machine the pages show: batches (plain and card) and card journals."""

    batches: tuple[BatchView, ...] = ()
    cards: tuple[LocalCard, ...] = ()


def _cards(root: Path, label: str) -> list[LocalCard]:
    from app.cycle.schedule import card_of  # noqa: PLC0415  # the engine loads only here
    from app.engine import jsonl  # noqa: PLC0415
    from app.engine.livelog import read_tail  # noqa: PLC0415
    from app.engine.manifest import list_batches, load_project_config  # noqa: PLC0415
    from app.engine.runstate import RunLocus, read_parks  # noqa: PLC0415

    if not (root / ".pair" / "batches").is_dir():
        return []
    try:
        config = load_project_config(root)
        rounds, trigger = config.cycle.max_fix_rounds, config.trigger
    except Exception:  # a broken config shows on the batch rows; the cards keep the defaults
        rounds, trigger = 3, "pair"
    found: list[LocalCard] = []
    for name in list_batches(root):
        if card_of(name) is None:
            continue
        locus = RunLocus.for_batch(root, name)
        try:
            records = tuple(dict(r) for r in jsonl.read_records(locus.journal))
            parks = read_parks(locus)
        except Exception:  # noqa: S112  # its batch row carries the error
            continue
        live = read_tail(locus.directory, LIVE_LINES)
        found.append(LocalCard(label, name, records, parks, rounds, trigger, live))
    return found


def read_local(root: Path, checkouts: Path | None) -> Local:
    """The batches and card journals of `root` and of every checkout under `checkouts`."""
    from app.web.checkouts import checkout_dirs  # noqa: PLC0415

    places = [("", root)]
    if checkouts is not None:
        places += [(f"{p.parent.name}/{p.name}", p) for p in checkout_dirs(checkouts)]
    batches: list[BatchView] = []
    cards: list[LocalCard] = []
    for label, path in places:
        batches += batches_of(path, label)
        cards += _cards(path, label)
    return Local(batches=tuple(batches), cards=tuple(cards))


def card_views(local: Local, jobs: Sequence[JobRecord], root_repo: str) -> list[CardView]:
    """Every card: one per local card batch (its repository is its checkout's, or for the
    served project's the repository its newest job named, else `root_repo`), then one per card
    that only the job queue knows."""
    newest: dict[tuple[str, int], JobRecord] = {}
    by_number: dict[int, JobRecord] = {}
    for job in sorted(jobs, key=lambda j: j.id):
        if job.target != "card":
            continue
        newest[(job.repo.lower(), job.number)] = job
        by_number[job.number] = job
    views: list[CardView] = []
    shown: set[tuple[str, int]] = set()
    checkouts = {c.checkout.lower() for c in local.cards if c.checkout}
    for card in local.cards:
        number = int(card.key.removeprefix("card-"))
        repo = card.checkout
        if not repo:
            named = by_number.get(number)
            repo = named.repo if named and named.repo.lower() not in checkouts else root_repo
        last = newest.get((repo.lower(), number))
        command = f"/{last.verb or last.kind}: {last.state}" if last is not None else ""
        views.append(
            card_view(
                repo,
                card.key,
                card.records,
                card.parks,
                max_fix_rounds=card.max_fix_rounds,
                trigger=card.trigger,
                last_command=command,
                live=card.live,
            )
        )
        shown.add((repo.lower(), number))
    views += [remote_card(j) for k, j in newest.items() if k not in shown]
    return views


def cohort_of_local(local: Local, viewer: Viewer, root_repo: str) -> Cohort:
    """The cohort report over the local cards `viewer` can read. Each card batch is one card:
    two repositories' card #1 are two cards (unlike `cohort_of`, which merges one project's
    checkouts by card number)."""
    from app.cycle.cohort import card_figures  # noqa: PLC0415  # the engine loads only here
    from app.cycle.schedule import card_of  # noqa: PLC0415
    from app.domain.cohort import reduce_cohort  # noqa: PLC0415

    figures = []
    for card in local.cards:
        number = card_of(card.key)
        if number is not None and viewer.can_read(card.checkout or root_repo):
            figures.append(card_figures(number, card.records))
    return reduce_cohort(figures)
