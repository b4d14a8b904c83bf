"""A comment's first API requests: who wrote it, and 👀 for a command pairbot will run.

    receipt = acknowledge(ctx, intent, say)       before the lock, the pull and the engine

A person who comments `/pair …` expects to see at once that pairbot got it, not after the run
has taken the `pair-state` lock, pulled the run-state and loaded the engine. The event payload
and one REST call are enough to decide, by the same rules as the App and the full run:

- the intake (`action.event.classify`) has already ignored pairbot's own comments, other bots
  off the allowlist, edits, quoted or fenced text and comments without a command: those reach
  no request at all;
- who may act is `app.domain.intake.authors.decide` on the author's permission level, asked of
  GitHub (`GET /repos/{o}/{r}/collaborators/{login}/permission`, the first request) unless the
  author's id is on the allowlist — never `author_association`;
- 👀 (`POST /repos/{o}/{r}/issues/comments/{id}/reactions`) only for a command that runs: the
  author may act, and the comment is not answered instead of run (usage, `help`:
  `action.comments.comment_answer`). A refused author gets the polite reply from the full run,
  never a reaction.

Both requests go through a bare httpx client: neither githubkit nor pydantic is loaded before
them. The `Receipt` goes on to `action.comments.handle_comment`, which then neither asks for the
permission again nor owes a second 👀. A request that fails is not the run's failure: one line
in the log, and the run does it the usual way — the permission from the host, the 👀 owed in
the run-state and posted once the command is recorded (`action.acks`). A comment already gone
(404) owes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import quote

from app.domain.intake.authors import decide, needs_permission
from app.domain.intake.intent import Comment

if TYPE_CHECKING:
    import httpx

    from action.context import ActionContext

__all__ = ["PERMISSIONS", "Receipt", "acknowledge", "acknowledges", "permission_level"]

# The levels GitHub names (`role_name` first: it knows custom roles' base, e.g. maintain).
PERMISSIONS: Final = frozenset({"admin", "maintain", "write", "triage", "read", "none"})
TIMEOUT_S: Final = 10.0
API_VERSION: Final = "2022-11-28"
_DIGITS = frozenset("0123456789")


@dataclass(frozen=True)
class Receipt:
    """What the early requests settled, for the rest of the run.

    `permission`: the author's level as GitHub answered it (None: not asked, or no answer).
    `owed`: whether the run still owes the comment its 👀 (False once it landed, once GitHub
    said the comment is gone, or when the command gets no 👀 at all).
    """

    permission: str | None = None
    owed: bool = True


def permission_level(status: int, body: Any) -> str | None:
    """The permission GitHub's answer names; None when it is no answer (an error). Pure.

    The host adapter's reading (`hosts.github`): `role_name` when it is a known level, else
    the legacy `permission`, else "none"; a 404 (no such user, or not visible) is "none".
    """
    if status == 404:
        return "none"
    if status != 200 or not isinstance(body, Mapping):
        return None
    role, legacy = body.get("role_name"), body.get("permission")
    if role in PERMISSIONS:
        return str(role)
    return str(legacy) if legacy in PERMISSIONS else "none"


def acknowledges(intent: Comment, permission: str | None, ctx: ActionContext) -> bool:
    """Whether this comment gets 👀: its author may act and its command runs. Pure."""
    from action.comments import comment_answer  # noqa: PLC0415

    decision = decide(intent.author, permission, ctx.allowlist, ctx.identity_allowlist)
    if not decision.allowed:
        return False
    return comment_answer(intent, decision, ctx.trigger, ctx.run_id or "action") is None


def acknowledge(
    ctx: ActionContext,
    intent: Comment,
    say: Callable[[str], object],
    *,
    transport: httpx.BaseTransport | None = None,
) -> Receipt:
    """Ask for the author's permission when it decides, then 👀 a command that runs.

    Never raises for a failed request: the `Receipt` says what is still to do."""
    comment_id = intent.comment.id
    if ctx.github_token is None or not comment_id or not set(comment_id) <= _DIGITS:
        return Receipt()  # nothing to ask with, or no comment to react to: the usual way
    import httpx  # noqa: PLC0415  # the one import the first request needs

    repo = f"/repos/{ctx.repository}"
    headers = {
        "Authorization": f"Bearer {ctx.github_token.get_secret_value()}",
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": API_VERSION,
        "User-Agent": "pairbot-action",
    }
    with httpx.Client(
        base_url=ctx.api_url, headers=headers, timeout=TIMEOUT_S, transport=transport
    ) as client:
        permission = None
        if needs_permission(intent.author, ctx.allowlist, ctx.identity_allowlist):
            path = f"{repo}/collaborators/{quote(intent.author_login, safe='')}/permission"
            try:
                response = client.get(path)
                permission = permission_level(response.status_code, _json(response))
            except httpx.HTTPError as err:
                say(f"pairbot: could not read {intent.author_login}'s permission yet ({err})")
                return Receipt()
            if permission is None:  # an error answer: the run asks the host, with its retries
                say(
                    f"pairbot: could not read {intent.author_login}'s permission yet "
                    f"(HTTP {response.status_code})"
                )
                return Receipt()
        if not acknowledges(intent, permission, ctx):
            return Receipt(permission, owed=False)
        try:
            response = client.post(
                f"{repo}/issues/comments/{comment_id}/reactions", json={"content": "eyes"}
            )
        except httpx.HTTPError as err:
            say(_not_yet(comment_id, str(err)))
            return Receipt(permission)
    if response.status_code in (200, 201):  # 200: the reaction was there already
        return Receipt(permission, owed=False)
    if response.status_code == 404:
        say(f"pairbot: comment {comment_id} is gone; its 👀 is dropped")
        return Receipt(permission, owed=False)
    say(_not_yet(comment_id, f"HTTP {response.status_code}"))
    return Receipt(permission)


def _not_yet(comment_id: str, why: str) -> str:
    return (
        f"pairbot: could not acknowledge comment {comment_id} yet ({why}); "
        "the 👀 follows once the command is recorded"
    )


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None
