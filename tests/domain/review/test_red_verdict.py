"""The red contract verifier's verdict: read strictly, held to the contract, counted in a row."""

from __future__ import annotations

from typing import Any

import pytest

from app.domain.review.red_verdict import (
    MAX_REFUSALS,
    RedVerdict,
    contract_park_reason,
    parse_red_verdict,
    refusal_reasons,
    refusals_in_a_row,
    verdict_problems,
)


def row(
    ident: str, verdict: str = "accept", reason: str = "fails for the finding"
) -> dict[str, str]:
    return {"id": ident, "verdict": verdict, "reason": reason}


def verdict(overall: str, *rows: dict[str, str]) -> RedVerdict:
    read = parse_red_verdict({"verdict": overall, "rows": list(rows)})
    assert isinstance(read, RedVerdict), read
    return read


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        pytest.param(None, "reported no contract verdict", id="missing"),
        pytest.param([], "(top level): Input should be a valid dictionary", id="not-an-object"),
        pytest.param({"verdict": "maybe", "rows": [row("r1-1")]}, "verdict:", id="bad-verdict"),
        pytest.param({"verdict": "accept", "rows": []}, "rows:", id="no-rows"),
        pytest.param(
            {"verdict": "accept", "rows": [{"id": "r1-1", "verdict": "accept"}]},
            "rows.0.reason",
            id="row-without-reason",
        ),
        pytest.param(
            {"verdict": "accept", "rows": [row("r1-1")], "note": "x"},
            "note: Extra inputs are not permitted",
            id="unknown-key",
        ),
    ],
)
def test_a_report_that_is_not_a_verdict_is_refused_naming_what_is_wrong(
    raw: Any, says: str
) -> None:
    read = parse_red_verdict(raw)
    assert isinstance(read, str)
    assert says in read
    assert '"verdict": "accept"|"refuse"' in read  # the shape it expects


@pytest.mark.parametrize(
    ("read", "rows", "problems"),
    [
        pytest.param(verdict("accept", row("r1-1")), ["r1-1"], [], id="accepted"),
        pytest.param(
            verdict("refuse", row("r1-1", "refuse"), row("r1-2")),
            ["r1-1", "r1-2"],
            [],
            id="refused",
        ),
        pytest.param(
            verdict("accept", row("r1-1")),
            ["r1-1", "r1-2"],
            ["rows not judged: r1-2 (judge every contract row)"],
            id="row-skipped",
        ),
        pytest.param(
            verdict("accept", row("r1-1"), row("r9-9")),
            ["r1-1"],
            ["rows the contract does not have: r9-9"],
            id="row-invented",
        ),
        pytest.param(
            verdict("accept", row("r1-1"), row("r1-1")),
            ["r1-1"],
            ["rows judged twice: r1-1"],
            id="row-twice",
        ),
        pytest.param(
            verdict("accept", row("r1-1", "refuse")),
            ["r1-1"],
            ["the verdict accepts the contract but refuses a row"],
            id="accepts-but-refuses",
        ),
        pytest.param(
            verdict("refuse", row("r1-1")),
            ["r1-1"],
            ["the verdict refuses the contract but accepts every row"],
            id="refuses-but-accepts",
        ),
    ],
)
def test_a_verdict_is_held_to_the_contracts_rows(
    read: RedVerdict, rows: list[str], problems: list[str]
) -> None:
    assert verdict_problems(read, rows) == problems


def test_refusal_reasons_name_each_refused_row() -> None:
    read = verdict("refuse", row("r1-1", "refuse", "asserts nothing"), row("r1-2"))
    assert refusal_reasons(read) == ["r1-1: asserts nothing"]
    assert refusal_reasons(read.model_dump()) == ["r1-1: asserts nothing"]
    assert refusal_reasons({"not": "a verdict"}) == []


def outcome(
    transition: str, converged: bool | None = None, state: str = "advanced"
) -> dict[str, Any]:
    verdict_record = None if converged is None else {"converged": converged}
    return {
        "kind": "outcome",
        "key": "card-1",
        "transition": transition,
        "state": state,
        "verdict": verdict_record,
    }


@pytest.mark.parametrize(
    ("records", "count"),
    [
        pytest.param([], 0, id="none"),
        pytest.param([outcome("red"), outcome("verify-red", False)], 1, id="one"),
        pytest.param(
            [outcome("verify-red", False), outcome("red"), outcome("verify-red", False)],
            2,
            id="two-in-a-row",
        ),
        pytest.param(
            [
                outcome("verify-red", False),
                outcome("verify-red", True),
                outcome("verify-red", False),
            ],
            1,
            id="an-accept-resets",
        ),
        pytest.param(
            [outcome("verify-red", False), outcome("verify", False), outcome("verify-red", False)],
            1,
            id="a-review-resets",
        ),
        pytest.param(
            [outcome("verify-red", False), {"kind": "retry", "key": "card-1"}],
            0,
            id="a-retry-resets",
        ),
        pytest.param(
            [outcome("verify-red", False), outcome("verify-red", state="failed")],
            1,
            id="a-failed-step-is-no-refusal",
        ),
        pytest.param(
            [{**outcome("verify-red", False), "key": "card-2"}],
            0,
            id="another-card",
        ),
    ],
)
def test_refusals_are_counted_in_a_row(records: list[dict[str, Any]], count: int) -> None:
    assert refusals_in_a_row(records, "card-1") == count


def test_only_the_third_refusal_in_a_row_parks() -> None:
    report = verdict("refuse", row("r1-1", "refuse", "asserts nothing")).model_dump()
    assert contract_park_reason(MAX_REFUSALS - 1, report) is None
    reason = contract_park_reason(MAX_REFUSALS, report)
    assert reason is not None
    assert reason.startswith("failed-contract: the red verifier refused red's contract 3 times")
    assert "r1-1: asserts nothing" in reason and "A retry runs red again" in reason
