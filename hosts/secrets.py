"""Secret values that never print, and scrubbing of every secret seen from any text.

Secret      one credential (a token, a PEM key): `repr`/`str` show `***`; `reveal()` is
            the only way to the value, so it is visible at every place that uses it
Secrets     every secret value an adapter has seen (fixed ones and the last few minted),
            with their Basic-auth encodings, scrubbed from text before it is raised,
            logged or shown
"""

from __future__ import annotations

import base64
import threading
from collections import deque

__all__ = ["REDACTED", "Secret", "Secrets", "basic_encodings"]

REDACTED = "***"


class Secret:
    """A credential value that never prints (repr, str, logs, tracebacks' locals)."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The value itself: for the one place that sends it."""
        return self._value

    def __bool__(self) -> bool:
        return bool(self._value.strip())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __repr__(self) -> str:
        return "Secret(***)"

    __str__ = __repr__


def basic_encodings(secret: str) -> tuple[str, ...]:
    """The Basic-auth credentials git and the SDKs derive from a token (also secrets)."""
    return tuple(
        base64.b64encode(f"{user}:{secret}".encode()).decode("ascii")
        for user in ("x-access-token", "")
    )


class Secrets:
    """Secret values to scrub from any text before it is raised, logged or shown.

    Keeps the fixed secrets plus the last few dynamic ones (minted tokens, JWTs): a minted token
    is replaced hourly, so the set stays small. Thread-safe (the Azure DevOps SDK runs in
    worker threads).
    """

    __slots__ = ("_dynamic", "_fixed", "_lock")

    def __init__(self, *fixed: str) -> None:
        self._fixed: set[str] = set()
        self._dynamic: deque[str] = deque(maxlen=32)
        self._lock = threading.Lock()
        for value in fixed:
            self.add(value, fixed=True)

    def add(self, value: str, *, fixed: bool = False) -> None:
        """Remember `value` (and its Basic-auth encodings) as a secret."""
        if len(value) < 4:  # too short to scrub without mangling ordinary text
            return
        with self._lock:
            for item in (value, *basic_encodings(value)):
                if fixed:
                    self._fixed.add(item)
                elif item not in self._dynamic:
                    self._dynamic.append(item)

    def scrub(self, text: str) -> str:
        """`text` with every known secret replaced by `***`."""
        with self._lock:
            known = sorted({*self._fixed, *self._dynamic}, key=len, reverse=True)
        for secret in known:
            text = text.replace(secret, REDACTED)
        return text

    def __repr__(self) -> str:
        return f"Secrets({len(self._fixed) + len(self._dynamic)} values)"
