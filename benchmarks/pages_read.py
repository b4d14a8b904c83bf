"""What the cards overview costs as cards pile up history: the run-state reader with its memo
against the same reader without one, side by side in one run.

    python benchmarks/pages_read.py                    20 and 200 cards, 1,000 records each
    python benchmarks/pages_read.py --cards 50 500 --records 2000 --runs 9

A project directory gets N card batches (`.pair/batches/card-<n>`), each with a long journal
in the shapes the cycle writes (propose, apply, then review and fix rounds with findings,
usage, progress reports, pushes, labels and tracking comments). The real app
(`app.web.app.create_app`) is served by uvicorn on loopback twice over that same directory:

    uncached   `local=lambda: read_local(root, None)`: every request parses every journal
    cached     `local=LocalReader(root, None)`: a request stats every card's files and
               re-derives only those that changed (warmed by one request first)
    one grew   the cached server, with one card's journal appended to before every request
               (a step running somewhere): what a page costs while work goes on

Each figure is the median wall time of `GET /` (the overview, with the cohort) as the
operator, the three alternated so the machine's load hits them alike. The ratio uncached /
cached is the figure to compare; the absolute times move with the machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    # `python benchmarks/pages_read.py` puts benchmarks/ first on sys.path, not the project.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from app.web.app import create_app
from app.web.pages.read import LocalReader, read_local
from tests.web.conftest import OPERATOR, AppGitHub, Served, app_settings, github_forges, served

RUNS = 7
BATCH = """gate: voluntary
prGrouping: per-change
phases:
- name: card
  changes:
  - name: card-{n}
    card: {n}
"""


def _stamp(n: int) -> str:
    return f"2026-12-01T{(n // 3600) % 24:02d}:{(n // 60) % 60:02d}:{n % 60:02d}+00:00"


def card_journal(number: int, length: int) -> Iterator[dict[str, Any]]:
    """About `length` records of one card's cycle, round after round of review and fix."""
    key, clock, made = f"card-{number}", 0, 0

    def record(kind: str, **fields: Any) -> dict[str, Any]:
        nonlocal clock, made
        clock += 7
        made += 1
        return {"kind": kind, "key": key, "at": _stamp(clock), **fields}

    def step(transition: str, session: str, **outcome: Any) -> Iterator[dict[str, Any]]:
        yield record("step-started", transition=transition, session=session,
                     data={"agent": "claude", "model": "sonnet"})  # fmt: skip
        for n in range(3):
            yield record("progress", transition=transition, session=session,
                         message=f"{transition}: working through part {n} of the card")  # fmt: skip
        yield record("outcome", transition=transition, session=session, state="advanced",
                     usage={"inputTokens": 12_000, "outputTokens": 900, "costUsd": 0.04},
                     message=f"{transition} done", **outcome)  # fmt: skip

    def cycle(**data: Any) -> dict[str, Any]:
        return record("cycle", data=data)

    yield cycle(event="bound", card=number, mode="implement", run="r1")
    yield cycle(event="snapshot", card=number, title=f"Card {number}: a feature", comments=[])
    yield from step("propose", "s-propose")
    yield from step("apply", "s-apply")
    yield cycle(event="pushed", sha=f"{number:040x}", transition="apply")
    yield cycle(event="pr", number=1000 + number, url=f"https://github.com/o/r/pull/{number}")
    round_ = 0
    while made < length:
        round_ += 1
        findings = {
            "findings": [
                {"id": f"r{round_}-{n}", "kind": "defect", "severity": "major",
                 "blocking": n == 0, "transition": "open", "title": f"finding {n}"}
                for n in range(3)
            ],
            "scopeChanges": [],
        }  # fmt: skip
        yield from step("verify", f"s-verify-{round_}", findings=findings)
        sha = f"{number:020x}{round_:020x}"
        yield cycle(event="reviewed", head=sha, converged=False, blocking=1, round=round_)
        comment = {"target": "pull", "number": 1000 + number, "id": str(round_), "url": ""}
        yield cycle(event="review-published", head=sha, comment=comment)
        yield from step("red", f"s-red-{round_}")
        yield from step("fix", f"s-fix-{round_}")
        yield cycle(event="pushed", sha=sha, transition="fix")
        yield cycle(event="label", state="pr-state:in-progress", pr=1000 + number)
        yield cycle(event="tracking", digest=f"d{round_}", status="in-progress", next="verify",
                    why="a review round is due")  # fmt: skip


