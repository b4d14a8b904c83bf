"""`pairbot report cohort [--json]` over real card cycles on the local host.

Four cards run real cycles with the scripted agent — one merged, one with one fix round, one
with two, one parked blocked — and the report's figures must equal what the test derives from
the cards' journals on its own (a different reading of the same files, not the reducer).
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

import pytest

from tests.support.card_project import MAINTAINER, CardProject, card_journal
from tests.support.project import cli

pytestmark = pytest.mark.slow


def drive(project: CardProject, limit: int = 20) -> None:
    """Step the current card until a step runs nothing (`until_quiet` without its one-PR
    invariants: this project holds several cards, each with its own PR)."""
    for _ in range(limit):
        if project.step().result.state in ("nothing-ready", "blocked", "awaiting-approval"):
            return
    raise AssertionError(f"card #{project.card} found no quiet state in {limit} steps")


def _independent(records: list[dict[str, Any]]) -> dict[str, Any]:
    """A card's status, fix rounds, completed fix cycles and tokens, read straight from its
    journal: the last `label` event's state; accepted fix outcomes; fixes a later accepted
    verify re-checked; input+output tokens of outcomes reporting both."""
    status = "unknown"
    fixes = cycles = 0
    fix_waiting = False
    tokens = 0
    reported = 0
    for record in records:
        data = record.get("data") or {}
        if record.get("kind") == "cycle" and data.get("event") == "label":
            status = str(data["state"]).removeprefix("pr-state:")
        if record.get("kind") == "cycle" and data.get("event") == "merged":
            status = "merged"
        if record.get("kind") != "outcome":
            continue
        usage = record.get("usage") or {}
        if isinstance(usage.get("inputTokens"), int) and isinstance(usage.get("outputTokens"), int):
            tokens += usage["inputTokens"] + usage["outputTokens"]
            reported += 1
        accepted = record.get("state") in ("advanced", "awaiting-approval")
        if accepted and record.get("transition") == "fix":
            fixes += 1
            fix_waiting = True
        if accepted and record.get("transition") == "verify" and fix_waiting:
            cycles += 1
            fix_waiting = False
    return {
        "status": status,
        "fixRounds": fixes,
        "cycles": cycles,
        "tokens": tokens if reported else None,
    }


@pytest.mark.slow_first(25)
def test_cohort_json_matches_the_cards_journals(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path)
    first = project.card
    cards = [first] + [
        project.forge.seed_card(f"Card {n}", "AC-1: it works\n", author=MAINTAINER)
        for n in range(3)
    ]
    merged, one_fix, two_fixes, parked = cards
    project.script(
        {
            f"card-{one_fix}:verify": ["findings-blocking", "ok"],
            f"card-{two_fixes}:verify": ["findings-blocking", "findings-new", "ok"],
            f"card-{parked}:apply": ["block"],
        }
    )
    for card, command in (
        (merged, "implement until: merged merge: never"),
        (one_fix, "implement"),
        (two_fixes, "implement"),
        (parked, "implement"),
    ):
        project.card = card
        project.command(command)
        drive(project)

    done = cli("report", "cohort", "--json", cwd=project.root)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)

    derived = {card: _independent(card_journal(project.root, card)) for card in cards}
    assert derived[merged]["status"] == "merged"
    assert derived[parked]["status"] == "blocked"
    assert derived[two_fixes]["fixRounds"] == 2

    assert report["schema"] == 1
    assert report["cards"] == 4
    by_status: dict[str, int] = {}
    for figures in derived.values():
        by_status[figures["status"]] = by_status.get(figures["status"], 0) + 1
    assert report["byStatus"] == by_status
    completed = [f for f in derived.values() if f["status"] in ("merged", "ready-for-merge")]
    assert report["completed"] == len(completed) == 3
    assert report["completionRate"] == round(len(completed) / 4, 3)
    to_done = sorted(1 + f["cycles"] for f in completed)
    assert to_done == [1, 2, 3]
    assert report["cyclesToDone"] == {
        "count": 3,
        "mean": round(statistics.fmean(to_done), 3),
        "median": float(statistics.median(to_done)),
        "p90": float(to_done[math.ceil(0.9 * len(to_done)) - 1]),
    }
    fixes = sum(f["fixRounds"] for f in derived.values())
    assert report["fixRounds"] == {"total": fixes, "meanPerCard": round(fixes / 4, 3)}
    reporting = [f for f in derived.values() if f["tokens"] is not None]
    assert report["tokens"]["cardsReporting"] == len(reporting)
    assert report["tokens"]["cards"] == 4
    if reporting:
        assert report["tokens"]["value"] == sum(f["tokens"] for f in reporting)
    else:
        assert report["tokens"]["value"] is None
        assert report["tokens"]["coverage"] == "unknown"
    rows = {row["card"]: row for row in report["perCard"]}
    for card, figures in derived.items():
        assert rows[card]["status"] == figures["status"]
        assert rows[card]["fixRounds"] == figures["fixRounds"]
        assert rows[card]["cycles"] == figures["cycles"]

    text = cli("report", "cohort", cwd=project.root)
    assert text.returncode == 0, text.stderr
    assert "cards: 4" in text.stdout
    assert "completed (ready-for-merge or merged): 3 (75.0%)" in text.stdout
    assert "cycles to done: mean 2, median 2, p90 3 (over 3 cards)" in text.stdout


def test_cohort_of_a_project_without_cards(tmp_path: Path) -> None:
    root = tmp_path / "empty"
    root.mkdir()
    done = cli("report", "cohort", cwd=root)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "no card has a pairbot cycle here yet\n"
    as_json = json.loads(cli("report", "cohort", "--json", cwd=root).stdout)
    assert as_json["cards"] == 0
    assert as_json["completionRate"] is None
    assert as_json["tokens"] == {
        "value": None,
        "coverage": "unknown",
        "cardsReporting": 0,
        "cards": 0,
    }


def test_an_unknown_report_is_refused_naming_the_choices(tmp_path: Path) -> None:
    done = cli("report", "velocity", cwd=tmp_path)
    assert done.returncode == 2
    assert "cohort" in done.stderr
