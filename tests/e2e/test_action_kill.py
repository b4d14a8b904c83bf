"""SIGKILL the Action at random moments of its steps; the next runner resumes, nothing doubles.

Each invocation is `python -m action` on a fresh checkout (a new runner) against the fake GitHub
served on loopback, with the run-state only on the `pair-state` branch of a bare repository
(`tests/e2e/action_harness.py`). A runner that dies takes everything with it, so a kill here
freezes the Action's whole process tree (SIGSTOP), then SIGKILLs it: the Action, its git
children and the agent, which runs in a session of its own. Processes that still carry the
run's HOME (or sit in its directory) are swept up before the next runner starts.

A killed run leaves its `pair-state` lock behind. The real timeout is 30 minutes; these tests
set `PAIR_STATE_STALE_AFTER_S` to half a second so the next runner reclaims it (a runner that
finds it fresh exits cleanly as `nothing-ready`, which is counted, not failed).

The random test drives two cards, one after the other, from an unkilled `/pair implement` to
`ready-for-merge` through a blocking first review: apply, verify, red, fix, verify, publish.
The first card runs unkilled and measures, for each step on this machine, its duration and
when its first checkpoint (the step's outcome saved on `pair-state`) was pushed. Then each
step of the second card is killed twice before it may finish, on a fixed seeded budget sized
for CI: once before its checkpoint and once after it, each after a delay drawn by a seeded
`random.Random` within that part of the step (scaled by how much slower or faster the machine
runs since); idle ticks are killed to make up KILLS. The step to come is read from the state
branch, so a kill that lands after the step was saved counts as that step's. After every
round: no unexpected request, no comment marker twice, every journal line on `pair-state`
complete and parsing; after every unkilled round, the card
took the step the state branch said was next (or a later one it found done unrecorded), and the
card and its PR carry exactly one, the same, `pr-state:*` label. At the end: every card is
`ready-for-merge`, each has one PR, each pairbot comment exists once, `pair-review` success
sits on each final reviewed head, no status was set twice in a row on a head, and the lock is
gone. A test never asserts a duration; the delays only aim the kills.

Targeted kills land where a random one rarely does: a `/pair implement` run killed while its
propose runs (after its 👀), and a step killed the moment the card's branch moved (its result is
pushed, its outcome not yet saved): work pushed but unrecorded still gets its PR, a plan pushed
but unrecorded still waits for approval, a review saved with its outcome is never run twice.
A label written by a run killed before its final push is ahead of the journal: the next step
that runs reconciles it with the host.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import random
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from action.context import ENV_STALE_AFTER_S
from tests.e2e.action_harness import ActionRepo, Invocation, action_repo, read_outputs
from tests.support.git import run_git

SEED = 20_261_201
CARDS = 2  # driven one after the other, each from /pair implement to ready-for-merge
# Kills of each step of the second card (apply, verify, red, fix, verify, publish) before it may
# finish: one before its checkpoint, one after it.
PER_STEP = 2
CYCLE_STEPS = 6  # apply, verify, red, fix, verify, publish: the steps after the comment's propose
KILLS = CYCLE_STEPS * PER_STEP + 2  # at least; idle ticks make up what the steps did not take
MAX_ROUNDS = 200  # a bound on a run that stopped making progress, never a timing assertion
STALE_AFTER_S = "0.5"
LOCK_HELD = "another pairbot run holds the pair-state lock"
REVIEW_CONTEXT = "pair-review"
_PROC = Path("/proc")

needs_proc = pytest.mark.skipif(not _PROC.exists(), reason="walks process trees via /proc")


# ---------------------------------------------------------------- processes


def _parents() -> dict[int, int]:
    """pid → parent pid of every live process."""
    parents: dict[int, int] = {}
    for entry in _PROC.iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat = (entry / "stat").read_text()
                # The command name is in parentheses and may hold spaces: split after it.
                parents[int(entry.name)] = int(stat[stat.rindex(")") + 2 :].split()[1])
    return parents


def _descendants(pid: int) -> set[int]:
    parents = _parents()
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _left_behind(home: Path) -> set[int]:
    """Processes of one run that survived it: they carry its HOME or work inside its dir."""
    needle = f"HOME={home}".encode()
    home = home.resolve()
    found: set[int] = set()
    for entry in _PROC.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                found.add(int(entry.name))
                continue
            if (entry / "cwd").readlink().is_relative_to(home):
                found.add(int(entry.name))
    return found


def _kill_runner(process: subprocess.Popen[str], home: Path) -> None:
    """The runner dies: freeze the Action's whole tree, SIGKILL all of it, sweep up stragglers.

    Freezing first means nothing can fork a child we have not seen; the agent runs in a session
    of its own, so killing one process group would miss it.
    """
    tree = {process.pid}
    with contextlib.suppress(ProcessLookupError):
        os.kill(process.pid, signal.SIGSTOP)
    while new := _descendants(process.pid) - tree:
        for pid in new:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        tree |= new
    for pid in tree:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    process.communicate(timeout=30)
    deadline = time.monotonic() + 10
    while stragglers := _left_behind(home):
        assert time.monotonic() < deadline, f"processes of {home} survive SIGKILL: {stragglers}"
        for pid in stragglers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)


# ---------------------------------------------------------------- the bare repository


def _tip(repo: ActionRepo, branch: str) -> str | None:
    return (
        run_git(
            repo.bare, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"
        ).stdout.strip()
        or None
    )


def _polled_tip(repo: ActionRepo, branch: str) -> str | None:
    """`_tip` read straight from the bare repository's ref files, for cues polled every few ms.

    A `git rev-parse` per poll would keep a core busy forking git beside the run it watches.
    git 2.x keeps a branch as a loose ref file or, once packed, as a line of `packed-refs`.
    """
    with contextlib.suppress(FileNotFoundError):
        return (repo.bare / "refs" / "heads" / branch).read_text().strip() or None
    with contextlib.suppress(FileNotFoundError):
        for line in (repo.bare / "packed-refs").read_text().splitlines():
            sha, _, ref = line.partition(" ")
            if ref == f"refs/heads/{branch}":
                return sha
    return None


def _lock(repo: ActionRepo, commit: str = "pair-state") -> dict[str, Any] | None:
    shown = run_git(repo.bare, "show", f"{commit}:lock.json")
    return json.loads(shown.stdout) if shown.returncode == 0 else None


def _state_subject(repo: ActionRepo, commit: str = "pair-state") -> str:
    return run_git(repo.bare, "log", "-1", "--format=%s", commit).stdout.strip()


def _journal(repo: ActionRepo, card: int) -> list[dict[str, Any]]:
    """A card's journal on `pair-state`: every line complete and parsing as a JSON object."""
    path = f"pair-state:.pair/batches/card-{card}/run/journal.jsonl"
    shown = run_git(repo.bare, "show", path)
    if shown.returncode != 0:
        return []
    assert shown.stdout.endswith("\n"), "the journal on pair-state ends in a torn line"
    records = []
    for number, line in enumerate(shown.stdout.splitlines(), start=1):
        record = json.loads(line)  # raises on a line that does not parse
        assert isinstance(record, dict), f"journal line {number} is not an object"
        records.append(record)
    return records


