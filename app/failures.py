"""One line for every failure pairbot expects, and the exit code it ends with. Pure.

Each surface (the CLI, the Action, the App's worker) ends an expected failure the same way:
one line that says what failed, where, and what to do next, and the documented exit code —
never a traceback (the CLI's `--debug` and the Action's `RUNNER_DEBUG=1` add one for a person
who asks). Expected means one of:

    app.errors.PairbotError     the product's own tree: `str(err)` already names the remedy;
                                its `exit_code` (2 user, 3 lock held, 1 operator)
    hosts.errors.HostError      a code host or work-item host refused or failed: the message
                                names the call (`POST /repos/o/r/issues/7/reactions: GitHub
                                answered 404`); the remedy depends on the kind; exit 1, or 2
                                for `HostUnsupported` (a host the user's config names)
    hosts.git.GitError          a git command failed: its message names the command and git's
                                (scrubbed) stderr; exit 1

Anything else is a bug and keeps its traceback. The messages come from `hosts/`, which scrubs
every secret it knows before raising; nothing here adds one. A multi-line message (git's
stderr) is folded into one line and capped, so a log or an `::error::` annotation stays one
readable line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from app.errors import PairbotError, UserError
from hosts.errors import (
    Conflict,
    Forbidden,
    HostError,
    HostUnavailable,
    HostUnsupported,
    NotFound,
    RateLimited,
    Unsupported,
)
from hosts.git import GitError

MAX_LINE: Final = 1000  # git's stderr can be pages long; the line names the start of it


@dataclass(frozen=True)
class Explained:
    """An expected failure as one line (no prefix) and the exit code it ends with."""

    line: str
    code: int


def one_line(text: str, limit: int = MAX_LINE) -> str:
    """`text` folded onto one line (lines joined with ' | '), at most `limit` characters."""
    folded = " | ".join(part.strip() for part in text.splitlines() if part.strip())
    return folded if len(folded) <= limit else folded[: limit - 1] + "…"


def explain(error: BaseException) -> Explained | None:
    """The line and exit code of an expected failure; None for anything else (a bug)."""
    if isinstance(error, UserError):
        # Written for the person who typed or wrote it. A ConfigError lists one invalid key a
        # line and a malformed command adds its usage (docs/cli.md): kept as written.
        return Explained(str(error) or type(error).__name__, error.exit_code)
    if isinstance(error, PairbotError):
        # Operator errors may carry git's stderr (the Action's state branch): one line.
        return Explained(one_line(str(error) or type(error).__name__), error.exit_code)
    if isinstance(error, HostError):
        said = one_line(str(error) or type(error).__name__)
        code = 2 if isinstance(error, HostUnsupported) else 1
        return Explained(f"{_host_what(error)}: {said}; {_host_remedy(error)}", code)
    if isinstance(error, GitError):
        said = one_line(str(error))
        return Explained(f"git failed: {said}; {_git_remedy(error)}", 1)
    return None


def _host_what(error: HostError) -> str:
    if isinstance(error, NotFound):
        return "not found on the host"
    if isinstance(error, Forbidden):
        return "refused by the host"
    if isinstance(error, RateLimited):
        return "rate-limited by the host"
    if isinstance(error, HostUnavailable):
        return "the host is unavailable"
    if isinstance(error, Conflict):
        return "the host's state moved"
    if isinstance(error, HostUnsupported | Unsupported):
        return "not supported by the host"
    return "the host call failed"


def _host_remedy(error: HostError) -> str:
    if isinstance(error, NotFound):
        return "check that it still exists and that pairbot's credential can see it"
    if isinstance(error, Forbidden):
        return (
            "check that pairbot's credential (token or App installation) has the permission "
            "this call needs (docs/hosts.md)"
        )
    if isinstance(error, RateLimited):
        wait = f"{error.retry_after:.0f}s" if error.retry_after is not None else "a while"
        return f"run again after {wait}; nothing was lost"
    if isinstance(error, HostUnavailable):
        return "run again later; nothing was lost (the run-state records what was done)"
    if isinstance(error, Conflict):
        return (
            "run again (the next step starts from the host's current state); if it repeats, "
            "check the branch's protection rules"
        )
    if isinstance(error, HostUnsupported):
        return "set `hosts:` in .pair/config.yaml to one of the available adapters"
    if isinstance(error, Unsupported):
        return "this host cannot do it; use another host binding or leave the option out"
    return "run again; if it keeps failing, check the host's status page"


def _git_remedy(error: GitError) -> str:
    if error.timed_out:
        return "the remote did not answer in time; run again later"
    if error.returncode is None:
        return "install git (or put it on PATH) and run again"
    return (
        "check the remote, the credential and the network (a protected or moved branch "
        "refuses a push), then run again"
    )
