"""The three postures pairbot ships into, as OS users of this machine, for end-to-end flows.

    root     a container job or a self-hosted runner running as root: pairbot switches to
             `pairbot-agent` with setpriv (or runuser)
    runner   a GitHub-hosted runner: user `pbt-runner` with `NOPASSWD: ALL` in /etc/sudoers.d,
             HOME 0750, the workspace under HOME (`~/work/<repo>/<repo>`); pairbot switches
             through `sudo -n -u pairbot-agent` and opens the closed HOME with setfacl
    plain    a laptop: user `pbt-plain`, no sudo, HOME 0750; pairbot cannot switch users and
             says so once per run

`ensure_users()` makes the two users with useradd (reusing them when present) and writes the
runner's sudoers rule; `remove_sudoers()` takes the rule away again. Only root can do either,
so the flows built on them skip elsewhere. Several workers of one suite run flows as these
users at once (`-n` without `--dist loadgroup` spreads a module over them): `users_held()`
shares the users between them, so the first resets the runner's HOME and the last removes the
rule, and none strips the HOME's ACL (the agent's way to its workspace) from another's flow.

`Posture.run` / `Posture.popen` start a command as the posture's user through `setpriv`
(exec, no session or PAM of its own: a signal reaches pairbot itself) with an environment
built from nothing (`Posture.env`): no PAIR_ISOLATION — the product's default is the point —
and none of the suite's COVERAGE_* / COV_CORE_* variables, which would make a process of
another user try to write the repository's .coverage files. PYTHONPATH names this checkout,
so the venv's console script (an editable install of whichever tree built the venv) imports
the code under test; the agent inherits it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

from app.runtime import isolation

REPOSITORY: Final = Path(__file__).resolve().parents[2]
VENV_BIN: Final = Path(sys.executable).parent
# What a runner or a container job has on PATH (sbin included: useradd, runuser live there on
# Debian), with the venv's bin first as an activated venv or an installed tool puts it.
SYSTEM_PATH: Final = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
RUNNER: Final = "pbt-runner"
PLAIN: Final = "pbt-plain"
AGENT_USER: Final = "pairbot-agent"  # the product's default (isolation.DEFAULT_AGENT_USER)
CANNOT_ISOLATE: Final = "cannot isolate the agent"  # the product's one-line warning says this
SUDOERS: Final = Path("/etc/sudoers.d")

Name = Literal["root", "runner", "plain"]


def ensure_user(name: str, *, sudoer: bool, reset: bool = True) -> Path:
    """The user `name` with HOME /home/<name> (0750) and bash, made by useradd unless present;
    with `sudoer`, a `NOPASSWD: ALL` rule of its own in /etc/sudoers.d (as GitHub's `runner`
    has), without, no rule at all. `reset`: its HOME as a fresh runner's (never while a flow
    of another worker runs there). Its HOME."""
    home = Path("/home") / name
    if not isolation.user_exists(name):
        subprocess.run(
            ["useradd", "--create-home", "--home-dir", str(home), "--shell", "/bin/bash", name],
            check=True,
            capture_output=True,
        )
    home.mkdir(exist_ok=True)
    if reset:
        _reset_home(home, name)
    _ensure_sudoers(name, sudoer=sudoer)
    return home


def _reset_home(home: Path, name: str) -> None:
    shutil.chown(home, name, name)
    home.chmod(0o750)  # a hosted runner's HOME: closed to other users (pairbot-agent included)
    if shutil.which("setfacl") is not None:
        # The entry an earlier run's pairbot added for its agent user would open the way before
        # pairbot looks: each run starts from a HOME as closed as a fresh runner's.
        subprocess.run(["setfacl", "-b", str(home)], check=True)


def _ensure_sudoers(name: str, *, sudoer: bool) -> None:
    rule = SUDOERS / name
    if sudoer:
        text = f"{name} ALL=(ALL) NOPASSWD: ALL\n"
        if not rule.exists() or rule.read_text() != text:
            # sudo ignores names with a dot: never half a rule; one staged file per process,
            # so two workers setting the rule up at once cannot take each other's.
            staged = SUDOERS / f".{name}.{os.getpid()}.new"
            staged.write_text(text)
            staged.chmod(0o440)
            staged.replace(rule)
    else:
        rule.unlink(missing_ok=True)


def remove_sudoers(name: str) -> None:
    """Take `name`'s sudoers rule away (the user stays, for the next run to reuse)."""
    (SUDOERS / name).unlink(missing_ok=True)


def ensure_users(*, reset: bool = True) -> None:
    """Both users of the non-root postures."""
    ensure_user(RUNNER, sudoer=True, reset=reset)
    ensure_user(PLAIN, sudoer=False, reset=reset)


USERS_LOCK: Final = Path("/tmp/pbt-postures-users.lock")  # root's, one per machine
_USERS_WAIT_S: Final = 120.0  # another worker's set-up or tear-down: a second or two


