"""What both CI entries read from their environment the same way.

    CiSettings            the base of `action.context.ActionContext` (GitHub Actions) and
                          `action.azure.settings.PipelineSettings` (Azure Pipelines): the
                          checkout, the command word, the `pair-state` lock's knobs and debug
                          logging; each declares its run's page, its secrets and its hosts
    get(env, name)        one variable: empty or blank is "not given", as both CIs spell it
    read_trigger(…)       the command word, judged by the command grammar itself
    read_lock_knobs(env)  PAIR_STATE_LOCK_WAIT_S and PAIR_STATE_STALE_AFTER_S (action.lockknobs)

Light (no pydantic, no engine): it is on the path of every run before its first API request.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from action.lockknobs import (
    DEFAULT_LOCK_WAIT_S,
    DEFAULT_STALE_AFTER_S,
    ENV_LOCK_WAIT_S,
    ENV_STALE_AFTER_S,
    lock_wait_s,
    stale_after_s,
)
from app.domain.intake.comment_commands import DEFAULT_TRIGGER, parse_commands
from app.errors import UserError

if TYPE_CHECKING:
    from app.hosting import HostSettings

__all__ = ["CiSettings", "get", "read_lock_knobs", "read_trigger"]


@dataclass(frozen=True, kw_only=True)
class CiSettings(ABC):
    """The settings every CI run has, read once from its environment."""

    workspace: Path  # the checkout pairbot acts in
    trigger: str = DEFAULT_TRIGGER  # the command word (`pair`, for `/pair …`)
    lock_wait_s: float = DEFAULT_LOCK_WAIT_S  # how long a command waits for a running step
    stale_after_s: float = DEFAULT_STALE_AFTER_S  # after how long a dead run's lock is reclaimed
    debug: bool = False  # the CI's debug logging: a failure prints its traceback too

    @property
    @abstractmethod
    def run_url(self) -> str | None:
        """This run's page, linked from the tracking comment; None outside a run."""

    @abstractmethod
    def secrets(self) -> tuple[str, ...]:
        """Every secret value the run holds: masked before anything else is printed."""

    @abstractmethod
    def host_settings(self) -> HostSettings:
        """The hosts' settings for the card cycle (this loads pydantic: only a run with work
        calls it)."""


def get(env: Mapping[str, str], name: str) -> str | None:
    """The variable's value, stripped; None when unset, empty or blank."""
    value = env.get(name, "").strip()
    return value or None


def read_trigger(value: str | None, label: str) -> str:
    """The command word given as `label` (e.g. `input trigger`, `PAIR_TRIGGER`), or `pair`.

    The grammar itself is the judge of a trigger word, so the App and both entries agree."""
    word = value or DEFAULT_TRIGGER
    try:
        parse_commands("", trigger=word)
    except ValueError:
        raise UserError(
            f"{label}={word!r} is not a command word; allowed: letters, digits, '.', '_' and "
            "'-' (e.g. pair, for `/pair …`)"
        ) from None
    return word


def read_lock_knobs(env: Mapping[str, str]) -> tuple[float, float]:
    """The lock's two knobs (`lock_wait_s`, `stale_after_s`); `UserError` naming a bad one."""
    return (
        lock_wait_s(get(env, ENV_LOCK_WAIT_S)),
        stale_after_s(get(env, ENV_STALE_AFTER_S)),
    )
