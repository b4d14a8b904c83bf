"""Acknowledgements (the 👀 on a command's comment, a like on Azure DevOps) recorded before they
are posted.

A maintainer's command must survive a reaction GitHub refuses (a 502, a 401). So the Action
records first and acknowledges second:

    handle_comment      adds a `PendingAck` to `.pair/acks.json` (this module's `record`)
    the card cycle      journals the command and saves: the run-state push (`pair-state`)
                        carries the command and its pending acknowledgement together
    flush               after that save, at the start and at the end of every run: posts each
                        pending reaction and drops the ones that landed

An acknowledgement that fails stays pending and is retried by the next run (a tick included);
the command itself is never re-run for it (its delivery is journaled, `app.cycle.driver`). A
reaction posted twice is harmless: GitHub answers a repeated reaction with the existing one
(200), so a run that dies between posting and saving costs nothing. A comment that no longer
exists (404), or an acknowledgement still refused after `MAX_ATTEMPTS` runs, is dropped with
one line in the run's log: it must not be retried forever.

Azure DevOps has no 👀: the Azure Pipelines entry owes a like (`+1`) to a work-item comment (on
the PM host) or a PR comment (`<thread>/<comment>`); where a host has no reaction at all, one
reply under the comment's own `ack` marker stands in for it.
`.pair/acks.json` travels on the state branch (`action.statebranch`); a file that is not what
this module writes is read as "nothing pending" (with one line), never as a failed run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Literal

from hosts.base import Host
from hosts.errors import HostError, NotFound, Unsupported
from hosts.markers import make_marker
from hosts.models import Target
from hosts.vocabulary import ack_word

__all__ = ["ACKS_FILE", "MAX_ATTEMPTS", "PendingAck", "flush", "read_pending", "record"]

ACKS_FILE = ".pair/acks.json"
Reaction = Literal["eyes", "+1"]
# A GitHub comment id, an Azure DevOps work-item comment id, or a PR comment's `<thread>/<id>`.
_COMMENT_ID = re.compile(r"[0-9]+(?:/[0-9]+)?")
MAX_ATTEMPTS = 10


@dataclass(frozen=True)
class PendingAck:
    """A reaction still owed to a command's comment."""

    kind: Literal["card", "pull"]
    number: int
    comment_id: str
    # 👀 on GitHub; Azure DevOps has no 👀, so its comments are owed a like (`+1`).
    reaction: Reaction = "eyes"
    attempts: int = 0  # runs that tried and failed (several tries in one run count once)
    last_run: str = ""

    @property
    def target(self) -> Target:
        """The issue or pull request the comment is on."""
        return Target(self.kind, self.number)


def with_ack(pending: Sequence[PendingAck], ack: PendingAck) -> list[PendingAck]:
    """`pending` with `ack` owed (once per comment and reaction). Pure."""
    if any(_same(p, ack) for p in pending):
        return list(pending)
    return [*pending, ack]


def _same(a: PendingAck, b: PendingAck) -> bool:
    return (a.comment_id, a.reaction) == (b.comment_id, b.reaction)


def _parse(text: str) -> list[PendingAck] | None:
    """The file's acknowledgements; None when it is not what `write_pending` writes."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, list):
        return None
    acks: list[PendingAck] = []
    for item in data:
        if not isinstance(item, dict):
            return None
        kind, number, comment = item.get("kind"), item.get("number"), item.get("comment_id")
        attempts, last_run = item.get("attempts", 0), item.get("last_run", "")
        if (
            kind not in ("card", "pull")
            or type(number) is not int
            or number <= 0
            or not isinstance(comment, str)
            or not _COMMENT_ID.fullmatch(comment)
            or item.get("reaction", "eyes") not in ("eyes", "+1")
            or type(attempts) is not int
            or not isinstance(last_run, str)
        ):
            return None
        side: Literal["card", "pull"] = "card" if kind == "card" else "pull"
        reaction: Reaction = "+1" if item.get("reaction") == "+1" else "eyes"
        acks.append(PendingAck(side, number, comment, reaction, attempts, last_run))
    return acks


def read_pending(root: Path, say: Callable[[str], None] | None = None) -> list[PendingAck]:
    """The acknowledgements owed under `root` (none when the file is absent or unreadable)."""
    path = root / ACKS_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError):
        text = ""
    acks = _parse(text)
    if acks is None:
        if say is not None:
            say(f"pairbot: {ACKS_FILE} is not a list of pending reactions; ignoring it")
        return []
    return acks


def write_pending(root: Path, acks: Sequence[PendingAck]) -> None:
    """Replace the file (atomically: a killed run leaves the old or the new list)."""
    path = root / ACKS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps([asdict(a) for a in acks], indent=1) + "\n"
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(path)


def record(root: Path, ack: PendingAck) -> None:
    """Owe `ack`: written before the command is recorded, so both travel in one push."""
    write_pending(root, with_ack(read_pending(root), ack))


async def flush(
    root: Path, host: Host, say: Callable[[str], None], run: str, *, pm: Host | None = None
) -> int:
    """Post every pending reaction; keep the ones that failed. Returns how many remain.

    `host` holds the pull requests' comments, `pm` (default: `host`) the cards'. Where the
    host has no such reaction (`Unsupported`), a short reply under the comment's own `ack`
    marker acknowledges it instead (written once: an upsert).

    `run` names this run: the failures of one run count as one attempt, however many
    checkpoints retried.

    Never raises for a host failure: the command is what the run is about, and it is recorded.
    """
    pending = read_pending(root, say)
    if not pending:
        return 0
    remaining: list[PendingAck] = []
    for ack in pending:
        where = pm if pm is not None and ack.kind == "card" else host
        try:
            try:
                await where.react(ack.target, ack.comment_id, ack.reaction)
            except Unsupported:
                await where.upsert_comment(ack.target, _ack_marker(ack), ACK_REPLY)
        except NotFound:
            gone = ack_word(ack.reaction)
            say(f"pairbot: comment {ack.comment_id} is gone; its {gone} is dropped")
        except HostError as err:  # its message never carries a token (hosts.errors)
            if ack.last_run == run:  # this run already counted (and said) its failure
                remaining.append(ack)
                continue
            tried = replace(ack, attempts=ack.attempts + 1, last_run=run)
            if tried.attempts >= MAX_ATTEMPTS:
                say(
                    f"pairbot: gave up acknowledging comment {ack.comment_id} after "
                    f"{tried.attempts} runs ({err}); the command itself was recorded"
                )
            else:
                say(
                    f"pairbot: could not acknowledge comment {ack.comment_id} ({err}); "
                    f"the command is recorded, the next run retries the {ack_word(ack.reaction)}"
                )
                remaining.append(tried)
    write_pending(root, remaining)
    return len(remaining)


# What a comment gets where its host has no reaction for it (`flush`).
ACK_REPLY = "pairbot received this command and recorded it; its progress is on the card."


def _ack_marker(ack: PendingAck) -> str:
    return make_marker("ack", ack.number, run=ack.comment_id.replace("/", "-"))
