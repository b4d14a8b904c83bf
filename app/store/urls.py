"""A store URL as logs and errors may show it: without its password.

Its own module so that the factory (which names the URL in its errors) and the PostgreSQL
store (which names it in its own) both import it, and neither imports the other.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def redact_url(value: str) -> str:
    """A URL without its password (`user:***@host`), for logs and errors."""
    try:
        parts = urlsplit(value)
        password = parts.password
    except ValueError:
        return "<unparsable URL>"
    if password is None:
        return value
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))
