"""A scope decision counts only where a reader sees it: a ```json block in an HTML comment, a
hidden element or spelled with entities is no decision (`no-decision`), one in `<details>` is.
Discovery (`hosts.decisions`) skips HTML comments too."""

from __future__ import annotations

from functools import partial

import pytest

from app.domain.scope.decision import ScopeDecision, is_deciders_decision
from hosts.decisions import holds_scope_decision, scope_decision_in
from hosts.models import Author, Comment
from tests.domain.scope.test_decision import GOOD, check, refused

FENCE = f"```json\n{GOOD}\n```"


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(f"<!-- {FENCE} -->", id="html-comment"),
        pytest.param(f"I agree.\n\n<!--\n{FENCE}\n-->", id="html-comment-block"),
        pytest.param(f"I agree.\n\n<!--\n\n{FENCE}\n\n", id="unterminated-comment"),
        pytest.param(f"<div hidden>\n\n{FENCE}\n\n</div>", id="hidden-element"),
        pytest.param(f'<div style="display:none">\n\n{FENCE}\n\n</div>', id="display-none"),
        pytest.param(f'<div style="color:#fff">\n\n{FENCE}\n\n</div>', id="white-text"),
        pytest.param(f"<template>\n\n{FENCE}\n\n</template>", id="template"),
        pytest.param(
            "&#96;&#96;&#96;json\n" + GOOD + "\n&#96;&#96;&#96;", id="entity-spelled-fence"
        ),
        pytest.param(
            "&#x60;&#x60;&#x60;json\n" + GOOD + "\n&#x60;&#x60;&#x60;", id="hex-entity-fence"
        ),
        pytest.param(f'<span style="display:none">\n{FENCE}\n</span>', id="inline-hidden-html"),
    ],
)
def test_a_decision_no_reader_sees_is_no_decision(body: str) -> None:
    refused(check(body), "no-decision", "```json")


def test_a_decision_in_details_is_seen() -> None:
    body = f"<details><summary>my decision</summary>\n\n{FENCE}\n\n</details>"
    assert isinstance(check(body), ScopeDecision)


def test_a_hidden_decision_beside_a_visible_one_is_not_a_second_block() -> None:
    other = '```json\n{"schemaVersion": 1, "decisions": []}\n```'
    assert isinstance(check(f"{FENCE}\n\n<!--\n{other}\n-->"), ScopeDecision)
    assert isinstance(check(f"<div hidden>\n\n{other}\n\n</div>\n\n{FENCE}"), ScopeDecision)


def test_line_numbers_stay_the_comment_s_own_after_hidden_text() -> None:
    body = '<!--\nhidden\n-->\n\nintro\n\n```json\n{\n  "schemaVersion": 1,\n  oops\n}\n```'
    refused(check(body), "malformed-json", "on line 10", "column 3")


def test_discovery_skips_a_fence_in_an_html_comment() -> None:
    assert holds_scope_decision(FENCE)
    assert not holds_scope_decision(f"<!-- {FENCE} -->")
    assert not holds_scope_decision(f"ok <!--\n{FENCE}")
    author = Author(login="octocat", id="1", is_bot=False)
    honest = _comment("1", FENCE, author, "2026-01-01T00:00:00Z")
    hidden = _comment("2", f"thanks <!--\n{FENCE}\n-->", author, "2026-01-02T00:00:00Z")
    assert scope_decision_in([honest, hidden], None) == honest


def _comment(ident: str, body: str, author: Author, created: str) -> Comment:
    return Comment(id=ident, body=body, author=author, created_at=created, url=f"u/{ident}")


def test_a_later_comment_by_someone_else_or_hidden_does_not_shadow_the_maintainer_s() -> None:
    maintainer = Author(login="octocat", id="1", is_bot=False)
    stranger = Author(login="mallory", id="7", is_bot=False)
    honest = _comment("1", FENCE, maintainer, "2026-01-01T00:00:00Z")
    hidden = _comment("2", f"<div hidden>\n\n{FENCE}\n\n</div>", maintainer, "2026-01-02T00:00:00Z")
    shadow = _comment("3", FENCE, stranger, "2026-01-03T00:00:00Z")
    prefer = partial(is_deciders_decision, maintainer="octocat", assignees=())
    assert scope_decision_in([honest, hidden, shadow], None, prefer=prefer) == honest
    # With no comment the decider wrote, the newest is still chosen, for its refusal.
    assert scope_decision_in([shadow], None, prefer=prefer) == shadow
    assert not is_deciders_decision(hidden, maintainer="octocat", assignees=())
    assert not is_deciders_decision(shadow, maintainer="octocat", assignees=())
    assert is_deciders_decision(honest, maintainer=None, assignees=("octocat",))
