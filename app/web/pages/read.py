"""The run-state the status pages read on this machine: the served project and its checkouts.

    LocalReader(root, checkouts)() -> Local     what the pages show, re-reading only the files
                                                 that changed since the last call (pages.cache)
    read_local(root, checkouts) -> Local         the same, reading everything (no memo)
    card_views(local, jobs) -> list[CardView]   every card: local run-state first, then the
                                                 cards only the job queue knows
    with_remote(local, cards) -> Local          the cards read from `pair-state` branches added
    cohort_of_local(local, viewer, root_repo)    `pairbot report cohort` over the cards the
                                                 viewer can read (each repository's own cards)

Reads block: call them from a worker thread. The served project (`pairbot serve --dev`, or a
worker's root) and each checkout under `PAIR_WORKER_CHECKOUTS` (`<owner>/<name>`) keep their
batches under `.pair/batches`; a card batch (`card-<n>`) holds the card's journal and parks,
and the live log of its last agent step (`run/live/<session>.log`), whose last lines a running
step shows. A GitHub App whose steps run in Actions keeps its run-state on the repositories'
`pair-state` branches: `app.web.pages.remote_state` reads those, and `with_remote` adds their
cards here; a card of a repository whose branch could not be read (or has no such branch)
comes from the job queue only, with no status guessed.

What a card batch's journal and parks give (its view, its status, its cohort figures) is
derived once per version of those files (`Derived`, keyed by their stamps): a page request
stats every card's files and re-parses only the journals that changed. The live log is read
only for a step that is running. Plain batches (not cards) are derived afresh each time: their
status also depends on the change files on disk, which no single stamp covers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cycle.card_status import card_status, read_card_status
from app.cycle.cohort_journals import card_figures
from app.cycle.schedule import card_of
from app.domain.reports.cohort import reduce_cohort
from app.engine import jsonl
from app.engine.livelog import read_tail
from app.engine.manifest import ProjectConfig, list_batches, load_project_config
from app.engine.runstate import Park, RunLocus, read_parks
from app.store.base import JobRecord
from app.web.checkouts import checkout_dirs
from app.web.dashboard import BatchView, batches_of
from app.web.pages.cache import Memo, stamp
from app.web.pages.model import DEFAULT_SETTINGS, CardSettings, card_view, remote_card, with_live
from app.web.pages.views import CardView
from app.web.viewer import Viewer

if TYPE_CHECKING:
    from app.cycle.card_status import CardStatus
    from app.domain.reports.cohort import CardFigures, Cohort


LIVE_LINES = 200  # the tail of a running step's output a card page shows


@dataclass(frozen=True)
class Derived:
    """What one card batch's journal and parks give, before a request adds its own parts (the
    repository, the last command from the job queue, the running step's output)."""

    view: CardView  # repo "" and no last command: see `card_views`
    status: CardStatus
    figures: CardFigures
    running: frozenset[str] = frozenset()  # the sessions of its steps still running


@dataclass(frozen=True)
class LocalCard:
    """One card batch's run-state, with the settings its views need.

    Built by a test (or anything else) from raw `records` and `parks`; `LocalReader` leaves
    them empty and hands over what it derived from them instead (`derived`)."""

    checkout: str  # "<owner>/<name>" under PAIR_WORKER_CHECKOUTS; "" for the served project
    key: str
    records: tuple[Mapping[str, Any], ...]
    parks: Mapping[str, Park]
    settings: CardSettings = DEFAULT_SETTINGS  # its repository's config (gates, budget)
    # The last lines of the batch's live log, by session (the output of its running step).
    live: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    derived: Derived | None = None

    def derive(self) -> Derived:
        """What this card's journal and parks give (computed here when not handed over)."""
        if self.derived is not None:
            return self.derived
        return derive(self.key, self.records, self.parks, self.settings)


@dataclass(frozen=True)
class Local:
    """Everything on this machine the pages show: batches (plain and card) and card journals."""

    batches: tuple[BatchView, ...] = ()
    cards: tuple[LocalCard, ...] = ()


def derive(
    key: str,
    records: Sequence[Mapping[str, Any]],
    parks: Mapping[str, Park],
    settings: CardSettings = DEFAULT_SETTINGS,
) -> Derived:
    """A card batch's view, status and cohort figures from its journal records and parks, with
    what its repository's config says (`settings`)."""
    number = card_of(key)
    if number is None:
        raise ValueError(f"{key!r} is not a card batch (card-<n>)")
    view = card_view("", key, records, parks, settings=settings)
    running = frozenset(s.session for s in view.steps if s.running)
    return Derived(view, card_status(records, key, parks), card_figures(number, records), running)


