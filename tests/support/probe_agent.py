"""A hostile agent for the isolation tests: it collects every secret-bearing text it can read.

Started by the real runtime through the `command` adapter (with the system's python3 and the
standard library only, so another OS user can run it). It does not know the secrets: it copies
what it can read into `$PAIR_PROBE_OUT/probe-<pid>.json`, and the test, which knows them, looks
there. Read, as an injected card would: `/proc/*/environ` and `/proc/*/cmdline` of every
process, every file under its HOME, the runner's temp directories (RUNNER_TEMP, RUNNER_TOOL_CACHE,
TMPDIR) and the directories in PAIR_PROBE_SCAN, and every `.git/config` it can find from its
working directory (its gitfile, the common directory, the checkout above it). It exits 0
without reporting: the step it pretends to run simply does not complete.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

_MAX_FILE = 1 << 20
_MAX_FILES = 5000


def _read(path: Path, found: dict[str, str]) -> None:
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > _MAX_FILE:
            return
        found[str(path)] = path.read_bytes().decode("utf-8", "replace")
    except OSError:
        pass  # unreadable: exactly what isolation is for


def _walk(root: Path, found: dict[str, str]) -> None:
    count = 0
    for here, dirs, files in os.walk(root, onerror=lambda _err: None):
        dirs[:] = [d for d in dirs if d not in ("objects", "node_modules", ".venv")]
        for name in files:
            count += 1
            if count > _MAX_FILES:
                return
            _read(Path(here) / name, found)


def _git_configs(start: Path, found: dict[str, str]) -> None:
    for here in [start, *start.parents]:
        git = here / ".git"
        gitdirs = []
        if git.is_dir():
            gitdirs.append(git)
        elif git.is_file():
            try:
                pointer = git.read_text().strip().removeprefix("gitdir:").strip()
            except OSError:
                continue
            gitdir = (here / pointer).resolve()
            gitdirs.append(gitdir)
            try:
                common = (gitdir / "commondir").read_text().strip()
                gitdirs.append((gitdir / common).resolve())
            except OSError:
                pass
        for gitdir in gitdirs:
            _read(gitdir / "config", found)
            _read(gitdir / "config.worktree", found)


def main() -> int:
    sys.stdin.read()  # the instructions, unused
    found: dict[str, str] = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            for name in ("environ", "cmdline"):
                try:
                    text = (proc / name).read_bytes().decode("utf-8", "replace")
                except OSError:
                    continue
                found[f"{proc}/{name}"] = text.replace("\0", "\n")
    places = [os.environ.get(n, "") for n in ("HOME", "RUNNER_TEMP", "RUNNER_TOOL_CACHE", "TMPDIR")]
    places += os.environ.get("PAIR_PROBE_SCAN", "").split(os.pathsep)
    for place in filter(None, places):
        _walk(Path(place), found)
    _git_configs(Path.cwd(), found)
    out = Path(os.environ["PAIR_PROBE_OUT"]) / f"probe-{os.getpid()}.json"
    partial = out.with_suffix(".partial")  # renamed into place: a watcher never reads half
    partial.write_text(
        json.dumps({"uid": os.getuid(), "home": os.environ.get("HOME"), "found": found})
    )
    partial.rename(out)
    print(f"probe: {len(found)} texts read as uid {os.getuid()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