def _reclaims(repo: ActionRepo) -> int:
    log = run_git(repo.bare, "log", "--format=%s", "pair-state").stdout
    return sum(line.startswith("pairbot: reclaim stale lock") for line in log.splitlines())


# ---------------------------------------------------------------- one round


@dataclass
class Round:
    """What one invocation did: killed (where) or finished (with which outputs)."""

    killed: bool
    landing: str
    outputs: dict[str, str]
    stdout: str = ""
    seconds: float = 0.0  # from start to exit, when it was not killed


def _landing(repo: ActionRepo, run_id: str, tip_before: str | None, writes: int) -> str:
    """Where a kill landed, judged by what the bare repository and the fake GitHub saw."""
    # One snapshot of the branch: a push the dead runner sent may still land while we look.
    tip = _tip(repo, "pair-state")
    if tip == tip_before or tip is None:
        return "before taking the lock" if writes == 0 else "with a foreign lock (?)"
    subject = run_git(repo.bare, "log", "-1", "--format=%s", tip).stdout.strip()
    lock = _lock(repo, tip)
    ours = lock is not None and str(lock.get("runId", "")).startswith(f"{run_id}-")
    if f"run {run_id}-" not in subject:
        # The server finished a push the previous (killed) runner had sent: it landed late.
        return "before taking the lock, as a dead run's push landed"
    if ours and subject.startswith("pairbot: run "):
        return "after the run-state push, before the release"
    if ours:
        return "holding the lock, " + (
            "before any GitHub write" if writes == 0 else "after GitHub writes"
        )
    if subject.startswith("pairbot: unlock"):
        return "after the release"
    return f"elsewhere ({subject})"


