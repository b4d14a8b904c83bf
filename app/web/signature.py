"""Who sent a delivery: GitHub's HMAC signature and Azure DevOps' Basic auth. Pure.

GitHub signs the raw body with HMAC-SHA256 under the webhook secret and sends
`X-Hub-Signature-256: sha256=<hex>`. Only that header counts: the legacy `X-Hub-Signature`
(`sha1=`) alone is an unsigned delivery (githubkit's own verify would accept it).
https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries

Azure DevOps service hooks carry no signature; a subscription sends Basic auth (or a custom
header), compared here in constant time. Both checks always run, so the time an answer takes
says nothing about which half was wrong.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from collections.abc import Mapping

SIGNATURE_HEADER = "x-hub-signature-256"
_PREFIX = "sha256="
# One regex match per delivery: a per-character check cost more than the rest of the refusal.
_WELL_FORMED = re.compile(r"(?i:sha256=)[0-9a-fA-F]{64}")


def sign(secret: bytes, body: bytes) -> str:
    """The `X-Hub-Signature-256` value GitHub would send for `body`."""
    return _PREFIX + hmac.digest(secret, body, "sha256").hex()  # one-shot: OpenSSL's fast path


def well_formed(header: str | None) -> bool:
    """Whether `header` could be a signature at all (`sha256=` and 64 hex digits): a delivery
    whose header is not is refused before its body is read."""
    if not header:
        return False
    return _WELL_FORMED.fullmatch(header.strip()) is not None


def verify_github(secret: bytes, body: bytes, header: str | None) -> bool:
    """Whether `header` is the sha256 signature of `body` under `secret` (never with no secret)."""
    if not secret or not header:
        return False
    given = header.strip()
    if given[: len(_PREFIX)].lower() != _PREFIX:
        return False
    # Compared as bytes: compare_digest refuses non-ASCII str, and a forged header may hold any.
    expected = sign(secret, body).encode()
    return hmac.compare_digest(expected, (_PREFIX + given[len(_PREFIX) :].lower()).encode())


def basic_credentials(header: str | None) -> bytes | None:
    """The decoded `user:password` of an `Authorization: Basic …` header, else None."""
    if not header:
        return None
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "basic" or not value:
        return None
    try:
        return base64.b64decode(value.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None


def verify_azure(
    headers: Mapping[str, str],
    *,
    username: str | None,
    password: str | None,
    secret_header: tuple[str, str] | None,
) -> bool:
    """Basic auth matching `username:password`, or the configured secret header's value.

    Nothing configured means nothing is accepted. `headers` must be case-insensitive (as
    Starlette's are) or use lower-case names.
    """
    accepted = False
    if username and password:
        given = basic_credentials(headers.get("authorization")) or b""
        wanted = f"{username}:{password}".encode()
        accepted |= hmac.compare_digest(_digest(given), _digest(wanted))
    if secret_header is not None:
        name, value = secret_header
        given_value = headers.get(name.lower(), "").strip().encode()
        accepted |= hmac.compare_digest(_digest(given_value), _digest(value.encode()))
    return accepted


def _digest(value: bytes) -> bytes:
    # Comparing digests keeps the comparison constant-time in the secret's length as well.
    return hashlib.sha256(value).digest()
