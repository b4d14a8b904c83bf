"""Keeping cards moving between CI runs: the settings and values both CI entries share.

    ContinuationSettings     whether a run asks for the next one (`continue` / PAIR_CONTINUE)
                             and the daily bound per card (`continue-limit` /
                             PAIR_CONTINUE_LIMIT, default 50)
    Continuation             the next run a run asks for: after which card, the how-many-th today
    Plan, Requested          what the locked step decided; what the CI answered
    read_continuation(env…)  the settings from the environment, a `UserError` naming a bad one

The decision and the request are `action.run.next_run`'s. Light (no cycle, no hosts, no state
branch): both platforms read the settings on the start path of every run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Final

from action.run.settings import get
from app.errors import UserError

__all__ = [
    "DEFAULT_DAILY_LIMIT",
    "Continuation",
    "ContinuationSettings",
    "Plan",
    "Requested",
    "read_continuation",
]

DEFAULT_DAILY_LIMIT: Final = 50
MAX_DAILY_LIMIT: Final = 10_000
_TRUE: Final = frozenset({"true", "yes", "on", "1"})
_FALSE: Final = frozenset({"false", "no", "off", "0"})


@dataclass(frozen=True)
class ContinuationSettings:
    """Whether a run asks for the next one, and how many chained runs a batch gets a day."""

    enabled: bool = True
    daily_limit: int = DEFAULT_DAILY_LIMIT


@dataclass(frozen=True)
class Continuation:
    """The next run this run asks for: after a step of `after` (`card-<n>`), its `count`th
    chained run today."""

    after: str
    count: int


@dataclass(frozen=True)
class Plan:
    """What the locked step decided: a next run to ask for (or none), and a line to say."""

    next_run: Continuation | None = None
    note: str = ""


@dataclass(frozen=True)
class Requested:
    """What the CI answered: `ok` (a run is queued) and one line for the log; `remedy` (when
    refused) is what to grant, for the summary too."""

    ok: bool
    line: str
    remedy: str = ""


def read_continuation(
    env: Mapping[str, str],
    *,
    enabled: tuple[str, ...],
    limit: tuple[str, ...],
    labels: tuple[str, str],
) -> ContinuationSettings:
    """The settings from the first set variable of `enabled` and of `limit` (their spellings);
    `labels` name the two in an error (`input continue`, `PAIR_CONTINUE_LIMIT`)."""
    on = next((v for name in enabled if (v := get(env, name)) is not None), None)
    bound = next((v for name in limit if (v := get(env, name)) is not None), None)
    settings = ContinuationSettings()
    if on is not None:
        if on.lower() not in _TRUE | _FALSE:
            raise UserError(
                f"{labels[0]}={on!r} is not a switch; allowed: true (ask for the next run after a "
                "step, the default) or false (leave every next step to the schedule)"
            )
        settings = replace(settings, enabled=on.lower() in _TRUE)
    if bound is not None:
        if not bound.isdigit() or not 1 <= int(bound) <= MAX_DAILY_LIMIT:
            raise UserError(
                f"{labels[1]}={bound!r} is not a number of runs; allowed: a whole number from "
                f"1 to {MAX_DAILY_LIMIT} (chained runs per card per day; default "
                f"{DEFAULT_DAILY_LIMIT})"
            )
        settings = replace(settings, daily_limit=int(bound))
    return settings