def _checkpointed_since(repo: ActionRepo, tip: str | None, now: str | None) -> bool:
    """Whether a checkpoint commit reached `pair-state` between tips `tip` and `now`."""
    if now is None or now == tip:
        return False
    # Every commit since the last look: two pushes may land between two polls.
    span = f"{tip}..{now}" if tip else now
    return "(checkpoint)" in run_git(repo.bare, "log", "--format=%s", span).stdout


def _round(repo: ActionRepo, delay: float | None, *, after_checkpoint: bool = False) -> Round:
    """One scheduled tick on a fresh runner, SIGKILLed `delay` seconds after it started, or
    with `after_checkpoint` after its first checkpoint reached `pair-state` (None: never)."""
    tip_before = _tip(repo, "pair-state")
    writes_before = repo.fake.mutations
    process, home = repo.popen(repo.schedule_event())
    started = time.monotonic()
    run_id = str(1000 + int(home.name.removeprefix("run-")))  # the harness's GITHUB_RUN_ID
    deadline = None if delay is None or after_checkpoint else started + delay
    watching = delay is not None and after_checkpoint  # polls for the checkpoint until seen
    tip = tip_before
    while True:
        if watching:
            wait = 0.005
        else:
            wait = 240.0 if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            stdout, stderr = process.communicate(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            now = time.monotonic()
            assert now - started < 240, "a tick neither finished nor reached its kill"
        if deadline is not None and now >= deadline:
            _kill_runner(process, home)
            writes = repo.fake.mutations - writes_before
            return Round(True, _landing(repo, run_id, tip_before, writes), {})
        if watching and _checkpointed_since(repo, tip, seen := _polled_tip(repo, "pair-state")):
            assert delay is not None
            watching, deadline = False, time.monotonic() + delay
        elif watching:
            tip = seen
    assert process.returncode in (0, 1), stdout + stderr
    outputs = read_outputs(home / "output")
    assert outputs, stdout + stderr
    return Round(False, "", outputs, stdout, time.monotonic() - started)


def _check_every_round(repo: ActionRepo, cards: list[int]) -> None:
    assert repo.fake.unexpected == []
    doubled = {m: n for m, n in repo.markers().items() if n > 1}
    assert not doubled, doubled
    for card in cards:
        _journal(repo, card)


def _pull_of(journal: list[dict[str, Any]]) -> int | None:
    opened = [r["data"]["number"] for r in journal if _event(r) == "pr"]
    assert len(set(opened)) <= 1, opened  # a card's PR is opened once, whatever was redone
    return opened[0] if opened else None


def _event(record: dict[str, Any]) -> str | None:
    return record["data"].get("event") if record["kind"] == "cycle" else None


def _check_labels(repo: ActionRepo, card: int) -> str:
    """Exactly one `pr-state:*` on the card, and the same one on its PR; which one."""
    labels = repo.state_labels(card)
    assert len(labels) == 1, (card, labels)
    pull = _pull_of(_journal(repo, card))
    if pull is not None:
        assert repo.state_labels(pull) == labels, (card, pull)
    return labels[0]


def _statuses(repo: ActionRepo, sha: str) -> list[tuple[str, str]]:
    return [
        (s["state"], s["description"])
        for s in repo.fake.statuses.get(sha, [])
        if s["context"] == REVIEW_CONTEXT
    ]


# ---------------------------------------------------------------- the tests


def _watched(
    repo: ActionRepo, event: tuple[str, dict[str, Any]]
) -> tuple[dict[str, str], float, float | None]:
    """Run the Action unkilled; its outputs, its wall time from start to exit, and when (from
    its start) its first checkpoint reached `pair-state` (None: it pushed none)."""
    tip = _polled_tip(repo, "pair-state")
    process, home = repo.popen(event)
    started = time.monotonic()
    checkpoint: float | None = None
    while True:
        try:
            stdout, stderr = process.communicate(timeout=0.005)
            break
        except subprocess.TimeoutExpired:
            assert time.monotonic() - started < 240, "an unkilled tick did not finish"
        if checkpoint is None:
            if _checkpointed_since(repo, tip, now := _polled_tip(repo, "pair-state")):
                checkpoint = time.monotonic() - started
            tip = now
    elapsed = time.monotonic() - started
    assert process.returncode == 0, stdout + stderr
    return read_outputs(home / "output"), elapsed, checkpoint


@dataclass
class Calibration:
    """How long each step takes unkilled on this machine now, and the cycle's steps in order."""

    steps: list[str] = field(default_factory=list)  # apply, verify, red, fix, verify, publish
    # Per kind of step (the longer of two verifies), and "idle": seconds from start to exit,
    # and from start to the first checkpoint (None: the step pushes none, e.g. publish).
    seconds: dict[str, float] = field(default_factory=dict)
    checkpoint: dict[str, float | None] = field(default_factory=dict)

    def measured(self, step: str, seconds: float, checkpoint: float | None) -> None:
        if seconds >= self.seconds.get(step, 0.0):
            self.seconds[step] = seconds
            self.checkpoint[step] = checkpoint

    def __str__(self) -> str:
        return ", ".join(
            f"{k} {v:.2f} s"
            + ("" if (c := self.checkpoint[k]) is None else f" (checkpoint {c:.2f} s)")
            for k, v in self.seconds.items()
        )


def _blocking_first_review(repo: ActionRepo, cards: list[int]) -> None:
    """Script the agent: a card's first review blocks (then red and fix), later ones converge.

    Decided from the state branch before every round, not by the agent's own counter, which a
    killed verify would have used up.
    """
    steps = {
        f"card-{card}:verify": ["findings-blocking"]
        for card in cards
        if not any(
            r["kind"] == "outcome" and r["transition"] == "verify" and r["state"] == "advanced"
            for r in _journal(repo, card)
        )
    }
    (repo.scratch / "script.json").write_text(json.dumps({"default": "ok", "steps": steps}))
    (repo.scratch / "script-state.json").unlink(missing_ok=True)


def _is_ready(journal: list[dict[str, Any]]) -> bool:
    labels = [r["data"]["state"] for r in journal if _event(r) == "label"]
    return bool(labels) and labels[-1] == "pr-state:ready-for-merge"


def _steps_done(journal: list[dict[str, Any]]) -> int:
    """How many steps of the cycle the state branch records as done."""
    agent = [r for r in journal if r["kind"] == "outcome" and r.get("state") == "advanced"]
    return len(agent) + any(_event(r) == "synthesis" for r in journal)


@dataclass
class KillRun:
    """The kill test's bookkeeping across cards."""

    repo: ActionRepo
    rng: random.Random
    calibration: Calibration = field(default_factory=Calibration)
    seen: Counter[str] = field(default_factory=Counter)
    kills: Counter[str] = field(default_factory=Counter)
    rounds: int = 0
    load: float = 1.0  # how much slower than at calibration the machine runs now

    def calibrate(self, card: int) -> None:
        """Drive `card` unkilled from `/pair implement` to `ready-for-merge`, then one idle
        tick, measuring each step (the next card's kills are aimed by it)."""
        repo, calibration = self.repo, self.calibration
        event = repo.comment_event("/pair implement", number=card)
        while True:
            _blocking_first_review(repo, [card])
            outputs, seconds, checkpoint = _watched(repo, event)
            _check_every_round(repo, [card])
            step = outputs["transition"] or "idle"
            calibration.measured(step, seconds, checkpoint)
            if step == "idle":
                break
            assert outputs["card"] == str(card), outputs
            calibration.steps.append(step)
            assert _check_labels(repo, card) == f"pr-state:{outputs['status']}"
            event = repo.schedule_event()
        steps = calibration.steps
        assert steps == [
            "propose",
            "apply",
            "verify",
            "red",
            "verify-red",
            "fix",
            "verify",
            "publish",
        ], steps

    def drive(self, card: int, cards: list[int]) -> None:
        """From an unkilled `/pair implement` to `ready-for-merge`, each step killed PER_STEP
        times: first before its checkpoint, then after it (once a kill lands after the step
        was recorded, the card has moved on to the next step)."""
        repo, steps = self.repo, self.calibration.steps
        typical, checkpoint = self.calibration.seconds, self.calibration.checkpoint
        # Killing the comment's own run is a test of its own (below); this one binds the card.
        _blocking_first_review(repo, cards)
        outputs, seconds, _ = _watched(repo, repo.comment_event("/pair implement", number=card))
        assert (outputs["card"], outputs["transition"]) == (str(card), "propose"), outputs
        # The machine's load drifts (other test runs): scale the calibration by how the last
        # unkilled run compared with its own calibrated duration, so kills stay within steps.
        self.load = seconds / typical["propose"]
        killed_here: Counter[int] = Counter()
        while not _is_ready(journal := _journal(repo, card)):
            self.rounds += 1
            assert self.rounds <= MAX_ROUNDS, f"no progress: {dict(self.seen)}"
            # The step the state branch says comes next; it decides the kill's time scale.
            index = min(_steps_done(journal), len(steps) - 1)
            step = steps[index]
            # A step that pushes no checkpoint is killed in its first half, then its second.
            split = checkpoint[step]
            middle = typical[step] / 2 if split is None else split
            delay, after = None, False
            if killed_here[index] == 0:  # before its checkpoint, timed from the start
                delay = self.rng.uniform(0.0, middle) * self.load
            elif killed_here[index] == 1 and split is None:
                delay = self.rng.uniform(middle, typical[step]) * self.load
            elif killed_here[index] == 1:  # after it: timed from the checkpoint, seen pushed
                delay, after = self.rng.uniform(0.0, typical[step] - split) * self.load, True
            _blocking_first_review(repo, cards)
            done = _round(repo, delay, after_checkpoint=after)
            _check_every_round(repo, cards)
            if done.killed:
                killed_here[index] += 1
                self.kills[step] += 1
                self.seen[f"{step} killed {done.landing}"] += 1
                continue
            if LOCK_HELD in done.stdout:
                self.seen["found the lock fresh and exited"] += 1
                continue
            transition = done.outputs["transition"]
            # The next runner resumes where the state branch says the card is: it never
            # redoes a recorded step (a saved review included: nothing moved its head), it may
            # find an unrecorded one done, and it never idles while the card has steps left.
            assert done.outputs["card"] == str(card), (step, done.outputs, dict(self.seen))
            assert transition in steps[index:], (step, done.outputs, dict(self.seen))
            self.load = done.seconds / typical[transition]
            how = "ran" if delay is None else "outran the kill"
            self.seen[f"{step} {how}" + (f" as {transition}" if transition != step else "")] += 1
            assert _check_labels(repo, card) == f"pr-state:{done.outputs['status']}"

    def idle_kills(self, cards: list[int]) -> None:
        """Kill idle ticks (every card is ready) until KILLS is made up."""
        typical = self.calibration.seconds["idle"]
        while self.kills.total() < KILLS:
            self.rounds += 1
            assert self.rounds <= MAX_ROUNDS, f"no progress: {dict(self.seen)}"
            done = _round(self.repo, self.rng.uniform(0.0, typical * self.load))
            _check_every_round(self.repo, cards)
            if done.killed:
                self.kills["idle"] += 1
                self.seen[f"idle killed {done.landing}"] += 1
            else:
                assert done.outputs["transition"] == "", done.outputs
                self.seen["idle outran the kill"] += 1
                # Rescale by this tick, as drive() does after every unkilled step: a calibration
                # idle measured in a burst of load would otherwise aim most kills past the end.
                self.load = done.seconds / typical


def _check_card_at_the_end(repo: ActionRepo, card: int, diagnosis: str) -> None:
    assert _check_labels(repo, card) == "pr-state:ready-for-merge", diagnosis
    journal = _journal(repo, card)
    pull = _pull_of(journal)
    assert pull is not None, diagnosis
    assert repo.fake.pulls[pull].head_ref == f"pair/card-{card}"
    markers = [m for m in repo.markers() if f" #{card} " in m]
    kinds = sorted(m.split()[1].removeprefix("pair:") for m in markers)
    assert kinds == ["review", "synthesis", "tracking"], markers
    reviewed = [r["data"]["head"] for r in journal if _event(r) == "reviewed"]
    assert reviewed and repo.fake.pulls[pull].head_sha == reviewed[-1], diagnosis
    statuses = _statuses(repo, reviewed[-1])
    assert statuses and statuses[-1][0] == "success", statuses


@pytest.mark.slow
@pytest.mark.slow_first(150)
@needs_proc
def test_random_kills_of_every_step_resume_and_nothing_doubles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_STALE_AFTER_S, STALE_AFTER_S)  # the harness passes its env on
    # The kills are aimed at the steps: a tick's catch-up listing (before the lock) would
    # shift them towards "before taking the lock"; the catch-up has tests of its own.
    monkeypatch.setenv("PAIR_CATCHUP_WINDOW_S", "0")
    with action_repo(tmp_path) as repo:
        run = KillRun(repo, random.Random(SEED))
        cards = [repo.card]
        cards += [
            repo.fake.seed_issue(f"Card {n}", "AC-1: it works\n") for n in range(2, CARDS + 1)
        ]
        run.calibrate(cards[0])  # the first card's cycle, unkilled, aims the kills
        calibration = run.calibration
        for number, card in enumerate(cards[1:], start=2):
            run.drive(card, cards[:number])
        run.idle_kills(cards)

        diagnosis = f"{run.kills.total()} kills (seed {SEED}): {dict(run.kills)}; {dict(run.seen)}"
        # One last unkilled tick, once the last kill's lock is stale: ready cards cost nothing,
        # and the lock is reclaimed and released.
        time.sleep(float(STALE_AFTER_S))
        idle = _round(repo, None)
        assert idle.outputs["status"] == "nothing-ready", (idle.outputs, diagnosis)
        assert LOCK_HELD not in idle.stdout, diagnosis
        assert _lock(repo) is None, diagnosis
        assert repo.fake.unexpected == []
        markers = repo.markers()
        assert set(markers.values()) == {1}, markers
        assert len(repo.fake.pulls) == len(cards), diagnosis
        for card in cards:
            _check_card_at_the_end(repo, card, diagnosis)
        for sha in repo.fake.statuses:  # never the same status twice in a row on a head
            mine = _statuses(repo, sha)
            assert all(a != b for a, b in itertools.pairwise(mine)), (sha, mine)
        assert run.kills.total() >= KILLS, diagnosis
        # Some kills left a lock behind, and a later runner reclaimed it.
        assert sum(n for what, n in run.seen.items() if "lock," in what), diagnosis
        assert _reclaims(repo) >= 1, diagnosis
        print(f"\n{diagnosis}; {run.rounds} rounds; calibration: {calibration}")


