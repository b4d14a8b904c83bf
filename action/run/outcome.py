"""What one CI run did, and the pure decisions about it that both entries share.

    ignored_reason(intent)       why the run does nothing for an intent, before any lock
    outcome_of(step)             a card-cycle step (or an engine result) as the run's Outcome
    lock_held(intent, wait_s)    the outcome of a run that did not get the `pair-state` lock
    summary_markdown(o, ref)     the job summary (GitHub's step summary, Azure's summary tab)
    closing_line(o)              the run's last log line: `pairbot: <status> <transition> …`

Values in, values out: no I/O, nothing that reads the environment or the clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.domain.intake.intent import Comment, Ignore, Installation, Intent, Malformed
from app.domain.text import mdtext

__all__ = ["Outcome", "closing_line", "ignored_reason", "lock_held", "outcome_of"]


@dataclass(frozen=True)
class Outcome:
    """What this run did, for the outputs, the summary and the exit code."""

    status: str
    card: int | None = None
    transition: str = ""
    pr: int | None = None
    message: str = ""
    explanation: str = ""  # the card's "why", as Markdown, when the step gave one
    code: int = 0  # the process's exit code
    continuation: str = ""  # what came of asking for the next run (`action.run.continuation`)


def ignored_reason(intent: Intent) -> str | None:
    """Why this run does nothing for `intent` (before any lock), or None: it acts on it."""
    if isinstance(intent, Ignore | Malformed):
        return intent.reason
    if isinstance(intent, Installation):
        return f"{intent.event}.{intent.action} is the App's bookkeeping, not the Action's"
    return None


def outcome_of(step: Any) -> Outcome:
    """A `CardStep` (the step, its card, its PR and the card's explanation) or a bare
    `StepResult`, as the run's outcome; a blocked step exits 1."""
    result = getattr(step, "result", step)
    explanation = getattr(step, "explanation", None)
    return Outcome(
        status=getattr(step, "status", None) or result.state,
        card=getattr(step, "card", None),
        transition=result.transition,
        pr=getattr(step, "pr", None),
        message=result.message or "",
        explanation=explanation.to_markdown() if explanation is not None else "",
        code=1 if result.state == "blocked" else 0,
    )


def lock_held(intent: Intent, wait_s: float) -> Outcome:
    """Another run held the `pair-state` lock (for `wait_s`, for a command): this one exits.

    A command says that it did not run: its acknowledgement may already be on the comment
    (GitHub's early 👀), and nothing will run it later."""
    message = "another pairbot run holds the pair-state lock; this one exits"
    if isinstance(intent, Comment):
        which = f" of comment {intent.comment.id}" if intent.comment.id else ""
        message = (
            f"another pairbot run held the pair-state lock for {wait_s:.0f} s; the command"
            f"{which} did not run: comment it again"
        )
    return Outcome(status="nothing-ready", message=message)


def summary_markdown(outcome: Outcome, pull_ref: str) -> str:
    """The run's Markdown summary; `pull_ref` is how the host names a pull request (`#`, `!`).

    The message is one inline paragraph (no HTML, no pings: `app.domain.text.mdtext.inline`)."""
    lines = [
        "## pairbot",
        "",
        f"**{outcome.status}**"
        + (f" — card #{outcome.card}" if outcome.card else "")
        + (f", `{outcome.transition}`" if outcome.transition else "")
        + (f", PR {pull_ref}{outcome.pr}" if outcome.pr else ""),
        "",
    ]
    if outcome.message:
        lines += [mdtext.inline(outcome.message), ""]
    if outcome.explanation:
        lines += [outcome.explanation, ""]
    if outcome.continuation:
        lines += [f"Next run: {mdtext.inline(outcome.continuation)}", ""]
    return "\n".join(lines)


def closing_line(outcome: Outcome) -> str:
    """The run's last log line. An error's message is its error line already: not repeated."""
    said = "" if outcome.status == "error" else outcome.message
    return " ".join(part for part in ("pairbot:", outcome.status, outcome.transition, said) if part)
