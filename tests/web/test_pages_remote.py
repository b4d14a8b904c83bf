"""The App's pages under `execution: actions`: every card's cycle read from its repository's
`pair-state` branch — written by the Action's own state-branch code after real card cycles,
served by a fake GitHub on loopback through the git data API — with conditional requests, a
bounded number of repositories read per page view, and a damaged branch shown, never fatal."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from starlette.applications import Starlette

from app.engine.jsonl import append_record
from app.errors import ConfigError
from app.store.base import InstallationChange, NewJob, Store
from app.store.factory import make_store
from app.web.app import create_app
from app.web.forge import GitHubForges, LocalForges
from app.web.pages.model import CardSettings
from app.web.pages.read import read_local
from app.web.pages.remote_state import (
    RemoteState,
    config_settings,
    derive_files,
    github_fetch,
    refresh_settings,
    remote_state_for,
    store_repos,
    wanted,
)
from hosts.github.state_branch import BranchFile, BranchFiles, StateBranchReader
from tests.support.fake_github import rsa_key
from tests.support.github_server import WallClock, serve_fake_github
from tests.support.pair_state import (
    StateGitHub,
    files_repo,
    push_default_file,
    push_run_state,
    run_real_cards,
    state_repo,
)
from tests.web.conftest import Served, app_settings, served

INSTALLATION = 42


@dataclass
class World:
    """Real cards on `octo/widget`'s pair-state, a damaged `octo/broken`, an `octo/empty`
    with no such branch, and the fake GitHub that serves them. `root` is the checkout the
    cards ran in (their run-state as this machine would hold it)."""

    root: Path
    widget: Path
    fake: StateGitHub
    base_url: str


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repositories, built once per module (two real cycles); each test copies them."""
    base = tmp_path_factory.mktemp("pair-state")
    project = run_real_cards(base / "cards", 2)
    push_run_state(project.root, state_repo(base / "widget.git"))
    damaged = {
        ".pair/batches/card-5/run/journal.jsonl": b'{"kind": "cycle"}\nnot json at all\n',
        ".pair/batches/card-6/run/journal.jsonl": b'{"kind": "cycle", "key": "card-6"}\n',
        ".pair/batches/card-6/run/state.json": b'{"version": 1, "parks": []}',
    }
    push_run_state(files_repo(base / "broken", damaged), state_repo(base / "broken.git"))
    state_repo(base / "empty.git")
    return base


@pytest.fixture
def world(template: Path, tmp_path: Path) -> Iterator[World]:
    here = tmp_path / "world"
    shutil.copytree(template, here, symlinks=True)
    names = ("widget", "broken", "empty")
    fake = StateGitHub(
        clock=WallClock(), state_repos={f"octo/{n}": here / f"{n}.git" for n in names}
    )
    with serve_fake_github(fake, bare_repo=None) as base_url:
        yield World(here / "cards" / "repo", here / "widget.git", fake, base_url)
    assert fake.unexpected == []


def forges_of(world: World) -> GitHubForges:
    """The App's production forges, over real HTTP to the loopback fake."""
    return GitHubForges(app_id=world.fake.app_id, private_key=rsa_key()[0], base_url=world.base_url)


def seeded_store(path: Path) -> Store:
    """The App's store with the installation of the three repositories, and a finished
    command on `octo/empty` card #9 (a card only the job queue knows)."""
    store = make_store(path)
    change = InstallationChange(
        id=INSTALLATION, account="octo", repos=("octo/widget", "octo/broken", "octo/empty")
    )
    job = NewJob(
        kind="command",
        source="github",
        repo="octo/empty",
        installation=INSTALLATION,
        target="card",
        number=9,
        dedupe_key="k9",
        serial_key="octo/empty#9",
        request={},
    )

    async def seed() -> None:
        await store.open()  # and closed again: the app opens it for itself
        await store.enqueue_delivery("d-inst", "installation", "created", [], installation=change)
        await store.enqueue_delivery("d-9", "issue_comment", "created", [job])
        (claimed,) = await store.claim(1, 0.0)
        await store.finish(claimed.id, "done", "dispatched to the repository's workflow")
        await store.close()

    asyncio.run(seed())
    return store


def remote_app(world: World, tmp_path: Path, refresh_s: float = 30.0) -> Starlette:
    """The App on the seeded store, reading pair-state through its own forges."""
    settings = app_settings(tmp_path)
    store = seeded_store(settings.store)
    forges = forges_of(world)
    remote = RemoteState(github_fetch(forges), store_repos(store), refresh_s=refresh_s)
    return create_app(settings, store=store, github=forges, remote=remote, poll_s=0.05)


def cards_json(app: Served) -> dict[tuple[str, int], dict[str, object]]:
    response = app.page("/api/v1/cards")
    assert response.status_code == 200, response.text
    return {(c["repo"], c["number"]): c for c in response.json()["cards"]}


