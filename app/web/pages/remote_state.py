"""The run-state of the cards the Action and the pipeline run: each repository's `pair-state`.

    RemoteState(fetch, repos, ...)          what the pages know of the installed repositories'
                                            `pair-state` branches, refreshed as pages are viewed
      await .cards(readable) -> LocalCard…  every card batch on those branches, derived as a
                                            local card is (`app.web.pages.read.derive`)
    remote_state_for(settings, forges, store)   the App's, on GitHub with `execution: actions`
    refresh_settings(env) -> (max, seconds)     PAIR_STATE_REFRESH_MAX, PAIR_STATE_REFRESH_S

With `execution: actions` a card's steps run in its repository's workflow, and the run-state
lives on the repository's orphan branch `pair-state` (`action.statebranch`), not on this
machine. A page view asks each installed repository the viewer can read for it, bounded:

- A repository is looked at again at most every PAIR_STATE_REFRESH_S seconds (default 30);
  until then the pages show what was read last.
- At most PAIR_STATE_REFRESH_MAX repositories (default 8) are looked at per page view, those
  never read first, then the longest unread; the others keep their last reading and are looked
  at by the next views. So a page view waits on a bounded number of requests however many
  repositories are installed; a card's own page looks at its repository only.
- Looking costs one conditional request when the branch did not move (the session's edge
  sends `If-None-Match`, GitHub answers 304, which its rate limit does not count), and when it
  moved the tree and only the blobs that changed (`hosts.github.state_branch`).

A card's page shows its repository's gates and budget: the repository's `.pair/config.yaml`
(the file users write) is read from its default branch in the same look, with a conditional
request of its own (an unchanged file is one more 304; `StateBranchReader.default_file`), and
kept with the branch's files under `CONFIG_PATH`. No such file: pairbot's defaults, as the
Action would run with. A config that cannot be read or is not valid keeps the defaults too,
and is logged once per version of the file (what it says is in the line).

A card batch's journal and `state.json` are derived with the same code as a local card's
(`app.engine.jsonl`, `app.engine.runstate`, `app.web.pages.read.derive`), once per pair of
blob shas (`Memo`: the same bytes give the same view). A file that cannot be read (a corrupt
journal, a malformed or incompatible `state.json`, a blob too large) makes that card
`unreadable`, with why, on the page; a repository that cannot be read (403, a network fault)
keeps its last reading and is logged once per new error. Nothing here ever fails a page.
Repositories come from the installations the App has recorded and the jobs it has queued.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Protocol

from app.cycle.card_status import CardStatus
from app.cycle.cohort_journals import card_figures
from app.cycle.schedule import card_of
from app.engine import jsonl
from app.engine.manifest import load_project_config
from app.engine.runstate import RunLocus, read_parks
from app.errors import ConfigError
from app.store.base import Store
from app.web.forge import GitHubForges
from app.web.pages.cache import Memo
from app.web.pages.model import DEFAULT_SETTINGS, CardSettings
from app.web.pages.read import Derived, LocalCard, card_settings, derive
from app.web.pages.views import CardView
from hosts.errors import HostError
from hosts.github.state_branch import BranchFile, BranchFiles, StateBranchReader

log = logging.getLogger(__name__)

REFRESH_S = 30.0
REFRESH_MAX = 8
FETCHES = 4  # repositories looked at at once
_JOURNAL = re.compile(r"^\.pair/batches/(?P<batch>card-[1-9][0-9]{0,8})/run/journal\.jsonl$")
_STATE = re.compile(r"^\.pair/batches/card-[1-9][0-9]{0,8}/run/state\.json$")
# The repository's config, read from its default branch (never from `pair-state`: not wanted).
CONFIG_PATH = ".pair/config.yaml"


def wanted(path: str) -> bool:
    """The branch files the pages read: each card batch's journal and `state.json`."""
    return _JOURNAL.match(path) is not None or _STATE.match(path) is not None


class Fetch(Protocol):
    """Reads a repository's `pair-state` (None: no such branch); `previous` is what it read
    last, which it returns as is when the branch did not move."""

    def __call__(
        self, repo: str, installation: int, previous: BranchFiles | None
    ) -> Awaitable[BranchFiles | None]: ...


Repos = Callable[[], Awaitable[Sequence[tuple[str, int]]]]


