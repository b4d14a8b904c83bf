"""What one run of the Action costs on GitHub: API requests per tick and step, and its start-up.

    python benchmarks/action_requests.py                  every scenario (about 30 s)
    python benchmarks/action_requests.py --requests       also list each run's requests

`python -m action` runs as a subprocess on a fresh checkout for every invocation (a new runner,
as on GitHub Actions) against the fake GitHub served on loopback, with the scripted agent and
the run-state on the `pair-state` branch of a bare repository (`tests/e2e/action_harness.py`).
Scenarios, each in its own repository:

    no-card   a scheduled tick with no card at all
    cycle     `/pair implement` on a card whose first review blocks: propose, apply (the draft
              PR), verify (review comment + failing `pair-review`), red, fix, verify (success),
              publish (the synthesis), then a tick with the card at `ready-for-merge`
    merge     `/pair implement until: merged merge: never`: the merge step, then a tick with
              the card merged

Per invocation it counts, from the fake's own bookkeeping: the requests that count against
the rate limit (`counted`; a 304 does not), all requests, the mutations and the 304s. Targets
(issue 5): an idle tick makes at most 2 counted requests.

Start-up: the time from the Action's process start (`Popen` returns once the interpreter is
exec'd) to the fake's first API request (`FakeGitHub.arrivals`), for every run that makes one.
Measured in the same run, the same way: a baseline `python -c "import httpx; httpx.get(url)"`,
the least a Python process can do to reach the API. Target: under 1 s to the first call. The
breakdown beside it says where the time goes: the interpreter and the imports an Action run
loads, and the `pair-state` lock and pull (git over the fake's HTTP edge), which come before
any API call. Wall times vary with the machine's load; the ratio to the baseline is the figure
to compare across machines.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    # `python benchmarks/action_requests.py` puts benchmarks/ first on sys.path, not the project.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.e2e.action_harness import REPO_ROOT, ActionRepo, action_repo, read_outputs
from tests.support.github_server import checkout

SCENARIOS = ("no-card", "cycle", "merge")
IDLE_TARGET = 2  # counted requests per idle tick
START_TARGET_S = 1.0  # process start to the first API call
BASELINE_RUNS = 5
# What an Action run imports before its first API call (the run driver, action/run/, imports
# the engine lazily, after the lock): measured as one interpreter start.
ACTION_IMPORTS = (
    "action.__main__",
    "action.comments",
    "app.cycle.driver",
    "app.cycle.report",
    "action.statebranch",
    "app.runtime.select",
    "hosts.github.host",
)


@dataclass(frozen=True)
class Row:
    """One invocation of the Action and what it cost."""

    scenario: str
    what: str  # "idle (no card)", "propose", "apply", …
    counted: int
    requests: int
    mutations: int
    not_modified: int
    first_call_s: float | None  # None: it made no API call
    calls: tuple[tuple[str, str, int], ...]  # (method, path, status)


@dataclass
class Report:
    """Every row, the start-up baseline and the breakdown."""

    rows: list[Row] = field(default_factory=list)
    baseline_s: list[float] = field(default_factory=list)
    breakdown: dict[str, float] = field(default_factory=dict)

    @property
    def idle(self) -> list[Row]:
        """The ticks that found nothing to do."""
        return [r for r in self.rows if r.what.startswith("idle")]

    @property
    def starts(self) -> list[float]:
        """Start-up to the first API call, of every run that made one."""
        return [r.first_call_s for r in self.rows if r.first_call_s is not None]


# ---------------------------------------------------------------- measuring


def invoke(repo: ActionRepo, event: tuple[str, dict[str, Any]], scenario: str, what: str) -> Row:
    """Run the Action once, unkilled; its row. `what` names an idle tick; else the step."""
    fake = repo.fake
    before = (fake.counted, fake.requests, fake.mutations, fake.not_modified)
    logged, arrived = len(fake.log), len(fake.arrivals)
    process, home = repo.popen(event)
    started = time.monotonic()  # Popen returns once the child has exec'd the interpreter
    stdout, stderr = process.communicate(timeout=240)
    if process.returncode != 0 or fake.unexpected:
        raise RuntimeError(f"the Action failed ({process.returncode}): {stdout}{stderr}")
    outputs = read_outputs(home / "output")
    after = (fake.counted, fake.requests, fake.mutations, fake.not_modified)
    counted, requests, mutations, not_modified = (a - b for a, b in zip(after, before, strict=True))
    firsts = fake.arrivals[arrived:]
    return Row(
        scenario=scenario,
        what=outputs.get("transition") or what,
        counted=counted,
        requests=requests,
        mutations=mutations,
        not_modified=not_modified,
        first_call_s=firsts[0][0] - started if firsts else None,
        calls=tuple(fake.log[logged:]),
    )


def scenario_no_card(tmp: Path) -> list[Row]:
    """A scheduled tick in a repository where no card was ever started."""
    with action_repo(tmp) as repo:
        return [invoke(repo, repo.schedule_event(), "no-card", "idle (no card)")]


def _drive(repo: ActionRepo, scenario: str, command: str, idle: str) -> list[Row]:
    rows = [invoke(repo, repo.comment_event(command), scenario, "comment")]
    for _ in range(15):
        row = invoke(repo, repo.schedule_event(), scenario, idle)
        rows.append(row)
        if row.what == idle:
            return rows
    raise RuntimeError(f"the card never came to rest: {[r.what for r in rows]}")


def scenario_cycle(tmp: Path, *, blocking: bool = True) -> list[Row]:
    """A card from `/pair implement` to `ready-for-merge`; its first review blocks."""
    with action_repo(tmp) as repo:
        if blocking:
            script = {"default": "ok", "steps": {"verify": ["findings-blocking"]}}
            (repo.scratch / "script.json").write_text(json.dumps(script))
        return _drive(repo, "cycle", "/pair implement", "idle (ready-for-merge)")


def scenario_merge(tmp: Path) -> list[Row]:
    """`until: merged merge: never`: only the merge and the idle tick after it are reported."""
    with action_repo(tmp) as repo:
        rows = _drive(repo, "merge", "/pair implement until: merged merge: never", "idle (merged)")
        assert any(r.what == "merge" for r in rows), [r.what for r in rows]
        return [r for r in rows if r.what in ("merge", "idle (merged)")]


def baseline(repo: ActionRepo, runs: int) -> list[float]:
    """`python -c "import httpx; httpx.get(url)"`: process start to its request's arrival.

    The request reads the card with the Action's token, so the fake answers it like any other.
    """
    url = f"{repo.base_url}/repos/{repo.fake.owner}/{repo.fake.repo}/issues/{repo.card}"
    code = f"import httpx; httpx.get({url!r}, headers={{'authorization': 'token {repo.fake.pat}'}})"
    seconds = []
    for _ in range(runs):
        arrived = len(repo.fake.arrivals)
        process = subprocess.Popen(
            [sys.executable, "-c", code],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        started = time.monotonic()
        process.communicate(timeout=60)
        seconds.append(repo.fake.arrivals[arrived][0] - started)
    if repo.fake.unexpected:
        raise RuntimeError(f"the baseline's request was not understood: {repo.fake.unexpected}")
    return seconds


def _interpreter_s(code: str, runs: int) -> float:
    """Median wall time of `python -c code` (the interpreter, its imports, nothing else)."""
    times = []
    for _ in range(runs):
        started = time.monotonic()
        subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, check=True)
        times.append(time.monotonic() - started)
    return statistics.median(times)


def breakdown(tmp: Path, runs: int) -> dict[str, float]:
    """Where the start-up goes, part by part, each the median of `runs`."""
    from action.statebranch import StateBranch  # noqa: PLC0415  # the project, on sys.path
    from app.engine.step import utc_now  # noqa: PLC0415

    parts = {
        "interpreter alone": _interpreter_s("pass", runs),
        "interpreter + the Action's imports": _interpreter_s(
            "import " + ", ".join(ACTION_IMPORTS), runs
        ),
    }
    lock, pull, release = [], [], []
    with action_repo(tmp) as repo:
        workspace = checkout(repo.fake, repo.base_url, tmp / "workspace")
        for attempt in range(runs):
            branch = StateBranch(workspace, clock=utc_now, host_id="benchmark")
            started = time.monotonic()
            lease = branch.try_lock(f"benchmark-{attempt}")
            locked = time.monotonic()
            branch.pull(workspace)
            pulled = time.monotonic()
            assert lease is not None
            branch.release(lease)
            lock.append(locked - started)
            pull.append(pulled - locked)
            release.append(time.monotonic() - pulled)
    parts["pair-state lock (git fetch + push)"] = statistics.median(lock)
    parts["pair-state pull"] = statistics.median(pull)
    parts["pair-state release (after the step)"] = statistics.median(release)
    return parts


# ---------------------------------------------------------------- reporting


def _label(row: Row) -> str:
    notes = {
        "propose": "propose (the comment's run: permission, ack, plan)",
        "apply": "apply (push, draft PR)",
        "verify": "verify (review comment, pair-review)",
        "red": "red (failing tests, sealed)",
        "fix": "fix",
        "publish": "publish (synthesis, read back)",
        "merge": "merge (mark ready, merge pinned to the head)",
    }
    return notes.get(row.what, row.what)


def format_report(report: Report, *, with_requests: bool = False) -> str:
    """The table, the start-up figures against the baseline, the targets, and the why."""
    lines = [
        f"{'scenario':<8} {'invocation':<52} {'counted':>7} {'requests':>8} {'writes':>6} "
        f"{'304s':>4} {'1st call s':>10}",
    ]
    for r in report.rows:
        first = f"{r.first_call_s:.3f}" if r.first_call_s is not None else "—"
        lines.append(
            f"{r.scenario:<8} {_label(r):<52} {r.counted:>7} {r.requests:>8} {r.mutations:>6} "
            f"{r.not_modified:>4} {first:>10}"
        )
        if with_requests:
            lines += [f"{'':<10}{m} {p} {s}" for m, p, s in r.calls]
    lines.append("")
    starts, base = report.starts, report.baseline_s
    start_s = statistics.median(starts) if starts else None
    base_s = statistics.median(base) if base else None
    if start_s is not None and base_s is not None:
        lines.append(
            f"start-up to the first API call: Action median {start_s:.3f} s over {len(starts)} "
            f'runs (min {min(starts):.3f}, max {max(starts):.3f}); baseline `python -c "import '
            f'httpx; httpx.get(url)"` median {base_s:.3f} s over {len(base)} runs; '
            f"ratio {start_s / base_s:.1f}x"
        )
    for part, seconds in report.breakdown.items():
        lines.append(f"  {part:<44} {seconds:.3f} s")
    parts = report.breakdown
    if start_s is not None and parts:
        # What the parts measured here do not cover: settings, the hosts, a tick's worktree.
        before = sum(parts[k] for k in parts if "release" not in k and k != "interpreter alone")
        lines.append(
            f"  {'the rest, to the first call (by difference)':<44} {start_s - before:.3f} s"
        )
    idle = report.idle
    worst_idle = max((r.counted for r in idle), default=None)
    lines.append(
        f"target: an idle tick makes ≤ {IDLE_TARGET} counted requests: "
        + (
            "not measured"
            if worst_idle is None
            else f"{'met' if worst_idle <= IDLE_TARGET else 'MISSED'} "
            f"({', '.join(f'{r.what}: {r.counted}' for r in idle)})"
        )
    )
    lines.append(
        f"target: under {START_TARGET_S:g} s from process start to the first API call: "
        + (
            "not measured"
            if start_s is None
            else f"{'met' if start_s < START_TARGET_S else 'MISSED'} (median {start_s:.3f} s, "
            f"slowest {max(starts):.3f} s)"
        )
    )
    for r in idle:
        calls = ", ".join(f"{m} {p} {s}" for m, p, s in r.calls) or "none"
        lines.append(f"  requests of the {r.what} tick: {calls}")
    return "\n".join(lines)


def _fresh(path: Path) -> Path:
    path.mkdir()
    return path


def main(
    scenarios: Sequence[str] = SCENARIOS,
    *,
    blocking: bool = True,
    baseline_runs: int = BASELINE_RUNS,
    with_requests: bool = False,
    out: Callable[[str], object] = print,
) -> Report:
    """Run the scenarios, measure the baseline and the breakdown, print the report."""
    unknown = set(scenarios) - set(SCENARIOS)
    if unknown:
        raise ValueError(f"unknown scenarios {sorted(unknown)}; known: {SCENARIOS}")
    report = Report()
    with tempfile.TemporaryDirectory(prefix="pairbot-action-requests-") as tmp:
        root = Path(tmp)
        out(
            f"Action requests and start-up: {', '.join(scenarios)}; "
            f"{sys.implementation.name} {sys.version.split()[0]}"
        )
        if "no-card" in scenarios:
            report.rows += scenario_no_card(_fresh(root / "no-card"))
        if "cycle" in scenarios:
            report.rows += scenario_cycle(_fresh(root / "cycle"), blocking=blocking)
        if "merge" in scenarios:
            report.rows += scenario_merge(_fresh(root / "merge"))
        with action_repo(_fresh(root / "baseline")) as repo:
            report.baseline_s = baseline(repo, baseline_runs)
        report.breakdown = breakdown(_fresh(root / "breakdown"), baseline_runs)
    out(format_report(report, with_requests=with_requests))
    return report


def _cli(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--scenarios", nargs="+", default=list(SCENARIOS), choices=SCENARIOS)
    parser.add_argument("--baseline-runs", type=int, default=BASELINE_RUNS)
    parser.add_argument("--requests", action="store_true", help="list each run's requests")
    args = parser.parse_args(argv)
    main(args.scenarios, baseline_runs=args.baseline_runs, with_requests=args.requests)


if __name__ == "__main__":
    _cli(sys.argv[1:])
