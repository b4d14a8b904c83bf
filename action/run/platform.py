"""What differs between GitHub Actions and Azure Pipelines, as the run driver sees it.

    LogCommands   the CI's log commands: a plain line, a secret's mask, the run's one error
                  line, and the group that holds the agent's output (which must not be able to
                  issue a command: GitHub stops commands in it, Azure neutralizes every line)
    CiPlatform    the rest: its settings (`action.run.settings.CiSettings`), what the run is
                  for (`work`: the event, or the service-hook notification), the agent's
                  environment and git's credentials, the outputs and the job summary, how
                  a command is read back and acknowledged (👀 on GitHub, a like on Azure), how
                  it asks for the next run (`action.run.next_run`), and where a tick looks for
                  commands whose own run never happened (`action.run.catchup`)

`action.github_actions.GitHubActions` and `action.azure.pipelines.AzurePipelines` implement
them (with `action.workflow.WorkflowCommands` and `action.azure.vso.LoggingCommands`); the
driver (`action.run.driver`) does everything else once.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from action.comments import CommentContext
    from action.run.catchup import CatchupSettings, CatchupSource, Found
    from action.run.continuation import Continuation, ContinuationSettings, Requested
    from action.run.outcome import Outcome
    from action.run.settings import CiSettings
    from app.cycle.card_cycle import CardCycle
    from app.domain.intake.intent import Comment, Intent

__all__ = ["AgentLog", "CiPlatform", "CommentHandling", "LogCommands"]


class AgentLog(Protocol):
    """Where the agent's output goes: `line` is the engine's line sink."""

    def line(self, text: str) -> None: ...


class LogCommands(Protocol):
    """The CI's log and the commands it reads from it."""

    def say(self, line: str) -> None:
        """One plain line of the run's log."""

    def mask(self, value: str) -> None:
        """Hide `value` (and each of its lines) in everything printed after this."""

    def error(self, line: str) -> None:
        """The run's one-line failure, as the CI shows an error."""

    def agent_log(self, title: str) -> AbstractContextManager[AgentLog]:
        """A collapsible group for the agent's output, unable to issue a command."""


@dataclass(frozen=True)
class CommentHandling:
    """How this CI hands a command's comment to `action.comments.handle_comment`."""

    context: CommentContext  # who may act: the allowlists, the trigger, the run
    delivery: str | None = None  # the command's delivery (default: the comment's id)
    acknowledge: bool = True  # whether the run still owes the comment its reaction
    reaction: Literal["eyes", "+1"] = "eyes"  # 👀 on GitHub; Azure DevOps' comments take a like
    permission: str | None = None  # the author's level, when it was already asked for


class CiPlatform(Protocol):
    """One run's CI: GitHub Actions or Azure Pipelines."""

    @property
    def settings(self) -> CiSettings:
        """The run's settings, read once."""

    @property
    def log(self) -> LogCommands:
        """The run's log."""

    @property
    def run_id(self) -> str:
        """This run's id (`local` outside a CI run): the lock's owner, the acks' attempts."""

    @property
    def lock_owner(self) -> str:
        """Who holds the `pair-state` lock, as its lock file says (`actions:<run id>`)."""

    @property
    def pull_ref(self) -> str:
        """How the host names a pull request in the summary: `#` on GitHub, `!` on Azure."""

    @property
    def delivery(self) -> str | None:
        """The id of the notification this run was queued for when the CI may deliver it
        again (Azure DevOps' service hooks): handled once, remembered on the state branch."""

    def work(self) -> Intent:
        """What this run is for, read from the event before any lock (an `Ignore` for nothing).

        It may make the run's first API requests (GitHub: a comment's 👀, `action.early`)."""

    def engine_env(self, env: dict[str, str]) -> dict[str, str]:
        """The environment the engine and its agent get: the job's, with what the CI adds."""

    def git_credentials(self, origin: str, base: Mapping[str, str]) -> dict[str, str]:
        """The process environment (`base`, updated) with which pairbot's own git reaches
        `origin` (an http(s) URL) with the job's token, never written to `.git/config`; empty
        without a token."""

    def publish(self, outcome: Outcome, summary: str) -> None:
        """Write the outputs (GitHub) and the Markdown `summary` where the CI shows it."""

    async def read_back(self, cycle: CardCycle, intent: Comment) -> Comment:
        """The comment as the host holds it (a notification is a claim: Azure reads it back);
        raises when the host holds no such comment."""

    def comment_handling(self) -> CommentHandling:
        """How this run's command comment is authorized and acknowledged."""

    @property
    def continuation(self) -> ContinuationSettings:
        """Whether this run asks for the next one after a step, and the daily bound."""

    async def request_continuation(self, after: Continuation) -> Requested:
        """Ask the CI for another run of this workflow or pipeline (after the lock's release);
        a refusal is an answer, never raised."""

    @property
    def catchup(self) -> CatchupSettings:
        """How far a tick of every batch looks back for missed commands (0: it does not)."""

    def catchup_source(self) -> CatchupSource | None:
        """The host's recent comments as this CI's comment event reads them (None: no
        credential to list them with); builds the host's client, so only a tick calls it."""

    def catch_up(self, found: Found) -> Comment:
        """Make this run the run `found`'s comment never got: its delivery, read-back and
        acknowledgement are then that comment's. Returns the intent to act on."""

    def comment_key(self, intent: Comment) -> str:
        """How `.pair/deliveries.json` remembers a comment this run handled (the key the
        catch-up checks)."""