def _kill_when(
    repo: ActionRepo,
    event: tuple[str, dict[str, Any]],
    cue: Callable[[], bool],
    extra_env: dict[str, str] | None = None,
) -> None:
    """Start the Action and kill its runner the moment `cue()` holds (polled)."""
    process, home = repo.popen(event, extra_env=extra_env)
    while process.poll() is None:
        if cue():
            _kill_runner(process, home)
            return
        time.sleep(0.005)
    out, err = process.communicate()
    pytest.fail(f"the run ended before its cue: {out}{err}")


def _until_stale() -> None:
    # The killed run's lock must age past PAIR_STATE_STALE_AFTER_S before a tick may take it.
    time.sleep(float(STALE_AFTER_S) + 0.2)


def _check_one_card_ready(repo: ActionRepo, runs: list[Invocation]) -> None:
    outputs = [r.outputs for r in runs]
    # What each run said last (a summary names why it did nothing), for a failure's message.
    said = [(r.outputs, (r.summary + r.stdout + r.stderr)[-1500:]) for r in runs]
    assert runs[-1].outputs["status"] == "nothing-ready", said
    assert repo.fake.unexpected == []
    assert set(repo.markers().values()) == {1}, repo.markers()
    assert len(repo.fake.pulls) == 1, outputs
    _check_card_at_the_end(repo, repo.card, str(outputs))