@dataclass
class _Repo:
    """What is known of one repository's branch."""

    repo: str
    installation: int
    files: BranchFiles | None = None
    checked: float | None = None  # the clock's time of the last look; None: never
    error: str = ""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class RemoteState:
    """See the module docstring. One per App; its methods run on the App's event loop."""

    def __init__(
        self,
        fetch: Fetch,
        repos: Repos,
        *,
        refresh_s: float = REFRESH_S,
        refresh_max: int = REFRESH_MAX,
        clock: Callable[[], float] = time.monotonic,
        memo: Memo | None = None,
    ) -> None:
        self._fetch = fetch
        self._repos = repos
        self.refresh_s = refresh_s
        self.refresh_max = refresh_max
        self._clock = clock
        self._memo = memo if memo is not None else Memo(4096)
        self._known: dict[str, _Repo] = {}
        self.looks = 0  # repositories looked at, for tests and operators

    async def cards(self, readable: Callable[[str], bool]) -> tuple[LocalCard, ...]:
        """The card batches on the `pair-state` of every repository `readable` admits, after
        looking again at the stalest few of them (see the module docstring)."""
        entries = [e for e in await self._entries() if readable(e.repo)]
        now = self._clock()
        stale = [e for e in entries if e.checked is None or now - e.checked >= self.refresh_s]
        stale.sort(key=lambda e: -1.0 if e.checked is None else e.checked)
        limit = asyncio.Semaphore(FETCHES)

        async def look(entry: _Repo) -> None:
            async with limit:
                await self._look(entry)

        await asyncio.gather(*(look(e) for e in stale[: self.refresh_max]))
        read = [(e.repo, e.files) for e in entries if e.files is not None]
        return await asyncio.to_thread(self._derive_all, read)

    async def _entries(self) -> list[_Repo]:
        for repo, installation in await self._repos():
            entry = self._known.get(repo.lower())
            if entry is None or entry.installation != installation:
                self._known[repo.lower()] = _Repo(repo, installation)
        return list(self._known.values())

    async def _look(self, entry: _Repo) -> None:
        async with entry.lock:  # a second view waits for the first one's look, then uses it
            checked = entry.checked
            if checked is not None and self._clock() - checked < self.refresh_s:
                return
            entry.checked = self._clock()
            self.looks += 1
            try:
                entry.files = await self._fetch(entry.repo, entry.installation, entry.files)
            except (HostError, ValueError) as exc:
                self._failed(entry, str(exc))
            except Exception as exc:  # a page never fails on one repository
                log.exception("reading pair-state of %s failed", entry.repo)
                entry.error = f"{type(exc).__name__}: {exc}"
            else:
                entry.error = ""

    def _failed(self, entry: _Repo, error: str) -> None:
        if error != entry.error:  # once per new error, not once per page view
            log.warning(
                "could not read pair-state of %s (kept its last reading): %s", entry.repo, error
            )
        entry.error = error

    def _derive_all(self, read: Sequence[tuple[str, BranchFiles]]) -> tuple[LocalCard, ...]:
        cards: list[LocalCard] = []
        for repo, files in read:
            settings = self._settings(repo, files.files.get(CONFIG_PATH))
            for path, journal in files.files.items():
                found = _JOURNAL.match(path)
                if found is None:
                    continue
                batch = found["batch"]
                state = files.files.get(path.removesuffix("journal.jsonl") + "state.json")
                shas = (journal.sha, state.sha if state else None)
                key = ("pair-state", repo.lower(), *shas, batch, settings)
                derived = self._memo.get(
                    key, partial(derive_files, repo, batch, journal, state, settings)
                )
                cards.append(LocalCard(repo, batch, (), {}, settings, derived=derived))
        return tuple(cards)

    def _settings(self, repo: str, config: BranchFile | None) -> CardSettings:
        """The repository's config as a card's page needs it, parsed once per blob sha."""
        if config is None:
            return DEFAULT_SETTINGS
        key = ("pair-config", repo.lower(), config.sha)
        return self._memo.get(key, partial(config_settings, repo, config))


def config_settings(repo: str, config: BranchFile) -> CardSettings:
    """What `repo`'s `.pair/config.yaml` says, validated as `pairbot` validates it (from a
    private temporary directory: the loader reads a file); the defaults, logged, when it cannot
    be read or is not valid."""
    where = f"{repo} {CONFIG_PATH} (default branch)"
    if config.data is None:
        log.warning("could not read %s, showing the defaults: %s", where, config.problem)
        return DEFAULT_SETTINGS
    with tempfile.TemporaryDirectory(prefix="pairbot-pair-config-") as tmp:
        path = Path(tmp) / CONFIG_PATH
        path.parent.mkdir()
        path.write_bytes(config.data)
        try:
            return card_settings(load_project_config(Path(tmp)))
        except Exception as exc:  # whatever the file holds, the page stands
            why = str(exc).replace(str(path), where).replace(tmp, repo)
            log.warning("%s is not a valid config, showing the defaults: %s", where, why)
            return DEFAULT_SETTINGS


