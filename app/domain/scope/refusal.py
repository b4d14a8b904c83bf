"""A scope decision pairbot will not apply: a stable code and the sentence naming the remedy.
Pure; shared by the reading of the decision comment and its checks (`app.domain.scope.decision`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

RefusalCode = Literal[
    "maintainer-unresolved",
    "author-is-bot",
    "not-maintainer",
    "no-decision",
    "malformed-json",
    "unsupported-schema-version",
    "invalid-decision",
    "unknown-action",
    "duplicate-id",
    "stale-baseline",
    "unknown-proposal",
    "conflicting-delta",
    # from rewrite_card (app.domain.scope.acceptance)
    "invalid-ac-id",
    "unsupported-card-format",
    "ac-id-unresolvable",
    "ambiguous-ac-id",
    "invalid-ac-text",
]


@dataclass(frozen=True)
class Refusal:
    """A decision pairbot will not apply: a stable `code` and a message naming the remedy."""

    code: RefusalCode
    message: str
