"""How fast the Action reaches GitHub: process start to its first API request, and an idle tick.

    python benchmarks/action_startup.py              11 runs of each (about a minute)
    python benchmarks/action_startup.py --runs 21    more runs, steadier medians
    python benchmarks/action_startup.py --with-click both processes see this venv's click

`python -m action` runs as a subprocess on a fresh checkout for every invocation (a new runner)
against the fake GitHub served on loopback, which records when each request arrives
(`FakeGitHub.arrivals`); `tests/e2e/action_harness.py` builds the repository and the env a run
gets. Measured side by side in one run, alternated so that the machine's load hits all alike:

    baseline   `python -c "import httpx; httpx.get(url)"`: process start (`Popen` returns once
               the interpreter is exec'd) to its request's arrival, the least a Python process
               can do to reach the API
    comment    an `issue_comment` event (`/pair status` on a card, by a maintainer who is
               not on the allowlist): process start to the Action's first API request, the
               author's permission lookup, sent before the `pair-state` lock, the pull and
               the engine's imports (`action.early`; the 👀 follows it)
    idle tick  a `schedule` event with no card: the whole run's wall time (it takes no lock:
               it reads `pair-state` once, makes its one catch-up listing of the repository's
               recent comments, `action.run.catchup`, and finds nothing)
    idle tick, no catch-up   the same with `PAIR_CATCHUP_WINDOW_S=0` (no API request, no
               GitHub client): the catch-up's extra time is the ratio of the two

Both processes run as action.yml installs pairbot: without click (the install step uninstalls
it; installed, it makes every `import httpx` load httpx's command-line tool, about 0.1 s). A
directory whose `click` package fails to import, first on PYTHONPATH, stands for the missing
package in this development venv; `--with-click` measures with this venv's click instead.

Targets (issue 16): first API request ≤ 2.5x the baseline and under 1 s; the idle tick's wall
time is reported. Wall times vary with the machine's load; the ratio is the figure to compare.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):
    # `python benchmarks/action_startup.py` puts benchmarks/ first on sys.path, not the project.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.e2e.action_harness import ActionRepo, action_repo

RUNS = 11
TARGET_RATIO = 2.5
TARGET_S = 1.0


@dataclass(frozen=True)
class Report:
    """Seconds per run of each measured thing."""

    baseline_s: list[float]
    comment_s: list[float]
    tick_s: list[float]
    tick_off_s: list[float]

    @property
    def ratio(self) -> float:
        """Median comment first request / median baseline."""
        return statistics.median(self.comment_s) / statistics.median(self.baseline_s)

    @property
    def catchup_ratio(self) -> float:
        """Median idle tick with its catch-up listing / median idle tick without."""
        return statistics.median(self.tick_s) / statistics.median(self.tick_off_s)


def without_click(directory: Path) -> dict[str, str]:
    """The environment of a process that runs as if click were not installed."""
    package = directory / "click"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text(
        'raise ImportError("click is not installed where the Action runs (action.yml)")\n'
    )
    return {"PYTHONPATH": str(directory)}


def baseline_once(repo: ActionRepo, env: dict[str, str] | None = None) -> float:
    """`python -c "import httpx; httpx.get(url)"`: process start to its request's arrival."""
    url = f"{repo.base_url}/repos/{repo.fake.owner}/{repo.fake.repo}/issues/{repo.card}"
    code = f"import httpx; httpx.get({url!r}, headers={{'authorization': 'token {repo.fake.pat}'}})"
    arrived = len(repo.fake.arrivals)
    process = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )
    started = time.monotonic()
    process.communicate(timeout=60)
    if len(repo.fake.arrivals) == arrived:
        raise RuntimeError("the baseline's request never arrived")
    return repo.fake.arrivals[arrived][0] - started


