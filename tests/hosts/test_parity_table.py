"""docs/hosts.md's GitHub ↔ Azure DevOps parity table cannot rot: every row names at least one
test on each host, and every named test exists (its module imports and defines or collects it)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "hosts.md"
_NAMED = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")
COLUMNS = ("row", "GitHub", "test on GitHub", "Azure DevOps", "test on Azure DevOps")


def parity_rows() -> list[list[str]]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Parity: GitHub ↔ Azure DevOps", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert tuple(header) == COLUMNS
    # Cells hold no `|` of their own (a Markdown table would split them too).
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]


def test_every_row_names_a_test_on_each_host() -> None:
    rows = parity_rows()
    names = [row[0] for row in rows]
    for wanted in (
        "trigger comment",
        "bots ignored",
        "allowlist",
        "acknowledgement",
        "fork guard",
        "permission",
        "comment paging",
        "status on the exact head",
        "state labels / tags",
        "scope decision",
        "merge gate",
        "scheduled ticks",
        "state branch",
        "secrets masked",
    ):
        assert wanted in names, f"docs/hosts.md's parity table lost its {wanted!r} row"
    for row in rows:
        assert len(row) == len(COLUMNS), row
        for column in (2, 4):
            assert _NAMED.findall(row[column]), f"{row[0]!r}: no test named for {COLUMNS[column]}"


def test_every_named_test_exists() -> None:
    missing: list[str] = []
    for row in parity_rows():
        for path, name in _NAMED.findall(row[2] + " " + row[4]):
            module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
            if not callable(getattr(module, name, None)) or not name.startswith("test_"):
                missing.append(f"{path}::{name}")
    assert missing == [], f"docs/hosts.md names tests that do not exist: {missing}"
