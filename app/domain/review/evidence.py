"""Outside evidence: the checks others reported on the head a verify judges. Pure.

Before a verify the cycle reads every check and status on the exact head (`Host.head_checks`)
and decides here what they mean for the review:

    of_head(head, checks, required)   the checks, each marked required when the host requires
                                      it or the project names it (`review.requiredChecks`)
    Evidence.failing                  every check that did not pass: handed to the reviewer as
                                      external findings it must address
    Evidence.blocking                 the failing required ones: the review cannot converge
                                      while one stands, whatever the reviewer says
    Evidence.waiting                  required checks still pending: the verify waits for them
                                      (no agent is spent on a head whose verdict CI has not
                                      given yet); a pending check nobody requires is only
                                      mentioned to the reviewer
    to_record / from_record           the journal's `evidence` entry, and back

A check's name and summary are written by whoever reports it (any App, any CI script): they
are untrusted text, quoted and stripped like every other text an agent reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, cast, get_args

from hosts.models import CheckSource, CheckState, HeadCheck

_STATES: frozenset[str] = frozenset(get_args(CheckState))
_SOURCES: frozenset[str] = frozenset(get_args(CheckSource))
SUMMARY_MAX = 500  # a check's own text, as recorded and quoted: enough to say what failed


@dataclass(frozen=True)
class Evidence:
    """The checks on one head, required ones marked."""

    head: str
    checks: tuple[HeadCheck, ...] = ()

    @property
    def failing(self) -> tuple[HeadCheck, ...]:
        """Every check that did not pass, required or not."""
        return tuple(c for c in self.checks if c.state == "failure")

    @property
    def blocking(self) -> tuple[HeadCheck, ...]:
        """Failing required checks: no convergence while one stands."""
        return tuple(c for c in self.failing if c.required)

    @property
    def waiting(self) -> tuple[HeadCheck, ...]:
        """Required checks that have not reported a result yet."""
        return tuple(c for c in self.checks if c.required and c.state == "pending")


def of_head(head: str, checks: Iterable[HeadCheck], required: Iterable[str] = ()) -> Evidence:
    """`checks` on `head`, required when the host said so or `required` names them; in a
    stable order (name, then source) so the same checks always read the same."""
    named = frozenset(required)
    marked = (
        replace(c, required=c.required or c.name in named, summary=c.summary[:SUMMARY_MAX])
        for c in checks
    )
    return Evidence(head, tuple(sorted(marked, key=lambda c: (c.name, c.source))))


def waiting_reason(evidence: Evidence) -> str:
    """Why the verify waits: the required checks still pending on the head."""
    names = ", ".join(c.name for c in evidence.waiting)
    return (
        f"waiting for required check(s) {names} on {evidence.head[:12]}: the review starts "
        "once they report"
    )


def blocking_line(evidence: Evidence) -> str:
    """What the failing required checks say about convergence, one line."""
    names = ", ".join(c.name for c in evidence.blocking)
    return f"required check(s) failing on {evidence.head[:12]}: {names}"


def to_record(evidence: Evidence) -> dict[str, Any]:
    """The journal's `evidence` entry (`data`, beside `event: evidence`)."""
    return {
        "head": evidence.head,
        "checks": [
            {
                "name": c.name,
                "source": c.source,
                "state": c.state,
                "url": c.url,
                "required": c.required,
                "summary": c.summary,
            }
            for c in evidence.checks
        ],
    }


def from_record(data: Mapping[str, Any]) -> Evidence:
    """The recorded entry back; an entry an older or foreign writer left malformed reads as
    the checks it can still name, an unknown state as a failure (never green)."""
    checks: list[HeadCheck] = []
    for item in data.get("checks") or ():
        if not isinstance(item, Mapping) or not item.get("name"):
            continue
        state = str(item.get("state"))
        source = str(item.get("source"))
        checks.append(
            HeadCheck(
                name=str(item["name"]),
                source=cast(CheckSource, source if source in _SOURCES else "status"),
                state=cast(CheckState, state if state in _STATES else "failure"),
                url=str(item.get("url") or ""),
                required=item.get("required") is True,
                summary=str(item.get("summary") or ""),
            )
        )
    return Evidence(str(data.get("head") or ""), tuple(checks))
