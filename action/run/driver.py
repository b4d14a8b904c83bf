"""One CI run, from its settings to its last log line, written once for both entries.

    platform = start(env, log)     the settings, read once; a bad one is one error line
    mask every secret              before anything else is printed
    intent = platform.work()       the event or the notification (GitHub may send a comment's
                                   👀 here: the first API request, before the lock)
    ignored?                       the outcome at once: no lock, no engine, no hosts
    the step                       under the `pair-state` lock (`action.run.locked`)
    publish                        the outputs and the summary, then one closing line

Every failure pairbot expects (its own errors, a host's, git's: `app.failures`) ends the run as
ONE error line that says what failed and what to do next; the traceback is printed only with
the CI's debug logging on. A failure pairbot does not expect is a bug: it propagates, traceback
and all. Exit codes: 0 for a step taken or nothing to do, 1 for a blocked step, an operator
error or a host or git failure, 2 for a user error.

Start-up stays light by structure: this module and the platforms' settings load no pydantic,
engine, host or asyncio. Two named seams load the rest when a run needs it: the step under the
lock (`action.run.locked`, once the event asks for one) and the explanation of a failure
(`app.failures`, which loads the git runner).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import TypeVar

from action.run.outcome import Outcome, closing_line, ignored_reason, summary_markdown
from action.run.platform import CiPlatform, LogCommands
from app.errors import PairbotError

__all__ = ["drive"]

Log = TypeVar("Log", bound=LogCommands)


def drive(env: dict[str, str], log: Log, start: Callable[[dict[str, str], Log], CiPlatform]) -> int:
    """Run one invocation of the CI entry whose platform `start` builds on `log`; the exit
    code."""
    try:
        platform = start(env, log)
    except PairbotError as err:  # a setting: nothing has run, nothing is masked yet
        log.error(str(err))
        return err.exit_code
    for secret in platform.settings.secrets():
        log.mask(secret)
    try:
        outcome = _run(platform, env)
    except Exception as err:
        outcome = _failed(err, platform)
    platform.publish(outcome, summary_markdown(outcome, platform.pull_ref))
    log.say(closing_line(outcome))
    return outcome.code


def _run(platform: CiPlatform, env: dict[str, str]) -> Outcome:
    intent = platform.work()
    reason = ignored_reason(intent)
    if reason is not None:
        return Outcome(status="ignored", message=reason)
    # The seam: the lock, the run-state and (for a run with work) the engine load from here.
    from action.run.locked import run_step  # noqa: PLC0415

    return run_step(platform, intent, env)


def _failed(err: Exception, platform: CiPlatform) -> Outcome:
    """A failure pairbot expects as one error line and its outcome; a bug is re-raised."""
    from app.failures import explain  # noqa: PLC0415  # the failure path's own seam

    explained = explain(err)
    if explained is None:
        raise err  # a bug: its traceback is what a report needs
    if platform.settings.debug:
        traceback.print_exc()
    platform.log.error(explained.line)
    return Outcome(status="error", message=explained.line, code=explained.code)
