"""A step's rule files written where the agent runs (docker, remote), before it starts.

codex's and gemini's bounded rules are files (app/runtime/rules/): a CODEX_HOME holding an
execpolicy rule, a `--policy` file. On a docker or remote locus the agent's disk is not
pairbot's, so `write_rules` puts them there through the swerex runtime, in the step's run
directory (a fresh `mktemp -d`, 0700, of the user the agent runs as):

    <run dir>/rules/              0700, made before anything is written into it
    <run dir>/rules/<file>        0600 (umask 077), decoded from a base64 copy sent with
                                  swerex's write_file, which is then removed

The directory's path is only known once the run directory exists, so the launcher hands over
a `RulesFor` and the rules it returns (argv, environment) are added to the request here. The
directory goes with the run directory when the step ends (protocol.finish_command), whatever
way it ends. Any failure is a `RexError` before the launcher script is written: the agent is
never started without its rules.
"""

from __future__ import annotations

import base64
import shlex
from pathlib import PurePosixPath

from app.runtime.rex.errors import RexError
from app.runtime.rex.follow import RunDir
from app.runtime.rules import AgentRules, RulesFor

__all__ = ["RULES_SUBDIR", "write_rules"]

RULES_SUBDIR = "rules"


async def write_rules(run: RunDir, rules_for: RulesFor) -> AgentRules:
    """The rules for `run`'s step, their files written in `<run dir>/rules` on the agent's side."""
    where = f"{run.path}/{RULES_SUBDIR}"
    rules = rules_for(where)
    if not rules.files:
        return rules
    names = [_checked(name) for name in rules.files]
    timeout = run.request_timeout_s
    # Made by the session's user, like the run directory itself; an agent with an OS user of its
    # own gets both with the run directory's `chown -R` when it is launched.
    await run.connection.execute(
        "create the agent's rules directory", f"umask 077 && mkdir {shlex.quote(where)}", timeout
    )
    for index, text in enumerate(rules.files.values()):
        encoded = base64.b64encode(text.encode("utf-8")).decode("ascii")
        await run.connection.write_file(
            "write the agent's rule files", f"{where}/.{index}.b64", encoded, timeout
        )
    await run.connection.execute("write the agent's rule files", _decode(where, names), timeout)
    return rules


def _checked(name: str) -> str:
    """A file name relative to the rules directory, never outside it."""
    path = PurePosixPath(name)
    if not name or path.is_absolute() or ".." in path.parts:
        raise RexError(f"could not write the agent's rule files: {name!r} is not a relative path")
    return path.as_posix()


def _decode(where: str, names: list[str]) -> str:
    """The script turning each staged `.<index>.b64` into its file (0600, parents 0700)."""
    lines = [f"cd {shlex.quote(where)} || exit 90", "umask 077"]
    for index, name in enumerate(names):
        target = shlex.quote(name)
        parent = PurePosixPath(name).parent.as_posix()
        if parent != ".":
            lines.append(f"mkdir -p {shlex.quote(parent)} || exit 91")
        lines.append(f"base64 -d .{index}.b64 >{target} || exit 92")
        lines.append(f"rm -f .{index}.b64")
    return "\n".join(lines)
