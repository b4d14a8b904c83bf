"""`python -m action.azure`: one run of an Azure Pipelines job, one step of one card or batch.

    read the job's variables                        action.azure.settings (once)
    mask every secret before anything is printed    ##vso[task.setvariable …;issecret=true]
    what the run is for                             BUILD_REASON: Schedule or Manual → a tick;
                                                    ResourceTrigger → the service-hook
                                                    notification (action.azure.hook)
    take the `pair-state` lock (a pushed commit)    action.statebranch.run_locked, as the
                                                    GitHub Action does — held elsewhere: a tick
                                                    exits as nothing-ready, a command waits
    skip a notification already handled             action.deliveries (on the branch)
    act on it                                       app.cycle.card_cycle (one step at most);
                                                    a comment is read back, then authorized as
                                                    the App does (action.comments.handle_comment;
                                                    bots and PAIR_ALLOWLIST by account or id)
    acknowledge it                                  a like on the command's comment once its
                                                    record is pushed (action.acks)
    push the run-state, release the lock            even when the step failed
    write the Markdown summary                      ##vso[task.uploadsummary]

The run itself is the CI run driver's (`action.run.driver.drive`), shared with `python -m
action`; what is Azure's is `action.azure.pipelines.AzurePipelines` and the logging commands
(`action.azure.vso.LoggingCommands`).

pairbot's git (the state branch, card branches) authenticates with the job's token as an
`http.<origin>.extraheader` passed in this process's environment (`hosts.azure_devops.push`),
never in argv, a URL or `.git/config`: the checkout runs with `persistCredentials: false`, and
any credential a checkout did persist is removed before an agent runs.

Every failure pairbot expects ends the run as ONE `##vso[task.logissue type=error]` line that
says what failed and what to do next; the traceback is printed only with `System.Debug` on.
Exit codes: 0 for a step taken or nothing to do, 1 for a blocked step, an operator error or a
host or git failure, 2 for a user error. A command refused by a `UserError` is answered on its
comment once (the App's text and marker).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TextIO

from action.azure.pipelines import AzurePipelines
from action.azure.vso import LoggingCommands
from action.run.driver import drive


def main(env: Mapping[str, str] | None = None, stream: TextIO | None = None) -> int:
    """Run one step; returns the process exit code."""
    log = LoggingCommands(stream or sys.stdout)
    return drive(dict(os.environ if env is None else env), log, AzurePipelines.start)


if __name__ == "__main__":
    sys.exit(main())