def comment_once(repo: ActionRepo, env: dict[str, str] | None = None) -> float:
    """The Action on a `/pair status` comment: process start to its first API request."""
    arrived = len(repo.fake.arrivals)
    process, _ = repo.popen(repo.comment_event("/pair status"), extra_env=env)
    started = time.monotonic()
    stdout, stderr = process.communicate(timeout=240)
    # The card has no cycle yet: `/pair status` is answered there and exits 2 (a user error).
    if process.returncode not in (0, 2) or len(repo.fake.arrivals) == arrived:
        raise RuntimeError(f"the Action failed ({process.returncode}): {stdout}{stderr}")
    return repo.fake.arrivals[arrived][0] - started


def tick_once(repo: ActionRepo, env: dict[str, str] | None = None) -> float:
    """A scheduled tick with no card: the run's wall time."""
    process, _ = repo.popen(repo.schedule_event(), extra_env=env)
    started = time.monotonic()
    stdout, stderr = process.communicate(timeout=240)
    elapsed = time.monotonic() - started
    if process.returncode != 0:
        raise RuntimeError(f"the idle tick failed ({process.returncode}): {stdout}{stderr}")
    return elapsed


def measure(runs: int, workdir: Path, *, with_click: bool = False) -> Report:
    """`runs` of each, alternated; one warm-up of each first (the page cache, .pyc files)."""
    report = Report([], [], [], [])
    (workdir / "comment").mkdir()
    (workdir / "tick").mkdir()
    env = None if with_click else without_click(workdir / "no-click")
    off = {**(env or {}), "PAIR_CATCHUP_WINDOW_S": "0"}  # the same tick without its listing
    with action_repo(workdir / "comment") as repo, action_repo(workdir / "tick") as idle:
        baseline_once(repo, env), comment_once(repo, env), tick_once(idle, env)
        tick_once(idle, off)
        for _ in range(runs):
            report.baseline_s.append(baseline_once(repo, env))
            report.comment_s.append(comment_once(repo, env))
            report.tick_s.append(tick_once(idle, env))
            report.tick_off_s.append(tick_once(idle, off))
    return report


def _spread(values: Sequence[float]) -> str:
    return (
        f"median {statistics.median(values):.3f} s (min {min(values):.3f}, max {max(values):.3f})"
    )


def format_report(report: Report) -> str:
    """The medians, the ratio and the targets' verdicts."""
    first = statistics.median(report.comment_s)
    ratio = report.ratio
    ratio_met = "met" if ratio <= TARGET_RATIO else "MISSED"
    time_met = "met" if first < TARGET_S else "MISSED"
    return "\n".join(
        [
            f'baseline `python -c "import httpx; httpx.get(url)"`: {_spread(report.baseline_s)}',
            f"Action, comment event, to the first API request: {_spread(report.comment_s)}",
            f"Action, idle tick (no card), wall time:           {_spread(report.tick_s)}",
            f"Action, idle tick without catch-up, wall time:    {_spread(report.tick_off_s)}",
            f"ratio idle tick with its catch-up listing / without: {report.catchup_ratio:.2f}x "
            f"(+{statistics.median(report.tick_s) - statistics.median(report.tick_off_s):.3f} s)",
            f"ratio first request / baseline: {ratio:.2f}x",
            f"target: first API request ≤ {TARGET_RATIO:g}x the baseline: {ratio_met} "
            f"({ratio:.2f}x)",
            f"target: first API request under {TARGET_S:g} s: {time_met} ({first:.3f} s)",
        ]
    )


def main(
    runs: int = RUNS, *, with_click: bool = False, out: Callable[[str], object] = print
) -> Report:
    """Measure, print the report; returns it."""
    with tempfile.TemporaryDirectory(prefix="pairbot-action-startup-") as tmp:
        out(
            f"Action start-up: {runs} run(s) of each, alternated; "
            f"{sys.implementation.name} {sys.version.split()[0]}; "
            + ("with this venv's click" if with_click else "without click, as action.yml installs")
        )
        report = measure(runs, Path(tmp), with_click=with_click)
    out(format_report(report))
    return report


def _cli(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument(
        "--with-click", action="store_true", help="measure with this venv's click importable"
    )
    args = parser.parse_args(argv)
    main(args.runs, with_click=args.with_click)


if __name__ == "__main__":
    _cli(sys.argv[1:])