def derive_files(
    repo: str,
    batch: str,
    journal: BranchFile,
    state: BranchFile | None,
    settings: CardSettings = DEFAULT_SETTINGS,
) -> Derived:
    """A card batch's view from its branch files, read by the engine's own readers (from a
    private temporary directory: they read files), with its repository's `settings`; an
    unreadable card when they refuse."""
    where = f"{repo} pair-state .pair/batches/{batch}/run"
    for name, file in (("journal.jsonl", journal), ("state.json", state)):
        if file is not None and file.data is None:
            return unreadable(batch, f"{where}/{name}: {file.problem}")
    with tempfile.TemporaryDirectory(prefix="pairbot-pair-state-") as tmp:
        locus = RunLocus(Path(tmp))
        locus.journal.write_bytes(journal.data or b"")
        if state is not None:
            locus.state.write_bytes(state.data or b"")
        try:
            return derive(batch, jsonl.read_records(locus.journal), read_parks(locus), settings)
        except Exception as exc:  # whatever the branch holds, the page stands
            return unreadable(batch, str(exc).replace(tmp, where))


def unreadable(batch: str, why: str) -> Derived:
    """A card whose run-state could not be read: status `unreadable`, and why."""
    number = card_of(batch) or 0
    view = CardView(
        repo="",
        number=number,
        title="",
        url="",
        status="unreadable",
        label="",
        tone="alert",
        next="unknown here",
        why=why,
        gate="unknown here",
        budget="",
        actions=(),
    )
    status = CardStatus(card=number, status="unreadable", next=None, why=why)
    return Derived(view, status, replace(card_figures(number, []), status="unreadable"))


# -- the App's -------------------------------------------------------------------------------


def refresh_settings(env: Mapping[str, str]) -> tuple[int, float]:
    """PAIR_STATE_REFRESH_MAX (a whole number ≥ 1) and PAIR_STATE_REFRESH_S (seconds ≥ 0)."""
    raw_max = env.get("PAIR_STATE_REFRESH_MAX", "").strip() or str(REFRESH_MAX)
    raw_s = env.get("PAIR_STATE_REFRESH_S", "").strip() or str(REFRESH_S)
    try:
        most = int(raw_max)
    except ValueError:
        most = 0
    if most < 1 or most > 1000:
        raise ConfigError(
            f"PAIR_STATE_REFRESH_MAX is {raw_max!r}: expected a whole number from 1 to 1000 "
            f"(repositories whose pair-state one page view reads; default {REFRESH_MAX})"
        )
    try:
        seconds = float(raw_s)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= 86_400:
        raise ConfigError(
            f"PAIR_STATE_REFRESH_S is {raw_s!r}: expected seconds from 0 to 86400 (how long a "
            f"repository's pair-state reading is shown before it is read again; default "
            f"{REFRESH_S:.0f})"
        )
    return most, seconds


def github_fetch(forges: GitHubForges) -> Fetch:
    """Reads `pair-state` as the repository's installation, over the session its hosts share
    (one pool, one token, one rate window, one ETag cache), and then, when the branch exists,
    the repository's config from its default branch (kept under `CONFIG_PATH`)."""

    async def fetch(
        repo: str, installation: int, previous: BranchFiles | None
    ) -> BranchFiles | None:
        reader = StateBranchReader.of(forges.session(installation))
        files = await reader.read(repo, previous, wanted)
        if files is None:  # no cards there: no config to read either
            return None
        config = await reader.default_file(repo, CONFIG_PATH)
        kept = {p: f for p, f in files.files.items() if p != CONFIG_PATH}
        return replace(files, files={**kept, CONFIG_PATH: config} if config else kept)

    return fetch


def store_repos(store: Store) -> Repos:
    """The repositories of the App's installations (not suspended), and of its GitHub jobs."""

    async def repos() -> list[tuple[str, int]]:
        found: dict[str, tuple[str, int]] = {}
        for job in await store.jobs(500):
            if job.source == "github" and job.installation is not None:
                found.setdefault(job.repo.lower(), (job.repo, job.installation))
        for installation in await store.installations():
            if not installation.suspended:
                for repo in installation.repos:
                    found[repo.lower()] = (repo, installation.id)
        return sorted(found.values())

    return repos


def remote_state_for(
    execution: str, forges: object, store: Store, env: Mapping[str, str] | None = None
) -> RemoteState | None:
    """The App's `RemoteState`: on GitHub with `execution: actions`, else None (a worker
    keeps its run-state on this machine, and the local forge has no branches to read)."""
    if execution != "actions" or not isinstance(forges, GitHubForges):
        return None
    most, seconds = refresh_settings(os.environ if env is None else env)
    return RemoteState(
        github_fetch(forges), store_repos(store), refresh_s=seconds, refresh_max=most
    )
