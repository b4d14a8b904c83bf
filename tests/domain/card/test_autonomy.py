"""The card's autonomy gates: parsing `always | never | when has:… lacks:…` and when they fire."""

from __future__ import annotations

import pytest

from app.domain.card.autonomy import ALLOWED_GATE_FORMS, GateCondition, parse_gate_condition


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("always", GateCondition("always"), id="always"),
        pytest.param("never", GateCondition("never"), id="never"),
        pytest.param("  never \n", GateCondition("never"), id="surrounding-whitespace"),
        pytest.param("when has:risky", GateCondition("when", has=("risky",)), id="has"),
        pytest.param("when lacks:tested", GateCondition("when", lacks=("tested",)), id="lacks"),
        pytest.param(
            "when has:a,b lacks:c,d",
            GateCondition("when", has=("a", "b"), lacks=("c", "d")),
            id="has-and-lacks",
        ),
        pytest.param(
            "when has:a; lacks:c",
            GateCondition("when", has=("a",), lacks=("c",)),
            id="semicolon-separated",
        ),
        pytest.param(
            "when; has:a;lacks:c",
            GateCondition("when", has=("a",), lacks=("c",)),
            id="semicolon-after-when",
        ),
        pytest.param(
            "when lacks:c has:a",
            GateCondition("when", has=("a",), lacks=("c",)),
            id="any-clause-order",
        ),
        pytest.param(
            "when has:a has:b",
            GateCondition("when", has=("a", "b")),
            id="repeated-clause-accumulates",
        ),
        pytest.param(
            "when has : a,,b,",
            GateCondition("when", has=("a", "b")),
            id="spaces-round-colon-and-empty-labels",
        ),
        pytest.param(
            "when has:area/security lacks:tested-by-ci",
            GateCondition("when", has=("area/security",), lacks=("tested-by-ci",)),
            id="label-punctuation",
        ),
    ],
)
def test_parse_gate_condition(text: str, expected: GateCondition) -> None:
    assert parse_gate_condition(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("sometimes", id="unknown-word"),
        pytest.param("Always", id="case-sensitive"),
        pytest.param("when", id="when-without-clauses"),
        pytest.param("when has:", id="clause-without-labels"),
        pytest.param("when has:,", id="only-empty-labels"),
        pytest.param("when with:a", id="unknown-clause"),
        pytest.param("when has:a junk", id="trailing-junk"),
        pytest.param("when has:a, b", id="space-inside-label-list"),
        pytest.param("when has:a;b", id="semicolon-inside-label-list"),
        pytest.param("whenever has:a", id="word-starting-with-when"),
        pytest.param("whenhas:a", id="no-separator-after-when"),
        pytest.param("always never", id="two-modes"),
    ],
)
def test_invalid_gate_names_the_allowed_forms(text: str) -> None:
    with pytest.raises(ValueError, match="is not a gate; allowed: ") as err:
        parse_gate_condition(text)
    assert str(err.value) == f"{text!r} is not a gate; allowed: {ALLOWED_GATE_FORMS}"


@pytest.mark.parametrize(
    ("condition", "labels", "fires"),
    [
        pytest.param(GateCondition("always"), [], True, id="always-no-labels"),
        pytest.param(GateCondition("always"), ["x"], True, id="always-with-labels"),
        pytest.param(GateCondition("never"), [], False, id="never-no-labels"),
        pytest.param(GateCondition("never"), ["risky"], False, id="never-with-labels"),
        pytest.param(GateCondition("when", has=("risky",)), ["risky"], True, id="has-present"),
        pytest.param(GateCondition("when", has=("risky",)), ["other"], False, id="has-absent"),
        pytest.param(GateCondition("when", has=("a", "b")), ["b"], True, id="has-any-of-several"),
        pytest.param(GateCondition("when", lacks=("ok",)), [], True, id="lacks-missing"),
        pytest.param(GateCondition("when", lacks=("ok",)), ["ok"], False, id="lacks-present"),
        pytest.param(
            GateCondition("when", lacks=("a", "b")), ["a"], True, id="lacks-any-of-several"
        ),
        pytest.param(
            GateCondition("when", has=("risky",), lacks=("ok",)),
            ["ok"],
            False,
            id="neither-clause-holds",
        ),
        pytest.param(
            GateCondition("when", has=("risky",), lacks=("ok",)),
            ["ok", "risky"],
            True,
            id="has-holds-though-lacks-does-not",
        ),
        pytest.param(
            GateCondition("when", has=("risky",), lacks=("ok",)),
            [],
            True,
            id="lacks-holds-though-has-does-not",
        ),
        pytest.param(GateCondition("when"), ["x"], False, id="empty-when-never-fires"),
    ],
)
def test_fires(condition: GateCondition, labels: list[str], fires: bool) -> None:
    assert condition.fires(labels) is fires
    assert condition.fires(frozenset(labels)) is fires
