"""Markers and `plan_upsert`: every branch, the 65,536 limit, the human tail, who owns a comment."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hosts.markers import (
    END_MARKER,
    MAX_BODY,
    QUOTED_END_MARKER,
    check_marker,
    human_tail,
    is_own,
    make_marker,
    owned_comments,
    plan_upsert,
    render,
    same_text,
)
from hosts.models import Author, Comment, Upserted

BOT = Author(login="pairbot[bot]", id="41898282", is_bot=True)
HUMAN = Author(login="octocat", id="583231")
MARKER = make_marker("synthesis", 12, pr=34, run="r-1")


def comment(
    cid: str, body: str, author: Author = BOT, created_at: str = "2025-01-01T00:00:00Z"
) -> Comment:
    return Comment(id=cid, body=body, author=author, created_at=created_at)


# -- make_marker / check_marker -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(("plan", 7), "<!-- pair:plan #7 -->", id="card-only"),
        pytest.param(("first-review", 7, 9), "<!-- pair:first-review #7 PR#9 -->", id="pr"),
        pytest.param(
            ("status", 7, None, "a.b_c-1"), "<!-- pair:status #7 run:a.b_c-1 -->", id="run"
        ),
        pytest.param(
            ("synthesis", 12, 34, "r-1"), "<!-- pair:synthesis #12 PR#34 run:r-1 -->", id="all"
        ),
    ],
)
def test_marker_format(args: tuple[object, ...], expected: str) -> None:
    assert make_marker(*args) == expected  # type: ignore[arg-type]
    assert check_marker(expected) == expected


@pytest.mark.parametrize(
    "kind", ["", "Synthesis", "1st", "-x", "a b", "a_b", "synthesis\n", "a>b", "ü"]
)
def test_marker_kind_is_validated(kind: str) -> None:
    with pytest.raises(ValueError, match="marker kind"):
        make_marker(kind, 1)


@pytest.mark.parametrize("run", ["", "a b", "r1\n", "a/b", "x-->", "ü"])
def test_marker_run_is_validated(run: str) -> None:
    with pytest.raises(ValueError, match="run id"):
        make_marker("synthesis", 1, run=run)


@pytest.mark.parametrize(
    "marker",
    [
        "",
        "<!-- pair:",
        "<!-- pair:synthesis",
        "<!-- pair:synthesis #1",
        "<!-- pair:synthesis #1 -->\n",
        "<!-- pair:synthesis #1 --> tail",
        " <!-- pair:synthesis #1 -->",
        "<!-- other #1 -->",
        "<!-- /pair -->",
        "<!-- pair:Synthesis #1 -->",
        "<!-- pair:x #1 <b> -->",
    ],
)
def test_check_marker_refuses_what_would_match_too_much(marker: str) -> None:
    with pytest.raises(ValueError, match="not a pair marker"):
        check_marker(marker)


@given(
    kind=st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True),
    card=st.integers(min_value=1, max_value=10**9),
    pr=st.none() | st.integers(min_value=1, max_value=10**9),
    run=st.none() | st.from_regex(r"[A-Za-z0-9._-]{1,30}", fullmatch=True),
)
def test_every_made_marker_is_valid(kind: str, card: int, pr: int | None, run: str | None) -> None:
    marker = make_marker(kind, card, pr, run)
    assert check_marker(marker) == marker
    assert "\n" not in marker


# -- is_own ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("author", "identity", "own"),
    [
        pytest.param(BOT, BOT, True, id="same"),
        pytest.param(Author("renamed[bot]", BOT.id), BOT, True, id="renamed-same-id"),
        pytest.param(Author(BOT.login, "999"), BOT, False, id="same-login-other-id"),
        pytest.param(Author("PairBot[BOT]", ""), BOT, True, id="no-id-login-any-case"),
        pytest.param(
            Author("pairbot[bot]", "1"), Author("pairbot[bot]", ""), True, id="no-self-id"
        ),
        pytest.param(HUMAN, BOT, False, id="human"),
        pytest.param(Author("", ""), Author("", ""), False, id="no-identity-at-all"),
    ],
)
def test_is_own(author: Author, identity: Author, own: bool) -> None:
    assert is_own(author, identity) is own


# -- render and human_tail -----------------------------------------------------------------------


def test_render_layout() -> None:
    assert render(MARKER, "hello") == f"{MARKER}\nhello\n{END_MARKER}"
    assert render(MARKER, "hello", "\n\nmine") == f"{MARKER}\nhello\n{END_MARKER}\n\nmine"
    assert human_tail(render(MARKER, "hello", "\n\nmine")) == "\n\nmine"
    assert human_tail("no end marker here") == ""
    assert human_tail(render(MARKER, "")) == ""


def test_an_end_marker_inside_the_body_cannot_close_the_section() -> None:
    body = f"quoting: {END_MARKER} and more"
    text = render(MARKER, body, "\n\nhuman")
    assert text.count(END_MARKER) == 1
    assert QUOTED_END_MARKER in text
    assert human_tail(text) == "\n\nhuman"


def frame() -> int:
    return len(MARKER) + len(END_MARKER) + 2


def test_a_body_that_just_fits_is_not_truncated() -> None:
    body = "x" * (MAX_BODY - frame())
    text = render(MARKER, body)
    assert len(text) == MAX_BODY
    assert "truncated" not in text


def test_one_character_more_is_truncated_with_a_visible_notice() -> None:
    body = "x" * (MAX_BODY - frame() + 1)
    text = render(MARKER, body)
    assert len(text) <= MAX_BODY
    assert text.startswith(MARKER + "\nxxx")
    kept = text.count("x")
    assert f"truncated by pairbot: {len(body) - kept} characters omitted to fit 65536" in text
    assert text.endswith(END_MARKER)


def test_truncation_keeps_the_human_tail() -> None:
    tail = "\n\nA maintainer's note."
    text = render(MARKER, "y" * 100_000, tail)
    assert len(text) <= MAX_BODY
    assert text.endswith(END_MARKER + tail)
    assert "truncated by pairbot" in text


def test_a_huge_human_tail_is_cut_too_but_the_comment_still_fits() -> None:
    text = render(MARKER, "body", "\n" + "z" * 100_000)
    assert len(text) <= MAX_BODY
    assert text.startswith(f"{MARKER}\nbody\n{END_MARKER}\n")
    assert text.endswith(")")
    assert "truncated by pairbot" in text


@given(
    body=st.integers(min_value=0, max_value=150_000),
    tail=st.integers(min_value=0, max_value=150_000),
)
def test_render_never_exceeds_the_limit(body: int, tail: int) -> None:
    text = render(MARKER, "b" * body, "t" * tail)
    assert len(text) <= MAX_BODY
    assert text.startswith(MARKER + "\n")
    fits = frame() + body + tail <= MAX_BODY
    assert ("truncated by pairbot" not in text) is fits
    if fits:
        assert human_tail(text) == "t" * tail


# -- same_text ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stored", "wanted", "same"),
    [
        ("a\nb", "a\nb", True),
        ("a\r\nb", "a\nb", True),
        ("a\nb  \n", "a\nb", True),
        ("a\nb", "a\nc", False),
        ("a b", "a  b", False),
        ("  a", "a", False),
    ],
)
def test_same_text(stored: str, wanted: str, same: bool) -> None:
    assert same_text(stored, wanted) is same


# -- plan_upsert: every branch --------------------------------------------------------------------


def test_nothing_there_creates() -> None:
    plan = plan_upsert([], MARKER, "body", BOT)
    assert (plan.action, plan.body, plan.comment_id, plan.duplicates) == (
        Upserted.CREATED,
        render(MARKER, "body"),
        None,
        (),
    )


def test_other_markers_and_plain_comments_create() -> None:
    comments = [
        comment("1", "plain text"),
        comment("2", render(make_marker("synthesis", 12, pr=34, run="r-2"), "other run")),
        comment("3", render(make_marker("synthesis", 1, pr=34, run="r-1"), "other card")),
        comment("4", "quoting " + MARKER),
    ]
    assert plan_upsert(comments, MARKER, "body", BOT).action is Upserted.CREATED


def test_a_card_number_prefix_is_not_the_same_marker() -> None:
    one = make_marker("plan", 1)
    comments = [comment("1", render(make_marker("plan", 12), "card twelve"))]
    assert plan_upsert(comments, one, "body", BOT).action is Upserted.CREATED


@pytest.mark.parametrize(
    "forger", [HUMAN, Author("dependabot[bot]", "49699333", is_bot=True)], ids=["human", "bot"]
)
def test_a_forged_marker_is_ignored(forger: Author) -> None:
    forged = comment("1", render(MARKER, "forged"), author=forger)
    plan = plan_upsert([forged], MARKER, "forged", BOT)
    assert plan.action is Upserted.CREATED
    assert plan.comment_id is None


def test_own_comment_with_the_same_text_is_unchanged() -> None:
    plan = plan_upsert([comment("1", render(MARKER, "body"))], MARKER, "body", BOT)
    assert (plan.action, plan.comment_id, plan.duplicates) == (Upserted.UNCHANGED, "1", ())


def test_line_endings_rewritten_by_a_browser_are_unchanged() -> None:
    stored = render(MARKER, "line one\nline two").replace("\n", "\r\n") + "\r\n"
    plan = plan_upsert([comment("1", stored)], MARKER, "line one\nline two", BOT)
    assert plan.action is Upserted.UNCHANGED


def test_own_comment_with_other_text_is_updated() -> None:
    plan = plan_upsert([comment("1", render(MARKER, "old"))], MARKER, "new", BOT)
    assert (plan.action, plan.body, plan.comment_id) == (
        Upserted.UPDATED,
        render(MARKER, "new"),
        "1",
    )


def test_an_update_keeps_the_human_tail() -> None:
    tail = "\n\n> reviewed by me, ship it"
    plan = plan_upsert([comment("1", render(MARKER, "old") + tail)], MARKER, "new", BOT)
    assert plan.action is Upserted.UPDATED
    assert plan.body == render(MARKER, "new") + tail
    assert plan_upsert([comment("1", plan.body)], MARKER, "new", BOT).action is Upserted.UNCHANGED


def test_an_own_comment_without_end_marker_is_repaired() -> None:
    plan = plan_upsert([comment("1", MARKER + "\nhalf written")], MARKER, "body", BOT)
    assert (plan.action, plan.body) == (Upserted.UPDATED, render(MARKER, "body"))


def test_duplicates_keep_the_oldest_and_report_the_rest() -> None:
    comments = [
        comment("7", render(MARKER, "newest"), created_at="2025-01-03T00:00:00Z"),
        comment("5", render(MARKER, "oldest"), created_at="2025-01-01T00:00:00Z"),
        comment("6", render(MARKER, "middle"), created_at="2025-01-02T00:00:00Z"),
    ]
    plan = plan_upsert(comments, MARKER, "oldest", BOT)
    assert (plan.action, plan.comment_id, plan.duplicates) == (Upserted.UNCHANGED, "5", ("6", "7"))
    plan = plan_upsert(comments, MARKER, "new", BOT)
    assert (plan.action, plan.comment_id, plan.duplicates) == (Upserted.UPDATED, "5", ("6", "7"))


def test_equal_timestamps_keep_host_order() -> None:
    comments = [comment("2", render(MARKER, "a")), comment("1", render(MARKER, "b"))]
    plan = plan_upsert(comments, MARKER, "c", BOT)
    assert (plan.comment_id, plan.duplicates) == ("2", ("1",))


def test_ownership_is_by_id_when_there_is_one() -> None:
    renamed = Author("pairbot-renamed[bot]", BOT.id, is_bot=True)
    impostor = Author(BOT.login, "13", is_bot=True)  # the login changed hands
    comments = [
        comment("1", render(MARKER, "impostor"), author=impostor, created_at="2025-01-01"),
        comment("2", render(MARKER, "mine"), author=renamed, created_at="2025-01-02"),
    ]
    plan = plan_upsert(comments, MARKER, "mine", BOT)
    assert (plan.action, plan.comment_id, plan.duplicates) == (Upserted.UNCHANGED, "2", ())
    assert [c.id for c in owned_comments(comments, MARKER, BOT)] == ["2"]


def test_ownership_by_login_when_the_host_has_no_ids() -> None:
    me = Author("pairbot", "")
    comments = [comment("1", render(MARKER, "mine"), author=Author("PAIRBOT", ""))]
    assert plan_upsert(comments, MARKER, "mine", me).action is Upserted.UNCHANGED


def test_an_invalid_marker_is_refused_before_anything_matches() -> None:
    comments = [comment("1", render(MARKER, "mine"))]
    for marker in ("", "<!-- pair:", "<!--"):
        with pytest.raises(ValueError, match="not a pair marker"):
            plan_upsert(comments, marker, "body", BOT)


def test_an_oversized_body_plans_a_comment_within_the_limit() -> None:
    plan = plan_upsert([], MARKER, "x" * 200_000, BOT)
    assert len(plan.body) <= MAX_BODY
    stored = [comment("1", plan.body)]
    assert plan_upsert(stored, MARKER, "x" * 200_000, BOT).action is Upserted.UNCHANGED


@given(
    body=st.text(st.characters(codec="utf-8"), max_size=300)
    | st.builds(lambda a, b: a + END_MARKER + b, st.text(max_size=50), st.text(max_size=50)),
    tail=st.sampled_from(["", "\n\nhuman note", "\r\n\r\nnote " + END_MARKER]),
    new=st.text(max_size=100),
)
def test_a_republish_is_a_no_op_and_keeps_the_tail(body: str, tail: str, new: str) -> None:
    created = plan_upsert([], MARKER, body, BOT)
    assert created.action is Upserted.CREATED
    stored = comment("1", created.body + tail)  # a human appended a note
    again = plan_upsert([stored], MARKER, body, BOT)
    assert again.action is Upserted.UNCHANGED
    assert human_tail(again.body) == tail
    updated = plan_upsert([stored], MARKER, new, BOT)
    assert human_tail(updated.body) == tail
    final = plan_upsert([comment("1", updated.body)], MARKER, new, BOT)
    assert final.action is Upserted.UNCHANGED
