"""What a command loads: the console script's entry run in a fresh interpreter, and its modules.

    pairbot_modules(argv, cwd, tmp, env) -> (exit code, output, modules)   `pairbot argv`
    under(modules, *prefixes) -> sorted names that are one of `prefixes` or inside one

The interpreter writes its `sys.modules` to a file at exit, so what an earlier test imported
does not count (tests/cli/test_cli_imports.py, tests/packaging/test_report_imports.py,
tests/packaging/test_import_cost.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def pairbot_modules(
    argv: Sequence[str], cwd: Path, tmp: Path, env: Mapping[str, str] | None = None
) -> tuple[int, str, set[str]]:
    """Run `pairbot argv` in `cwd` (`env`, else this process's): its exit code, its stdout and
    stderr, and the modules loaded by its exit."""
    dump = tmp / "modules.json"
    script = (
        "import atexit, json, sys\n"
        "def dump():\n"
        f"    with open({str(dump)!r}, 'w') as out:\n"
        "        json.dump(sorted(sys.modules), out)\n"
        "atexit.register(dump)\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        f"sys.argv = ['pairbot', *{list(argv)!r}]\n"
        "from app.cli import main\n"
        "main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=cwd,
        env=dict(env) if env is not None else dict(os.environ),
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    return done.returncode, done.stdout + done.stderr, set(json.loads(dump.read_text()))


def under(modules: set[str], *prefixes: str) -> list[str]:
    """The modules that are one of `prefixes` or inside one of them."""
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes))
