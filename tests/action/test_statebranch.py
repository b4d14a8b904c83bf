"""The `pair-state` branch against real git: a bare repository as origin, clones as runners.

Every test ends by checking that the runners' checkouts are exactly as they were: HEAD, the
current branch, and `git status` (runner A carries a staged edit and an untracked file, which a
tool using the default index or work tree would disturb). HOME points at an empty directory and
the system config is off, so git has no identity but the one the module passes.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from action.statebranch import (
    DELIVERIES_FILE,
    LOCK_FILE,
    LeaseNotHeldError,
    LockLease,
    StateBranch,
    StateBranchConflict,
    StateBranchGitError,
    lock_is_stale,
    run_locked,
)
from app.engine.jsonl import append_record, read_records
from app.engine.runstate import RunLocus
from tests.support.git import git, run_git

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
STALE_S = 30 * 60.0


@dataclass
class Clock:
    now: datetime = T0

    def __call__(self) -> datetime:
        return self.now


@dataclass
class Runner:
    """One clone standing for one Actions runner, and its view before the test touched it."""

    path: Path
    head: str = ""
    branch: str = ""
    status: str = ""

    def snapshot(self) -> None:
        self.head = git(self.path, "rev-parse", "HEAD")
        self.branch = git(self.path, "symbolic-ref", "HEAD")
        self.status = git(self.path, "status", "--porcelain=v1", "--untracked-files=all")

    def assert_untouched(self) -> None:
        assert git(self.path, "rev-parse", "HEAD") == self.head
        assert git(self.path, "symbolic-ref", "HEAD") == self.branch
        assert git(self.path, "status", "--porcelain=v1", "--untracked-files=all") == self.status


@dataclass
class World:
    tmp: Path
    origin: Path
    a: Runner
    b: Runner
    main: str
    clock: Clock = field(default_factory=Clock)

    def state(self, runner: Runner, host: str, clock: Clock | None = None) -> StateBranch:
        return StateBranch(
            runner.path,
            clock=clock or self.clock,
            host_id=host,
            stale_after_s=STALE_S,
        )

    def dir(self, name: str) -> Path:
        path = self.tmp / "dirs" / name
        path.mkdir(parents=True)
        return path

    def origin_files(self) -> dict[str, str]:
        listing = git(self.origin, "ls-tree", "-r", "--name-only", "pair-state").split()
        # Byte for byte: a journal's trailing newline is part of what was pushed.
        return {p: run_git(self.origin, "show", f"pair-state:{p}").stdout for p in listing}

    def assert_untouched(self) -> None:
        self.a.assert_untouched()
        self.b.assert_untouched()
        assert git(self.origin, "rev-parse", "refs/heads/main").strip() == self.main


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.delenv("GIT_CONFIG_GLOBAL", raising=False)
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "--quiet", "--bare", "--initial-branch=main", str(origin))
    seed = tmp_path / "seed"
    git(tmp_path, "clone", "--quiet", str(origin), str(seed))
    (seed / "README.md").write_text("project\n")
    git(seed, "add", "README.md")
    git(seed, "commit", "--quiet", "-m", "initial")
    git(seed, "push", "--quiet", "origin", "HEAD:refs/heads/main")
    runners = []
    for name in ("a", "b"):
        path = tmp_path / f"runner-{name}"
        git(tmp_path, "clone", "--quiet", str(origin), str(path))
        runners.append(Runner(path))
    a, b = runners
    # Runner A has work in progress: a staged edit and an untracked file.
    (a.path / "README.md").write_text("project, edited\n")
    git(a.path, "add", "README.md")
    (a.path / "notes.txt").write_text("untracked\n")
    for runner in runners:
        runner.snapshot()
    main = git(origin, "rev-parse", "refs/heads/main").strip()
    return World(tmp=tmp_path, origin=origin, a=a, b=b, main=main)


def write_run_state(root: Path, batch: str, record: dict[str, object]) -> RunLocus:
    locus = RunLocus.for_batch(root, batch)
    append_record(locus.journal, record)
    locus.state.parent.mkdir(parents=True, exist_ok=True)
    locus.state.write_text('{"version": 1, "parks": {}}\n')
    return locus


def test_first_push_creates_an_orphan_branch_and_leaves_main_alone(world: World) -> None:
    state = world.state(world.a, "host-a")
    assert state.pull(world.dir("empty")).tip is None

    lease = state.try_lock("run-1")
    assert lease is not None
    work = world.dir("work")
    write_run_state(work, "b1", {"kind": "step-started"})
    (work / ".pair" / "batches" / "card-7").mkdir(parents=True)
    (work / ".pair" / "batches" / "card-7" / "batch.yaml").write_text("phases: []\n")
    (work / ".pair" / "batches" / "b1" / "run" / "step.lock").write_text("{}")
    tip = state.push(work, "pairbot: step", lease, card_batches=["card-7"])

    assert git(world.origin, "rev-parse", "pair-state").strip() == tip
    # An orphan: no history shared with main.
    roots = git(world.origin, "rev-list", "--max-parents=0", "pair-state").split()
    assert world.main not in git(world.origin, "rev-list", "pair-state").split()
    assert len(roots) == 1
    merge_base = subprocess.run(
        ["git", "merge-base", "main", "pair-state"],
        cwd=world.origin,
        capture_output=True,
        check=False,
    )
    assert merge_base.returncode == 1
    files = world.origin_files()
    assert set(files) == {
        LOCK_FILE,
        ".pair/batches/b1/run/journal.jsonl",
        ".pair/batches/b1/run/state.json",
        ".pair/batches/card-7/batch.yaml",
    }
    assert json.loads(files[LOCK_FILE]) == {
        "runId": "run-1",
        "host": "host-a",
        "at": T0.isoformat(),
    }
    author = git(world.origin, "log", "-1", "--format=%an <%ae>", "pair-state").strip()
    assert author == "pairbot <pairbot@users.noreply.invalid>"
    world.assert_untouched()


def test_pull_materialises_what_was_pushed(world: World) -> None:
    a = world.state(world.a, "host-a")
    lease = a.try_lock("run-1")
    assert lease is not None
    work = world.dir("work")
    write_run_state(work, "b1", {"kind": "step-started", "n": 1})
    manifest = work / ".pair" / "batches" / "card-7" / "batch.yaml"
    manifest.parent.mkdir(parents=True)
    manifest.write_text("phases: []\n")
    owed = '[{"kind": "card", "number": 7, "comment_id": "1"}]\n'  # action.acks
    (work / ".pair" / "acks.json").write_text(owed)
    tip = a.push(work, "pairbot: step", lease, card_batches=["card-7"])

    into = world.dir("into")
    pulled = world.state(world.b, "host-b").pull(into)
    assert pulled.tip == tip
    assert (into / ".pair" / "acks.json").read_text() == owed
    assert (into / ".pair" / "batches" / "card-7" / "batch.yaml").read_text() == "phases: []\n"
    locus = RunLocus.for_batch(into, "b1")
    assert read_records(locus.journal) == [{"kind": "step-started", "n": 1}]
    assert locus.state.read_text() == '{"version": 1, "parks": {}}\n'
    assert (into / ".pair" / "batches" / "card-7" / "batch.yaml").read_text() == "phases: []\n"
    # The lock lives on the branch only.
    assert not (into / LOCK_FILE).exists()
    world.assert_untouched()


def test_push_lays_files_over_the_branch_and_keeps_recorded_manifests(world: World) -> None:
    a = world.state(world.a, "host-a")
    lease = a.try_lock("run-1")
    assert lease is not None
    first = world.dir("first")
    write_run_state(first, "b1", {"n": 1})
    manifest = first / ".pair" / "batches" / "card-7" / "batch.yaml"
    manifest.parent.mkdir(parents=True)
    manifest.write_text("v: 1\n")
    a.push(first, "one", lease, card_batches=["card-7"])

    # A second tick works in a directory holding only another batch and the card's new manifest.
    second = world.dir("second")
    write_run_state(second, "b2", {"n": 2})
    manifest = second / ".pair" / "batches" / "card-7" / "batch.yaml"
    manifest.parent.mkdir(parents=True)
    manifest.write_text("v: 2\n")
    tip = a.push(second, "two", lease)
    files = world.origin_files()
    assert files[".pair/batches/b1/run/journal.jsonl"] == '{"n":1}\n'
    assert files[".pair/batches/b2/run/journal.jsonl"] == '{"n":2}\n'
    assert files[".pair/batches/card-7/batch.yaml"] == "v: 2\n"
    # Nothing changed: no empty commit.
    assert a.push(second, "three", lease) == tip
    world.assert_untouched()


def test_a_held_lock_makes_the_other_runner_skip_until_released(world: World) -> None:
    a = world.state(world.a, "host-a")
    b = world.state(world.b, "host-b")
    lease = a.try_lock("run-1")
    assert lease is not None
    assert b.try_lock("run-2") is None
    assert b.release(lease.__class__("run-2", "host-b", T0.isoformat(), "0" * 40)) is False

    assert a.release(lease) is True
    assert LOCK_FILE not in world.origin_files()
    assert a.release(lease) is False  # already gone
    other = b.try_lock("run-2")
    assert other is not None
    assert json.loads(world.origin_files()[LOCK_FILE])["runId"] == "run-2"
    world.assert_untouched()


def _contend(
    state: StateBranch,
    run_id: str,
    barrier: threading.Barrier,
    results: list[LockLease | None],
    index: int,
) -> None:
    barrier.wait()
    results[index] = state.try_lock(run_id)


def test_racing_runners_get_exactly_one_lease(world: World) -> None:
    runners = [world.a, world.b]
    for name in ("c", "d"):
        path = world.tmp / f"runner-{name}"
        git(world.tmp, "clone", "--quiet", str(world.origin), str(path))
        runners.append(Runner(path))
    for round_ in range(3):
        results: list[LockLease | None] = [None] * len(runners)
        barrier = threading.Barrier(len(runners))
        threads = [
            threading.Thread(
                target=_contend,
                args=(world.state(runner, f"host-{i}"), f"run-{round_}-{i}", barrier, results, i),
            )
            for i, runner in enumerate(runners)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        winners = [lease for lease in results if lease is not None]
        assert len(winners) == 1
        winner = winners[0]
        assert json.loads(world.origin_files()[LOCK_FILE])["runId"] == winner.run_id
        owner = runners[int(winner.host.removeprefix("host-"))]
        assert world.state(owner, winner.host).release(winner) is True
    world.assert_untouched()


class _RaceAfterFetch(StateBranch):
    """A runner whose next fetch is followed, before it pushes, by another runner's move.

    The seam is the private `_fetch`; it makes the lost race deterministic instead of hoping
    threads interleave.
    """

    def __init__(self, *args: object, then: StateBranch, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.then = then
        self.fired = False

    def _fetch(self) -> str | None:
        tip = super()._fetch()
        if not self.fired:
            self.fired = True
            assert self.then.try_lock("run-fast") is not None
        return tip


def test_a_push_rejected_by_a_faster_locker_means_no_lease(world: World) -> None:
    fast = world.state(world.b, "host-b")
    slow = _RaceAfterFetch(world.a.path, clock=world.clock, host_id="host-a", then=fast)
    assert slow.try_lock("run-slow") is None
    assert json.loads(world.origin_files()[LOCK_FILE])["runId"] == "run-fast"
    world.assert_untouched()


def test_a_stale_lock_is_reclaimed_and_a_fresh_one_is_not(world: World) -> None:
    a = world.state(world.a, "host-a")
    lease_a = a.try_lock("run-1")
    assert lease_a is not None
    later = Clock(T0 + timedelta(seconds=STALE_S - 60))
    b = world.state(world.b, "host-b", clock=later)
    assert b.try_lock("run-2") is None

    later.now = T0 + timedelta(seconds=STALE_S + 60)
    lease_b = b.try_lock("run-2")
    assert lease_b is not None
    assert json.loads(world.origin_files()[LOCK_FILE]) == {
        "runId": "run-2",
        "host": "host-b",
        "at": later.now.isoformat(),
    }
    subject = git(world.origin, "log", "-1", "--format=%s", "pair-state")
    assert "reclaim stale lock" in subject

    # The run that lost its lock can no longer write, and its release leaves B's lock alone.
    work = world.dir("work")
    write_run_state(work, "b1", {"late": True})
    with pytest.raises(StateBranchConflict):
        a.push(work, "late step", lease_a)
    a.pull(world.dir("repull"))
    with pytest.raises(LeaseNotHeldError):
        a.push(work, "late step", lease_a)
    assert a.release(lease_a) is False
    assert json.loads(world.origin_files()[LOCK_FILE])["runId"] == "run-2"
    assert ".pair/batches/b1/run/journal.jsonl" not in world.origin_files()
    world.assert_untouched()


def test_push_without_a_current_lease_is_refused(world: World) -> None:
    a = world.state(world.a, "host-a")
    work = world.dir("work")
    write_run_state(work, "b1", {"n": 1})
    forged = LockLease(run_id="run-1", host="host-a", at=T0.isoformat(), commit="0" * 40)
    with pytest.raises(LeaseNotHeldError, match="does not hold its lock"):
        a.push(work, "never locked", forged)

    lease = a.try_lock("run-1")
    assert lease is not None
    a.push(work, "step", lease)
    assert a.release(lease) is True
    with pytest.raises(LeaseNotHeldError):
        a.push(work, "after release", lease)
    # Another runner's lock is not ours either, even after pulling it.
    b = world.state(world.b, "host-b")
    assert b.try_lock("run-2") is not None
    a.pull(world.dir("pulled"))
    with pytest.raises(LeaseNotHeldError):
        a.push(work, "not ours", lease)
    world.assert_untouched()


def test_a_push_rejected_because_the_branch_moved_loses_nothing(world: World) -> None:
    a = world.state(world.a, "host-a")
    lease = a.try_lock("run-1")
    assert lease is not None
    work = world.dir("work")
    a.pull(work)
    locus = write_run_state(work, "b1", {"mine": 1})

    # Someone else moves the branch (keeping the lock): a plain commit from another clone.
    other = world.tmp / "other"
    git(world.tmp, "clone", "--quiet", "--branch", "pair-state", str(world.origin), str(other))
    theirs = other / ".pair" / "batches" / "b2" / "run" / "journal.jsonl"
    theirs.parent.mkdir(parents=True)
    theirs.write_text('{"theirs":1}\n')
    git(other, "add", ".")
    git(other, "commit", "--quiet", "-m", "theirs")
    git(other, "push", "--quiet", "origin", "pair-state")
    moved = git(world.origin, "rev-parse", "pair-state").strip()

    with pytest.raises(StateBranchConflict, match="pull again"):
        a.push(work, "step", lease)
    assert git(world.origin, "rev-parse", "pair-state").strip() == moved
    assert read_records(locus.journal) == [{"mine": 1}]  # our files are as we left them

    again = world.dir("again")
    assert a.pull(again).tip == moved
    append_record(RunLocus.for_batch(again, "b1").journal, {"mine": 1})
    tip = a.push(again, "step", lease)
    assert git(world.origin, "rev-parse", f"{tip}^").strip() == moved
    files = world.origin_files()
    assert files[".pair/batches/b1/run/journal.jsonl"] == '{"mine":1}\n'
    assert files[".pair/batches/b2/run/journal.jsonl"] == '{"theirs":1}\n'
    assert json.loads(files[LOCK_FILE])["runId"] == "run-1"
    world.assert_untouched()


def test_git_failures_are_operator_errors_without_credentials(world: World) -> None:
    git(world.a.path, "remote", "add", "private", "https://user:s3cret@127.0.0.1:9/x.git")
    state = StateBranch(world.a.path, remote="private", clock=world.clock, host_id="host-a")
    with pytest.raises(StateBranchGitError) as caught:
        state.pull(world.dir("into"))
    assert "s3cret" not in str(caught.value)
    assert "fetch" in str(caught.value)
    with pytest.raises(ValueError, match="remote name"):
        StateBranch(world.a.path, remote="https://x@y/z", clock=world.clock, host_id="h")
    world.assert_untouched()


@pytest.mark.parametrize(
    ("content", "age_s", "stale"),
    [
        pytest.param({"at": T0.isoformat()}, STALE_S - 1, False, id="fresh"),
        pytest.param({"at": T0.isoformat()}, STALE_S + 1, True, id="old"),
        pytest.param({"at": "2026-05-01T12:00:00"}, STALE_S + 1, True, id="naive-utc"),
        pytest.param({"at": T0.isoformat()}, -60, False, id="future-skew"),
        pytest.param({"at": "yesterday"}, 0, True, id="unparseable-at"),
        pytest.param(None, 0, True, id="unreadable"),
    ],
)
def test_lock_staleness(content: dict[str, object] | None, age_s: float, stale: bool) -> None:
    assert lock_is_stale(content, T0 + timedelta(seconds=age_s), STALE_S) is stale


def test_a_push_the_remote_refuses_is_an_error_not_a_lost_race(world: World) -> None:
    hook = world.origin / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'protected branch' >&2\nexit 1\n")
    hook.chmod(0o755)
    state = world.state(world.a, "host-a")
    with pytest.raises(StateBranchGitError, match="protected branch"):
        state.try_lock("run-1")
    world.assert_untouched()


# -- run_locked: one CI run on the branch (the Action's and the Azure Pipelines entry's) --------


def test_run_locked_pushes_checkpoints_and_the_outcome_then_releases(world: World) -> None:
    branch = world.state(world.b, "ci:1")
    root = world.b.path

    async def act(save: Any) -> str:
        (root / ".pair").mkdir(exist_ok=True)
        (root / DELIVERIES_FILE).write_text('{"version": 1, "handled": ["n-1"]}\n')
        await save()
        return "done"

    assert asyncio.run(run_locked(branch, root, "run-1", act, str)) == "done"
    files = world.origin_files()
    assert DELIVERIES_FILE in files and "lock.json" not in files
    log = git(world.origin, "log", "--format=%s", "pair-state")
    assert "pairbot: run run-1 (checkpoint)" in log and "pairbot: unlock run run-1" in log


def test_run_locked_skips_while_another_run_holds_the_lock_and_keeps_a_failed_step(
    world: World,
) -> None:
    holder = world.state(world.a, "ci:a")
    lease = holder.try_lock("run-a")
    assert lease is not None
    waiter = world.state(world.b, "ci:b")
    calls: list[str] = []

    async def act(save: Any) -> str:
        calls.append("ran")
        raise RuntimeError("the step failed")

    done = asyncio.run(run_locked(waiter, world.b.path, "run-b", act, str, wait_s=0.01, poll_s=0))
    assert done is None and calls == []
    holder.release(lease)
    with pytest.raises(RuntimeError):
        asyncio.run(run_locked(waiter, world.b.path, "run-b", act, str))
    log = git(world.origin, "log", "--format=%s", "pair-state")
    assert "pairbot: unlock run run-b" in log.splitlines()[0]
    assert "lock.json" not in world.origin_files()


def test_lessons_travel_on_the_branch_and_nothing_else_under_lessons_does(world: World) -> None:
    a = world.state(world.a, "host-a")
    lease = a.try_lock("run-1")
    assert lease is not None
    work = world.dir("work")
    write_run_state(work, "card-7", {"n": 1})
    lessons = work / ".pair" / "lessons"
    lessons.mkdir(parents=True)
    (lessons / "card-7-abc123.md").write_text("---\ncard: 7\n---\nlesson\n")
    (lessons / "card-0-abc.md").write_text("not a card number\n")
    (lessons / "notes.md").write_text("not a lesson\n")
    (lessons / "card-8-dir.md").mkdir()
    a.push(work, "pairbot: lesson", lease)
    files = world.origin_files()
    assert files[".pair/lessons/card-7-abc123.md"] == "---\ncard: 7\n---\nlesson\n"
    assert not [p for p in files if p.startswith(".pair/lessons/") and "abc123" not in p]

    into = world.dir("into")
    world.state(world.b, "host-b").pull(into)
    assert (into / ".pair" / "lessons" / "card-7-abc123.md").read_text().endswith("lesson\n")


def counting_git(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Put a `git` first on PATH that logs each invocation's subcommand, then runs the real one."""
    import shutil

    real = shutil.which("git")
    assert real is not None
    wrapper_dir = tmp / "counting-git"
    wrapper_dir.mkdir()
    log = tmp / "git-calls.log"
    wrapper = wrapper_dir / "git"
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> {str(log)!r}\nexec {real!r} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper_dir}:{Path(real).parent}")
    return log


