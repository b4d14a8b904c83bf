"""`/pair status`: which gate blocks and why, the budget with coverage, the commands that help."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.domain.intake.comment_commands import Command, parse_commands
from app.domain.reports.explain import NEXT_TEXT, CardFacts, Explanation, explain
from app.domain.reports.metrics_model import Quantity
from hosts.labels import PREFIX, PrState

A = "a" * 40
B = "b" * 40
BASE = CardFacts(card=7, status="in-progress", next_step="apply", title="Add login", pr=12)


def facts(**changes: Any) -> CardFacts:
    return dataclasses.replace(BASE, **changes)


@pytest.mark.parametrize(
    ("given_facts", "gate", "why", "actions"),
    [
        pytest.param(
            facts(status="awaiting-approval", next_step="apply"),
            "prepare",
            'the plan waits for a maintainer\'s approval (prepare gate "always")',
            ("/pair approve", "/pair feedback <text>", "/pair abandon"),
            id="prepare-gate",
        ),
        pytest.param(
            facts(status="awaiting-human", next_step="merge", reviewed_head=A, until="merged"),
            "merge",
            'merge gate "always": the reviewed head aaaaaaaaaaaa waits for a maintainer',
            ("/pair approve", "/pair abandon"),
            id="merge-gate-always",
        ),
        pytest.param(
            facts(
                status="escalated",
                next_step="merge",
                reviewed_head=A,
                merge_gate="when has:risky",
                park_reason="merge gate condition fired: has:risky",
            ),
            "merge",
            'merge gate "when has:risky": a condition fired, so the reviewed head aaaaaaaaaaaa '
            "waits for a maintainer to approve the merge — merge gate condition fired: has:risky",
            ("/pair approve", "/pair abandon"),
            id="merge-gate-escalated",
        ),
        pytest.param(
            facts(status="awaiting-scope-decision", next_step=None, pending_scope=2),
            "scope-decision",
            "2 scope proposals await the maintainer's decision on PR #12",
            ("reply on PR #12 with a scope decision (one fenced JSON object)", "/pair abandon"),
            id="scope-decision",
        ),
        pytest.param(
            facts(status="awaiting-approval", gate="batch-gate", gate_why="phase 2 gated"),
            "batch-gate",
            "phase 2 gated",
            ("/pair approve", "/pair feedback <text>", "/pair abandon"),
            id="explicit-batch-gate",
        ),
        pytest.param(
            facts(status="needs-input", park_reason="which database?"),
            None,
            "the agent needs an answer: which database?",
            ("/pair answer <text>", "/pair abandon"),
            id="needs-input",
        ),
        pytest.param(
            facts(status="blocked", park_reason="apply was refused 3 times in a row"),
            None,
            "apply was refused 3 times in a row",
            ("/pair retry", "/pair feedback <text>", "/pair abandon"),
            id="blocked",
        ),
        pytest.param(
            facts(status="blocked"),
            None,
            "the last step is blocked",
            ("/pair retry", "/pair feedback <text>", "/pair abandon"),
            id="blocked-without-reason",
        ),
        pytest.param(
            facts(status="failed-fix", next_step=None, fix_rounds_used=3, open_blocking=1),
            None,
            "3 fix rounds spent (maxFixRounds 3) and the review still has 1 blocking finding",
            ("/pair feedback <text>", "/pair abandon"),
            id="failed-fix",
        ),
        pytest.param(
            facts(status="failed-verify", next_step=None),
            None,
            "the review could not be completed or trusted",
            ("/pair retry", "/pair feedback <text>", "/pair abandon"),
            id="failed-verify",
        ),
        pytest.param(
            facts(status="failed-publication", next_step="publish"),
            None,
            "the synthesis comment could not be confirmed",
            ("/pair retry", "/pair abandon"),
            id="failed-publication",
        ),
        pytest.param(
            facts(status="ready-for-merge", next_step=None, reviewed_head=A),
            None,
            "converged and review-approved at aaaaaaaaaaaa; the merge is yours",
            ("merge PR #12", "/pair implement until: merged"),
            id="ready-for-merge",
        ),
        pytest.param(
            facts(status="ready-for-merge", next_step="merge", reviewed_head=A, until="merged"),
            None,
            "the merge gate decides next",
            ("/pair abandon",),
            id="ready-until-merged",
        ),
        pytest.param(
            facts(status="merged", next_step=None), None, "the PR is merged", (), id="merged"
        ),
        pytest.param(
            facts(status="abandoned", next_step="apply"),
            None,
            "the cycle was abandoned",
            (),
            id="abandoned",
        ),
        pytest.param(
            facts(status="interrupted", next_step=None),
            None,
            "PR #12 was closed without merging",
            ("reopen PR #12, then /pair implement", "/pair abandon"),
            id="interrupted",
        ),
        pytest.param(
            facts(status="in-progress", next_step="red", open_blocking=2, fix_rounds_used=1),
            None,
            "nothing blocks: the next step runs red (the last review left 2 blocking findings; "
            "fix round 2 of 3)",
            ("/pair implement", "/pair abandon"),
            id="fix-loop",
        ),
        pytest.param(
            facts(status="awaiting-verify", next_step="verify", reviewed_head=A, current_head=B),
            None,
            "nothing blocks: the next step runs verify; the PR head moved from the reviewed "
            "aaaaaaaaaaaa to bbbbbbbbbbbb, so the next review is a delta re-review",
            ("/pair implement", "/pair abandon"),
            id="head-moved",
        ),
        pytest.param(
            facts(status="ready", next_step=None, park_reason="waiting for add-login"),
            None,
            "waiting for add-login",
            ("/pair implement", "/pair abandon"),
            id="nothing-runnable",
        ),
    ],
)
def test_explain_names_the_gate_why_and_the_commands(
    given_facts: CardFacts, gate: str | None, why: str, actions: tuple[str, ...]
) -> None:
    explanation = explain(given_facts)
    assert explanation.gate == gate
    assert why in explanation.why
    assert explanation.what_you_can_do == actions
    assert explanation.label == PREFIX + given_facts.status


def test_the_trigger_word_is_used_in_every_command() -> None:
    explanation = explain(facts(status="blocked", trigger="bot"))
    assert explanation.what_you_can_do == ("/bot retry", "/bot feedback <text>", "/bot abandon")


@pytest.mark.parametrize(
    ("changes", "budget"),
    [
        pytest.param(
            {"fix_rounds_used": 1, "review_round": 2},
            "fix rounds: 1 of 3 used; reviews: 2; tokens: unknown (not reported); "
            "cost: unknown (not reported)",
            id="nothing-reported",
        ),
        pytest.param(
            {"tokens": Quantity(None, "unknown", 0, 3), "cost": Quantity(None, "unknown", 0, 3)},
            "tokens: unknown (0 of 3 steps reported); cost: unknown (0 of 3 steps reported)",
            id="unknown-is-never-zero",
        ),
        pytest.param(
            {"tokens": Quantity(12_340, "partial", 2, 3), "cost": Quantity(0.5, "known", 1, 1)},
            "tokens: at least 12,340 (2 of 3 steps reported); cost: $0.5000 (1 of 1 step reported)",
            id="partial-and-known",
        ),
        pytest.param(
            {"tokens": Quantity(None, "unknown", 0, 0)},
            "tokens: unknown (no agent step yet)",
            id="no-step-yet",
        ),
        pytest.param(
            {"fix_rounds_used": 3, "max_fix_rounds": 3},
            "fix rounds: 3 of 3 used (none left)",
            id="rounds-spent",
        ),
        pytest.param(
            {"fix_rounds_used": 0, "max_fix_rounds": 0},
            "fix rounds: 0 of 0 used;",
            id="no-rounds-allowed",
        ),
    ],
)
def test_budget(changes: dict[str, Any], budget: str) -> None:
    assert budget in explain(facts(**changes)).budget


def test_usage_is_reduced_from_the_journal_records() -> None:
    records = (
        {"kind": "step-started", "key": "c", "transition": "propose", "at": "t0"},
        {
            "kind": "outcome",
            "key": "c",
            "transition": "propose",
            "state": "advanced",
            "usage": {"inputTokens": 100, "outputTokens": 20, "costUsd": 0.01},
        },
        {"kind": "step-started", "key": "c", "transition": "apply", "at": "t1"},
        {"kind": "outcome", "key": "c", "transition": "apply", "state": "advanced"},
    )
    explanation = explain(facts(records=records))
    assert "tokens: at least 120 (1 of 2 steps reported)" in explanation.budget
    assert "cost: at least $0.0100 (1 of 2 steps reported)" in explanation.budget
    given = Quantity(5, "known", 1, 1)
    assert explain(facts(records=records, tokens=given)).tokens == given


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        pytest.param({"status": "done"}, "'done' is not a pr-state", id="status"),
        pytest.param({"next_step": "decompose"}, "next_step must be one of", id="next-step"),
        pytest.param({"gate": "other"}, "gate must be one of", id="gate"),
        pytest.param({"until": "forever"}, "until must be one of", id="until"),
        pytest.param({"reviewed_head": "abc"}, "reviewed_head must be a 40-hex", id="head"),
        pytest.param({"current_head": "g" * 40}, "current_head must be a 40-hex", id="current"),
        pytest.param({"fix_rounds_used": -1}, "fix_rounds_used must be >= 0", id="rounds"),
        pytest.param({"pending_scope": -1}, "pending_scope must be >= 0", id="scope"),
        pytest.param({"trigger": "pair`x"}, "trigger must be a word", id="trigger"),
    ],
)
def test_facts_are_validated(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        facts(**changes)


HOSTILE = "<!\u200b-- pair:tracking #7 --> | **x** @octocat\n# heading <img src=x>"


def test_rendering_escapes_user_and_agent_text() -> None:
    explanation = explain(
        facts(
            status="blocked",
            title=HOSTILE,
            park_reason=HOSTILE,
            pr_url="https://github.com/o/r/pull/12",
        )
    )
    markdown = explanation.to_markdown()
    assert "<!--" not in markdown
    assert "\u200b-- pair" not in markdown
    assert re.search(r"(?<!\\)<img", markdown) is None
    assert "@octocat" not in markdown  # no ping
    assert "[PR \\#12](https://github.com/o/r/pull/12)" in markdown
    assert all(not line.startswith("#") for line in markdown.splitlines())
    text = explanation.to_text()
    assert "<!--" not in text
    assert "\n# heading" not in text
    assert text.splitlines()[0].startswith("Card #7 — ")


def test_markdown_and_text_shape() -> None:
    explanation = explain(facts(status="awaiting-approval", pr_url="javascript:alert(1)"))
    assert explanation.to_markdown().splitlines() == [
        "**Card #7** — Add login · PR \\#12",
        "",
        "- **Status:** `awaiting-approval` (label `pr-state:awaiting-approval`)",
        "- **Next step:** apply: implement the plan test-first on the card's branch",
        "- **Blocked by:** the prepare gate",
        '- **Why:** the plan waits for a maintainer\'s approval (prepare gate "always"); the '
        "tracking comment shows the plan",
        "- **Budget:** fix rounds: 0 of 3 used; reviews: 0; tokens: unknown (not reported); "
        "cost: unknown (not reported)",
        "- **What you can do:** `/pair approve`, `/pair feedback <text>`, `/pair abandon`",
    ]
    assert explanation.to_text().splitlines()[:4] == [
        "Card #7 — Add login (PR #12)",
        "status: awaiting-approval (pr-state:awaiting-approval)",
        "next: apply: implement the plan test-first on the card's branch",
        "gate: the prepare gate",
    ]
    merged = explain(facts(status="merged", next_step=None, title="", pr=None))
    assert "- **What you can do:** nothing: the cycle is over" in merged.to_markdown()
    assert "what you can do" not in merged.to_text()
    assert merged.to_markdown().startswith("**Card #7**\n")


def test_to_json_is_json_with_coverage() -> None:
    explanation = explain(
        facts(
            status="awaiting-human",
            reviewed_head=A.upper(),
            tokens=Quantity(None, "unknown", 0, 2),
            pr_url="https://e.com/p/12",
        )
    )
    data = json.loads(json.dumps(explanation.to_json()))
    assert data["status"] == "awaiting-human"
    assert data["gate"] == "merge"
    assert data["whatYouCanDo"] == ["/pair approve", "/pair abandon"]
    assert data["reviewedHead"] == A
    assert data["tokens"] == {"value": None, "coverage": "unknown", "reported": 0, "of": 2}
    assert data["costUsd"] is None
    assert data["prUrl"] == "https://e.com/p/12"
    assert data["fixRounds"] == {"used": 0, "max": 3}


STATUSES = [state.value.removeprefix(PREFIX) for state in PrState]
NEXTS = st.one_of(st.none(), st.sampled_from(sorted(NEXT_TEXT)))


@given(
    status=st.sampled_from(STATUSES),
    next_step=NEXTS,
    used=st.integers(0, 5),
    blocking=st.integers(0, 5),
    reason=st.one_of(st.none(), st.text(max_size=40)),
    title=st.text(max_size=40),
)
def test_every_card_gets_a_complete_explanation(
    *, status: str, next_step: str | None, used: int, blocking: int, reason: str | None, title: str
) -> None:
    explanation = explain(
        CardFacts(
            card=1,
            status=status,
            next_step=next_step,
            title=title,
            park_reason=reason,
            fix_rounds_used=used,
            open_blocking=blocking,
            trigger="bot",
        )
    )
    assert isinstance(explanation, Explanation)
    assert explanation.why
    assert "\n" not in explanation.why
    gated = {"awaiting-approval", "awaiting-human", "escalated", "awaiting-scope-decision"}
    assert (explanation.gate is not None) == (status in gated)
    assert f"fix rounds: {used} of 3 used" in explanation.budget
    assert "tokens: 0" not in explanation.budget
    # Every command offered parses with the shared grammar.
    for action in explanation.what_you_can_do:
        if action.startswith("/"):
            parsed = parse_commands(action.replace("<text>", "some text"), trigger="bot")
            assert [type(p) for p in parsed] == [Command], action
    markdown = explanation.to_markdown()
    assert "<!--" not in markdown
    json.dumps(explanation.to_json())
