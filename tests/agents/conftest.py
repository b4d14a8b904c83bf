"""Collect the real-CLI tests only where `python3 dev.py test` installed the agent CLIs.

Without tests/agents/node_modules (no npm, or `npm ci` failed), the test modules here are not
collected at all and the run says so in one header line, instead of one skip per test.
"""

from __future__ import annotations

import pytest

from tests.agents.real_cli import NODE_BIN

INSTALLED = NODE_BIN.is_dir()

collect_ignore_glob = [] if INSTALLED else ["test_*.py"]


def pytest_report_header(config: pytest.Config) -> str | None:
    """The one line saying the real-CLI tests are skipped, when they are."""
    del config
    if INSTALLED:
        return None
    return (
        "real-CLI tests skipped: no agent CLIs in tests/agents/node_modules "
        "(python3 dev.py test installs them with npm)"
    )
