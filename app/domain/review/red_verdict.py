"""The red contract verifier's verdict: read strictly, held to the contract, counted. Pure.

After an accepted `red` (its own checks passed: its tests newly fail, for an assertion, and its
contract has a row per finding), an independent agent — the `verify-red` step, role
`redVerifier` — reads the contract, the findings it answers, red's test diff and the failing
output, and accepts or refuses the contract row by row. It reports a file (`pairbot batch
report --complete … --findings FILE`) of this shape:

    {"verdict": "accept" | "refuse",
     "rows": [{"id": "r1-1", "verdict": "accept" | "refuse", "reason": "why, in a sentence"}]}

    parse_red_verdict(raw)           the report validated (unknown keys refused), or the reason
                                     it is none; a missing report is none too: never an accept
    verdict_problems(verdict, rows)  what makes a well-formed verdict unusable for this
                                     contract: a row not judged, a row the contract has not, a
                                     row judged twice, an overall verdict the rows contradict
    refusal_reasons(verdict)         the refused rows and their reasons, for red's next attempt
    refusals_in_a_row(records, key)  how many contract refusals since the last accepted review,
                                     accepted contract or `/pair retry` (the third parks the
                                     change: `failed-contract`)
    contract_park_reason(n, verdict) why the n-th refusal in a row parks it, or None
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

from pydantic import Field, ValidationError

from app.settings import StrictModel

REPORT_SHAPE: Final = (
    '{"verdict": "accept"|"refuse", "rows": [{"id": <row id>, "verdict": "accept"|"refuse", '
    '"reason": <why>}]}'
)
# Refusals in a row that end the contract path: the change parks `blocked` under the park
# transition `contract` (a card shows `failed-contract`); a retry runs red again.
MAX_REFUSALS: Final = 3
CONTRACT_PARK: Final = "contract"
_ACCEPTED: Final = ("advanced", "awaiting-approval")

RowVerdict = Literal["accept", "refuse"]


class RedRowVerdict(StrictModel):
    """The verifier's word on one contract row."""

    id: str = Field(min_length=1)
    verdict: RowVerdict
    reason: str = Field(min_length=1)


class RedVerdict(StrictModel):
    """The verifier's word on the whole contract, and on each of its rows."""

    verdict: RowVerdict
    rows: list[RedRowVerdict] = Field(min_length=1)

    @property
    def accepted(self) -> bool:
        """Whether the verifier accepted the contract."""
        return self.verdict == "accept"


def parse_red_verdict(raw: object) -> RedVerdict | str:
    """The verifier's report, or why there is none (a refusal of the step, never an accept)."""
    if raw is None:
        return (
            "the red verifier reported no contract verdict: it must pass --findings FILE with "
            + REPORT_SHAPE
        )
    try:
        return RedVerdict.model_validate(raw)
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        return (
            f"the red verifier's verdict does not validate: {where}: "
            f"{first['msg'].removeprefix('Value error, ')} (expected {REPORT_SHAPE})"
        )


def verdict_problems(verdict: RedVerdict, rows: Sequence[str]) -> list[str]:
    """What makes `verdict` unusable for a contract of `rows` (empty: it can be acted on)."""
    problems: list[str] = []
    judged = [row.id for row in verdict.rows]
    missing = [row for row in rows if row not in judged]
    if missing:
        problems.append(f"rows not judged: {', '.join(missing)} (judge every contract row)")
    unknown = sorted({row for row in judged if row not in rows})
    if unknown:
        problems.append(f"rows the contract does not have: {', '.join(unknown)}")
    twice = sorted({row for row in judged if judged.count(row) > 1})
    if twice:
        problems.append(f"rows judged twice: {', '.join(twice)}")
    refused = any(row.verdict == "refuse" for row in verdict.rows)
    if verdict.accepted and refused:
        problems.append("the verdict accepts the contract but refuses a row")
    if not verdict.accepted and not refused:
        problems.append("the verdict refuses the contract but accepts every row")
    return problems


def refusal_reasons(verdict: Mapping[str, Any] | RedVerdict) -> list[str]:
    """`row: reason` for each refused row (a journaled verdict or a parsed one)."""
    read = verdict if isinstance(verdict, RedVerdict) else parse_red_verdict(verdict)
    if isinstance(read, str):
        return []
    return [f"{row.id}: {row.reason}" for row in read.rows if row.verdict == "refuse"]


def refusals_in_a_row(records: Sequence[Mapping[str, Any]], key: str) -> int:
    """Contract refusals of `key` since the last accepted review, accepted contract or
    `/pair retry`: an accepted `verify-red` whose verdict did not converge."""
    count = 0
    for record in records:
        if record.get("key") != key:
            continue
        kind = record.get("kind")
        if kind == "retry":
            count = 0
        elif kind == "outcome" and record.get("state") in _ACCEPTED:
            transition = record.get("transition")
            verdict = record.get("verdict")
            converged = verdict.get("converged") if isinstance(verdict, Mapping) else None
            if transition == "verify":
                count = 0
            elif transition == "verify-red":
                count = count + 1 if converged is False else 0
    return count


def contract_park_reason(refusals: int, verdict: Mapping[str, Any]) -> str | None:
    """Why the `refusals`-th refusal in a row parks the change, None before the third."""
    if refusals < MAX_REFUSALS:
        return None
    reasons = "; ".join(refusal_reasons(verdict)) or "(no reason given)"
    return (
        f"failed-contract: the red verifier refused red's contract {refusals} times in a row; "
        f"last: {reasons}. A retry runs red again"
    )
