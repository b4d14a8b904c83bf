"""The one error of the SWE-ReX loci: `RexError`, whose `str()` is safe to show a user.

Failures never raise out of `RexRuntime.spawn` (no new outcome states). Whatever goes wrong in
swerex, aiohttp, Docker or the OS becomes `RexError` — internal, one actionable line, with the
auth token redacted — and `spawn` turns it into an `error` event plus a non-zero result
(`START_FAILURE_EXIT_CODE` when the agent never started, 1 when it was lost mid-run) with the
message in `stderr`, so the engine parks the step as blocked and resumable:

    RexError                   this package only; str() is safe to show a user
      (from) RemoteUrlError    the remote host's scheme rules refused it (remote_url.py)
      (from) ServerError       swerex-remote answered 4xx/5xx, 511 carrying a swerexception
                               (connection.py)
      (from) any Exception     a swerex call, aiohttp, the Docker deployment, the OS
"""

from __future__ import annotations

__all__ = ["RexError"]


class RexError(Exception):
    """A failure to run the agent through SWE-ReX. `str()` is one actionable, token-free line.

    `started` says whether the agent process was launched: it picks the result's exit code.
    """

    def __init__(self, message: str, *, started: bool = False) -> None:
        super().__init__(message)
        self.started = started
