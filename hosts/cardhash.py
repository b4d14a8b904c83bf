"""The card hash: a fingerprint of only the inputs that define the work. Pure.

It covers the title and the body, with pairbot's own markers and owned sections removed and
whitespace normalised, so a label, an assignee, a comment, a line-ending change or pairbot's
own edits never look like new work.

An owned section runs from a `<!-- pair:… -->` marker to its `<!-- /pair -->`. A marker with no
close removes only itself: text after a stray (or pasted) marker is still the work, so an edit
there still changes the hash and still triggers a re-review.
"""

from __future__ import annotations

import hashlib
import re

# A section never spans another opening marker: a stray one before it is not its start.
_OWNED = re.compile(r"<!-- pair:[^>]*-->(?:(?!<!-- pair:).)*?<!-- /pair -->", re.DOTALL)
_STRAY = re.compile(r"<!-- (?:pair:[^>]*|/pair )-->")
_SPACE = re.compile(r"\s+")


def normalise(text: str) -> str:
    """Drop pairbot's sections and markers, collapse every run of whitespace to one space."""
    return _SPACE.sub(" ", _STRAY.sub("", _OWNED.sub("", text))).strip()


def card_hash(title: str, body: str) -> str:
    """`sha256:<hex>` over the normalised title and body."""
    digest = hashlib.sha256(f"{normalise(title)}\n\n{normalise(body)}".encode())
    return f"sha256:{digest.hexdigest()}"
