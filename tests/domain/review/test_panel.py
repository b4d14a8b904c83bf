"""The review panel's pure parts: reviewer slugs and the panel's verdict."""

from __future__ import annotations

import pytest

from app.domain.review.panel import (
    PanelVote,
    finding_owner,
    merge_reports,
    panel_id_problems,
    panel_slugs,
    panel_verdict,
    reviewer_slug,
)
from app.domain.review.verdict import FINDING_ID, FindingsReport


@pytest.mark.parametrize(
    ("name", "model", "slug"),
    [
        pytest.param("claude", None, "claude", id="name"),
        pytest.param("Codex-CLI", None, "codexcli", id="only-letters-and-digits"),
        pytest.param("claude", "claude-opus-4-1", "claudeclaudeopus41", id="with-model"),
        pytest.param("---", None, "reviewer", id="nothing-left"),
        pytest.param("a" * 40, "b", "a" * 24, id="capped"),
    ],
)
def test_reviewer_slug(name: str, model: str | None, slug: str) -> None:
    assert reviewer_slug(name, model) == slug
    assert FINDING_ID.match(f"r2-{slug}-3")


def test_panel_slugs_add_the_model_only_where_an_agent_repeats() -> None:
    entries = [("claude", "opus"), ("codex", "o3"), ("claude", "sonnet")]
    assert panel_slugs(entries) == ["claudeopus", "codex", "claudesonnet"]


def test_panel_slugs_refuse_two_that_stay_the_same() -> None:
    with pytest.raises(ValueError, match="same reviewer 'claudeopus'"):
        panel_slugs([("claude", "opus"), ("claude", "opus")])


def test_every_reviewer_must_converge() -> None:
    split = panel_verdict([PanelVote("claude", True), PanelVote("codex", False, 2)])
    assert not split.converged
    assert split.blocking == 2
    assert split.disagreement
    assert (split.ready, split.blocked) == (("claude",), ("codex",))
    agreed = panel_verdict([PanelVote("claude", True), PanelVote("codex", True)])
    assert agreed.converged and not agreed.disagreement


def test_no_verdict_blocks_and_no_vote_never_converges() -> None:
    assert not panel_verdict([PanelVote("claude", True), PanelVote("codex", None)]).converged
    assert not panel_verdict([]).converged


def _report(*ids: str, transition: str = "open") -> FindingsReport:
    return FindingsReport.model_validate(
        {
            "findings": [
                {"id": i, "kind": "defect", "blocking": True, "transition": transition} for i in ids
            ]
        }
    )


SLUGS = ["claude", "codex"]


@pytest.mark.parametrize(
    ("slug", "report", "earlier", "problems"),
    [
        pytest.param("codex", _report("r2-codex-1"), [], [], id="own-new-id"),
        pytest.param(
            "codex",
            _report("r2-1"),
            [],
            ["finding r2-1 is new; new findings of reviewer codex are r2-codex-<n>"],
            id="new-id-without-slug",
        ),
        pytest.param(
            "codex",
            _report("r2-claude-1"),
            [],
            ["finding r2-claude-1 is new; new findings of reviewer codex are r2-codex-<n>"],
            id="new-id-with-another-slug",
        ),
        pytest.param(
            "codex",
            _report(),
            ["r1-codex-1", "r1-claude-1"],
            [
                "finding r1-codex-1 from an earlier round was dropped; carry it with a "
                "transition (open, resolved, superseded, human)"
            ],
            id="drops-its-own",
        ),
        pytest.param(
            "codex",
            _report("r1-claude-1", transition="resolved"),
            ["r1-claude-1"],
            ["finding r1-claude-1 is reviewer claude's; report only your own"],
            id="resolves-anothers",
        ),
        pytest.param("claude", _report("r1-1"), ["r1-1"], [], id="first-carries-slugless"),
        pytest.param(
            "codex",
            _report("r1-1"),
            ["r1-1"],
            ["finding r1-1 is reviewer claude's; report only your own"],
            id="slugless-belongs-to-first",
        ),
    ],
)
def test_panel_id_problems(
    slug: str, report: FindingsReport, earlier: list[str], problems: list[str]
) -> None:
    assert (
        panel_id_problems(slug, SLUGS, earlier_active=earlier, report=report, round_no=2)
        == problems
    )


def test_merge_reports_keeps_every_finding_and_the_first_test_and_proposal() -> None:
    first = FindingsReport.model_validate(
        {
            "acTests": {"AC-1": "t::one"},
            "findings": [{"id": "r1-claude-1", "kind": "defect", "blocking": True}],
            "scopeChanges": [{"id": "sc-1", "type": "new-requirement"}],
        }
    )
    second = FindingsReport.model_validate(
        {
            "acTests": {"AC-1": "t::other", "AC-2": "t::two"},
            "findings": [{"id": "r1-codex-1", "kind": "question", "blocking": False}],
            "scopeChanges": [{"id": "sc-1", "type": "other"}, {"id": "sc-2", "type": "x"}],
        }
    )
    merged = merge_reports([first, second])
    assert [f.id for f in merged.findings] == ["r1-claude-1", "r1-codex-1"]
    assert merged.ac_tests == {"AC-1": "t::one", "AC-2": "t::two"}
    assert [(s.id, s.type) for s in merged.scope_changes] == [
        ("sc-1", "new-requirement"),
        ("sc-2", "x"),
    ]


def test_finding_owner() -> None:
    assert finding_owner("r3-codex-2", SLUGS) == "codex"
    assert finding_owner("r3-2", SLUGS) == "claude"
    assert finding_owner("r3-gemini-2", SLUGS) == "claude"


def test_the_review_comment_names_who_disagreed() -> None:
    from app.domain.review.review_comment import render_review

    votes = [PanelVote("claude", True), PanelVote("codex", False, 2), PanelVote("gemini", None)]
    body = render_review(
        FindingsReport(), head="b" * 40, review_round=2, converged=False, blocking=2, panel=votes
    )
    assert "| claude | converged | 0 |" in body
    assert "| gemini | blocks | 0 |" in body
    assert "**The reviewers disagree:** claude found nothing blocking; codex, gemini block." in body
    agreed = render_review(
        FindingsReport(), head="b" * 40, review_round=1, converged=True, panel=votes[:1]
    )
    assert "#### Review panel" in agreed and "disagree" not in agreed