def subcommands(log: Path) -> list[str]:
    """The git subcommand of each logged call (the word after the `-C`/`-c` options)."""
    found = []
    for line in log.read_text().splitlines() if log.exists() else []:
        words = iter(line.split())
        for word in words:
            if word in ("-C", "-c"):
                next(words, None)
            else:
                found.append(word)
                break
    return found


def test_an_idle_run_spends_few_git_processes_and_leaves_the_branch_as_it_was(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = world.state(world.a, "ci:0")
    lease = first.try_lock("run-0")
    assert lease is not None
    work = world.dir("work")
    write_run_state(work, "b1", {"step": 1})
    first.push(work, "state", lease)
    assert first.release(lease) is True
    before = git(world.origin, "rev-parse", "pair-state^{tree}").strip()

    log = counting_git(world.tmp, monkeypatch)
    branch = world.state(world.b, "ci:1")

    async def act(save: Any) -> str:
        return "nothing-ready"

    assert asyncio.run(run_locked(branch, world.b.path, "run-1", act, str)) == "nothing-ready"
    # Lock: fetch, rev-parse (tip and tree), ls-tree, hash-object, update-index, write-tree,
    # commit-tree, push. The pull reads the journal (cat-file); the final push finds nothing
    # changed; the unlock commits the tree the run locked (commit-tree, push).
    assert subcommands(log) == [
        "fetch",
        "rev-parse",
        "ls-tree",
        "hash-object",
        "update-index",
        "write-tree",
        "commit-tree",
        "push",
        "cat-file",
        "hash-object",
        "commit-tree",
        "push",
    ]
    assert (world.b.path / ".pair/batches/b1/run/journal.jsonl").is_file()
    assert git(world.origin, "rev-parse", "pair-state^{tree}").strip() == before


def test_release_fetches_when_the_tip_it_last_saw_does_not_carry_its_lock(world: World) -> None:
    # An object that never locked (no tip seen) and one whose tip predates the lock both fetch
    # before deciding; neither takes the other's word for what the remote holds.
    holder = world.state(world.a, "ci:a")
    lease = holder.try_lock("run-a")
    assert lease is not None
    assert world.state(world.a, "ci:a").release(lease) is True
    observer = world.state(world.b, "ci:a")
    observer.pull(world.dir("seen"))  # the tip without a lock
    lease = holder.try_lock("run-a2")
    assert lease is not None
    assert observer.release(lease) is True
    assert LOCK_FILE not in world.origin_files()
    world.assert_untouched()


def test_a_steps_live_log_stays_on_the_runner_and_never_travels(world: World) -> None:
    from app.engine.livelog import LiveLog

    a = world.state(world.a, "host-a")
    lease = a.try_lock("run-1")
    assert lease is not None
    work = world.dir("work")
    locus = write_run_state(work, "card-7", {"kind": "step-started", "session": "s1"})
    live = LiveLog(locus.directory, "s1")
    live.line("agent output that belongs to this runner only")
    live.close()
    assert live.path.is_file()
    a.push(work, "pairbot: step", lease, card_batches=["card-7"])
    files = world.origin_files()
    assert ".pair/batches/card-7/run/journal.jsonl" in files
    assert not [path for path in files if "/live/" in path or path.endswith(".log")]
    world.assert_untouched()
