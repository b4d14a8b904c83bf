"""The review comment a `verify` publishes on the PR, and its `pair-review` status text. Pure.

After a verify the engine upserts one review comment on the PR (marker-keyed, by the shell)
and sets `pair-review` on the exact head that was reviewed (docs/cycle.md;
issue #5). The comment shows:

- the reviewed head, short and in full (the status and any merge are pinned to it);
- the review round;
- per acceptance criterion, the test that proves it (`acTests`), and the criteria the card
  has that no test was named for;
- the findings (id, kind, severity, blocking, transition, AC, summary, reproducer as code);
- the scope proposals (`sc-<n>`), listed as what they are: not defects, never blocking;
- the review panel, when several reviewers judged the head: each one's verdict, and who
  disagreed with whom;
- the outside evidence: the checks others reported on the reviewed head that did not pass
  (or have not reported yet), which of them are required, and how many passed — a failing
  required check holds the verdict whatever the reviewer said;
- the verdict: "converged — nothing blocks" or "N blocking finding(s)".

The verdict comes from the findings (`verdict_from_findings`) unless the caller passes the
recorded one: a verifier that reported only a verdict line has no findings to count, and a
recorded "not converged" is never shown as converged (fail closed).

Every string from the verifier is agent-written: it is stripped of hidden content and escaped
(`app.domain.text.mdtext`), reproducers are shown as inline code, so nothing in a report can break
the tables, add HTML, ping anyone or forge a pair marker.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from app.domain.review.panel import PanelVote, panel_verdict
from app.domain.review.verdict import FindingsReport, Verdict, verdict_from_findings
from app.domain.text import mdtext
from hosts.models import HeadCheck

STATUS_DESCRIPTION_MAX: Final = 140  # GitHub refuses a longer commit-status description
_SHA: Final = re.compile(r"[0-9a-fA-F]{40}")
_DIGITS: Final = re.compile(r"(\d+)")


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _natural(text: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key putting AC-2 before AC-10."""
    return tuple((0, int(p)) if p.isdecimal() else (1, p) for p in _DIGITS.split(text) if p)


def _verdict(
    report: FindingsReport, converged: bool | None, blocking: int | None
) -> tuple[bool, int]:
    """(converged, blocking count): the report's own count, never less than what was recorded."""
    counted = verdict_from_findings(report)
    count = max(counted.blocking, blocking or 0)
    ok = counted.converged and count == 0 and converged is not False
    return ok, count


def verdict_line(converged: bool, blocking: int) -> str:
    """ "converged — nothing blocks", "N blocking finding(s)", or a verdict-only refusal."""
    if converged:
        return "converged — nothing blocks"
    if blocking:
        return f"{blocking} blocking finding" + ("" if blocking == 1 else "s")
    return "not converged — the verifier's verdict reports blocking issues"


def render_review(
    report: FindingsReport,
    *,
    head: str,
    review_round: int,
    converged: bool | None = None,
    blocking: int | None = None,
    criteria: Sequence[str] = (),
    external: Sequence[HeadCheck] = (),
    panel: Sequence[PanelVote] = (),
) -> str:
    """The owned body of the review comment (no marker): same input, same text.

    `head` is the 40-hex reviewed head; `converged` / `blocking` the recorded verdict when the
    caller has one; `criteria` the card's AC ids, so an AC without a proving test shows;
    `external` the checks others reported on the head (`Host.head_checks`), whose failing
    required ones count as blocking; `panel` each reviewer's verdict when a panel reviewed.
    """
    if _SHA.fullmatch(head) is None:
        raise ValueError(f"head must be the 40-hex reviewed commit, got {head!r}")
    if review_round < 1:
        raise ValueError(f"review_round must be >= 1, got {review_round}")
    head = head.lower()
    ok, count = _verdict(report, converged, blocking)
    held = [c for c in external if c.required and c.state == "failure"]
    if held:
        ok, count = False, max(count, verdict_from_findings(report).blocking + len(held))
    lines = [
        f"### pairbot review — round {review_round}",
        "",
        f"**Reviewed head:** `{head[:12]}` (full: `{head}`)",
        "",
        f"**Verdict:** {verdict_line(ok, count)}",
        "",
        "#### Acceptance criteria and the tests that prove them",
        "",
    ]
    lines += _criteria_table(report, criteria)
    lines += _findings_table(report)
    lines += _scope_table(report)
    return "\n".join(lines + _panel(panel) + _external(external))


def _criteria_table(report: FindingsReport, criteria: Sequence[str]) -> list[str]:
    """Each acceptance criterion and the test named as proving it."""
    lines: list[str] = []
    named = dict(report.ac_tests)
    acs = sorted(set(named) | {c for c in criteria if c.strip()}, key=_natural)
    if acs:
        lines += ["| Criterion | Proving test |", "|---|---|"]
        lines += [
            f"| {mdtext.cell(ac, 40)} | "
            + (mdtext.code(named[ac]) if ac in named else "no proving test named")
            + " |"
            for ac in acs
        ]
    else:
        lines.append("No acceptance criterion was mapped to a test.")
    return lines


