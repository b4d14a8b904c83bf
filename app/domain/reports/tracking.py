"""The tracking comment of one card: where it is, why, what happened, what comes next. Pure.

Issue #5: a tracking comment per card (marker-keyed) always shows the current status, the step
history with links, and the next step; after `propose` under a `prepare` gate it also shows the
plan waiting for approval. `render_tracking` returns only pairbot's owned body; the shell wraps
it with `hosts.markers.render(make_marker("tracking", card), body)` and upserts it.

Guarantees:

- deterministic: the same input gives the same text (no clock; the only timestamps are the
  steps' own), so an unchanged card is an `UNCHANGED` upsert;
- bounded: the last `MAX_STEPS` steps (the rest counted, not shown), every cell cut to a line,
  the plan cut to `PLAN_LIMIT` characters — well inside `hosts.markers.MAX_BODY`;
- inert: every piece of user or agent text (step notes, titles, the plan) is stripped of hidden
  content and escaped (`app.domain.text.mdtext`), so it cannot break the table, add HTML or links,
  ping anyone, or forge a pair marker that would make pairbot edit the wrong comment. The plan
  is shown verbatim inside a code fence nothing in it can close.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from app.domain.reports.explain import CardFacts, Explanation
from app.domain.reports.metrics import AGENT_TRANSITIONS
from app.domain.text import mdtext
from hosts.vocabulary import GITHUB, Vocabulary

MAX_STEPS: Final = 30
PLAN_LIMIT: Final = 20_000
_NOTE_LIMIT: Final = 200
_COMMIT: Final = re.compile(r"[0-9a-fA-F]{7,40}")


@dataclass(frozen=True)
class TrackingStep:
    """One step of the card's history, as the journal recorded it.

    `at` is the step's own timestamp (shown as given); the links are shown when known and safe.
    `tokens` None on an agent step reads "unknown" (never 0).
    """

    at: str
    transition: str
    outcome: str
    message: str = ""
    pr_url: str | None = None
    commit: str | None = None
    commit_url: str | None = None
    comment_url: str | None = None
    tokens: int | None = None


def _links(step: TrackingStep) -> str:
    parts: list[str] = []
    pr = mdtext.safe_url(step.pr_url)
    if pr is not None:
        parts.append(f"[PR]({pr})")
    if step.commit is not None and _COMMIT.fullmatch(step.commit.strip()):
        short = f"`{step.commit.strip()[:12].lower()}`"
        url = mdtext.safe_url(step.commit_url)
        parts.append(f"[{short}]({url})" if url is not None else short)
    comment = mdtext.safe_url(step.comment_url)
    if comment is not None:
        parts.append(f"[comment]({comment})")
    return " · ".join(parts) or mdtext.EMPTY


def _tokens(step: TrackingStep) -> str:
    if step.tokens is not None and step.tokens >= 0:
        return f"{step.tokens:,}"
    return "unknown" if step.transition in AGENT_TRANSITIONS else mdtext.EMPTY


def _row(step: TrackingStep) -> str:
    cells = (
        mdtext.cell(step.at, 40),
        mdtext.cell(step.transition, 40),
        mdtext.cell(step.outcome, 40),
        mdtext.cell(step.message, _NOTE_LIMIT),
        _links(step),
        _tokens(step),
    )
    return "| " + " | ".join(cells) + " |"


def _plan(plan: str) -> list[str]:
    text = mdtext.clean(plan)
    note = ""
    if len(text) > PLAN_LIMIT:
        note = f"_The plan is cut here: {len(text) - PLAN_LIMIT:,} more characters on the branch._"
        text = text[:PLAN_LIMIT]
    lines = [
        "#### Plan",
        "",
        "<details open><summary>The proposed plan (plan.md)</summary>",
        "",
        mdtext.fenced(text, "markdown"),
        "",
        "</details>",
    ]
    return [*lines, "", note] if note else lines


def render_tracking(
    facts: CardFacts,
    explanation: Explanation,
    steps: Sequence[TrackingStep],
    *,
    plan: str | None = None,
    max_steps: int = MAX_STEPS,
    notes: Sequence[str] = (),
    run_url: str | None = None,
    words: Vocabulary = GITHUB,
) -> str:
    """The owned body of the card's tracking comment (no marker): same input, same text.

    `facts` and `explanation` must describe the same card; `steps` are in journal order
    (oldest first); `plan` is the proposed plan, shown when given; `notes` are pairbot's own
    one-line facts about the run (the budget's figures, a step handed to a fallback agent),
    shown under the step history; `run_url` the run that writes the comment (the Action's
    workflow run, the App's job), linked when given and safe; `words`: the card's host's
    vocabulary (a `tag` on Azure DevOps where GitHub shows a `label`).
    """
    if facts.card != explanation.card:
        raise ValueError(
            f"facts are for card #{facts.card}, the explanation for #{explanation.card}"
        )
    if max_steps < 1:
        raise ValueError(f"max_steps must be >= 1, got {max_steps}")
    title = f": {mdtext.inline(explanation.title, 200)}" if explanation.title else ""
    lines = [f"### pairbot — card #{facts.card}{title}", ""]

    status = [f"**Current status:** `{explanation.label}`"]
    if explanation.pr is not None:
        status.append(mdtext.link(f"PR #{explanation.pr}", explanation.pr_url))
    if explanation.reviewed_head is not None:
        status.append(f"reviewed head `{explanation.reviewed_head[:12]}`")
    if facts.current_head is not None and facts.current_head.lower() != explanation.reviewed_head:
        status.append(f"PR head `{facts.current_head[:12].lower()}`")
    run = mdtext.safe_url(run_url)
    if run is not None:
        status.append(f"[the run that wrote this]({run})")
    lines += [" · ".join(status), "", explanation.to_markdown(words), ""]

    if plan is not None and mdtext.clean(plan).strip():
        lines += [*_plan(plan), ""]

    lines += ["#### Step history", ""]
    shown = list(steps)[-max_steps:]
    elided = len(steps) - len(shown)
    if elided:
        noun = "step is" if elided == 1 else "steps are"
        lines += [f"_{elided} earlier {noun} not shown._", ""]
    if shown:
        lines += [
            "| When | Step | Outcome | Note | Links | Tokens |",
            "|---|---|---|---|---|---|",
            *(_row(step) for step in shown),
        ]
    else:
        lines.append("No step has run yet.")
    if notes:
        lines += ["", *(f"- {mdtext.inline(note)}" for note in notes)]
    lines += ["", f"**Next step:** {mdtext.inline(explanation.next_text)}"]
    return "\n".join(lines)