def test_the_dashboard_shows_each_card_from_pair_state_as_a_local_card_and_asks_again_with_etag(
    world: World, tmp_path: Path
) -> None:
    local = {c.key: c.derive().view for c in read_local(world.root, None).cards}
    assert len(local) == 2
    with served(remote_app(world, tmp_path, refresh_s=0.0)) as app:
        cards = cards_json(app)
        for key, view in local.items():
            shown = cards[("octo/widget", view.number)]
            assert (shown["status"], shown["next"], shown["why"], shown["last_step"]) == (
                view.status,
                view.next,
                view.why,
                view.last_step,
            ), key
            detail = app.page(f"/api/v1/cards/octo/widget/{view.number}").json()["card"]
            assert [s["transition"] for s in detail["steps"]] == [s.transition for s in view.steps]
            assert len(detail["steps"]) >= 3
        first = local["card-1"]
        page = app.page("/cards/octo/widget/1")
        assert page.status_code == 200 and first.status in page.text
        assert all(s.transition in page.text for s in first.steps)
        # octo/empty has no pair-state: its card is the job queue's, as before.
        assert cards[("octo/empty", 9)]["status"] == "unknown"
        assert str(cards[("octo/empty", 9)]["last_command"]).startswith("/command: done")

        # The next view: one conditional request per repository, each answered 304, and no
        # tree or blob read again.
        before = len(world.fake.git_gets)
        cards_json(app)
        again = world.fake.git_gets[before:]
        assert sorted(again) == [
            (f"/repos/octo/{name}/{path}", status)
            for name, path, status in (
                # No config on the default branch (none there at all): pairbot's defaults.
                ("broken", "contents/.pair/config.yaml", 404),
                ("broken", "git/ref/heads/pair-state", 304),
                ("empty", "git/ref/heads/pair-state", 404),  # no branch: no config asked for
                ("widget", "contents/.pair/config.yaml", 404),
                ("widget", "git/ref/heads/pair-state", 304),
            )
        ]


def test_a_branch_that_moved_is_read_again_fetching_only_the_blobs_that_changed(
    world: World, tmp_path: Path
) -> None:
    with served(remote_app(world, tmp_path, refresh_s=0.0)) as app:
        cards_json(app)
        journal = world.root / ".pair/batches/card-1/run/journal.jsonl"
        append_record(journal, {"kind": "progress", "key": "card-1", "at": "x", "message": "m"})
        push_run_state(world.root, world.widget, run_id="run-2")
        before = len(world.fake.git_gets)
        card = app.page("/api/v1/cards/octo/widget/1").json()["card"]  # its repository only
        paths = [path for path, _ in world.fake.git_gets[before:]]
    # The ref (moved: 200), the tree, the one changed blob; then the config on the default
    # branch (none there: 404).
    assert len(paths) == 4, paths
    assert paths[0].endswith("/git/ref/heads/pair-state") and "/git/trees/" in paths[1]
    assert "/git/blobs/" in paths[2] and all("/octo/widget/" in p for p in paths)
    assert paths[3].endswith("/contents/.pair/config.yaml")
    assert card["number"] == 1


def test_what_cannot_be_read_on_the_branch_is_shown_as_unreadable_and_the_page_stands(
    world: World, tmp_path: Path
) -> None:
    with served(remote_app(world, tmp_path)) as app:
        cards = cards_json(app)
        overview = app.page("/")
        cohort = app.page("/api/v1/cohort").json()["cohort"]
    corrupt, malformed = cards[("octo/broken", 5)], cards[("octo/broken", 6)]
    assert corrupt["status"] == malformed["status"] == "unreadable"
    assert "octo/broken pair-state .pair/batches/card-5/run/journal.jsonl line 2" in str(
        corrupt["why"]
    )
    assert "card-6/run/state.json" in str(malformed["why"]) and "parks" in str(malformed["why"])
    assert "pairbot-pair-state-" not in json.dumps(list(cards.values()))  # no temp path
    assert overview.status_code == 200 and "unreadable" in overview.text
    assert cohort["cards"] == 4 and cohort["byStatus"]["unreadable"] == 2


def test_a_cards_page_shows_its_repositorys_gates_and_budget_from_the_default_branch(
    world: World, tmp_path: Path
) -> None:
    """The repository's `.pair/config.yaml` on its default branch, read in the same look as
    the branch, conditionally: an unchanged config is one 304, a changed one is read again."""
    config = "cycle:\n  maxFixRounds: 5\n  until: merged\n  merge: always\n"
    push_default_file(world.widget, tmp_path / "maintainer", ".pair/config.yaml", config)
    with served(remote_app(world, tmp_path, refresh_s=0.0)) as app:
        card = app.page("/api/v1/cards/octo/widget/1").json()["card"]
        assert card["max_fix_rounds"] == 5, card
        # `until: merged` from the config: the card no longer offers to ask for it, nor
        # leaves the merge to a person (the defaults do: see below).
        assert "/pair implement until: merged" not in card["actions"], card["actions"]
        assert not any(a.startswith("merge PR") for a in card["actions"])
        before = len(world.fake.git_gets)
        app.page("/api/v1/cards/octo/widget/1")
        again = sorted(world.fake.git_gets[before:])
        assert again == [
            ("/repos/octo/widget/contents/.pair/config.yaml", 304),
            ("/repos/octo/widget/git/ref/heads/pair-state", 304),
        ]
        push_default_file(world.widget, tmp_path / "maintainer", ".pair/config.yaml", "{")
        broken = app.page("/api/v1/cards/octo/widget/1").json()["card"]
        assert broken["max_fix_rounds"] == 3  # not valid YAML: the defaults, and a log line
        assert "/pair implement until: merged" in broken["actions"]


