#!/usr/bin/env python3
"""The README's two set-up commands: `python3 dev.py start` and `python3 dev.py test`.

Standard library only, so it runs on a fresh machine with nothing but Python 3.11 and git.
It creates `.venv`, installs pairbot with the pinned versions in `constraints.txt`, then
either runs pairbot's main job (start: the App, `pairbot serve --dev`, on 127.0.0.1 over the
bundled example project in ./pairbot-demo) or every check (test).
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
    demo = ROOT / "pairbot-demo"  # gitignored; `pairbot demo` works on the same directory
    if not (demo / ".pair").is_dir():
        prepare = "import pathlib, sys, app.demo; app.demo.prepare(pathlib.Path(sys.argv[1]))"
        _run(BIN / "python", "-c", prepare, demo)
    argv = [str(BIN / "pairbot"), "--root", str(demo), "serve", "--dev", *args]
    print("+", " ".join(argv), flush=True)
    server = subprocess.Popen(argv, cwd=ROOT)
    while True:
        try:
            sys.exit(server.wait())
        except KeyboardInterrupt:
            continue  # Ctrl-C reached the server too; wait for its graceful shutdown


def test(args: list[str]) -> None:
    install("dev")
    _run(BIN / "ruff", "check", ".")
    _run(BIN / "ruff", "format", "--check", ".")
    _run(BIN / "mypy")
    # Every core (2 here: ~12 min instead of ~24); tests sharing a scarce resource name an
    # xdist_group so they land on one worker. `-n 0` in args runs serially.
    _run(BIN / "pytest", "-n", "auto", "--dist", "loadgroup", "--cov", "--cov-report=term", *args)


def main() -> None:
    verbs = {"start": start, "test": test}
    if len(sys.argv) < 2 or sys.argv[1] not in verbs:
        sys.exit("usage: python3 dev.py start|test [args...]")
    verbs[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    main()
