"""The supported CLI versions: one table, the same pins as tests/agents for the npm install."""

from __future__ import annotations

import json

from app.runtime.adapters import AGENT_BINARIES
from app.runtime.supported import SUPPORTED
from tests.agents.real_cli import AGENTS_DIR, EXPECTATIONS


def test_pins_are_the_supported_versions() -> None:
    pinned = json.loads((AGENTS_DIR / "package.json").read_text())["dependencies"]
    expected = {c.package: c.version for c in SUPPORTED.values() if c.package is not None}
    assert pinned == expected
    lock = json.loads((AGENTS_DIR / "package-lock.json").read_text())["packages"]
    for package, version in pinned.items():
        assert lock[f"node_modules/{package}"]["version"] == version
    # Every agent with a pin has its acceptance test; cursor, not on npm, has neither.
    assert {a for a, c in SUPPORTED.items() if c.package} == set(EXPECTATIONS)
    assert set(SUPPORTED) == set(AGENT_BINARIES)
