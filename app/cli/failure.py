"""How `pairbot` ends on a failure it expected: one line on stderr, and the failure's exit code.

Loaded by `app.cli.entry.main` only once something failed, so a command that succeeds never
imports the hosts' and git's error types (`app.failures`) or `traceback`.
"""

from __future__ import annotations

import sys
import traceback

from app.failures import explain


def end(err: Exception, *, debug: bool) -> int | None:
    """Print `err`'s one line (after its traceback when `debug`) and return its exit code;
    None when pairbot did not expect it (a bug, whose traceback the caller lets through)."""
    explained = explain(err)
    if explained is None and not isinstance(err, OSError):
        return None
    # An OS error (a directory where a file belongs, no permission, disk full) names its
    # path; everything else expected names what failed and what to do next.
    line, code = (explained.line, explained.code) if explained else (str(err), 1)
    if debug:
        traceback.print_exc()
    print(f"pairbot: {line}", file=sys.stderr)
    return code
