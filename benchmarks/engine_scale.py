"""How `batch status` and step selection scale with the batch and its journal.

    python benchmarks/engine_scale.py                 the full matrix (about a minute)
    python benchmarks/engine_scale.py --profile       also cProfile the largest case

For batches of 10 / 100 / 1,000 changes (in 10 phases) and journals of 1k / 10k / 100k entries,
it builds a real project in a temp dir (`.pair/config.yaml`, the manifest, `plan.md` for the
changes the journal has touched) and a journal with a realistic mix: per step a `step-started`,
the agent's progress reports and completion, and the engine's `outcome` (verify outcomes carry
a verdict and findings, some reviews block and go through red/fix), plus proof-of-work records
for finished phases, and a last step still running (a `step-started` with no outcome yet).
(The builder is benchmarks/engine_project.py.)

It then measures, side by side in one run (median of `--repeats`, `time.perf_counter`):

    floor    `jsonl.read_records`: merely reading and parsing the journal file
    status   `runner.batch_status(root, batch)` (config, manifest, disk, journal, fold, derive)
             plus `selection.pick_next_step` on the same gathered facts

The goal: status ≤ 2x the floor at 100k entries, and linear growth.

The command, `pairbot batch status` as a user runs it (interpreter start, imports, the status,
the printing), is measured the same way at 1k and 100k entries (`--command-entries`) against
its own floor, a process that only parses the journal:

    parse process   `python -c "from app.engine import jsonl; jsonl.read_records(path)"`
    command         `pairbot batch status scale` (`python -m app.cli`, in the project's root)

and, to say where the command's time goes, two more processes in the same rounds:

    interpreter     `python -c pass`: the start-up every process pays
    imports         `python -c "import app.cli, …"`: the command's imports, nothing run

Each is timed by wall clock and by CPU (user + system, from `getrusage`), which is steadier
when other work shares the machine. The goals: the command ≤ 2x its floor at 100k entries and
≤ 4x at 1k, by wall time (at 1k most of the command is importing pydantic and building the
models of `.pair/config.yaml` and the manifest, which every command validates them with). Local
files only; no network.

    python benchmarks/engine_scale.py --changes --repeats 15    the command's cases only
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):
    # `python benchmarks/engine_scale.py` puts benchmarks/ first on sys.path, not the project.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.engine import jsonl
from app.engine.manifest import load_manifest, load_project_config
from app.engine.runner import batch_status
from app.engine.selection import pick_next_step
from app.engine.status import gather_facts

# The project builder lives in its own module; the tests import these names from here.
from benchmarks.engine_project import (
    BATCH,
    PHASES,
    Shape,
    build_journal,
    build_project,
    change_names,
    plan_history,
)

__all__ = [
    "BATCH",
    "CommandRow",
    "Shape",
    "build_journal",
    "build_project",
    "change_names",
    "main",
    "plan_history",
]

CHANGE_SIZES = (10, 100, 1_000)
ENTRY_SIZES = (1_000, 10_000, 100_000)
GOAL_RATIO = 2.0
GOAL_ENTRIES = 100_000
COMMAND_CHANGES = 100
COMMAND_ENTRIES = (1_000, 100_000)
# entries -> command / parse process. 4x, not 3x, at 1k: the manifest has one model (issue #26),
# and pydantic's import and the models' build are paid by every status.
COMMAND_GOALS = {1_000: 4.0, 100_000: 2.0}
PROJECT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- measuring


def _timed(run: Callable[[], object]) -> float:
    gc.collect()
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def median_pair(
    first: Callable[[], object], second: Callable[[], object], repeats: int
) -> tuple[float, float]:
    """Median wall times of two runs, alternated so that machine noise hits both alike."""
    first()  # warm-up: the page cache, imports, regex compilation
    second()
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeats):
        times[0].append(_timed(first))
        times[1].append(_timed(second))
    return statistics.median(times[0]), statistics.median(times[1])


def status_and_selection(root: Path) -> Callable[[], object]:
    """`batch_status` plus `pick_next_step` on the facts it gathers; they must agree."""
    facts = gather_facts(root, BATCH, load_manifest(root, BATCH), load_project_config(root))

    def run() -> object:
        status = batch_status(root, BATCH)
        target = pick_next_step(facts)
        assert target == status.next, (target, status.next)
        return target

    return run


@dataclass(frozen=True)
class Row:
    """One measured case."""

    changes: int
    entries: int
    floor_s: float
    status_s: float
    next_step: str

    @property
    def ratio(self) -> float:
        """status / floor."""
        return self.status_s / self.floor_s

    @property
    def per_entry_us(self) -> float:
        """status time per journal entry, in µs."""
        return self.status_s / self.entries * 1e6


def measure(shape: Shape, repeats: int, workdir: Path) -> Row:
    """Build the case's project and time floor and status side by side."""
    root = workdir / f"c{shape.changes}-e{shape.entries}"
    journal = build_project(root, shape)
    run = status_and_selection(root)
    floor, status = median_pair(lambda: jsonl.read_records(journal), run, repeats)
    target = run()
    return Row(shape.changes, shape.entries, floor, status, type(target).__name__)


