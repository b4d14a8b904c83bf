#!/usr/bin/env python3
"""The README's two set-up commands: `python3 dev.py start` and `python3 dev.py test`.

Standard library only, so it runs on a fresh machine with nothing but Python 3.11 and git.
It creates `.venv`, installs pairbot with the pinned versions in `constraints.txt`, then
either runs pairbot's main job on the bundled example (start) or every check (test).
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")


def _run(*argv: str | Path) -> None:
    print("+", " ".join(str(a) for a in argv), flush=True)
    code = subprocess.call([str(a) for a in argv], cwd=ROOT)
    if code != 0:
        sys.exit(code)


def install(extra: str) -> None:
    if not (BIN / "python").exists():
        venv.EnvBuilder(with_pip=True).create(VENV)
    target = f".[{extra}]" if extra else "."
    _run(
        BIN / "python",
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "-c",
        "constraints.txt",
        "-e",
        target,
    )


def start(args: list[str]) -> None:
    install("")
    _run(BIN / "pairbot", "demo", *args)


def test(args: list[str]) -> None:
    install("dev")
    _run(BIN / "ruff", "check", ".")
    _run(BIN / "ruff", "format", "--check", ".")
    _run(BIN / "mypy")
    _run(BIN / "pytest", "--cov", "--cov-report=term", *args)


def main() -> None:
    verbs = {"start": start, "test": test}
    if len(sys.argv) < 2 or sys.argv[1] not in verbs:
        sys.exit("usage: python3 dev.py start|test [args...]")
    verbs[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    main()
