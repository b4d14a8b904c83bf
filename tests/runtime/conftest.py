"""Fixtures the runtime tests share: a directory the agent user can reach."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory another OS user can reach (pytest's own tmp is private to this user)."""
    path = Path(tempfile.mkdtemp(prefix="pairbot-iso-test-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
