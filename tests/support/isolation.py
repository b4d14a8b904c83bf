"""What the isolation tests share: the probe agent, the skip rule, and the secret search."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from app.runtime import isolation

PROBE = Path(__file__).resolve().parent / "probe_agent.py"
# The probe runs as another OS user: this interpreter may live under a private HOME (/root).
SYSTEM_PYTHON = "/usr/bin/python3"


def can_isolate() -> bool:
    """Whether this machine lets pairbot run an agent as another OS user."""
    facts = isolation.probe_host()
    return (facts.euid == 0 and (facts.setpriv or facts.runuser)) or facts.sudo


needs_isolation = pytest.mark.skipif(
    not can_isolate() or not Path(SYSTEM_PYTHON).exists(),
    reason="agent isolation needs root or passwordless sudo, and /usr/bin/python3",
)


def secrets_found(texts: Mapping[str, str], needles: Mapping[str, str]) -> dict[str, list[str]]:
    """For each named secret the probe's texts contain: where it was found."""
    found: dict[str, list[str]] = {}
    for name, needle in needles.items():
        where = [path for path, text in texts.items() if needle in text]
        if where:
            found[name] = where
    return found
