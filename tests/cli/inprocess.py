"""The `pairbot` console script's entry, run in this process: same argv, same exit, same output.

`cli_in_process(*args, cwd=, env=)` is `tests.support.project.cli` without the new process: it
runs `app.cli.entry.run` with the environment `cli` would give the console script
(`agent_env`), in `cwd`, with stdout and stderr captured, and ends the way
`app.cli.entry.main` ends (an argparse exit, an expected failure's one line and code, a bug's
traceback let through). It returns the `CompletedProcess` `cli` would have.

Why: a `pairbot` process costs about 0.2 s of CPU to start (0.35 s with coverage following
it), and the refusal tests run hundreds of them to read one line of stderr. They run in this
process instead; tests/cli/test_cli_errors.py keeps a real console-script run of each kind of
refusal and checks that both ways give byte-for-byte the same result.

Only for commands that start no agent and no server: those belong in a process of their own.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from app.cli import entry
from tests.support.project import PAIRBOT, agent_env


def cli_in_process(
    *args: str, cwd: Path, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """What `cli(*args, cwd=cwd, env=env)` returns, without starting the console script."""
    argv = list(args)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = _main(argv, agent_env(env))
    return subprocess.CompletedProcess([str(PAIRBOT), *argv], code, out.getvalue(), err.getvalue())


def _main(argv: list[str], env: Mapping[str, str]) -> int:
    """`app.cli.entry.main` with its argv and environment passed in, returning the exit code
    it would `sys.exit` with."""
    try:
        return entry.run(argv, env)
    except SystemExit as done:  # argparse's usage errors, --version
        return _exit_code(done.code)
    except KeyboardInterrupt:
        return 130
    except Exception as err:
        failure = importlib.import_module(entry.FAILURE)
        ended: int | None = failure.end(err, debug=entry.wants_debug(argv))
        if ended is None:
            raise  # a bug: the test sees its traceback, as the console script would print it
        return ended


def _exit_code(code: object) -> int:
    """The process exit status `sys.exit(code)` gives."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # sys.exit("message"): printed, status 1
    return 1
