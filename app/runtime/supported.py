"""The agent CLI versions pairbot supports: one table that the adapters' tests, the real-CLI
tests and `pairbot doctor` all read.

Each entry names the npm package the CLI ships in, the version whose `--help` the adapters'
argv was checked against (tests/agents/package.json pins the same versions for the tests' npm
install, and a test ties the two together), and how to read an installed binary's version.
cursor's CLI is not published on npm (its installer is a shell script), so it has no package
and no pin: its argv follows Cursor's headless docs and is not tested against the real binary.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

__all__ = ["SUPPORTED", "SupportedCli", "parse_version"]


@dataclass(frozen=True)
class SupportedCli:
    """One agent CLI: where it comes from, the version pairbot supports, how to ask its version."""

    agent: str
    package: str | None  # the npm package; None when the CLI is not on npm
    version: str | None  # the supported version; None when untested
    version_args: tuple[str, ...] = ("--version",)


SUPPORTED: Final[Mapping[str, SupportedCli]] = {
    "claude": SupportedCli("claude", "@anthropic-ai/claude-code", "2.1.332"),
    "codex": SupportedCli("codex", "@openai/codex", "0.171.0"),
    "gemini": SupportedCli("gemini", "@google/gemini-cli", "0.61.0"),
    "opencode": SupportedCli("opencode", "opencode-ai", "1.18.33"),
    "cursor": SupportedCli("cursor", None, None),
}

# The first dotted version in a `--version` line: `2.1.332 (Claude Code)`, `codex-cli 0.171.0`,
# `0.61.0`, `1.18.33`, `2026.01.17-d239e66` (cursor).
_VERSION: Final = re.compile(r"\d+(?:\.\d+)+(?:-[0-9A-Za-z.]+)?")


def parse_version(output: str) -> str | None:
    """The version in a CLI's `--version` output, or None when there is none."""
    match = _VERSION.search(output)
    return match.group(0) if match else None