def _findings_table(report: FindingsReport) -> list[str]:
    lines: list[str] = ["", "#### Findings", ""]
    if report.findings:
        lines += [
            "| ID | Kind | Severity | Blocking | Transition | AC | Summary | Reproducer |",
            "|---|---|---|---|---|---|---|---|",
        ]
        lines += [
            "| "
            + " | ".join(
                (
                    f"`{f.id}`",
                    f.kind,
                    f.severity or mdtext.EMPTY,
                    "yes" if f.blocking else "no",
                    f.transition,
                    mdtext.cell(f.ac, 40),
                    mdtext.cell(f.summary),
                    mdtext.code(f.reproducer) if f.reproducer else mdtext.EMPTY,
                )
            )
            + " |"
            for f in report.findings
        ]
        lines += _finding_notes(report)
    else:
        lines.append("No findings.")
    return lines


def _scope_table(report: FindingsReport) -> list[str]:
    lines: list[str] = ["", "#### Scope proposals — not defects, never blocking", ""]
    if report.scope_changes:
        lines += ["| ID | Type | Affected AC | Evidence |", "|---|---|---|---|"]
        lines += [
            f"| `{s.id}` | {mdtext.cell(s.type, 60)} | {mdtext.cell(s.affected_ac, 40)} | "
            f"{mdtext.cell(s.evidence)} |"
            for s in report.scope_changes
        ]
        lines += [
            "",
            "The maintainer decides each proposal (ignore, new-card or extend-current-card); "
            "none of them holds the review.",
        ]
    else:
        lines.append("None.")
    return lines


def _panel(votes: Sequence[PanelVote]) -> list[str]:
    """Who reviewed and what each said; a split is spelled out, naming who said what."""
    if not votes:
        return []
    lines = ["", "#### Review panel — every reviewer must converge", ""]
    lines += ["| Reviewer | Verdict | Blocking |", "|---|---|---|"]
    lines += [
        f"| {mdtext.cell(v.reviewer, 40)} | "
        f"{'converged' if v.converged else 'blocks'} | {v.blocking} |"
        for v in votes
    ]
    decided = panel_verdict(votes)
    if decided.disagreement:
        ready = ", ".join(mdtext.one_line(r, 40) for r in decided.ready)
        blocked = ", ".join(mdtext.one_line(r, 40) for r in decided.blocked)
        lines += [
            "",
            f"**The reviewers disagree:** {ready} found nothing blocking; {blocked} "
            f"{'blocks' if len(decided.blocked) == 1 else 'block'}. The review converges only "
            "when every reviewer does.",
        ]
    return lines


def _external(checks: Sequence[HeadCheck]) -> list[str]:
    """The outside-evidence section: what did not pass, and how many did."""
    if not checks:
        return []
    lines = ["", "#### Outside evidence — checks on the reviewed head", ""]
    shown = [c for c in checks if c.state in ("failure", "pending")]
    if shown:
        lines += ["| Check | Source | State | Required | Says |", "|---|---|---|---|---|"]
        lines += [
            f"| {mdtext.cell(c.name, 80)} | {c.source} | {c.state} | "
            f"{'yes' if c.required else 'no'} | {mdtext.cell(c.summary)} |"
            for c in shown
        ]
        lines.append("")
    passed = len(checks) - len(shown)
    lines.append(f"{_plural(passed, 'other check')} passed or did not apply.")
    if any(c.required and c.state == "failure" for c in checks):
        lines.append("A failing required check blocks convergence until it passes on a head.")
    return lines


def _finding_notes(report: FindingsReport) -> list[str]:
    """What a reader must know beyond the table: a history rewrite a human decides, a
    regression a remediation introduced, the evidence for a severity change."""
    notes = []
    for f in report.findings:
        if f.human_decision_kind == "history-rewrite" and f.active:
            notes.append(
                f"- `{f.id}` can only be fixed by rewriting the branch's Git history: a human "
                "decides, outside pairbot (no command waives it), then comments `retry`."
            )
        claim = f.regression_risk
        if claim is not None and not claim.missing():
            notes.append(
                f"- `{f.id}` is a regression introduced by {mdtext.cell(claim.introduced_by, 40)} "
                f"(obligation {mdtext.cell(claim.obligation, 60)}): that remediation is "
                "invalidated and the card is rewound to repair it."
            )
        if f.severity_evidence:
            notes.append(f"- `{f.id}` changed severity: {mdtext.cell(f.severity_evidence)}")
    return ["", *notes] if notes else []


def _fit(text: str) -> str:
    if len(text) <= STATUS_DESCRIPTION_MAX:
        return text
    return text[: STATUS_DESCRIPTION_MAX - 1].rstrip() + "…"


def review_status_description(
    verdict: Verdict | None = None,
    *,
    converged: bool | None = None,
    blocking: int = 0,
    pending_scope: int = 0,
) -> str:
    """The `pair-review` description (at most 140 characters) for a verdict.

    Pass the `Verdict`, or the recorded `converged` / `blocking` (and `pending_scope`).
    """
    if verdict is not None:
        converged, blocking, pending_scope = (
            verdict.converged,
            verdict.blocking,
            verdict.pending_scope,
        )
    if converged is None:
        raise ValueError("pass a Verdict or converged=")
    ok = converged and blocking == 0
    text = f"pairbot review: {verdict_line(ok, blocking)}"
    if ok and pending_scope:
        text += f"; {_plural(pending_scope, 'scope proposal')} to decide (never blocking)"
    return _fit(text)
