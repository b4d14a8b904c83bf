"""The figures of one run of benchmarks/edge_targets.py, their ratios and targets, as printed.

Not run on its own; `python benchmarks/edge_targets.py` prints `report(result)` for each run.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.edge_runs import CONCURRENCY, Run

GOAL_NON_COMMAND = 0.8
GOAL_DUPLICATE = 0.3
GOAL_P99_MS = 50.0
RATE = 100.0


@dataclass(frozen=True)
class Result:
    """One run: the floor and the App, at max rate (rounds added up) and at RATE."""

    floor_plain: Run
    app_plain: Run
    app_command: Run  # answered, then run against the forge (the duplicates' first sending)
    app_duplicate: Run
    app_plain_rate: Run
    app_command_rate: Run
    driver_cpu_s: float
    wall_s: float
    failed_jobs: int  # jobs the App's worker ended `failed` (0 when the forge answered them all)
    forge_per_command: float  # the forge's requests per command delivery

    @property
    def non_command_ratio(self) -> float:
        return _ratio(self.app_plain.load.throughput, self.floor_plain.load.throughput)

    @property
    def non_command_cpu_ratio(self) -> float:
        """floor CPU / App CPU per request: the throughput ratio of two CPU-bound servers, less
        disturbed than wall-clock throughput by whatever else the cores run meanwhile."""
        return _ratio(self.floor_plain.us_per_request(), self.app_plain.us_per_request())

    @property
    def duplicate_ratio(self) -> float:
        """Duplicate CPU over a new non-command delivery's (the cheaper, stricter baseline)."""
        return _ratio(self.app_duplicate.us_per_request(), self.app_plain.us_per_request())

    @property
    def p99_rate_ms(self) -> float:
        """The worse p99 at RATE of non-command and command deliveries."""
        return max(
            self.app_plain_rate.load.percentile(99), self.app_command_rate.load.percentile(99)
        )

    @property
    def p99_max_ms(self) -> float:
        """The worse p99 at max rate (CONCURRENCY connections) of the two."""
        return max(self.app_plain.load.percentile(99), self.app_command.load.percentile(99))

    @property
    def failures(self) -> int:
        """Non-2xx answers over every run."""
        runs = (
            self.floor_plain,
            self.app_plain,
            self.app_command,
            self.app_duplicate,
            self.app_plain_rate,
            self.app_command_rate,
        )
        return sum(run.load.failures for run in runs)


def _ratio(a: float, b: float) -> float:
    return a / b if b else 0.0


def _ok(good: bool) -> str:
    return "yes" if good else "NO"


def table(r: Result) -> list[str]:
    """Each max-rate run's throughput, latencies and CPU per request."""
    lines = [
        f"{'max rate, 16 connections':<34}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'CPU us/req':>12}"
    ]
    for label, run in (
        ("floor, non-command", r.floor_plain),
        ("app, non-command", r.app_plain),
        ("app, command (answered)", r.app_command),
        ("app, duplicate", r.app_duplicate),
    ):
        load = run.load
        lines.append(
            f"{label:<34}{load.throughput:>9.0f}{load.percentile(50):>9.2f}"
            f"{load.percentile(99):>9.2f}{run.us_per_request():>12.0f}"
        )
    run = r.app_command
    lines += [
        f"app, command answered and run: {run.us_per_request(run.total_cpu_s):.0f} us CPU each, "
        f"{r.forge_per_command:.2f} forge requests each, {r.failed_jobs} job(s) failed "
        "(benchmarks/command_path.py sets this beside a floor of the same API calls)",
        f"non-2xx answers: {r.failures}; load generator CPU "
        f"{100 * r.driver_cpu_s / r.wall_s:.0f}% of one core over the run",
    ]
    return lines


def report(r: Result) -> list[str]:
    """The table, then each target's line with its baseline from the same run."""
    plain, dup = r.app_plain, r.app_duplicate
    return [
        *table(r),
        "",
        f"non-command deliveries: app/floor = {r.non_command_ratio:.2f} "
        f"(target >= {GOAL_NON_COMMAND}) — {_ok(r.non_command_ratio >= GOAL_NON_COMMAND)}; "
        f"by CPU per request {r.non_command_cpu_ratio:.2f} "
        f"({r.floor_plain.us_per_request():.0f} us / {plain.us_per_request():.0f} us)",
        f"duplicate CPU / new delivery CPU = {r.duplicate_ratio:.2f} "
        f"({dup.us_per_request():.0f} us vs {plain.us_per_request():.0f} us for a new "
        f"non-command delivery; "
        f"{_ratio(dup.us_per_request(), r.app_command.us_per_request()):.2f} of a new command "
        f"delivery's answer) (target <= {GOAL_DUPLICATE}) — "
        f"{_ok(r.duplicate_ratio <= GOAL_DUPLICATE)}",
        f"p99 at {RATE:.0f} requests/s = {r.p99_rate_ms:.2f} ms (non-command "
        f"{r.app_plain_rate.load.percentile(99):.2f}, command "
        f"{r.app_command_rate.load.percentile(99):.2f}) (target < {GOAL_P99_MS:.0f}) — "
        f"{_ok(r.p99_rate_ms < GOAL_P99_MS)}",
        f"p99 at saturation, {CONCURRENCY} connections = {r.p99_max_ms:.2f} ms (non-command "
        f"{plain.load.percentile(99):.2f}, command {r.app_command.load.percentile(99):.2f}) "
        f"(target < {GOAL_P99_MS:.0f}) — {_ok(r.p99_max_ms < GOAL_P99_MS)}",
    ]


def summary(results: list[Result]) -> list[str]:
    """Several runs' headline ratios on one line each (printed after the last run)."""
    if len(results) < 2:
        return []

    def listed(values: list[float], fmt: str = "{:.2f}") -> str:
        return ", ".join(fmt.format(v) for v in values)

    return [
        f"{len(results)} runs:",
        f"  non-command app/floor: {listed([r.non_command_ratio for r in results])} "
        f"(by CPU: {listed([r.non_command_cpu_ratio for r in results])})",
        f"  duplicate / new: {listed([r.duplicate_ratio for r in results])}",
        f"  p99 at {RATE:.0f}/s ms: {listed([r.p99_rate_ms for r in results], '{:.1f}')}; "
        f"at saturation: {listed([r.p99_max_ms for r in results], '{:.1f}')}",
    ]