@pytest.mark.slow
@pytest.mark.slow_first(15)
@needs_proc
def test_a_comment_killed_while_its_propose_runs_is_resumed_by_the_next_tick(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_STALE_AFTER_S, STALE_AFTER_S)
    with action_repo(tmp_path) as repo:
        # The propose's agent holds until released, so the kill lands while it runs however
        # slowly this test polls: on a loaded machine a propose left to finish pushed its plan
        # before the kill, and the next tick rightly went on to apply.
        release = repo.scratch / "release"
        (repo.scratch / "script.json").write_text(
            json.dumps({"default": "ok", "steps": {"propose": ["held"]}})
        )
        # The agent writes its counters once it has taken `held`: it is holding from then on.
        holding = (repo.scratch / "script-state.json").exists
        env = {"PAIR_TEST_RELEASE": str(release)}
        _kill_when(repo, repo.comment_event("/pair implement"), holding, extra_env=env)
        calls = [json.loads(c) for c in (repo.scratch / "agent-log.jsonl").read_text().splitlines()]
        assert [c["transition"] for c in calls] == ["propose"]
        assert "PAIR_TEST_RELEASE" in calls[0]["env"]  # it holds, rather than crashing
        release.touch()  # the resumed propose takes `ok` (its list is spent), held or not
        assert [r for r in repo.fake.reactions if r[2] == "eyes"]  # it was acknowledged
        _until_stale()
        resumed = repo.run(repo.schedule_event())
        said = (resumed.outputs, (resumed.summary + resumed.stdout + resumed.stderr)[-1500:])
        assert resumed.outputs["card"] == str(repo.card), said
        assert resumed.outputs["transition"] == "propose", said
        _check_one_card_ready(repo, repo.until_quiet())


