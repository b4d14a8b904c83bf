"""A comment that cannot concern pairbot is ignored before the rest of its payload is read
(`app.domain.intake.intent.unaddressed_comment`), by the App's edge and the Action alike.

What matters is that the shortcut never drops a comment the full reading would act on (a
command, a usage reply, a scope decision), and that where both answer, they answer alike.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Final

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.intake.intent import (
    MAX_COMMENT_CHARS,
    Ignore,
    NewComment,
    Policy,
    comment_intent,
    intake,
    read_issue_comment,
    unaddressed_comment,
)
from tests.domain.intake.test_intake_equivalence import DECISION

FIXTURE: Final = (
    Path(__file__).resolve().parents[2] / "fixtures" / "github-webhooks" / "issue_comment"
)
POLICY: Final = Policy(trigger="pair", app_slug="pairbot", app_id=123456)


def payload(body: Any, *, pull: bool = False, **changes: Any) -> dict[str, Any]:
    made: dict[str, Any] = copy.deepcopy(json.loads((FIXTURE / "created.json").read_text()))
    made["comment"]["body"] = body
    if pull:
        made["issue"]["pull_request"] = {"url": "https://api.github.com/repos/o/r/pulls/1"}
    made.update(changes)
    return made


def full_reading(data: dict[str, Any]) -> Any:
    """What the intake decided before the shortcut: the comment read field by field."""
    read = read_issue_comment(data, data.get("action"), POLICY)
    return comment_intent(read, POLICY) if isinstance(read, NewComment) else read


def test_a_plain_comment_is_answered_as_the_full_reading_answers_a_person() -> None:
    data = payload("Thanks, looks good.")
    number = data["issue"]["number"]
    expected = Ignore(f"the comment on issue #{number} holds no command for pairbot")
    assert unaddressed_comment(data, "created", POLICY) == expected
    assert full_reading(data) == expected
    assert intake("issue_comment", "created", data, POLICY) == expected


@pytest.mark.parametrize(
    ("body", "pull", "action"),
    [
        pytest.param("/pair status", False, "created", id="a command"),
        pytest.param("@pairbot[bot] status", False, "created", id="the slug addressed"),
        pytest.param("/pa\u200bir approve", False, "created", id="a hidden character"),
        pytest.param("/pair nonsense", False, "created", id="a usage reply"),
        pytest.param(DECISION, True, "created", id="a scope decision on a pull request"),
        pytest.param("Thanks", False, "edited", id="an edit"),
        pytest.param("Thanks", False, "deleted", id="a deletion"),
        pytest.param("x" * (MAX_COMMENT_CHARS + 1), False, "created", id="over the cap"),
        pytest.param(5, False, "created", id="a body that is not text"),
    ],
)
def test_what_may_act_or_is_not_a_plain_new_comment_is_read_in_full(
    body: Any, pull: bool, action: str
) -> None:
    assert unaddressed_comment(payload(body, pull=pull), action, POLICY) is None


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({"issue": {"number": -5}}, id="a negative number"),
        pytest.param({"issue": {"number": "5"}}, id="a number as text"),
        pytest.param({"issue": {"number": True}}, id="a boolean number"),
        pytest.param({"issue": "5"}, id="an issue that is not an object"),
        pytest.param({"comment": None}, id="no comment"),
    ],
)
def test_a_comment_whose_number_or_shape_is_wrong_is_read_in_full(
    changes: dict[str, Any],
) -> None:
    assert unaddressed_comment(payload("Thanks", **changes), "created", POLICY) is None


def test_who_wrote_a_comment_that_asks_nothing_is_not_read() -> None:
    """Its author (pairbot itself, a bot off the allowlist, a user without an id) changes
    nothing: nothing is written, run or answered for it either way."""
    for user in (
        {"login": "pairbot[bot]", "id": 1, "type": "Bot"},
        {"login": "dependabot[bot]", "id": 2, "type": "Bot"},
        {"login": "someone"},
        None,
    ):
        data = payload("Thanks")
        data["comment"]["user"] = user
        assert isinstance(unaddressed_comment(data, "created", POLICY), Ignore)


_TEXT = st.one_of(
    st.text(max_size=80),
    st.sampled_from(["/pair", "@pairbot[bot]", "/pa\u200bir", "```", "<!--", "\n", DECISION]),
)


@settings(max_examples=600, deadline=None)
@given(st.lists(_TEXT, max_size=6).map("".join), st.booleans())
def test_the_shortcut_never_drops_what_the_full_reading_acts_on(body: str, pull: bool) -> None:
    data = payload(body, pull=pull)
    shortcut = unaddressed_comment(data, "created", POLICY)
    if shortcut is not None:
        assert full_reading(data) == shortcut
