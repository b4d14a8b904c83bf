"""The tracking comment: status, explanation, bounded step history with links, next step, inert."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.domain.reports.explain import CardFacts, explain
from app.domain.reports.tracking import MAX_STEPS, PLAN_LIMIT, TrackingStep, render_tracking
from hosts.markers import END_MARKER, make_marker, render

A = "a" * 40
B = "b" * 40
FACTS = CardFacts(
    card=7,
    status="awaiting-verify",
    next_step="verify",
    title="Add login",
    pr=12,
    pr_url="https://github.com/o/r/pull/12",
    reviewed_head=A,
    current_head=B,
)
PR = "https://github.com/o/r/pull/12"
STEPS = (
    TrackingStep("2024-05-01T10:00:00Z", "propose", "awaiting-approval", "plan ready", tokens=900),
    TrackingStep(
        "2024-05-01T11:00:00Z",
        "apply",
        "advanced",
        "3 tasks done",
        pr_url=PR,
        commit=B,
        commit_url=f"https://github.com/o/r/commit/{B}",
    ),
    TrackingStep(
        "2024-05-01T12:00:00Z",
        "publish",
        "advanced",
        comment_url=f"{PR}#issuecomment-5",
    ),
)


def body(facts: CardFacts = FACTS, steps: tuple[TrackingStep, ...] = STEPS, **kw: object) -> str:
    return render_tracking(facts, explain(facts), steps, **kw)  # type: ignore[arg-type]


def test_the_whole_body() -> None:
    assert body().splitlines() == [
        "### pairbot — card #7: Add login",
        "",
        "**Current status:** `pr-state:awaiting-verify` · [PR \\#12](https://github.com/o/r/pull/12)"
        " · reviewed head `aaaaaaaaaaaa` · PR head `bbbbbbbbbbbb`",
        "",
        *explain(FACTS).to_markdown().splitlines(),
        "",
        "#### Step history",
        "",
        "| When | Step | Outcome | Note | Links | Tokens |",
        "|---|---|---|---|---|---|",
        "| 2024-05-01T10:00:00Z | propose | awaiting-approval | plan ready | — | 900 |",
        "| 2024-05-01T11:00:00Z | apply | advanced | 3 tasks done | "
        f"[PR]({PR}) · [`bbbbbbbbbbbb`](https://github.com/o/r/commit/{B}) | unknown |",
        f"| 2024-05-01T12:00:00Z | publish | advanced | — | [comment]({PR}#issuecomment-5) | — |",
        "",
        "**Next step:** verify: an independent review of the pushed head",
    ]


@pytest.mark.parametrize(
    ("step", "cells"),
    [
        pytest.param(
            TrackingStep("t", "fix", "advanced", commit="abc1234"),
            ["t", "fix", "advanced", "—", "`abc1234`", "unknown"],
            id="commit-without-url",
        ),
        pytest.param(
            TrackingStep("t", "fix", "advanced", commit="not-a-sha", pr_url="javascript:x()"),
            ["t", "fix", "advanced", "—", "—", "unknown"],
            id="unsafe-links-dropped",
        ),
        pytest.param(
            TrackingStep("t", "merge", "advanced", tokens=None),
            ["t", "merge", "advanced", "—", "—", "—"],
            id="mechanical-step-has-no-tokens",
        ),
        pytest.param(
            TrackingStep("t", "verify", "sent-back", "a | b\nc", tokens=0),
            ["t", "verify", "sent-back", "a \\| b c", "—", "0"],
            id="note-escaped-and-zero-is-a-real-zero",
        ),
    ],
)
def test_history_rows(step: TrackingStep, cells: list[str]) -> None:
    row = body(steps=(step,)).splitlines()
    index = row.index("|---|---|---|---|---|---|")
    assert row[index + 1] == "| " + " | ".join(cells) + " |"


def test_only_the_last_steps_are_shown_and_the_rest_counted() -> None:
    steps = tuple(TrackingStep(f"t{i:02}", "apply", "advanced") for i in range(MAX_STEPS + 5))
    text = body(steps=steps)
    assert "_5 earlier steps are not shown._" in text
    assert "| t04 |" not in text
    assert "| t05 |" in text
    assert f"| t{MAX_STEPS + 4:02} |" in text
    assert "_1 earlier step is not shown._" in body(steps=steps[:3], max_steps=2)


def test_no_history_yet() -> None:
    assert "No step has run yet." in body(steps=())


def test_the_plan_is_shown_in_a_fence_nothing_can_close() -> None:
    plan = "# Plan\n\n- [ ] AC-1: login\n```\n<!-- pair:tracking #7 -->\n<details>"
    text = body(plan=plan)
    assert "#### Plan" in text
    assert "````markdown\n# Plan\n\n- [ ] AC-1: login\n```\n\n<details>\n````" in text
    assert "<!--" not in text
    assert "#### Plan" not in body(plan="<!-- only hidden -->")


def test_a_long_plan_is_cut_with_a_note() -> None:
    text = body(plan="x" * (PLAN_LIMIT + 10))
    assert "_The plan is cut here: 10 more characters on the branch._" in text
    assert "x" * (PLAN_LIMIT + 1) not in text


def test_facts_and_explanation_must_be_the_same_card() -> None:
    other = CardFacts(card=8, status="ready")
    with pytest.raises(ValueError, match="card #7, the explanation for #8"):
        render_tracking(FACTS, explain(other), ())
    with pytest.raises(ValueError, match="max_steps"):
        body(max_steps=0)


def test_same_input_same_text() -> None:
    assert body(plan="p") == body(plan="p")


HOSTILE_PIECES = st.sampled_from(
    ["<!--", "-->", "<!", "--", " pair:tracking #7 ", "\u200b", "\u202e", "|", "\n", "`", "@x"]
)
HOSTILE = st.one_of(st.text(max_size=30), st.lists(HOSTILE_PIECES, max_size=12).map("".join))
STEP = st.builds(
    TrackingStep,
    at=HOSTILE,
    transition=HOSTILE,
    outcome=HOSTILE,
    message=HOSTILE,
    pr_url=st.one_of(st.none(), HOSTILE),
    commit=st.one_of(st.none(), HOSTILE),
    comment_url=st.one_of(st.none(), HOSTILE),
    tokens=st.one_of(st.none(), st.integers(-5, 10**9)),
)


@given(
    title=HOSTILE,
    reason=st.one_of(st.none(), HOSTILE),
    steps=st.lists(STEP, max_size=8),
    plan=st.one_of(st.none(), HOSTILE),
)
def test_nothing_in_the_input_can_forge_a_marker_or_break_the_table(
    *, title: str, reason: str | None, steps: list[TrackingStep], plan: str | None
) -> None:
    facts = CardFacts(card=7, status="blocked", title=title, park_reason=reason)
    owned = render_tracking(facts, explain(facts), steps, plan=plan)
    comment = render(make_marker("tracking", 7), owned)
    assert comment.count("<!--") == 2  # the marker and the end marker, nothing else
    assert comment.count(END_MARKER) == 1
    # The history is the last section (a plan could quote the heading inside its fence).
    history = owned.rsplit("\n#### Step history\n", 1)[1]
    rows = [line for line in history.splitlines() if line.startswith("| ")]
    assert len(rows) == (len(steps) + 1 if steps else 0)
    for row in rows:
        unescaped_pipes = re.findall(r"(?<!\\)\|", row)
        assert len(unescaped_pipes) == 7, row
    assert render_tracking(facts, explain(facts), steps, plan=plan) == owned


def test_notes_sit_between_the_history_and_the_next_step_and_are_inert() -> None:
    text = body(notes=("budget: 1/1 steps", "failover: apply: claude failed (quota) <b>@x</b>"))
    lines = text.splitlines()
    notes = lines.index("- budget: 1/1 steps")
    assert lines[notes + 1].startswith("- failover: apply: claude failed (quota)")
    assert "<b>" not in text
    assert lines.index("| When | Step | Outcome | Note | Links | Tokens |") < notes
    assert notes < next(i for i, line in enumerate(lines) if line.startswith("**Next step:**"))
    assert "- budget" not in body()