STRAIGHT = ("apply", "verify", "publish")
BLOCKING = ("apply", "verify", "red", "verify-red", "fix", "verify", "publish")


def _run_up_to(repo: ActionRepo, step: str, cycle: tuple[str, ...]) -> tuple[str, dict[str, Any]]:
    """Run the cycle unkilled up to `step`; the event whose run will do `step`."""
    if "red" in cycle:
        script = {"default": "ok", "steps": {"verify": ["findings-blocking"]}}
        (repo.scratch / "script.json").write_text(json.dumps(script))
    event: tuple[str, dict[str, Any]] = repo.comment_event("/pair implement")
    if step == "propose":
        return event
    for expected in ("propose", *cycle[: cycle.index(step)]):
        done = repo.run(event)
        assert done.outputs["transition"] == expected, done.outputs
        event = repo.schedule_event()
    return event


def _advanced(repo: ActionRepo) -> Counter[str]:
    journal = _journal(repo, repo.card)
    return Counter(
        r["transition"] for r in journal if r["kind"] == "outcome" and r["state"] == "advanced"
    )


@pytest.mark.slow
@pytest.mark.slow_first(40)
@needs_proc
@pytest.mark.parametrize(
    ("step", "cycle"),
    [
        pytest.param("propose", STRAIGHT, id="propose"),
        pytest.param("apply", STRAIGHT, id="apply"),
        pytest.param("red", BLOCKING, id="red"),
        pytest.param("fix", BLOCKING, id="fix"),
    ],
)
def test_a_step_killed_right_after_its_branch_push_is_resumed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str, cycle: tuple[str, ...]
) -> None:
    """The narrowest window: the card's branch moved, the step's outcome is not saved yet."""
    monkeypatch.setenv(ENV_STALE_AFTER_S, STALE_AFTER_S)
    with action_repo(tmp_path) as repo:
        event = _run_up_to(repo, step, cycle)
        branch = f"pair/card-{repo.card}"
        pushed = _tip(repo, branch)
        assert _polled_tip(repo, branch) == pushed
        _kill_when(repo, event, lambda: _polled_tip(repo, branch) != pushed)
        _until_stale()
        _check_one_card_ready(repo, repo.until_quiet())


