"""A webhook-triggered run's notification: the file the pipeline wrote → what it asks for.

An Azure DevOps service hook (work item commented, pull request commented, pull request
updated) posts to an Incoming WebHook service connection, which queues a run of every pipeline
that declares it under `resources: webhooks`; the notification's JSON is that resource's
parameters. The template (docs/azure-pipelines.md) writes `${{ convertToJson(parameters.<hook>) }}`
to a file through a step's environment and names it in `PAIR_WEBHOOK_PAYLOAD_PATH`; this module
reads that file and hands it to the reading the App uses (`app.domain.azure_hooks`).

Authenticity: the pipeline never sees the request's headers, so the HMAC of the connection's
secret is checked by Azure DevOps before it queues the run (a request that fails it queues
nothing). What the entry re-checks itself is what the App checks: that the notification is
for this pipeline's project and repository, and — before any command runs — the commenter's
permission on the repository (`action.comments.handle_comment`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from action.event import MalformedEventError
from app.domain.azure_hooks import AzureHook, read_azure_hook
from app.domain.intake import Policy
from app.errors import UserError

__all__ = ["Notification", "read_notification"]

# A service hook's notification is a few KiB; a comment is at most 150,000 characters.
MAX_PAYLOAD_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Notification:
    """One notification: its id (what de-duplicates it) and its reading."""

    id: str
    hook: AzureHook


def read_notification(path: Path, policy: Policy) -> Notification:
    """Read and classify the notification at `path`.

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
