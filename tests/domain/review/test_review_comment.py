"""The review comment on the PR and the `pair-review` status description."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.domain.review.review_comment import (
    STATUS_DESCRIPTION_MAX,
    _natural,
    render_review,
    review_status_description,
    verdict_line,
)
from app.domain.review.verdict import FindingsReport, Verdict, verdict_from_findings
from hosts.markers import END_MARKER, make_marker, render

HEAD = "0123456789abcdef" * 2 + "01234567"
REPORT = FindingsReport.model_validate(
    {
        "acTests": {
            "AC-10": "tests/test_login.py::test_rate_limit",
            "AC-2": "tests/test_login.py::test_lockout",
        },
        "findings": [
            {
                "id": "r1-1",
                "kind": "defect",
                "severity": "critical",
                "blocking": True,
                "transition": "open",
                "ac": "AC-2",
                "summary": "lockout never triggers",
                "reproducer": "pytest tests/test_login.py -k 'lockout or `x`' | tail",
            },
            {"id": "r1-2", "kind": "question", "blocking": False},
        ],
        "scopeChanges": [
            {
                "id": "sc-1",
                "type": "new-requirement",
                "evidence": "asks for SSO",
                "affectedAc": "AC-3",
            }
        ],
    }
)


def test_the_whole_comment() -> None:
    body = render_review(REPORT, head=HEAD.upper(), review_round=1, criteria=["AC-1", "AC-2"])
    assert body.splitlines() == [
        "### pairbot review — round 1",
        "",
        f"**Reviewed head:** `{HEAD[:12]}` (full: `{HEAD}`)",
        "",
        "**Verdict:** 1 blocking finding",
        "",
        "#### Acceptance criteria and the tests that prove them",
        "",
        "| Criterion | Proving test |",
        "|---|---|",
        "| AC-1 | no proving test named |",
        "| AC-2 | `tests/test_login.py::test_lockout` |",
        "| AC-10 | `tests/test_login.py::test_rate_limit` |",
        "",
        "#### Findings",
        "",
        "| ID | Kind | Severity | Blocking | Transition | AC | Summary | Reproducer |",
        "|---|---|---|---|---|---|---|---|",
        "| `r1-1` | defect | critical | yes | open | AC-2 | lockout never triggers | "
        "``pytest tests/test_login.py -k 'lockout or `x`' \\| tail`` |",
        "| `r1-2` | question | — | no | open | — | — | — |",
        "",
        "#### Scope proposals — not defects, never blocking",
        "",
        "| ID | Type | Affected AC | Evidence |",
        "|---|---|---|---|",
        "| `sc-1` | new-requirement | AC-3 | asks for SSO |",
        "",
        "The maintainer decides each proposal (ignore, new-card or extend-current-card); "
        "none of them holds the review.",
    ]


def test_an_empty_report() -> None:
    body = render_review(FindingsReport(), head=HEAD, review_round=2)
    assert "### pairbot review — round 2" in body
    assert "**Verdict:** converged — nothing blocks" in body
    assert "No acceptance criterion was mapped to a test." in body
    assert "No findings." in body
    assert body.endswith("#### Scope proposals — not defects, never blocking\n\nNone.")


RESOLVED = FindingsReport.model_validate(
    {"findings": [{"id": "r1-1", "kind": "defect", "blocking": True, "transition": "resolved"}]}
)


@pytest.mark.parametrize(
    ("report", "kwargs", "line"),
    [
        pytest.param(REPORT, {}, "1 blocking finding", id="from-findings"),
        pytest.param(RESOLVED, {}, "converged — nothing blocks", id="resolved-does-not-block"),
        pytest.param(
            FindingsReport(),
            {"converged": False},
            "not converged — the verifier's verdict reports blocking issues",
            id="verdict-only-not-converged",
        ),
        pytest.param(
            FindingsReport(),
            {"converged": False, "blocking": 3},
            "3 blocking findings",
            id="recorded-count",
        ),
        pytest.param(
            REPORT, {"converged": True}, "1 blocking finding", id="recorded-converged-fails-closed"
        ),
        pytest.param(
            FindingsReport(), {"converged": True}, "converged — nothing blocks", id="converged"
        ),
    ],
)
def test_verdict_line(report: FindingsReport, kwargs: dict[str, Any], line: str) -> None:
    body = render_review(report, head=HEAD, review_round=1, **kwargs)
    assert f"**Verdict:** {line}" in body.splitlines()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"head": "abc"}, "40-hex reviewed commit", id="short-head"),
        pytest.param({"head": "z" * 40}, "40-hex reviewed commit", id="not-hex"),
        pytest.param({"review_round": 0}, "review_round must be >= 1", id="round"),
    ],
)
def test_inputs_are_checked(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        render_review(REPORT, **{"head": HEAD, "review_round": 1, **kwargs})


@pytest.mark.parametrize(
    ("args", "kwargs", "description"),
    [
        pytest.param(
            (Verdict(True, 0, "findings"),),
            {},
            "pairbot review: converged — nothing blocks",
            id="converged",
        ),
        pytest.param(
            (Verdict(True, 0, "findings", pending_scope=2),),
            {},
            "pairbot review: converged — nothing blocks; 2 scope proposals to decide (never "
            "blocking)",
            id="converged-with-scope",
        ),
        pytest.param(
            (Verdict(False, 1, "findings"),), {}, "pairbot review: 1 blocking finding", id="one"
        ),
        pytest.param(
            (),
            {"converged": False, "blocking": 4},
            "pairbot review: 4 blocking findings",
            id="keywords",
        ),
        pytest.param(
            (),
            {"converged": False},
            "pairbot review: not converged — the verifier's verdict reports blocking issues",
            id="verdict-only",
        ),
        pytest.param(
            (),
            {"converged": True, "blocking": 2},
            "pairbot review: 2 blocking findings",
            id="contradiction-fails-closed",
        ),
    ],
)
def test_review_status_description(
    args: tuple[Verdict, ...], kwargs: dict[str, Any], description: str
) -> None:
    assert review_status_description(*args, **kwargs) == description


def test_review_status_description_needs_a_verdict() -> None:
    with pytest.raises(ValueError, match="pass a Verdict"):
        review_status_description()


@given(st.booleans(), st.integers(0, 10**30), st.integers(0, 10**30))
def test_the_status_description_always_fits(converged: bool, blocking: int, scope: int) -> None:
    verdict = Verdict(converged, blocking, "findings", pending_scope=scope)
    assert len(review_status_description(verdict)) <= STATUS_DESCRIPTION_MAX


def test_verdict_line_words() -> None:
    assert verdict_line(True, 0) == "converged — nothing blocks"
    assert verdict_line(False, 2) == "2 blocking findings"


HOSTILE = st.one_of(
    st.text(max_size=30),
    st.lists(
        st.sampled_from(["<!--", "-->", "<!", "--", " pair:review #1 ", "\u200b", "|", "\n", "`"]),
        max_size=12,
    ).map("".join),
)
FINDING = st.fixed_dictionaries(
    {
        "kind": st.sampled_from(["defect", "regression", "question"]),
        "blocking": st.booleans(),
        "transition": st.sampled_from(["open", "resolved", "human"]),
        "ac": st.one_of(st.none(), HOSTILE),
        "summary": st.one_of(st.none(), HOSTILE),
        "reproducer": st.one_of(st.none(), HOSTILE),
    }
)


@given(
    findings=st.lists(FINDING, max_size=5),
    ac_tests=st.dictionaries(HOSTILE, HOSTILE, max_size=4),
    scope=st.lists(st.tuples(HOSTILE.filter(lambda s: s.strip() != ""), HOSTILE), max_size=3),
)
def test_nothing_in_a_report_can_forge_a_marker_or_break_a_table(
    *,
    findings: list[dict[str, Any]],
    ac_tests: dict[str, str],
    scope: list[tuple[str, str]],
) -> None:
    report = FindingsReport.model_validate(
        {
            "acTests": ac_tests,
            "findings": [{"id": f"r1-{i}", **f} for i, f in enumerate(findings, start=1)],
            "scopeChanges": [
                {"id": f"sc-{i}", "type": t, "evidence": e}
                for i, (t, e) in enumerate(scope, start=1)
            ],
        }
    )
    body = render_review(report, head=HEAD, review_round=1)
    comment = render(make_marker("review", 1, 2), body)
    assert comment.count("<!--") == 2
    assert comment.count(END_MARKER) == 1
    for line in body.splitlines():
        if line.startswith("| ") or line.startswith("|---"):
            columns = len(re.findall(r"(?<!\\)\|", line)) - 1
            header = {2, 8, 4}
            assert columns in header, line
    expected = verdict_from_findings(report)
    assert f"**Verdict:** {verdict_line(expected.converged, expected.blocking)}" in body


def test_a_criterion_named_with_a_superscript_digit_sorts_without_a_crash() -> None:
    # '²'.isdigit() is True but int('²') fails: the sort key reads decimal digits only.
    assert _natural("AC-²") == ((1, "AC-²"),)
    assert _natural("²") == ((1, "²"),)
    assert _natural("AC-10") > _natural("AC-2")
