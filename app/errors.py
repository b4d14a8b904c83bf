"""pairbot's error tree, and who each error is for.

    PairbotError                    base; `str(err)` is one line a person can act on
    ├── UserError                   user-facing: a file, flag or argument is wrong; the text names
    │   │                           what was wrong and what is allowed (CLI: exit 2)
    │   ├── ConfigError             a file a user writes failed validation (file, key path, value)
    │   ├── NotInitialisedError     no `.pair/` directory where one is needed
    │   ├── UnknownBatchError       no such batch manifest
    │   └── UnknownChangeError      no such change in the batch
    ├── BatchLockedError            another live process holds the batch's step lock (exit 3)
    ├── PortInUseError              `pairbot serve`: something already listens on the port
    │                               (exit 1; never 3, which means "lock held")
    └── OperatorError               operator-facing: the world is not as recorded (exit 1)
        ├── JournalCorruptError     a journal line in the middle of the file does not parse
        └── StateCorruptError       a run-state file does not parse

No traceback is shown for any of these: the CLI prints `str(err)` and exits with `exit_code`.
A code host's errors (`hosts.errors`) and git's (`hosts.git.GitError`) are not in this tree
(`hosts/` never imports `app/`); `app.failures` gives them their one line and exit code.
"""

from __future__ import annotations


class PairbotError(Exception):
    """Base of every error pairbot raises on purpose."""

    exit_code = 1


class UserError(PairbotError):
    """Something the user wrote or typed is wrong; the message says what and what is allowed."""

    exit_code = 2


class CommandNotRun(UserError):
    """A command its card's cycle refused, after writing the card's own status back into its
    tracking comment (which the App's acknowledgement had replaced): the reply to the command
    says why, and the tracking comment must not be touched again."""


class ConfigError(UserError):
    """A `.pair/` file failed validation; nothing ran and no run-state was touched."""


class NotInitialisedError(UserError):
    """The directory has no `.pair/` project."""


class UnknownBatchError(UserError):
    """The named batch has no manifest."""


class UnknownChangeError(UserError):
    """The named change is not part of the batch."""


class BatchLockedError(PairbotError):
    """Another live process holds the batch's step lock; this call skipped instead of waiting."""

    exit_code = 3


class PortInUseError(PairbotError):
    """`pairbot serve` cannot bind its address: another process listens there."""


class OperatorError(PairbotError):
    """Recorded state is damaged or unreadable; an operator has to look."""


class JournalCorruptError(OperatorError):
    """A complete (newline-terminated) journal line does not parse."""


class StateCorruptError(OperatorError):
    """`state.json` (or another run-state file) does not parse."""
