#!/usr/bin/env python3
"""The README's two set-up commands: `python3 dev.py start` and `python3 dev.py test`.

Standard library only, so it runs on a fresh machine with nothing but Python 3.11 and git.
It creates `.venv`, installs pairbot with the pinned versions in `constraints.txt`, then
either runs pairbot's main job or every check.

The venv is built from an interpreter every OS user may execute: pairbot runs its agents (and
anything they wrote, such as the project's tests) as another user, `pairbot-agent`, who must run
pairbot's own `pairbot batch report` from this venv. A Python under a closed HOME (pyenv in
/root) is not one, so `install` builds from the system's `python3.X` of the same version.

`start` sets up the bundled demo in ./pairbot-demo (a repository, its local forge and cards:
`python -m app.cli.demo`, which resumes a demo already there) and runs the App over it, `pairbot
serve --dev` on 127.0.0.1, printing the URL of the cards overview. `test` also installs the
agent CLIs pairbot supports, at the versions pinned in tests/agents/package-lock.json, into the
gitignored tests/agents/node_modules (`npm install --no-save`, skipped when they are already
there) for the real-CLI tests; without npm it says so in one line and those tests skip. It
also installs Debian's Chromium (`apt-get install -y chromium`, as root or through `sudo -n`)
for the browser tests when /usr/bin/chromium is missing, and `acl` and `sudo` (setfacl opens a
closed parent directory to the agent user; sudo makes the runner-like user of the end-to-end
tests); where it cannot, it says so in one line and those tests skip. Playwright's own browser
download is never used.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
AGENTS = ROOT / "tests" / "agents"
CHROMIUM = "/usr/bin/chromium"  # Debian's package; the browser tests drive it with Playwright


def _run(*argv: str | Path) -> None:
    print("+", " ".join(str(a) for a in argv), flush=True)
    code = subprocess.call([str(a) for a in argv], cwd=ROOT)
    if code != 0:
        sys.exit(code)


def _reachable(path: Path) -> bool:
    """Whether every OS user may execute `path`: each directory above it searchable by others."""
    real = path.resolve()
    return all(p.stat().st_mode & 0o001 for p in [real, *real.parents] if p.exists())


def base_python() -> Path:
    """The interpreter the venv is built from: this one when every user may execute it, else the
    system's python3.X of the same version (an agent user cannot run pyenv's under /root)."""
    here = Path(getattr(sys, "_base_executable", sys.executable))
    if _reachable(here):
        return here
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for folder in ("/usr/bin", "/usr/local/bin"):
        candidate = Path(folder) / version
        if candidate.exists() and _reachable(candidate):
            return candidate
    print(
        f"note: {here} is not executable by other OS users and no system-wide {version} was "
        "found; isolated agents will not be able to run pairbot from this venv",
        flush=True,
    )
    return here


def install(extra: str) -> None:
    base = base_python()
    venv_python = BIN / "python"
    if venv_python.exists() and not _reachable(venv_python):
        # An older venv built from a private interpreter: rebuild it from `base`.
        shutil.rmtree(VENV)
    if not venv_python.exists():
        if base.resolve() == Path(sys.executable).resolve():
            venv.EnvBuilder(with_pip=True).create(VENV)
        else:
            _run(base, "-m", "venv", VENV)
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


def _agents_installed() -> bool:
    """Every CLI in tests/agents/package.json is in its node_modules at the pinned version."""
    pinned = json.loads((AGENTS / "package.json").read_text(encoding="utf-8"))["dependencies"]
    for package, version in pinned.items():
        manifest = AGENTS / "node_modules" / package / "package.json"
        try:
            installed = json.loads(manifest.read_text(encoding="utf-8")).get("version")
        except (OSError, ValueError):
            return False
        if installed != version:
            return False
    return True


def install_agents() -> None:
    """Install the pinned agent CLIs for the real-CLI tests, unless npm is absent."""
    npm = shutil.which("npm")
    if npm is None:
        print(
            "real-CLI tests: npm is not on PATH; the agent CLIs are not installed and those "
            "tests skip",
            flush=True,
        )
        return
    if _agents_installed():
        return
    # Not `npm ci`: it refuses a lock file without every platform's optional package, and
    # opencode's builds for other platforms are not on every registry (404), so no lock file
    # can list them. `npm install --no-save` installs the locked tree and writes no file.
    argv = [npm, "install", "--no-save", "--no-audit", "--no-fund", "--loglevel=error"]
    print("+", " ".join(argv), f"(in {AGENTS.relative_to(ROOT)})", flush=True)
    if subprocess.call(argv, cwd=AGENTS) != 0:
        print("real-CLI tests: the npm install failed (see above); those tests skip", flush=True)


def _option(args: list[str], name: str, default: str) -> str:
    """The value of `--name VALUE` or `--name=VALUE` in `args` (serve's own options)."""
    for index, arg in enumerate(args):
        if arg == name and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith(name + "="):
            return arg.partition("=")[2]
    return default


def start(args: list[str]) -> None:
    install("")
    demo = ROOT / "pairbot-demo"  # gitignored; `pairbot demo` works on the same directory
    # Creates the demo (repository, local forge, cards, the maintainer's commands) or resumes
    # it: run again, it adds only what is missing.
    # Under the product's defaults: the demo's agent is isolated like any other.
    _run(BIN / "python", "-m", "app.cli.demo", demo)
    argv = [str(BIN / "pairbot"), "--root", str(demo), "serve", "--dev", *args]
    print("+", " ".join(argv), flush=True)
    host = _option(args, "--host", "127.0.0.1")
    shown = f"[{host}]" if ":" in host else host
    print(
        f"overview: http://{shown}:{_option(args, '--port', '8080')}/ — the demo's cards, "
        "advanced by the App's worker as you watch (Ctrl-C stops the server)",
        flush=True,
    )
    server = subprocess.Popen(argv, cwd=ROOT)
    while True:
        try:
            sys.exit(server.wait())
        except KeyboardInterrupt:
            continue  # Ctrl-C reached the server too; wait for its graceful shutdown


# What the suite installs through apt where it can: Debian's Chromium (browser tests), acl
# (setfacl: the agent user's way through a closed HOME) and sudo (the runner-like user).
APT_PACKAGES = {"chromium": CHROMIUM, "acl": "/usr/bin/setfacl", "sudo": "/usr/bin/sudo"}


def install_system_packages() -> None:
    """The APT_PACKAGES that are missing, where apt-get can add them."""
    missing = [name for name, path in APT_PACKAGES.items() if not Path(path).exists()]
    if not missing:
        return
    apt = shutil.which("apt-get")
    root = hasattr(os, "geteuid") and os.geteuid() == 0
    sudo = shutil.which("sudo")
    if apt is not None and not root and sudo is not None:
        root = subprocess.call([sudo, "-n", "true"], stderr=subprocess.DEVNULL) == 0
        prefix = [sudo, "-n"]
    else:
        prefix = []
    if apt is None or not root:
        print(
            f"system packages: {', '.join(missing)} missing and apt-get cannot install them "
            "here (needs apt-get and root or sudo -n); the tests that need them skip",
            flush=True,
        )
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    argv = [*prefix, apt, "install", "-y", "-q", *missing]
    print("+", " ".join(argv), flush=True)
    if subprocess.call(argv, env=env) == 0:
        return
    # A fresh machine may have no package lists yet: read them once, then try again.
    print("+", " ".join([*prefix, apt, "update", "-q"]), flush=True)
    if subprocess.call([*prefix, apt, "update", "-q"], env=env) != 0 or (
        subprocess.call(argv, env=env) != 0
    ):
        print("system packages: the install failed (see above); the tests that need them skip")


def test(args: list[str]) -> None:
    install("dev")
    install_agents()
    install_system_packages()
    _run(BIN / "ruff", "check", ".")
    _run(BIN / "ruff", "format", "--check", ".")
    # Coverage follows pairbot into its subprocesses, and with it into the agents it runs as
    # another OS user (pairbot-agent): their data goes to a fresh directory every user may
    # write, not into this checkout, where they could not.
    data = Path(tempfile.mkdtemp(prefix="pairbot-coverage-"))
    data.chmod(0o777)
    os.environ["COVERAGE_FILE"] = str(data / ".coverage")
    # Two workers a core: a worker spends much of its time waiting on the git, agent and server
    # processes its tests start (with one a core the suite kept 1.4 of 2 cores busy). Tests
    # sharing a scarce resource name an xdist_group so they land on one worker. `-n 0` in args
    # runs serially.
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    workers = str(2 * (cores or 1))
    pytest: list[str | Path] = [BIN / "pytest", "-n", workers, "--dist", "loadgroup", "--cov"]
    # mypy (half a minute on one core from a cold cache) runs beside the tests, for the same
    # reason; its output is printed after theirs.
    with tempfile.TemporaryFile("w+") as typed:
        print("+", BIN / "mypy", "(beside the tests)", flush=True)
        mypy = subprocess.Popen([BIN / "mypy"], cwd=ROOT, stdout=typed, stderr=subprocess.STDOUT)
        print("+", *pytest, "--cov-report=term", *args, flush=True)
        tested = subprocess.call([*pytest, "--cov-report=term", *args], cwd=ROOT)
        typed_code = mypy.wait()
        typed.seek(0)
        print("+", BIN / "mypy", f"\n{typed.read()}", end="", flush=True)
    if tested or typed_code:
        sys.exit(tested or typed_code)


def main() -> None:
    verbs = {"start": start, "test": test}
    if len(sys.argv) < 2 or sys.argv[1] not in verbs:
        sys.exit("usage: python3 dev.py start|test [args...]")
    verbs[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    main()