def build(root: Path, cards: int, length: int) -> list[Path]:
    """`cards` card batches under `root`; their journals."""
    journals = []
    for number in range(1, cards + 1):
        run = root / ".pair" / "batches" / f"card-{number}" / "run"
        run.mkdir(parents=True)
        (run.parent / "batch.yaml").write_text(BATCH.format(n=number))
        lines = (json.dumps(r, separators=(",", ":")) for r in card_journal(number, length))
        (run / "journal.jsonl").write_text("\n".join(lines) + "\n")
        journals.append(run / "journal.jsonl")
    return journals


def _app(tmp: Path, name: str, local: Callable[[], Any]) -> Any:
    (tmp / name).mkdir()
    return create_app(
        app_settings(tmp / name),
        github=github_forges(AppGitHub()),
        poll_s=0.5,
        local=local,
        root_repo="octo/widget",
    )


def _timed(client: httpx.Client, before: Callable[[], None] | None = None) -> float:
    if before is not None:
        before()
    began = time.perf_counter()
    response = client.get("/", headers={"Authorization": f"Bearer {OPERATOR}"})
    took = time.perf_counter() - began
    if response.status_code != 200 or "Cards, what needs a person first" not in response.text:
        raise SystemExit(f"the overview answered {response.status_code}: {response.text[:200]}")
    return took


def measure(cards: int, length: int, runs: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="pages-read-") as name, ExitStack() as stack:
        tmp = Path(name)
        root = tmp / "project"
        journals = build(root, cards, length)
        servers: dict[str, Served] = {
            "uncached": stack.enter_context(served(_app(tmp, "a", lambda: read_local(root, None)))),
            "cached": stack.enter_context(served(_app(tmp, "b", LocalReader(root, None)))),
        }
        clients = {k: stack.enter_context(httpx.Client(base_url=s.url, timeout=600.0))
                   for k, s in servers.items()}  # fmt: skip
        grown = 0

        def grow() -> None:
            nonlocal grown
            grown += 1
            line = {"kind": "progress", "key": "card-1", "at": _stamp(grown), "message": "on"}
            with journals[0].open("a") as journal:
                journal.write(json.dumps(line) + "\n")

        _timed(clients["cached"])  # the memo's first fill
        times: dict[str, list[float]] = {"uncached": [], "cached": [], "one grew": []}
        for _ in range(runs):
            times["uncached"].append(_timed(clients["uncached"]))
            times["cached"].append(_timed(clients["cached"]))
            times["one grew"].append(_timed(clients["cached"], grow))
        return {k: statistics.median(v) for k, v in times.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cards", type=int, nargs="+", default=[20, 200])
    parser.add_argument("--records", type=int, default=1_000, help="journal records per card")
    parser.add_argument("--runs", type=int, default=RUNS)
    args = parser.parse_args(argv)
    if min(args.cards) < 1 or args.records < 20 or args.runs < 1:
        parser.error("--cards ≥ 1, --records ≥ 20 and --runs ≥ 1")
    print(f"GET / (the overview) as the operator; {args.records} journal records per card; "
          f"median of {args.runs}")  # fmt: skip
    print(f"{'cards':>6} {'uncached':>11} {'cached':>11} {'one grew':>11} {'uncached/cached':>16}")
    for cards in args.cards:
        got = measure(cards, args.records, args.runs)
        ratio = got["uncached"] / got["cached"]
        print(
            f"{cards:>6} {got['uncached'] * 1000:>9.1f}ms {got['cached'] * 1000:>9.1f}ms "
            f"{got['one grew'] * 1000:>9.1f}ms {ratio:>15.1f}x"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
