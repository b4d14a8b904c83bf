"""Who the agent runs as: a dedicated unprivileged OS user wherever pairbot can switch to one.

Any process of pairbot's own OS user can read `/proc/<pid>/environ` of pairbot and of every
ancestor (the runner's step shell included), where the forge token, the App's private key and
the webhook secret sit. Filtering the agent's environment cannot hide those; another OS user
can. So a `local` agent runs as `pairbot-agent` (or PAIR_AGENT_USER) when pairbot can become it:

    decide(setting, locus, facts)          pure: the plan for one step
      docker / remote locus  → Contained    the container or the server is the boundary
      PAIR_ISOLATION=off     → NoIsolation  the operator's explicit choice: said nowhere
      root                   → Switch via setpriv (else runuser, else sudo)
      non-root, `sudo -n`    → Switch via sudo -n -u <user> (GitHub-hosted runners)
      neither                → NoIsolation  warning once per run; `required` refuses instead

The thin I/O around it (`probe_host`, `AgentAccount`) finds the facts, creates the user on
demand (`useradd --system`, no login shell, no home of its own: every spawn gets a fresh HOME),
and opens the way to a step's files (lending.py lends them and takes them back). The switch
never carries a secret in argv: the agent's environment travels in a 0600 file the runtime
hands over.

No process of a step outlives it. A process group is not enough (an agent can `setsid` or
double-fork out of it), so whatever runs code of the agent's — the agent, the project's test
command, the proof-of-work — starts as the first process of a PID namespace of its own
(`unshare --pid --fork --mount-proc --kill-child`, util-linux): when that process ends, the
kernel kills every process left in the namespace, and the namespace's own /proc shows
concurrent steps nothing of each other. `contain` builds that prefix; a small watchdog in it
kills the namespace too when pairbot itself dies mid-step. Root (or sudo) makes the namespace
and then becomes the agent user inside it; a plain user gets one through a user namespace where
the kernel allows it (`HostFacts.userns`), and otherwise only the process group, said in the
warning.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from app.errors import UserError

__all__ = [
    "CLEAN_PATH",
    "DEFAULT_AGENT_USER",
    "HOME_VARS",
    "AgentAccount",
    "Contained",
    "HostFacts",
    "NoIsolation",
    "Plan",
    "Refused",
    "Setting",
    "Switch",
    "contain",
    "decide",
    "parse_setting",
    "probe_host",
    "run_tool",
    "succeeds",
    "user_exists",
]

DEFAULT_AGENT_USER: Final = "pairbot-agent"
# The PATH a process switched to the agent user starts with, before its own environment is read:
# it inherits nothing of pairbot's.
CLEAN_PATH: Final = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Locations of pairbot's own user that an agent with a HOME of its own must not inherit.
HOME_VARS: Final = frozenset(
    {"XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR"}
)
Setting = Literal["auto", "off", "required"]
_SETTINGS: Final[tuple[Setting, ...]] = ("auto", "off", "required")
_USER_NAME = re.compile(r"[a-z_][a-z0-9_-]{0,30}")
_COMMAND_TIMEOUT_S: Final = 120.0


@dataclass(frozen=True)
class HostFacts:
    """What this machine allows: pairbot's euid, passwordless sudo, the switch tools, and
    whether a PID namespace can be made (`pidns`: as root or through sudo; `userns`: as
    pairbot's own user, through an unprivileged user namespace)."""

    euid: int
    sudo: bool
    setpriv: bool
    runuser: bool
    pidns: bool = False
    userns: bool = False


# A PID namespace whose first process is the command: when it ends, the kernel kills the rest;
# --kill-child also ends it if unshare itself is killed; its own /proc hides other steps.
_PID_NAMESPACE: Final = ("unshare", "--pid", "--fork", "--mount-proc", "--kill-child")
# The same, for a user who is not root: a user namespace maps it to itself (no privilege gained).
_USER_PID_NAMESPACE: Final = ("unshare", "--user", "--map-current-user", *_PID_NAMESPACE[1:])

# Runs first, as the namespace's creator. When asked (`record`), it writes the process group to
# `group` before anything starts, for the launcher to publish as `pgid` once it runs as the agent
# (polled earlier, a group of root's processes would look dead to the agent user), and unshare's
# pid to `leader` (the runtime waits for it to end). It starts the rest (unshare) as its child —
# stdin kept, which an asynchronous list would lose to /dev/null — and watches: once a second,
# if pairbot died, it SIGKILLs the whole group, the namespace's first process included
# (unshare's --kill-child cannot be relied on: switching user clears the parent-death signal),
# which ends the namespace. It exits with unshare's status the moment unshare ends, stopping the
# watch (TERM, which its trap passes on to the pending `sleep`), so nothing of it outlives the
# step either; the watch waits in `/`, never in the project.
_WATCH: Final = (
    "w=$1; r=$2; shift 2; read -r _ _ _ _ g _ </proc/$$/stat; umask 022; "
    '[ -z "$r" ] || echo "$g" >"$r/group" || exit 95; '
    'exec 3<&0; "$@" <&3 3<&- & u=$!; exec 3<&-; '
    '[ -z "$r" ] || echo "$u" >"$r/leader"; '
    "( cd / || exit; trap 'kill \"$z\" 2>/dev/null; exit 0' TERM; "
    'while kill -0 "$w" 2>/dev/null && kill -0 "$u" 2>/dev/null; do '
    'sleep 1 & z=$!; wait "$z"; done; '
    'kill -0 "$u" 2>/dev/null && kill -s KILL -- "-$g" ) </dev/null >/dev/null 2>&1 & d=$!; '
    'wait "$u"; s=$?; kill -TERM "$d" 2>/dev/null; exit "$s"'
)


@dataclass(frozen=True)
class Switch:
    """Run the agent as `user`, becoming it `via` a tool; `admin` prefixes privileged commands.

    `namespace`: each step gets a PID namespace, made as root (directly or through sudo), inside
    which root becomes the user by `inner` (setpriv, else runuser)."""

    user: str
    via: Literal["setpriv", "runuser", "sudo"]
    namespace: bool = False
    inner: Literal["setpriv", "runuser"] = "setpriv"

    def argv(self) -> tuple[str, ...]:
        """The prefix that runs a command as the agent user (no secret: names only)."""
        if self.via == "setpriv":
            # --no-new-privs: nothing the agent runs can gain privileges back (setuid sudo).
            return (
                "setpriv",
                f"--reuid={self.user}",
                f"--regid={self.user}",
                "--init-groups",
                "--no-new-privs",
                "--",
            )
        if self.via == "runuser":
            return ("runuser", "-u", self.user, "--")
        return ("sudo", "-n", "-u", self.user, "--")

    def admin(self) -> tuple[str, ...]:
        """The prefix for useradd/chown/rm: nothing as root, `sudo -n` otherwise."""
        return ("sudo", "-n") if self.via == "sudo" else ()

    def contained(self, watch_pid: int, record: str = "") -> tuple[str, ...]:
        """The prefix that runs a command as the agent user in a PID namespace of its own (the
        plain switch when this machine cannot make one); see `contain`."""
        if not self.namespace:
            return self.argv()
        inner = Switch(self.user, self.inner).argv()
        return contain(self.admin(), _PID_NAMESPACE, inner, watch_pid, record)


def contain(
    admin: Sequence[str],
    namespace: Sequence[str],
    inner: Sequence[str],
    watch_pid: int,
    record: str = "",
) -> tuple[str, ...]:
    """`admin` + the watchdog + `namespace` + `inner`: a prefix for one step's command.

    `watch_pid` is pairbot's pid (the watchdog ends the namespace when it dies); `record`, when
    set, is the detached runtime's run directory, where the prefix writes `group` and `leader`
    (see `_WATCH`). Names and numbers only: nothing secret in argv.
    """
    watch = ("/bin/sh", "-c", _WATCH, "pairbot-contain", str(watch_pid), record)
    return (*admin, *watch, *namespace, "--", *inner)


@dataclass(frozen=True)
class NoIsolation:
    """The agent runs as pairbot's own user; `warning` (if any) is said once per run.

    `namespace`: the kernel lets pairbot's user make a PID namespace (a user namespace maps it
    to itself), so even so no process of a step outlives it."""

    warning: str | None
    namespace: bool = False

    def contained(self, watch_pid: int, record: str = "") -> tuple[str, ...]:
        """The prefix that bounds a step's processes (empty when the kernel forbids it)."""
        if not self.namespace:
            return ()
        return contain((), _USER_PID_NAMESPACE, (), watch_pid, record)


@dataclass(frozen=True)
class Contained:
    """The locus itself isolates the agent (a container, another machine)."""

    locus: str


@dataclass(frozen=True)
class Refused:
    """PAIR_ISOLATION=required and no way to isolate: no agent starts."""

    reason: str


Plan = Switch | NoIsolation | Contained | Refused


def parse_setting(env: Mapping[str, str]) -> tuple[Setting, str]:
    """PAIR_ISOLATION (auto | off | required) and PAIR_AGENT_USER from `env`; `UserError` when
    either is malformed. Read from the caller's environment only: a repository's files cannot
    turn isolation off."""
    raw = env.get("PAIR_ISOLATION", "").strip().lower() or "auto"
    if raw not in _SETTINGS:
        raise UserError(
            f"PAIR_ISOLATION={raw!r} is not a setting; use auto (the default), off or required"
        )
    user = env.get("PAIR_AGENT_USER", "").strip() or DEFAULT_AGENT_USER
    if not _USER_NAME.fullmatch(user) or user == "root":
        raise UserError(
            f"PAIR_AGENT_USER={user!r} is not a usable user name; use lower-case letters, digits, "
            "'_' or '-' (at most 31), never root"
        )
    setting: Setting = "auto" if raw == "auto" else "off" if raw == "off" else "required"
    return setting, user


def warning_line(reason: str, namespace: bool = False) -> str:
    """The one line a run says when its agent shares pairbot's OS user."""
    left = "" if namespace else ", and a process it detaches can outlive its step"
    return (
        f"pairbot: warning: cannot isolate the agent: it runs as pairbot's own OS user "
        f"({reason}), so it can read the credentials in pairbot's environment{left}; run as "
        "root or with passwordless sudo, or use `locus: docker` (docs/security.md)"
    )


def decide(setting: Setting, locus: str, facts: HostFacts, user: str) -> Plan:
    """The plan for one step's agent. Pure."""
    if locus in ("docker", "remote"):
        return Contained(locus)
    if setting == "off":
        return NoIsolation(None, facts.userns)
    # Inside a namespace, root becomes the user itself: setpriv, else runuser.
    inner: Literal["setpriv", "runuser"] = "setpriv" if facts.setpriv else "runuser"
    can_enter = facts.setpriv or facts.runuser
    if facts.euid == 0:
        if can_enter:
            return Switch(user, inner, facts.pidns, inner)
        if facts.sudo:
            return Switch(user, "sudo")
        reason = "root, but neither setpriv, runuser nor sudo is installed"
    elif facts.sudo:
        return Switch(user, "sudo", facts.pidns and can_enter, inner)
    else:
        reason = "not root and no passwordless sudo"
    if setting == "required":
        return Refused(f"PAIR_ISOLATION=required, but the agent cannot run as {user}: {reason}")
    return NoIsolation(warning_line(reason, facts.userns), facts.userns)


# --- the thin I/O ------------------------------------------------------------------------------


def succeeds(argv: Sequence[str]) -> bool:
    """Whether `argv` exits 0 promptly without a terminal (`sudo -n true`: passwordless sudo)."""
    try:
        done = subprocess.run(
            list(argv), stdin=subprocess.DEVNULL, capture_output=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def probe_host() -> HostFacts:
    """This machine's facts; `sudo -n true` is tried only when pairbot is not root, and a PID
    namespace is tried for real (a container may forbid unshare even to root)."""
    euid = os.geteuid()
    sudo = euid != 0 and shutil.which("sudo") is not None and succeeds(["sudo", "-n", "true"])
    unshare = shutil.which("unshare") is not None
    if euid == 0:
        pidns = unshare and succeeds([*_PID_NAMESPACE, "true"])
    else:
        pidns = sudo and unshare and succeeds(["sudo", "-n", *_PID_NAMESPACE, "true"])
    userns = euid != 0 and unshare and succeeds([*_USER_PID_NAMESPACE, "true"])
    return HostFacts(
        euid=euid,
        sudo=sudo,
        setpriv=shutil.which("setpriv") is not None,
        runuser=shutil.which("runuser") is not None,
        pidns=pidns,
        userns=userns,
    )


def run_tool(argv: Sequence[str], what: str) -> None:
    """Run one of isolation's tools (chown, setfacl, useradd…); a failure is one UserError line."""
    try:
        done = subprocess.run(
            list(argv),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=_COMMAND_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError(f"agent isolation: could not {what}: {exc}") from None
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise UserError(
            f"agent isolation: could not {what} (`{argv[0]}` exit {done.returncode}): "
            f"{said[-1] if said else 'no output'}"
        )


class AgentAccount:
    """The agent user on this machine: created once, a fresh HOME per spawn, files lent."""

    def __init__(
        self, switch: Switch, *, setfacl: Callable[[], str | None] = lambda: shutil.which("setfacl")
    ) -> None:
        """`setfacl` finds the tool that opens a closed parent directory to the agent."""
        self.switch = switch
        self._ids: tuple[int, int] | None = None
        self._setfacl = setfacl

    def ensure(self) -> tuple[int, int]:
        """(uid, gid) of the agent user, creating it (`useradd --system`) when missing."""
        if self._ids is not None:
            return self._ids
        name = self.switch.user
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            try:
                run_tool(
                    [
                        *self.switch.admin(),
                        "useradd",
                        "--system",
                        "--user-group",
                        "--no-create-home",
                        "--home-dir",
                        "/nonexistent",
                        "--shell",
                        "/usr/sbin/nologin",
                        "--comment",
                        "pairbot agent",
                        name,
                    ],
                    f"create the agent user {name}",
                )
            except UserError:
                if not user_exists(name):  # else another pairbot created it meanwhile
                    raise
            entry = pwd.getpwnam(name)
        if entry.pw_uid == 0:
            raise UserError(f"agent isolation: the agent user {name} has uid 0; use another user")
        self._ids = (entry.pw_uid, entry.pw_gid)
        return self._ids

    def make_home(self, files: Callable[[Path], Mapping[str, str]] | None = None) -> Path:
        """A fresh HOME owned by the agent user (0700), with its git trusting the worktree, and
        `files(home)` written in it (0600) before it is handed over: pairbot without root
        cannot write there afterwards."""
        uid, gid = self.ensure()
        # /tmp, not pairbot's TMPDIR: that may be a directory only pairbot's user can enter.
        home = Path(tempfile.mkdtemp(prefix="pairbot-agent-home-", dir="/tmp"))
        # The worktree's git directory is pairbot's: the agent's own git must accept it.
        (home / ".gitconfig").write_text("[safe]\n\tdirectory = *\n")
        for name, text in (files(home) if files is not None else {}).items():
            (home / name).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            descriptor = os.open(home / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                handle.write(text)
        # Its own temporary directory too: pairbot's TMPDIR may be one only pairbot can write
        # (claude, for one, makes its scratch directory there and stops when it cannot).
        (home / "tmp").mkdir(mode=0o700)
        self.chown([home], uid, gid)  # recursive: the tmp directory too
        return home

    def remove_home(self, home: Path) -> None:
        """Remove a HOME made by `make_home` (whatever the agent left in it)."""
        run_tool([*self.switch.admin(), "rm", "-rf", "--", str(home)], f"remove {home}")

    def chown(self, paths: Sequence[Path], uid: int, gid: int) -> None:
        """`chown -hR`: symbolic links themselves, never what they point at."""
        if paths:
            run_tool(
                [*self.switch.admin(), "chown", "-hR", f"{uid}:{gid}", "--", *map(str, paths)],
                f"hand {paths[0]} to uid {uid}",
            )

    def setfacl(self) -> str | None:
        """Where setfacl is (package acl), None when it is not installed."""
        return self._setfacl()

    def open_way(self, paths: Sequence[Path], skip: Collection[Path] = ()) -> None:
        """Let the agent user pass through every directory above `paths` that other users
        cannot enter (a 0750 HOME such as a runner's holds the workspace): an ACL entry for
        that one user, search only (`setfacl -m u:<user>:x`), never a wider mode. `skip`: the
        directories a live lending lets the agent write in (lending.py), left as they are."""
        closed: list[Path] = []
        for path in (p for p in paths if p.exists()):
            for parent in reversed(path.absolute().parents):
                if parent in skip:
                    continue
                if parent not in closed and not parent.stat().st_mode & 0o001:
                    closed.append(parent)
        if not closed:
            return
        tool = self.setfacl()
        if tool is None:
            raise UserError(
                f"agent isolation: {self.switch.user} cannot reach {paths[0]}: {closed[0]} is "
                "closed to other users and setfacl (package acl) is not installed; install it, "
                f"or open the directory (chmod o+x {closed[0]}), or set PAIR_ISOLATION=off"
            )
        user = self.switch.user
        run_tool(
            [*self.switch.admin(), tool, "-m", f"u:{user}:x", "--", *map(str, closed)],
            f"let {user} through {closed[0]}",
        )


def user_exists(name: str) -> bool:
    """Whether the OS user `name` exists."""
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True
