"""Finding a maintainer's scope decision among a pull request's comments. Pure, shared.

Every adapter lists the pull's comments its own way, then chooses among them with
`scope_decision_in`, so discovery is the same on every host. Whether the chosen comment is a
valid decision (its author, its JSON, its baseline) is `app.domain.scope.decision`'s to judge,
on the text a reader sees (`app.domain.text.sanitize.visible_code`). hosts/ may not import
app/, so discovery here is a cheaper pre-filter: a fence inside an HTML comment is no
candidate; one in a hidden element is found here and refused there (`no-decision`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from hosts.errors import NotFound
from hosts.markers import is_own
from hosts.models import Author, Comment

# A maintainer's scope decision: a fenced ```json block whose object names its schemaVersion.
# Malformed JSON still counts as a decision here: app/domain refuses it as `malformed-json`.
# An HTML comment renders as nothing (an unterminated one runs to the end); one pass.
_HTML_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_DECISION = re.compile(
    r"^[ \t]*```(?:json)?[ \t]*\r?\n(.*?)^[ \t]*```", re.DOTALL | re.MULTILINE | re.IGNORECASE
)


def scope_decision_in(
    comments: Sequence[Comment],
    comment_ref: str | None,
    *,
    identity: Author | None = None,
    prefer: Callable[[Comment], bool] | None = None,
) -> Comment | None:
    """The referenced comment (by id or URL), or the newest holding a fenced scope decision.

    Pure, and shared: any adapter can choose among the comments it listed with it. Discovery
    looks for a fenced block (```json, or a bare ```) whose text names `"schemaVersion"`, and
    skips pairbot's own comments when `identity` is given — the packet pairbot posts may show
    the JSON to copy, and it is not the maintainer's answer. A reference that matches nothing is
    NotFound: the caller named a decision that is not there. Who wrote the comment and whether
    its JSON is valid are app/domain's to judge (`not-maintainer`, `malformed-json`, …).

    `prefer` (the caller's judge: written by the one who decides, a decision a reader sees)
    picks the newest candidate it accepts, so someone else's later comment, or a decision
    hidden from readers, cannot shadow the maintainer's; only when it accepts none is the
    newest candidate returned, for its refusal to be answered.
    """
    if comment_ref is not None:
        for comment in comments:
            if comment_ref and comment_ref in (comment.id, comment.url):
                return comment
        raise NotFound(f"comment {comment_ref!r} is not on this pull request")
    holding = [
        c
        for c in comments
        if not (identity and is_own(c.author, identity)) and holds_scope_decision(c.body)
    ]
    # Newest by creation time; for equal times the later in host order (stable sort).
    ordered = sorted(holding, key=lambda c: c.created_at)
    preferred = [c for c in ordered if prefer(c)] if prefer is not None else []
    chosen = preferred or ordered
    return chosen[-1] if chosen else None


def holds_scope_decision(body: str) -> bool:
    """A fenced block outside HTML comments that names `"schemaVersion"`: a candidate
    decision, valid or not."""
    if "<!--" in body:
        body = _HTML_COMMENT.sub("", body)
    return any('"schemaVersion"' in block for block in _DECISION.findall(body))
