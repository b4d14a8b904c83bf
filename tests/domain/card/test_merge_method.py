"""The merge method: the configured one, or the first the repository allows."""

from __future__ import annotations

import pytest

from app.domain.card.merge_method import MERGE_METHOD_SETTINGS, choose_merge_method


@pytest.mark.parametrize(
    ("allowed", "expected"),
    [
        (None, "squash"),  # the host does not say: squash, as before
        ({"squash", "merge", "rebase"}, "squash"),
        ({"merge", "rebase"}, "merge"),
        ({"rebase"}, "rebase"),
    ],
)
def test_auto_takes_the_first_the_repository_allows(
    allowed: set[str] | None, expected: str
) -> None:
    choice = choose_merge_method("auto", allowed)  # type: ignore[arg-type]
    assert (choice.method, choice.refusal) == (expected, None)


def test_a_configured_method_is_used_when_allowed_or_unknown() -> None:
    assert choose_merge_method("rebase", {"rebase", "squash"}).method == "rebase"
    assert choose_merge_method("merge", None).method == "merge"


def test_a_configured_method_the_repository_refuses_is_not_swapped() -> None:
    choice = choose_merge_method("merge", {"squash", "rebase"})
    assert choice.method is None
    assert choice.refusal is not None
    # Names the setting, what the repository allows, and both ways out.
    assert "cycle.mergeMethod is 'merge'" in choice.refusal
    assert "allows squash and rebase" in choice.refusal
    assert "allow merge commits in the repository's settings" in choice.refusal


def test_a_repository_that_allows_nothing_is_refused() -> None:
    choice = choose_merge_method("auto", set())
    assert choice.method is None
    assert choice.refusal is not None and "allows no merge method" in choice.refusal


def test_every_setting_is_handled() -> None:
    for setting in MERGE_METHOD_SETTINGS:
        assert choose_merge_method(setting, {"squash", "merge", "rebase"}).method is not None