def _read_derived(locus: RunLocus, key: str, settings: CardSettings) -> Derived:
    records = jsonl.read_records(locus.journal)
    return derive(key, records, read_parks(locus), settings)


def card_settings(config: ProjectConfig) -> CardSettings:
    """What a project config says that a card's page shows."""
    cycle = config.cycle
    return CardSettings(
        max_fix_rounds=cycle.max_fix_rounds,
        trigger=config.trigger,
        until=cycle.until,
        merge=cycle.merge,
        prepare=cycle.prepare,
    )


def _settings(root: Path) -> CardSettings:
    try:
        config = load_project_config(root)
    except Exception:  # a broken config shows on the batch rows; the cards keep the defaults
        return DEFAULT_SETTINGS
    return card_settings(config)


def _cards(root: Path, label: str, memo: Memo) -> tuple[list[LocalCard], dict[str, CardStatus]]:
    if not (root / ".pair" / "batches").is_dir():
        return [], {}
    config = root / ".pair" / "config.yaml"
    settings = memo.get(("config", str(root), stamp(config)), partial(_settings, root))
    found: list[LocalCard] = []
    statuses: dict[str, CardStatus] = {}
    for name in list_batches(root):
        if card_of(name) is None:
            continue
        locus = RunLocus.for_batch(root, name)
        journal, state = locus.journal, locus.state
        # Stat before reading: what is read is at least as new as the stamps it is kept under.
        key = ("card", str(journal), stamp(journal), stamp(state), settings)
        try:
            derived = memo.get(key, partial(_read_derived, locus, name, settings))
        except Exception:  # noqa: S112  # its batch row carries the error
            continue
        running = derived.running
        live = read_tail(locus.directory, LIVE_LINES, running) if running else {}
        parks: Mapping[str, Park] = {}
        found.append(LocalCard(label, name, (), parks, settings, live, derived))
        statuses[name] = derived.status
    return found, statuses


class LocalReader:
    """`read_local` with a memory: each call re-derives only the card journals that changed."""

    def __init__(self, root: Path, checkouts: Path | None, memo: Memo | None = None) -> None:
        self.root = root
        self.checkouts = checkouts
        self.memo = memo if memo is not None else Memo()

    def __call__(self) -> Local:
        return read_local(self.root, self.checkouts, self.memo)


def read_local(root: Path, checkouts: Path | None, memo: Memo | None = None) -> Local:
    """The batches and card journals of `root` and of every checkout under `checkouts`
    (with `memo`, what was derived from files that did not change since is reused)."""
    memo = memo if memo is not None else Memo(0)
    places = [("", root)]
    if checkouts is not None:
        places += [(f"{p.parent.name}/{p.name}", p) for p in checkout_dirs(checkouts)]
    batches: list[BatchView] = []
    cards: list[LocalCard] = []
    for label, path in places:
        found, statuses = _cards(path, label, memo)
        cards += found

        def status_of(
            root: Path, name: str, known: dict[str, CardStatus] = statuses
        ) -> CardStatus | None:
            # A card batch whose journal could not be read is read again here, to show why.
            return known.get(name) or read_card_status(root, name)

        batches += batches_of(path, label, card_status=status_of)
    return Local(batches=tuple(batches), cards=tuple(cards))


def with_remote(local: Local, remote: Sequence[LocalCard]) -> Local:
    """`local` with the card batches read from repositories' `pair-state` branches
    (`app.web.pages.remote_state`) added as cards of those repositories; a card this machine
    also holds (a checkout of the same repository) is shown from this machine's copy."""
    here = {(c.checkout.lower(), c.key) for c in local.cards if c.checkout}
    added = tuple(c for c in remote if (c.checkout.lower(), c.key) not in here)
    return replace(local, cards=local.cards + added) if added else local


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
        base = replace(card.derive().view, repo=repo, last_command=command)
        views.append(with_live(base, card.live))
        shown.add((repo.lower(), number))
    views += [remote_card(j) for k, j in newest.items() if k not in shown]
    return views


def cohort_of_local(local: Local, viewer: Viewer, root_repo: str) -> Cohort:
    """The cohort report over the local cards `viewer` can read. Each card batch is one card:
    two repositories' card #1 are two cards (unlike `cohort_of`, which merges one project's
    checkouts by card number)."""
    figures = []
    for card in local.cards:
        number = card_of(card.key)
        if number is None or not viewer.can_read(card.checkout or root_repo):
            continue
        derived = card.derived
        figures.append(derived.figures if derived else card_figures(number, card.records))
    return reduce_cohort(figures)
