"""A verify by a review panel: each reviewer in turn on the same head, one verdict for the step.

`review.panel` names the reviewers (`(slug, agent)`); each runs in its own session and, when it
gives a valid verdict, is recorded with a `panel-vote` entry. The first that fails (no verdict,
a crash, a finding id outside the panel's rules) decides the step; otherwise the panel's
verdict (`app.domain.review.panel`) and its merged findings do. The step records one outcome,
under the last reviewer's session, with the panel's summed usage.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.domain.review.panel import PANEL_VOTE_KIND, PanelVote, merge_reports, panel_verdict
from app.domain.review.verdict import FindingsReport, Verdict
from app.engine.agent import AgentUsage
from app.engine.change_context import ChangeStepContext
from app.engine.journal import KeyHistory
from app.engine.review_verdict import reviewer_verdict
from app.engine.spawn import Session, spawn_agent, with_agent
from app.engine.step import EngineDeps, journal_event


@dataclass(frozen=True)
class PanelReview:
    """What a panel's verify leaves for the step's one outcome: the session it is recorded
    under (the first reviewer that failed, else the last one; its usage the panel's total),
    the panel's verdict, the problems that fail it closed and the merged findings."""

    session: Session
    verdict: Verdict | None
    problems: list[str]
    findings: Mapping[str, Any] | None


def add_usage(total: AgentUsage, more: AgentUsage) -> AgentUsage:
    """Two runs' spending; a figure either does not know stays unknown (never a made-up 0)."""

    def plus(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else a + b

    tokens_in = plus(total.input_tokens, more.input_tokens)
    tokens_out = plus(total.output_tokens, more.output_tokens)
    return AgentUsage(
        input_tokens=None if tokens_in is None else int(tokens_in),
        output_tokens=None if tokens_out is None else int(tokens_out),
        cost_usd=plus(total.cost_usd, more.cost_usd),
    )


async def panel_review(
    ctx: ChangeStepContext,
    deps: EngineDeps,
    history: KeyHistory,
    review_round: int,
    instructions_for: Callable[[str, str | None], str],
) -> PanelReview:
    """Each panel reviewer, in turn, on the same head: its own session and a `panel-vote`
    entry each; the first that fails (no verdict, a crash, a bad id) decides the step."""
    slugs = [slug for slug, _ in ctx.panel]
    votes: list[PanelVote] = []
    reports: list[FindingsReport] = []
    total: AgentUsage | None = None
    session: Session | None = None
    for index, (slug, choice) in enumerate(ctx.panel):
        if index and ctx.between_reviewers is not None:
            await ctx.between_reviewers()
        settings = with_agent(ctx.settings, "verify", choice)

        def for_agent(agent: str, reviewer: str = slug) -> str:
            return instructions_for(agent, reviewer)

        session = await spawn_agent(
            root=ctx.root,
            locus=ctx.locus,
            deps=deps,
            settings=settings,
            stage="verify",
            key=ctx.change,
            batch=ctx.batch,
            instructions=for_agent(choice.name),
            state_root=ctx.state_root,
            instructions_for=for_agent,
        )
        session = dataclasses.replace(session, settings=session.settings or settings)
        total = session.usage if total is None else add_usage(total, session.usage)
        verdict, problems, report = reviewer_verdict(
            session.entries, slug, slugs, history, review_round, floor=ctx.severity_floor
        )
        if verdict is None or problems or session.exit_code not in (0, None):
            named = [f"reviewer {slug}: {problem}" for problem in problems]
            return PanelReview(dataclasses.replace(session, usage=total), verdict, named, None)
        _journal_vote(ctx, deps, session, slug, verdict)
        votes.append(PanelVote(slug, verdict.converged, verdict.blocking))
        if report is not None:
            reports.append(report)
    if session is None or total is None:
        raise ValueError("a review panel needs at least one reviewer")
    return _decided(dataclasses.replace(session, usage=total), votes, reports)


def _journal_vote(
    ctx: ChangeStepContext, deps: EngineDeps, session: Session, slug: str, verdict: Verdict
) -> None:
    journal_event(
        ctx.locus,
        deps.clock,
        kind=PANEL_VOTE_KIND,
        key=ctx.change,
        transition="verify",
        session=session.session,
        data={
            "reviewer": slug,
            "agent": (session.settings or ctx.settings).agent_for("verify").name,
            "converged": verdict.converged,
            "blocking": verdict.blocking,
        },
    )


def _decided(
    session: Session, votes: Sequence[PanelVote], reports: Sequence[FindingsReport]
) -> PanelReview:
    """Every reviewer voted: the panel's verdict and its merged findings."""
    decided = panel_verdict(votes)
    merged = merge_reports(reports) if reports else None
    verdict = Verdict(
        converged=decided.converged,
        blocking=decided.blocking,
        source="findings" if merged is not None else "message",
        pending_scope=len(merged.scope_changes) if merged is not None else 0,
    )
    findings = merged.model_dump(by_alias=True, exclude_none=True) if merged else None
    return PanelReview(session, verdict, [], findings)
