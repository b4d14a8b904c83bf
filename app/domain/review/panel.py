"""A review panel: several reviewers judge the same head; the card converges only when all do.

Pure: the cycle runs each reviewer (its own journaled verify run) and hands the results here.

    reviewer_slug(name, model)   the short stable name a reviewer's findings carry in their ids
                                 (`r<round>-<slug>-<n>`): the agent's name, letters and digits
                                 only, plus the model's when two entries share an agent
    panel_slugs(entries)         one slug per panel entry, refusing two that would collide
    PanelVote / panel_verdict    who said what, and the panel's verdict: converged only when
                                 every reviewer converged; a split is a disagreement worth
                                 showing, naming who blocked and who did not
    panel_id_problems            each reviewer carries forward its own earlier findings and
                                 names its new ones with its slug (else it fails closed)
    merge_reports                the reviewers' reports as the one report the step records
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from app.domain.review.verdict import FindingsReport, ScopeChange, finding_id_problems

PANEL_VOTE_KIND = "panel-vote"  # the journal entry of one reviewer's verdict on a panel
_NOT_SLUG = re.compile(r"[^a-z0-9]+")
SLUG_MAX = 24


def _alnum(text: str) -> str:
    return _NOT_SLUG.sub("", text.lower())[:SLUG_MAX]


def reviewer_slug(name: str, model: str | None = None) -> str:
    """`claude` → `claude`; `{name: claude, model: claude-opus-4-1}` with the model asked
    for → `claudeclaudeopus41` (cut to `SLUG_MAX`): only letters and digits, because a finding
    id separates its parts with dashes."""
    base = _alnum(name) or "reviewer"
    if model is None:
        return base
    return (base + _alnum(model))[:SLUG_MAX]


def panel_slugs(entries: Sequence[tuple[str, str | None]]) -> list[str]:
    """One slug per `(agent, model)` entry: the agent's alone unless another entry names the
    same agent, then with its model. Raises ValueError for two entries that stay the same."""
    names = [reviewer_slug(name) for name, _ in entries]
    slugs = [
        reviewer_slug(name, model if names.count(names[i]) > 1 else None)
        for i, (name, model) in enumerate(entries)
    ]
    for i, slug in enumerate(slugs):
        if slug in slugs[:i]:
            raise ValueError(
                f"two panel entries review as the same reviewer {slug!r}: name each agent once, "
                "or give entries of the same agent different models"
            )
    return slugs


@dataclass(frozen=True)
class PanelVote:
    """One reviewer's verdict on the head: converged, or how many findings it holds blocking.

    `converged` is None when the reviewer reported no readable verdict (its run failed)."""

    reviewer: str
    converged: bool | None
    blocking: int = 0


@dataclass(frozen=True)
class PanelVerdict:
    """The panel's verdict: every reviewer converged, or not; a split is a disagreement."""

    converged: bool
    blocking: int
    votes: tuple[PanelVote, ...]

    @property
    def disagreement(self) -> bool:
        """Some reviewers converged and some did not."""
        states = {vote.converged is True for vote in self.votes}
        return len(states) > 1

    @property
    def ready(self) -> tuple[str, ...]:
        """The reviewers that found nothing blocking."""
        return tuple(v.reviewer for v in self.votes if v.converged is True)

    @property
    def blocked(self) -> tuple[str, ...]:
        """The reviewers that block (or gave no verdict)."""
        return tuple(v.reviewer for v in self.votes if v.converged is not True)


def panel_verdict(votes: Sequence[PanelVote]) -> PanelVerdict:
    """Converged only when there is a vote and every one converged (fail closed)."""
    return PanelVerdict(
        converged=bool(votes) and all(v.converged is True for v in votes),
        blocking=sum(v.blocking for v in votes),
        votes=tuple(votes),
    )


# ---------------------------------------------------------------- finding ids and merging

_PANEL_ID = re.compile(r"^r(?P<round>[1-9]\d*)-(?:(?P<reviewer>[a-z0-9]+)-)?(?P<n>[1-9]\d*)$")


def finding_owner(finding_id: str, slugs: Sequence[str]) -> str:
    """The panel reviewer who carries `finding_id` forward: the one its id names, else the
    first reviewer (an id from before the panel, or from a reviewer no longer on it)."""
    match = _PANEL_ID.match(finding_id)
    named = match.group("reviewer") if match else None
    return named if isinstance(named, str) and named in slugs else slugs[0]


def panel_id_problems(
    slug: str,
    slugs: Sequence[str],
    *,
    earlier_active: Sequence[str],
    report: FindingsReport,
    round_no: int,
    earlier_known: Sequence[str] = (),
) -> list[str]:
    """One reviewer's id problems on a panel; each fails the verification closed.

    It carries forward the earlier active findings it owns (`finding_owner`), reports none it
    does not own, and names its new findings `r<round>-<slug>-<n>`."""
    mine = [fid for fid in earlier_active if finding_owner(fid, slugs) == slug]
    problems = finding_id_problems(mine, report, round_no, [*earlier_known, *earlier_active])
    known = set(earlier_active) | set(earlier_known)
    for finding in report.findings:
        if finding.id in known:
            owner = finding_owner(finding.id, slugs)
            if owner != slug:
                problems.append(f"finding {finding.id} is reviewer {owner}'s; report only your own")
            continue
        match = _PANEL_ID.match(finding.id)
        if match is not None and match.group("reviewer") != slug:
            problems.append(
                f"finding {finding.id} is new; new findings of reviewer {slug} are "
                f"r{round_no}-{slug}-<n>"
            )
    return problems


def merge_reports(reports: Sequence[FindingsReport]) -> FindingsReport:
    """Every reviewer's findings (their ids differ by reviewer), every AC's proving test (the
    first reviewer naming one wins) and every scope proposal (a second one under an `sc-<n>`
    already taken is the same proposal seen twice, and the first is kept)."""
    findings = [f for report in reports for f in report.findings]
    ac_tests: dict[str, str] = {}
    scope: dict[str, ScopeChange] = {}
    for report in reports:
        for ac, test in report.ac_tests.items():
            ac_tests.setdefault(ac, test)
        for proposal in report.scope_changes:
            scope.setdefault(proposal.id, proposal)
    return FindingsReport(ac_tests=ac_tests, findings=findings, scope_changes=list(scope.values()))
