"""The review panel's pure parts: reviewer slugs and the panel's verdict."""

from __future__ import annotations

import pytest

from app.domain.panel import PanelVote, panel_slugs, panel_verdict, reviewer_slug
from app.domain.verdict import FINDING_ID


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