def test_a_config_that_is_not_valid_is_named_in_the_log_and_the_defaults_are_shown(
    caplog: pytest.LogCaptureFixture,
) -> None:
    wrong = BranchFile("a" * 40, b"cycle:\n  maxFixRounds: many\n")
    assert config_settings("octo/widget", wrong) == CardSettings()
    assert "octo/widget .pair/config.yaml (default branch)" in caplog.text
    assert "maxFixRounds" in caplog.text and "pairbot-pair-config-" not in caplog.text
    unread = BranchFile("b" * 40, None, "2000000 bytes, over the 16 this reader reads")
    assert config_settings("octo/widget", unread) == CardSettings()
    assert "over the 16" in caplog.text
    written = BranchFile("c" * 40, b"trigger: go\ncycle: {maxFixRounds: 1, until: merged}\n")
    assert config_settings("octo/widget", written) == CardSettings(
        max_fix_rounds=1, trigger="go", until="merged"
    )


def test_a_journal_over_the_size_bound_is_named_and_not_fetched(world: World) -> None:
    forges = forges_of(world)

    async def read() -> BranchFiles | None:
        try:
            reader = StateBranchReader.of(forges.session(INSTALLATION), max_bytes=100)
            return await reader.read("octo/widget", None, wanted)
        finally:
            await forges.aclose()

    files = asyncio.run(read())
    assert files is not None
    path = ".pair/batches/card-1/run/journal.jsonl"
    journal, state = files.files[path], files.files[".pair/batches/card-1/run/state.json"]
    assert journal.data is None and "over the 100 this reader fetches" in journal.problem
    assert not any(journal.sha in p for p, _ in world.fake.git_gets)  # never asked for
    derived = derive_files("octo/widget", "card-1", journal, state)
    assert derived.view.status == "unreadable" and path in derived.view.why


# -- the bounds, without a network ------------------------------------------------------------


class Recorded:
    """A `Fetch` that answers one card per repository and records who was read."""

    def __init__(self) -> None:
        self.read: list[str] = []

    async def __call__(
        self, repo: str, installation: int, previous: BranchFiles | None
    ) -> BranchFiles | None:
        self.read.append(repo)
        journal = b'{"kind": "cycle", "key": "card-1", "at": "t", "data": {"event": "bound"}}\n'
        path = ".pair/batches/card-1/run/journal.jsonl"
        return BranchFiles("a" * 40, {path: BranchFile("b" * 40, journal)})


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_page_view_reads_at_most_n_repositories_and_each_at_most_every_m_seconds() -> None:
    names = [f"octo/r{i}" for i in range(5)]

    async def repos() -> Sequence[tuple[str, int]]:
        return [(name, 1) for name in names]

    fetch, clock = Recorded(), Clock()
    remote = RemoteState(fetch, repos, refresh_s=30.0, refresh_max=2, clock=clock)

    def view(readable: object = None) -> list[str]:
        start = len(fetch.read)
        cards = asyncio.run(remote.cards(lambda r: readable is None or r == readable))
        assert all(c.derive().view.number == 1 for c in cards)
        return sorted(fetch.read[start:])

    assert view() == ["octo/r0", "octo/r1"]  # never read first, two a view
    assert view() == ["octo/r2", "octo/r3"]
    assert view() == ["octo/r4"]
    assert view() == []  # every reading is younger than 30 s
    clock.now += 31
    assert view("octo/r3") == ["octo/r3"]  # a card's page reads its own repository only
    assert view() == ["octo/r0", "octo/r1"]  # then the longest unread


def test_the_app_reads_pair_state_only_on_github_with_execution_actions(tmp_path: Path) -> None:
    store = make_store(tmp_path / "s.sqlite3")
    github = GitHubForges(app_id=1, private_key="k", base_url="http://127.0.0.1:9")
    env = {"PAIR_STATE_REFRESH_MAX": "3", "PAIR_STATE_REFRESH_S": "12.5"}
    remote = remote_state_for("actions", github, store, env)
    assert remote is not None and (remote.refresh_max, remote.refresh_s) == (3, 12.5)
    assert remote_state_for("worker", github, store, env) is None
    assert remote_state_for("actions", LocalForges(tmp_path / "forge"), store, env) is None
    defaults = remote_state_for("actions", github, store, {})
    assert defaults is not None and (defaults.refresh_max, defaults.refresh_s) == (8, 30.0)
    for name, value in (("PAIR_STATE_REFRESH_MAX", "0"), ("PAIR_STATE_REFRESH_S", "soon")):
        with pytest.raises(ConfigError, match=f"{name} is '{value}': expected"):
            refresh_settings({name: value})