@dataclass(frozen=True)
class Timing:
    """One process's median wall time and CPU time (user + system), in seconds."""

    wall_s: float
    cpu_s: float


@dataclass(frozen=True)
class CommandRow:
    """`pairbot batch status` as a process, against a process that only parses the journal,
    with the interpreter alone and the command's imports alone for the breakdown."""

    entries: int
    floor: Timing
    command: Timing
    interpreter: Timing
    imports: Timing

    @property
    def floor_s(self) -> float:
        """The parse process's wall time."""
        return self.floor.wall_s

    @property
    def command_s(self) -> float:
        """The command's wall time."""
        return self.command.wall_s

    @property
    def ratio(self) -> float:
        """command / parse process, wall time (the goal's measure)."""
        return self.command.wall_s / self.floor.wall_s

    @property
    def cpu_ratio(self) -> float:
        """command / parse process, CPU time (steadier on a shared machine)."""
        return self.command.cpu_s / self.floor.cpu_s


def run_process(argv: Sequence[str], cwd: Path) -> Timing:
    """Run one process to its end: its wall time and the CPU time it (and its children) used."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL, timeout=300)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Timing(wall, cpu)


def median_processes(
    probes: Mapping[str, tuple[Sequence[str], Path]], repeats: int
) -> dict[str, Timing]:
    """Median wall and CPU time of each process, run in turn so machine noise hits all alike."""
    for argv, cwd in probes.values():  # warm-up: the page cache, .pyc files
        run_process(argv, cwd)
    runs: dict[str, list[Timing]] = {name: [] for name in probes}
    for _ in range(repeats):
        for name, (argv, cwd) in probes.items():
            runs[name].append(run_process(argv, cwd))
    return {
        name: Timing(
            statistics.median(t.wall_s for t in timings),
            statistics.median(t.cpu_s for t in timings),
        )
        for name, timings in runs.items()
    }


# What `batch status` imports (tests/cli/test_cli_imports.py holds everything else away from
# it): the imports probe loads just these and exits.
STATUS_MODULES = ("app.cli", "app.cli.status")


def measure_command(entries: int, repeats: int, workdir: Path) -> CommandRow:
    """Build a project of `COMMAND_CHANGES` changes and time the command beside its floor,
    the bare interpreter and the command's imports alone (all in the same run)."""
    root = workdir / f"command-e{entries}"
    journal = build_project(root, Shape(COMMAND_CHANGES, entries))
    parse = (
        "from pathlib import Path; from app.engine import jsonl; "
        f"jsonl.read_records(Path({str(journal)!r}))"
    )
    timings = median_processes(
        {
            "floor": ([sys.executable, "-c", parse], PROJECT),
            "command": ([sys.executable, "-m", "app.cli", "batch", "status", BATCH], root),
            "interpreter": ([sys.executable, "-c", "pass"], PROJECT),
            "imports": ([sys.executable, "-c", f"import {', '.join(STATUS_MODULES)}"], PROJECT),
        },
        repeats,
    )
    return CommandRow(entries, **timings)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:6.1f}"


def format_command(rows: Sequence[CommandRow]) -> str:
    """The command's table, its goals, and where the command's time goes."""
    lines = [
        f"`pairbot batch status` as a command, {COMMAND_CHANGES} changes "
        "(wall ms, and CPU ms = user + system in brackets):",
        f"{'entries':>8} {'parse process ms':>17} {'command ms':>17} {'ratio':>14}  goal (wall)",
    ]
    for r in rows:
        goal = COMMAND_GOALS.get(r.entries)
        verdict = "" if goal is None else f"≤ {goal:g}x: {'met' if r.ratio <= goal else 'MISSED'}"
        lines.append(
            f"{r.entries:>8,} {_ms(r.floor.wall_s)} ({_ms(r.floor.cpu_s)})"
            f" {_ms(r.command.wall_s)} ({_ms(r.command.cpu_s)})"
            f" {r.ratio:>5.2f}x ({r.cpu_ratio:.2f}x)  {verdict}"
        )
    lines.append(
        "where the time goes, ms (CPU ms): the bare interpreter, then what each process adds"
    )
    for r in rows:
        start, imports = r.interpreter, r.imports
        lines.append(
            f"{r.entries:>8,}  interpreter {_ms(start.wall_s)} ({_ms(start.cpu_s)})"
            f" | command: imports {_ms(imports.wall_s - start.wall_s)}"
            f" ({_ms(imports.cpu_s - start.cpu_s)}),"
            f" work {_ms(r.command.wall_s - imports.wall_s)}"
            f" ({_ms(r.command.cpu_s - imports.cpu_s)})"
            f" | parse process: imports + parse {_ms(r.floor.wall_s - start.wall_s)}"
            f" ({_ms(r.floor.cpu_s - start.cpu_s)})"
        )
    return "\n".join(lines)