@pytest.mark.slow
@pytest.mark.slow_first(10)
@needs_proc
def test_a_propose_killed_after_its_push_still_waits_for_approval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_STALE_AFTER_S, STALE_AFTER_S)
    with action_repo(tmp_path, cycle={"prepare": "always"}) as repo:
        branch = f"pair/card-{repo.card}"
        _kill_when(
            repo,
            repo.comment_event("/pair implement"),
            lambda: _polled_tip(repo, branch) is not None,
        )
        _until_stale()
        runs = repo.until_quiet()
        assert [r.outputs["transition"] for r in runs if r.outputs["transition"]] in (
            [],
            ["propose"],
        )
        assert repo.state_labels(repo.card) == ["pr-state:awaiting-approval"], runs[-1].outputs
        assert not repo.fake.pulls
        assert "apply" not in _advanced(repo)


@pytest.mark.slow
@pytest.mark.slow_first(15)
@needs_proc
def test_a_verify_killed_after_its_checkpoint_is_not_reviewed_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_STALE_AFTER_S, STALE_AFTER_S)
    with action_repo(tmp_path) as repo:
        event = _run_up_to(repo, "verify", STRAIGHT)
        saved = _tip(repo, "pair-state")
        assert _polled_tip(repo, "pair-state") == saved
        subjects: dict[str, str] = {}

        def checkpointed() -> bool:
            # A tick's first checkpoint is the one right after its step's outcome. Read the
            # subject once per new tip: git runs only when the state branch moved.
            tip = _polled_tip(repo, "pair-state")
            if tip == saved:
                return False
            if tip is None:
                return False
            if tip not in subjects:
                subjects[tip] = _state_subject(repo, tip)
            return "(checkpoint)" in subjects[tip]

        _kill_when(repo, event, checkpointed)
        _until_stale()
        runs = repo.until_quiet()
        _check_one_card_ready(repo, runs)
        assert _advanced(repo)["verify"] == 1, [r.outputs for r in runs]


@pytest.mark.slow
@pytest.mark.slow_first(25)
@needs_proc
def test_a_label_a_killed_run_wrote_is_corrected_by_the_next_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_STALE_AFTER_S, STALE_AFTER_S)
    with action_repo(tmp_path) as repo:
        event = _run_up_to(repo, "fix", BLOCKING)  # the card and its PR are in-progress
        pull = repo.pull()
        assert pull is not None and repo.state_labels(pull) == ["pr-state:in-progress"]
        # The fix is saved at its checkpoint; its labels (awaiting-verify) are written after it.
        _kill_when(repo, event, lambda: "pr-state:awaiting-verify" in repo.fake.issues[pull].labels)
        _until_stale()
        done = repo.run(repo.schedule_event())
        assert done.outputs["transition"] == "verify", done.outputs
        assert repo.state_labels(repo.card) == [f"pr-state:{done.outputs['status']}"]
        assert repo.state_labels(pull) == repo.state_labels(repo.card)