@contextlib.contextmanager
def users_held() -> Iterator[None]:
    """Both users, for as long as the caller runs flows as them: the first worker to come
    (an exclusive flock on USERS_LOCK) resets them, the others share them as they are (a
    shared one), and the last to go removes the runner's sudoers rule."""
    descriptor = os.open(USERS_LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        first = _flock(descriptor, fcntl.LOCK_EX, wait=False)
        if not first:
            _flock(descriptor, fcntl.LOCK_SH, wait=True)
        # Not the first: the rule may be gone with a last worker that just left; write it.
        ensure_users(reset=first)
        if first:
            _flock(descriptor, fcntl.LOCK_SH, wait=True)
        yield
        if _flock(descriptor, fcntl.LOCK_EX, wait=False):  # nobody else holds the users
            remove_sudoers(RUNNER)
    finally:
        os.close(descriptor)


def _flock(descriptor: int, kind: int, *, wait: bool) -> bool:
    deadline = time.monotonic() + (_USERS_WAIT_S if wait else 0.0)
    while True:
        try:
            fcntl.flock(descriptor, kind | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                if wait:
                    raise TimeoutError(f"{USERS_LOCK} locked for {_USERS_WAIT_S} s") from None
                return False
            time.sleep(0.05)  # polling a lock with a deadline; flock itself cannot time out


def _coverage(name: str) -> bool:
    return name.startswith(("COVERAGE_", "COV_CORE_"))


@dataclass(frozen=True)
class Posture:
    """Who pairbot runs as, where its workspace and HOME are, and whether it can isolate."""

    name: Name
    user: str
    home: Path
    work: Path  # the directory checkouts go under (a runner's `~/work`, a container's `/__w`)
    isolates: bool
    made: list[Path] = field(default_factory=list, compare=False)  # workspaces, to remove

    @property
    def uid(self) -> int:
        return pwd.getpwnam(self.user).pw_uid

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment a run starts with, built from nothing (see the module docstring)."""
        env = {
            "PATH": f"{VENV_BIN}{os.pathsep}{SYSTEM_PATH}",
            "HOME": str(self.home),
            "USER": self.user,
            "LOGNAME": self.user,
            "LANG": "C.UTF-8",
            "PYTHONPATH": str(REPOSITORY),
        }
        env.update(extra or {})
        leaked = [k for k in env if k == "PAIR_ISOLATION" or _coverage(k)]
        assert not leaked, f"a posture's run must not carry {leaked}"
        return env

    def argv(self, argv: Sequence[str]) -> list[str]:
        """`argv` as this posture's user: setpriv execs it (no session, no PAM, one process)."""
        if self.user == "root":
            return list(argv)
        switch = ["setpriv", f"--reuid={self.user}", f"--regid={self.user}", "--init-groups"]
        return [*switch, "--", *argv]

    def job(self, argv: Sequence[str], env: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
        """A CI job's command and environment, as this user runs it: `env` less the suite's
        coverage hooks, on top of this posture's own (see the module docstring)."""
        kept = {k: v for k, v in env.items() if not _coverage(k)}
        return self.argv(argv), self.env(kept)

    def run(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str] | None = None,
        timeout: float = 120.0,
    ) -> subprocess.CompletedProcess[str]:
        """Run `argv` as this posture's user to the end (bounded by `timeout`)."""
        return subprocess.run(
            self.argv(argv),
            cwd=cwd,
            env=self.env(env),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def popen(
        self, argv: Sequence[str], *, cwd: Path, log: Path, env: Mapping[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        """Start `argv` as this posture's user, its output into `log` (a file: a pipe nobody
        drains would stall a chatty server)."""
        with log.open("wb") as out:
            return subprocess.Popen(
                self.argv(argv),
                cwd=cwd,
                env=self.env(env),
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def own(self, *paths: Path) -> None:
        """Hand `paths` (recursively) to this posture's user."""
        subprocess.run(["chown", "-R", f"{self.user}:{self.user}", *map(str, paths)], check=True)

    def workspace(self, repo: str) -> Path:
        """A fresh workspace directory for `repo`, laid out as GitHub's runners lay it out
        (`<work>/<repo>/<repo>` is the checkout), owned by this user: `<work>/<repo>`."""
        top = self.work / f"{repo}-{uuid.uuid4().hex[:8]}"
        top.mkdir(parents=True)
        self.made.append(top)
        if self.user != "root":
            # `work` itself, then only the new workspace: another flow's workspace beside it
            # may be lent to the agent user at this moment.
            shutil.chown(self.work, self.user, self.user)
            self.own(top)
        return top

    def clean(self) -> None:
        """Remove the workspaces this posture made (whoever owns what is in them)."""
        for top in self.made:
            remove_tree(top)
        self.made.clear()


def posture(name: Name, scratch: Path) -> Posture:
    """The posture `name`; root's HOME and workspace are made under `scratch` (as a container
    job's /github/home and /__w), the others' under their own HOME."""
    if name == "root":
        home = scratch / "github" / "home"
        home.mkdir(parents=True, exist_ok=True)
        return Posture("root", "root", home, scratch / "__w", isolates=True)
    user = RUNNER if name == "runner" else PLAIN
    home = Path("/home") / user
    return Posture(name, user, home, home / "work", isolates=name == "runner")


def remove_tree(path: Path) -> None:
    """Remove a tree whatever users own its files (the agent user's included)."""
    subprocess.run(["rm", "-rf", "--", str(path)], check=False)
