"""`python -m action`: one invocation of the composite Action, one step of one card or batch.

    read the Actions environment and the event      action.context, action.event
    mask every secret before anything is printed    ::add-mask:: (action.workflow)
    a comment: its author's permission, and 👀      action.early — the first API requests,
    for a command that runs                         before the lock and the engine load
    take the `pair-state` lock (a pushed commit)    action.statebranch — held elsewhere:
                                                    a tick exits as nothing-ready, a command
                                                    waits, bounded
    pull the run-state, act on the intent           app.cycle.card_cycle (one step at most)
    push the run-state, release the lock            even when the step failed
    write outputs and the job summary               status, card, transition, pr

The run itself is the CI run driver's (`action.run.driver.drive`), shared with
`python -m action.azure`; what is GitHub's is `action.github_actions.GitHubActions` and the
workflow commands (`action.workflow.WorkflowCommands`).

A command or scope decision from a comment (`issue_comment`, or the App's `repository_dispatch`
carrying the comment) that a `UserError` stops is answered on that comment once, with the App's
text under the App's marker (`app.domain.intake.answers`: a re-run edits it); the `::error::`
line and exit code 2 stay. A tick is never answered: no person asked for it.

The agent's streamed output goes into a collapsible log group with workflow commands stopped,
so nothing an agent prints can set an output, add a mask or end the group. Exit codes: 0 for a
step taken or nothing to do, 1 for a blocked step, an operator error or a host or git failure,
2 for a user error.

Every failure pairbot expects (its own errors, a host's, git's: `app.failures`) ends the run as
ONE `::error::` line that says what failed, where, and what to do next; the traceback is printed
only when the run has debug logging on (`RUNNER_DEBUG=1`, GitHub's "Re-run with debug
logging"). A command carries the delivery it came in, so a re-run is recognised: the App's
webhook delivery for a dispatch (this run's id when the dispatch carries none), the comment's id
for a comment the Action saw itself.

What runs before the first API request is kept light (no pydantic, no githubkit, no asyncio):
the context, the intake and, for a comment, `action.early`'s bare httpx requests. The engine,
the hosts and the state branch load after it, and an idle tick never loads the hosts at all.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TextIO

from action.github_actions import GitHubActions
from action.run.driver import drive
from action.workflow import WorkflowCommands


def main(env: Mapping[str, str] | None = None, stream: TextIO | None = None) -> int:
    """Run one invocation; returns the process exit code."""
    log = WorkflowCommands(stream or sys.stdout)
    return drive(dict(os.environ if env is None else env), log, GitHubActions.start)


if __name__ == "__main__":
    sys.exit(main())
