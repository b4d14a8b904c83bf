"""The crash test: SIGKILL a real `pairbot batch apply` at random moments; nothing recorded is lost.

A real git project and the installed console script; the scripted agent is slowed down
(`PAIR_TEST_SLOW`) so that kills land while the agent runs, while pairbot or an agent's
`batch report` appends to the journal, while a proof-of-work runs, and between steps. The
random delays come from a seeded `random.Random`, so a run is reproducible up to the machine's
timing. They are stratified on a fixed budget sized for CI: every other kill is timed from the
apply's start (start-up, lock, the first journal write), the others from its first journal
write (inside the step, where a kill timed from the start rarely reaches); each kind draws
one delay from each slice of [0, MAX_DELAY_S) per STRATA kills, in a shuffled order, so early
and late kills are both certain instead of left to chance. About one round in seven lets its
apply finish instead, so that the kills spread over the whole batch rather than all landing
in the first verify (which leaves nothing on disk to resume from, unlike propose and apply).

After every kill:

* every orphan is gone: pairbot runs in its own session, but the agent and the proof-of-work
  command run in sessions of their own, so killing pairbot's group leaves them running. Every
  process whose working directory is the project is killed before anything is inspected (an
  orphaned agent would otherwise report into the next step's session);
* every journal line that was complete before the kill is still there, byte for byte (only a
  torn, newline-less tail may be dropped), and every complete line parses;
* `pairbot batch status --json` exits 0 and parses; `state.json`, if present, parses.

Legitimate leftovers a kill may produce, which the engine has to cope with on its own: a
`step-started` with no `outcome`, a park written just before its outcome, a `step.lock` naming
the dead pairbot (reclaimed by the next apply), an empty `step.lock` if the kill fell between its
create and its write (skipped, exit 3, until `EMPTY_GRACE_SECONDS` pass), an orphaned
`.state.json.*.tmp`. A blocked park is cleared with `batch retry`, as a human would. Nothing is
ever repaired by hand.

Then the batch is driven to the end without kills, and it must be `done` with every change having
gone through propose, apply and verify, every phase proven before the next one started, and every
step single-flight (each outcome and each agent report belongs to the latest `step-started`).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.domain.card.plan import count_tasks
from app.engine import jsonl
from app.engine.lock import EMPTY_GRACE_SECONDS
from tests.support.project import PAIRBOT, Project, agent_env

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/self/cwd").exists(), reason="finds orphans via /proc"),
]

SEED = 20_261_130
KILLS = 16
STRATA = 4  # every STRATA kills cover each quarter of [0, MAX_DELAY_S) once
MAX_DELAY_S = 0.6
# A step takes 0.6-1 s here, longer than most delays, and a verify leaves nothing on disk until
# its outcome: without some whole steps in between, every kill would land in the first verify.
CLEAN_SHARE = 0.15
SLOW_ENV = {"PAIR_TEST_SLOW": "0.15"}
CHANGES = ("alpha", "beta", "gamma")

MANIFEST: dict[str, Any] = {
    "gate": "voluntary",
    "prGrouping": "off",
    "phases": [
        {
            "name": "first",
            "proofOfWork": {
                "run": "test -f alpha.txt && test -f beta.txt && echo proven",
                "pass": "contains:proven",
            },
            "changes": ["alpha", "beta"],
        },
        {
            "name": "second",
            "proofOfWork": {"run": "test -f gamma.txt", "pass": "exit 0"},
            "changes": [{"name": "gamma", "dependsOn": ["alpha"]}],
        },
    ],
}


# ---------------------------------------------------------------- processes


def _processes_in(root: Path) -> list[int]:
    """Live processes (not us) whose working directory is the project: pairbot, agents, proofs.

    Every process pairbot starts runs in the project root, and a child that is forked but not
    yet exec'd inherits it, so this also finds what `/proc/<pid>/environ` would still miss. A
    zombie has no working directory any more and is skipped.
    """
    root = root.resolve()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if (entry / "cwd").readlink() == root:
                found.append(int(entry.name))
    return found


def _kill_strays(root: Path, timeout_s: float = 10.0) -> int:
    """SIGKILL the process group of every process left in the project; wait until none is."""
    deadline = time.monotonic() + timeout_s
    killed = 0
    while pids := _processes_in(root):
        if time.monotonic() > deadline:
            raise AssertionError(f"processes in {root} survive SIGKILL: {pids}")
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                pgid = os.getpgid(pid)
                # Each of them leads or belongs to a session of its own; never signal ours.
                if pgid == os.getpgrp():
                    os.kill(pid, signal.SIGKILL)
                else:
                    os.killpg(pgid, signal.SIGKILL)
                killed += 1
        time.sleep(0.01)
    return killed


def _start_apply(project: Project, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(PAIRBOT), "batch", "apply", project.batch, "--json"],
            cwd=project.root,
            env=agent_env(SLOW_ENV),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _pairbot(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PAIRBOT), *args],
        cwd=project.root,
        env=agent_env(SLOW_ENV),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _pairbot_unlocked(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    """Run a locking verb; an empty lock left by a kill is honoured until its grace runs out."""
    deadline = time.monotonic() + EMPTY_GRACE_SECONDS + 5
    while True:
        lock_before = _lock_owner(project)
        done = _pairbot(project, *args)
        if done.returncode != 3:
            return done
        assert lock_before is None, f"a dead owner's lock was not reclaimed: {done.stderr}"
        assert time.monotonic() < deadline, f"the lock never became free: {done.stderr}"
        time.sleep(0.25)


# ---------------------------------------------------------------- run-state checks


def _journal_path(project: Project) -> Path:
    return project.run_dir / "journal.jsonl"


def _journal_bytes(project: Project) -> bytes:
    try:
        return _journal_path(project).read_bytes()
    except FileNotFoundError:
        return b""


def _complete(data: bytes) -> bytes:
    """The newline-terminated part: what was durably a line (a torn tail is not)."""
    return data[: data.rfind(b"\n") + 1]


def _assert_extends(before: bytes, after: bytes, when: str) -> None:
    kept = _complete(before)
    if not after.startswith(kept):
        old, new = kept.splitlines(), after.splitlines()
        pairs = enumerate(zip(old, new, strict=False), start=1)
        line = next((n for n, (was, now) in pairs if was != now), len(new) + 1)
        raise AssertionError(f"{when}: journal line {line} changed or vanished")


def _lock_owner(project: Project) -> dict[str, Any] | None:
    """The parsed owner of `step.lock`, None if absent, empty or unparseable."""
    try:
        raw = (project.run_dir / "step.lock").read_bytes()
        owner = json.loads(raw)
    except (FileNotFoundError, ValueError):
        return None
    return owner if isinstance(owner, dict) and isinstance(owner.get("pid"), int) else None


def _lock_state(project: Project) -> str:
    path = project.run_dir / "step.lock"
    if not path.exists():
        return "absent"
    return "owned" if _lock_owner(project) is not None else "empty"


def _status(project: Project) -> dict[str, Any]:
    done = _pairbot(project, "batch", "status", project.batch, "--json")
    assert done.returncode == 0, done.stderr
    status: dict[str, Any] = json.loads(done.stdout)
    assert set(status["changes"]) == set(CHANGES)
    return status


def _parks(project: Project) -> dict[str, Any]:
    path = project.run_dir / "state.json"
    if not path.exists():
        return {}
    state = json.loads(path.read_text(encoding="utf-8"))  # an atomic write: old or new, whole
    assert isinstance(state.get("parks"), dict), state
    parks: dict[str, Any] = state["parks"]
    return parks


def _clear_parks(project: Project) -> list[str]:
    """`batch retry` every blocked park, as the human on call would."""
    cleared = []
    for key, park in _parks(project).items():
        assert park["state"] in ("blocked", "needs-input"), park  # no approval gate here
        done = _pairbot_unlocked(project, "batch", "retry", project.batch, "--change", key)
        assert done.returncode == 0, done.stderr
        cleared.append(f"{key}: {park['reason']}")
    return cleared


def _agent_calls(root: Path) -> list[dict[str, Any]]:
    """The agent log, read tolerantly: a killed agent can leave a torn line that the next agent's
    line is glued to, so a line that does not parse is re-read from its last record start."""
    calls = []
    decoder = json.JSONDecoder()
    path = root / ".pair" / "agent-log.jsonl"
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        start = line.rfind('{"change": ')
        with contextlib.suppress(ValueError):
            calls.append(decoder.raw_decode(line[max(start, 0) :])[0])
    return calls


def _landing(before: bytes, after: bytes) -> str:
    """Where a kill landed, judged by what the journal gained meanwhile."""
    gained = _complete(after)[len(_complete(before)) :].splitlines()
    if not gained:
        return "before any journal write"
    last = json.loads(gained[-1])
    if last["kind"] == "step-started":
        return f"during {last['transition']}"
    if last["kind"] in ("progress", "completion", "blocker", "needs-input"):
        return "after the agent reported, before the outcome"
    return "after a step was recorded"


# ---------------------------------------------------------------- final journal checks


def _assert_single_flight(entries: list[dict[str, Any]]) -> None:
    """Each outcome, proof record and agent report belongs to the latest step-started."""
    current: dict[str, Any] | None = None
    for number, entry in enumerate(entries, start=1):
        kind = entry["kind"]
        if kind == "step-started":
            current = entry
        elif kind in (
            "outcome",
            "proof-of-work",
            "progress",
            "completion",
            "blocker",
            "needs-input",
        ):
            assert current is not None, f"entry {number} ({kind}) precedes every step-started"
            assert entry["key"] == current["key"], f"entry {number} belongs to another step"
            if kind == "proof-of-work":
                assert current["transition"] == "proof-of-work", f"entry {number}"
            else:
                assert entry.get("session") == current.get("session"), (
                    f"entry {number} ({kind} for {entry['key']}) is from an earlier session"
                )


def _assert_changes_went_through(project: Project, entries: list[dict[str, Any]]) -> None:
    for change in CHANGES:
        starts = [
            (i, e["transition"])
            for i, e in enumerate(entries)
            if e["kind"] == "step-started" and e["key"] == change
        ]
        first = {t: next(i for i, s in starts if s == t) for t in ("propose", "apply", "verify")}
        assert first["propose"] < first["apply"] < first["verify"], (change, starts)
        accepted = [
            e
            for e in entries
            if e["kind"] == "outcome" and e["key"] == change and e["state"] == "advanced"
        ]
        assert accepted, change
        assert accepted[-1]["transition"] == "verify", (change, accepted[-1])
        assert accepted[-1]["verdict"]["converged"] is True
        plan = count_tasks((project.root / ".pair" / "changes" / change / "plan.md").read_text())
        assert plan.total > 0 and plan.complete == plan.total, change
        assert (project.root / f"{change}.txt").exists()
    ran = {(c["change"], c["transition"]) for c in _agent_calls(project.root)}
    for change in CHANGES:
        assert {(change, t) for t in ("propose", "apply", "verify")} <= ran


def _assert_phases_proven_in_order(entries: list[dict[str, Any]]) -> None:
    proofs = [(i, e) for i, e in enumerate(entries) if e["kind"] == "proof-of-work"]
    assert {e["key"] for _, e in proofs} == {"first", "second"}
    assert all(e["proof"]["passed"] for _, e in proofs), proofs
    first_proven = next(i for i, e in proofs if e["key"] == "first")
    gamma_started = next(
        i for i, e in enumerate(entries) if e["kind"] == "step-started" and e["key"] == "gamma"
    )
    assert first_proven < gamma_started, "phase second started before phase first was proven"


# ---------------------------------------------------------------- the test


def _wait_for_a_write(project: Project, proc: subprocess.Popen[bytes], size: int) -> None:
    """Until the journal grows past `size` bytes or the apply exits (polled: a stat, not git)."""
    deadline = time.monotonic() + 60
    while proc.poll() is None:
        with contextlib.suppress(FileNotFoundError):
            if _journal_path(project).stat().st_size > size:
                return
        assert time.monotonic() < deadline, "the apply neither wrote its journal nor exited"
        time.sleep(0.005)


def _round(
    project: Project,
    delay: float | None,
    log: Path,
    seen: Counter[str],
    pairbots: set[int],
    *,
    after_write: bool = False,
) -> tuple[bytes, list[str]]:
    """Start one apply, SIGKILL it `delay` seconds after its start, or with `after_write` after
    its first journal write (None: let it finish), clean up, check.

    Returns the journal as it stands afterwards, and what had to be retried.
    """
    before = _journal_bytes(project)
    lock_before = _lock_state(project)
    seen[f"step.lock {lock_before} at start"] += 1
    proc = _start_apply(project, log)
    pairbots.add(proc.pid)
    try:
        if after_write and delay is not None:
            _wait_for_a_write(project, proc, len(before))
        proc.wait(timeout=60 if delay is None else delay)
    except subprocess.TimeoutExpired:
        assert delay is not None, f"an apply left alone did not finish: {log.read_text()}"
        at_kill = _journal_bytes(project)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        _kill_strays(project.root)
        after = _journal_bytes(project)
        _assert_extends(at_kill, after, "lines complete at the kill")
        owner = _lock_owner(project)
        # A lock left behind names a pairbot this test killed (or is empty): nobody else took it.
        assert owner is None or owner["pid"] in pairbots, owner
        seen[f"killed {_landing(before, after)}"] += 1
    else:
        # It finished first: one whole step, a park, nothing ready, or a skip on an empty lock.
        output = log.read_text(encoding="utf-8", errors="replace")
        assert proc.returncode in (0, 1, 3), output
        if proc.returncode == 3:
            assert lock_before == "empty", f"a dead owner's lock was not reclaimed: {output}"
            state = "skipped on an empty lock"
        else:
            state = json.loads(output.splitlines()[-1])["state"]
        _kill_strays(project.root)
        after = _journal_bytes(project)
        seen[f"{'uninterrupted' if delay is None else 'outran the kill'}: {state}"] += 1
    _assert_extends(before, after, "lines complete before the apply")
    jsonl.read_records(_journal_path(project))  # every complete line parses
    _status(project)
    _parks(project)
    notes = [f"retried {p}" for p in _clear_parks(project)]
    return _journal_bytes(project), notes


def _stratified_delays(rng: random.Random) -> Iterator[float]:
    """Kill delays: each block of STRATA draws one from every slice of [0, MAX_DELAY_S)."""
    while True:
        slices = list(range(STRATA))
        rng.shuffle(slices)
        for index in slices:
            yield rng.uniform(index, index + 1) * MAX_DELAY_S / STRATA


@pytest.mark.slow_first(60)
def test_random_sigkills_lose_nothing_and_the_batch_still_finishes(
    make_project: Callable[..., Project], tmp_path: Path
) -> None:
    project = make_project(MANIFEST)
    project.script({}, default="slow")
    rng = random.Random(SEED)
    # Kills timed from the apply's start, and from its first journal write: one draw each.
    delays = {False: _stratified_delays(rng), True: _stratified_delays(rng)}
    logs = tmp_path / "logs"
    logs.mkdir()
    seen: Counter[str] = Counter()
    notes: list[str] = []
    pairbots: set[int] = set()
    started = time.monotonic()
    try:
        journal = b""
        kills = rounds = 0
        while kills < KILLS:
            after_write = kills % 2 == 1
            delay = None if rng.random() < CLEAN_SHARE else next(delays[after_write])
            previous = journal
            rounds += 1
            journal, round_notes = _round(
                project,
                delay,
                logs / f"round-{rounds}.log",
                seen,
                pairbots,
                after_write=after_write,
            )
            _assert_extends(previous, journal, f"after round {rounds}")
            notes += round_notes
            kills += delay is not None

        # Drive to the end without kills: one step per apply until nothing is ready.
        blocked: Counter[str] = Counter()
        for _ in range(40):
            notes += [f"retried {p}" for p in _clear_parks(project)]
            done = _pairbot_unlocked(project, "batch", "apply", project.batch, "--json")
            assert done.returncode in (0, 1), done.stdout + done.stderr
            result = json.loads(done.stdout)
            if result["state"] == "nothing-ready":
                break
            if result["state"] == "blocked":
                blocked[result["change"]] += 1
                assert blocked[result["change"]] <= 3, (result, notes)
            assert not _processes_in(project.root)
            previous, journal = journal, _journal_bytes(project)
            _assert_extends(previous, journal, "while driving to the end")
        else:
            pytest.fail(f"the batch never ran out of steps; {notes}")
    finally:
        _kill_strays(project.root)

    diagnosis = f"seen: {dict(seen)}; notes: {notes}"
    status = _status(project)
    assert status["done"] is True, (status, diagnosis)
    assert not (project.run_dir / "step.lock").exists()
    assert _parks(project) == {}
    entries = jsonl.read_records(_journal_path(project))
    _assert_single_flight(entries)
    _assert_changes_went_through(project, entries)
    _assert_phases_proven_in_order(entries)
    # Some kills must have hit a live pairbot, or this test proved nothing.
    assert sum(n for what, n in seen.items() if what.startswith("killed ")), diagnosis
    print(f"\n{diagnosis}; {time.monotonic() - started:.1f} s")
