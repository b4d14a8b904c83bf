"""A webhook-triggered run's notification: the file the pipeline wrote → what it asks for.

An Azure DevOps service hook (work item commented, pull request commented, pull request
updated) posts to an Incoming WebHook service connection, which queues a run of every pipeline
that declares it under `resources: webhooks`; the notification's JSON is that resource's
parameters. The template (docs/azure-pipelines.md) writes `${{ convertToJson(parameters.<hook>) }}`
to a file through a step's environment and names it in `PAIR_WEBHOOK_PAYLOAD_PATH`; this module
reads that file and hands it to the reading the App uses (`app.domain.intake.azure_hooks`).

Authenticity. The pipeline never sees the request's headers, and an Azure DevOps service hook
cannot sign its body with the Incoming WebHook connection's HMAC secret (it sends fixed headers
only), so the connection is left without a secret and its URL is public: anyone who learns the
webhook's name can queue a run with a payload of their choosing. The payload is therefore a
claim, never a fact. Before a command runs, the entry reads the comment back from Azure DevOps
with the job's token (`confirms`): a comment by the claimed author, holding the same command,
must be on that work item (on a pull request: the comment with that id). Then the commenter, as
Azure DevOps names them (`as_confirmed`: the identity id and account of the comment's author,
whatever the notification's text said), is authorized exactly as the App does
(`action.comments.handle_comment`). A scope
decision and a moved head are read back by the card cycle itself (the decision comment and its
author, the pull request's head), as for the App. The notification must also name this
pipeline's project (a work item) or project and repository (a pull request).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from action.event import MalformedEventError
from app.domain.intake.azure_hooks import AzureHook, html_to_text, read_azure_hook
from app.domain.intake.intent import Comment, NewComment, Policy, comment_intent
from app.errors import OperatorError, UserError
from hosts.models import Author
from hosts.models import Comment as HostComment

__all__ = [
    "Notification",
    "UnconfirmedNotification",
    "as_confirmed",
    "confirms",
    "read_notification",
]


class UnconfirmedNotification(OperatorError):
    """A notification claims a comment Azure DevOps does not hold: nothing runs for it."""


# A service hook's notification is a few KiB; a comment is at most 150,000 characters.
MAX_PAYLOAD_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Notification:
    """One notification: its id (what de-duplicates it) and its reading."""

    id: str
    hook: AzureHook


def read_notification(path: Path, policy: Policy, secrets: tuple[str, ...] = ()) -> Notification:
    """Read and classify the notification at `path`.

    A payload that holds one of `secrets` is refused (`UserError`): the pipeline expanded a
    macro such as `$(System.AccessToken)` that a commenter wrote, and any reply could carry it.

    `UserError` when the file cannot be read or is not a JSON object (the pipeline's YAML is
    wrong); `MalformedEventError` when it lacks the notification id every service hook sends.
    """
    try:
        raw = path.read_bytes()[: MAX_PAYLOAD_BYTES + 1]
    except OSError as err:
        raise UserError(
            f"PAIR_WEBHOOK_PAYLOAD_PATH={str(path)!r} cannot be read ({err.strerror}); the "
            "pipeline writes the webhook resource's payload there (docs/azure-pipelines.md)"
        ) from None
    if len(raw) > MAX_PAYLOAD_BYTES:
        raise UserError(
            f"PAIR_WEBHOOK_PAYLOAD_PATH={str(path)!r} holds more than "
            f"{MAX_PAYLOAD_BYTES} bytes; a service-hook notification is a few KiB"
        )
    if any(secret.encode() in raw for secret in secrets if secret):
        raise UserError(
            f"PAIR_WEBHOOK_PAYLOAD_PATH={str(path)!r} holds a secret of this job: the pipeline "
            "expanded a `$(…)` macro a comment wrote; nothing ran — write the payload with "
            "docs/azure-pipelines.md's `replace(convertToJson(…), '$(', '$ (')`"
        )
    try:
        payload = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise UserError(
            f"PAIR_WEBHOOK_PAYLOAD_PATH={str(path)!r} is not a JSON notification; allowed: "
            "the webhook resource's parameters as `convertToJson` writes them"
        ) from None
    if not isinstance(payload, dict):
        raise UserError(
            f"PAIR_WEBHOOK_PAYLOAD_PATH={str(path)!r} holds a JSON {type(payload).__name__}, "
            "not the notification object"
        )
    notification = payload.get("id")
    if not isinstance(notification, str) or not notification.strip():
        raise MalformedEventError(
            "the webhook payload has no notification id (`id`); a service hook always sends "
            "one — is the webhook resource fed by an Azure DevOps service hook?"
        )
    return Notification(notification, read_azure_hook(payload, policy, notification))


def _same_person(a: Author, b: Author) -> bool:
    if a.id and b.id and a.id.casefold() == b.id.casefold():
        return True
    return bool(a.login) and a.login.casefold() == b.login.casefold()


def confirms(
    comments: Iterable[HostComment], intent: Comment, policy: Policy
) -> HostComment | None:
    """The host's comment on the target that `intent` was read from — by the same person, with
    the same first command line (and, on a pull request, the same id) — or None. Pure.

    A work-item notification may name no comment id: the one found here is what the
    acknowledgement reacts to, the newest that matches (the same command written again is a
    new comment, answered under its own marker). One that names it (`commentVersionRef`)
    must be that comment."""
    named = intent.is_pull or bool(intent.comment.id)
    for found in reversed(list(comments)):
        if named and found.id != intent.comment.id:
            continue
        if not _same_person(found.author, intent.author):
            continue
        body = found.body if intent.is_pull else html_to_text(found.body)
        new = NewComment(
            "pull" if intent.is_pull else "card",
            intent.card,
            found.id,
            found.url,
            body,
            intent.author,
        )
        again = comment_intent(new, policy)
        # The same command line (a fork's pull request answers it with a refusal instead).
        if isinstance(again, Comment) and _line(again) == _line(intent):
            return found
    return None


def as_confirmed(intent: Comment, found: HostComment) -> Comment:
    """`intent` as Azure DevOps holds it, once `confirms` found it: the comment's id, and its
    author as the host names them (the identity id, the account, a service identity's kind)
    rather than as the notification claimed (`Name <account>` text carries no id). Pure."""
    author = found.author if found.author.login or found.author.id else intent.author
    return replace(intent, comment=replace(intent.comment, id=found.id), author=author)


def _line(intent: Comment) -> tuple[int, str]:
    return intent.command.line, intent.command.raw
