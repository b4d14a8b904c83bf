"""Which merge method merges a card's pull request: the configured one, or the first the
repository allows. Pure.

    choose_merge_method(configured, allowed) -> MergeChoice

`configured` is `cycle.mergeMethod` (`auto`, `squash`, `merge`, `rebase`); `allowed` is what
the host says the repository accepts (`Host.merge_methods`), or None when it does not say (a
token that cannot read the repository's settings). `auto` takes squash, then a merge commit,
then rebase — squash first because a card is one reviewed change, and one commit on the base
keeps it revertable as one. A configured method the repository refuses is not silently
swapped: the card stops with the reason and the methods it could use.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal, get_args

if TYPE_CHECKING:
    # Types only: the manifest imports this module, and `batch status` loads no host module.
    from hosts.models import MergeMethod

MergeMethodSetting = Literal["auto", "squash", "merge", "rebase"]
MERGE_METHOD_SETTINGS: Final = get_args(MergeMethodSetting)
PREFERENCE: Final[tuple[MergeMethod, ...]] = ("squash", "merge", "rebase")
# What a repository's settings call each method (GitHub's "Allow squash merging", …).
_SETTING_NAMES: Final[dict[MergeMethod, str]] = {
    "squash": "squash merging",
    "merge": "merge commits",
    "rebase": "rebase merging",
}


@dataclass(frozen=True)
class MergeChoice:
    """The method to merge with, or why there is none (`method` None, `refusal` says why)."""

    method: MergeMethod | None
    refusal: str | None = None


def choose_merge_method(
    configured: MergeMethodSetting, allowed: Collection[MergeMethod] | None
) -> MergeChoice:
    """The method to merge with (see the module docstring)."""
    if configured != "auto":
        if allowed is None or configured in allowed:
            return MergeChoice(configured)
        return MergeChoice(
            None,
            f"cycle.mergeMethod is {configured!r}, but the repository allows "
            f"{_listed(allowed)}; set cycle.mergeMethod to one of those (or auto), or allow "
            f"{_SETTING_NAMES[configured]} in the repository's settings",
        )
    if allowed is None:
        return MergeChoice(PREFERENCE[0])
    for method in PREFERENCE:
        if method in allowed:
            return MergeChoice(method)
    return MergeChoice(
        None,
        "the repository allows no merge method pairbot can use (squash, merge or rebase); "
        "allow one in the repository's settings",
    )


def _listed(allowed: Collection[MergeMethod]) -> str:
    named = [m for m in PREFERENCE if m in allowed]
    return " and ".join(named) if named else "no merge method"