def shapes(changes: Sequence[int], entries: Sequence[int]) -> Iterator[Shape]:
    """Every (changes, entries) case."""
    for count in changes:
        for size in entries:
            yield Shape(count, size)


def format_table(rows: Sequence[Row]) -> str:
    """The result table, a growth line per batch size, and the goal verdict."""
    lines = [
        f"{'changes':>7} {'entries':>8} {'floor ms':>9} {'status ms':>10} {'ratio':>6} "
        f"{'µs/entry':>9}  next",
    ]
    for r in rows:
        lines.append(
            f"{r.changes:>7,} {r.entries:>8,} {r.floor_s * 1e3:>9.1f} {r.status_s * 1e3:>10.1f} "
            f"{r.ratio:>5.2f}x {r.per_entry_us:>9.2f}  {r.next_step}"
        )
    by = {(r.changes, r.entries): r for r in rows}
    for count in sorted({r.changes for r in rows}):
        small, big = by.get((count, 10_000)), by.get((count, 100_000))
        if small and big:
            floor_growth = big.floor_s / small.floor_s
            status_growth = big.status_s / small.status_s
            verdict = "linear" if status_growth <= 10 * 1.3 else "SUPERLINEAR"
            lines.append(
                f"growth 10k→100k entries at {count:,} changes: floor x{floor_growth:.1f}, "
                f"status x{status_growth:.1f} (x10 is linear; status {verdict}); "
                f"ratio {small.ratio:.2f}x → {big.ratio:.2f}x"
            )
    goal_rows = [r for r in rows if r.entries == GOAL_ENTRIES]
    lines.append(
        f"goal: status + selection ≤ {GOAL_RATIO:g}x the floor at {GOAL_ENTRIES:,} entries"
    )
    for r in goal_rows:
        met = "met" if r.ratio <= GOAL_RATIO else "MISSED"
        lines.append(f"  {r.changes:>5,} changes: {r.ratio:.2f}x — {met}")
    if not goal_rows:
        lines.append(f"  (no case with {GOAL_ENTRIES:,} entries was run)")
    return "\n".join(lines)


def profile(shape: Shape, workdir: Path, top: int = 25) -> str:
    """cProfile one status + selection of `shape`; the top functions by own time."""
    root = workdir / f"profile-c{shape.changes}-e{shape.entries}"
    build_project(root, shape)
    run = status_and_selection(root)
    run()
    profiler = cProfile.Profile()
    profiler.enable()
    run()
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


def main(
    changes: Sequence[int] = CHANGE_SIZES,
    entries: Sequence[int] = ENTRY_SIZES,
    repeats: int = 5,
    *,
    command_entries: Sequence[int] = COMMAND_ENTRIES,
    with_profile: bool = False,
    out: Callable[[str], None] = print,
    command_rows: list[CommandRow] | None = None,
) -> list[Row]:
    """Run the matrix and the command's cases, print the tables; returns the matrix's rows
    (the command's are appended to `command_rows` when given)."""
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="pairbot-scale-") as tmp:
        workdir = Path(tmp)
        out(
            f"engine scale: {BATCH!r} batch in {PHASES} phases, median of {repeats} "
            f"run(s), {sys.implementation.name} {sys.version.split()[0]}"
        )
        for shape in shapes(changes, entries):
            rows.append(measure(shape, repeats, workdir))
        if rows:
            out(format_table(rows))
        measured = [measure_command(n, repeats, workdir) for n in command_entries]
        if measured:
            out(format_command(measured))
        if command_rows is not None:
            command_rows.extend(measured)
        if with_profile and rows:
            biggest = Shape(max(changes), max(entries))
            out(
                f"\ncProfile of status + selection, {biggest.changes:,} changes, "
                f"{biggest.entries:,} entries:"
            )
            out(profile(biggest, workdir))
    return rows


def _cli(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    # `--changes` with no value skips the in-process matrix (the command's cases only).
    parser.add_argument("--changes", type=int, nargs="*", default=list(CHANGE_SIZES))
    parser.add_argument("--entries", type=int, nargs="+", default=list(ENTRY_SIZES))
    parser.add_argument("--command-entries", type=int, nargs="*", default=list(COMMAND_ENTRIES))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="cProfile the largest case")
    args = parser.parse_args(argv)
    main(
        args.changes,
        args.entries,
        args.repeats,
        command_entries=args.command_entries,
        with_profile=args.profile,
    )


if __name__ == "__main__":
    _cli(sys.argv[1:])
