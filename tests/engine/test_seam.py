"""The engine reaches the runtime only through its agent seam: the dependency stays one-way.

`app/engine/agent.py` defines the protocols; `app/runtime` implements them and the surfaces
inject the runtime's launcher. Read from the source with `ast`, so an import inside a function
(a lazy import) counts as much as one at the top of a module.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parents[2] / "app"


def imported_modules(source: str, path: Path) -> Iterator[str]:
    """Every module `source` (the file at `path`) imports, relative imports resolved."""
    package = path.relative_to(APP.parent).with_suffix("").parts[:-1]
    for node in ast.walk(ast.parse(source, filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            parts = list(package[: len(package) - node.level + 1] if node.level else [])
            base = ".".join([*parts, *([node.module] if node.module else [])])
            yield base
            # `from app import runtime` names the package in the alias, not in the module.
            yield from (f"{base}.{alias.name}" for alias in node.names)


def imports_of(path: Path) -> set[str]:
    return set(imported_modules(path.read_text(encoding="utf-8"), path))


def under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


@pytest.mark.parametrize(
    "path",
    [pytest.param(p, id=str(p.relative_to(APP))) for p in sorted((APP / "engine").rglob("*.py"))],
)
def test_no_engine_module_imports_the_runtime(path: Path) -> None:
    offending = sorted(m for m in imports_of(path) if under(m, "app.runtime"))
    assert offending == [], f"{path.relative_to(APP.parent)} imports {offending}"


def test_the_process_helpers_are_a_leaf() -> None:
    # app/proc.py is shared by the engine, the runtime and the cycle; importing any part of the
    # app back would make them depend on each other through it.
    assert sorted(m for m in imports_of(APP / "proc.py") if under(m, "app")) == []


@pytest.mark.parametrize(
    "line",
    [
        pytest.param("import app.runtime.rex", id="import"),
        pytest.param("from app.runtime import launcher", id="from-package"),
        pytest.param("from app import runtime", id="from-app"),
        pytest.param("from .. import runtime as r", id="relative-package"),
        pytest.param("def lazy() -> None:\n    from ..runtime.adapters import ADAPTERS", id="lazy"),
    ],
)
def test_the_check_sees_every_form_of_import(line: str) -> None:
    # The check above is only as good as this parser.
    found = imported_modules(line + "\n", APP / "engine" / "probe.py")
    assert any(under(m, "app.runtime") for m in found)


def test_the_check_is_not_fooled_by_a_lookalike() -> None:
    found = imported_modules("import app.runtimes\nfrom app import runtime_x\n", APP / "x.py")
    assert not any(under(m, "app.runtime") for m in found)
