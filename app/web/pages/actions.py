"""Acting on a card from its page: `approve`, `answer`, `implement` and `retry`, sent by the
signed-in person and authorized, queued and run exactly as their comment would be.

    offered(card) -> verbs              the buttons a card's page shows: the commands its
                                        `/pair status` explanation lists (`what you can do`)
    read_answer(text) -> str | Refused  an answer typed into the page, read as a comment's text
    command_job(...) -> NewJob          the `command` job a comment would queue, as `login`
                                        (GitHub user id `user_id`)
    Commands(...)                       the shell: who may act (the collaborator permission,
                                        through the job handler's cache) and the queueing

The dashboard never runs a step: a button only queues the job the comment path queues (a
`CommandJob` carrying the person as its commenter, under a delivery id of its own,
`dashboard-<uuid>`), so the worker authorizes it again, writes the card's tracking comment and
sends the dispatch or runs the executor as for any comment, and the delivery is on record with
the others. The command is built by pairbot from the chosen verb: no text a person typed ever
becomes a command line. An answer's text is read as a comment's is read for an agent
(`app.domain.text.sanitize.reader_text`: HTML comments, hidden elements, attributes, invisible
and bidi characters gone) and travels as the request's `text`, quoted data; a line of it that
looks like `/pair approve` is part of the answer, never a second command.

Who may act: a person signed in with GitHub, decided by the comment path's rule
(`app.domain.intake.authors.decide`) on the session's login and numeric user id: an id on the
operator's allowlist (PAIR_ALLOWLIST) may act whatever its permission; anyone else needs write,
maintain or admin permission on the card's repository, read from GitHub by the same lookup and
cache the comment path uses (`app.web.handling.PermissionCache`: a level is kept a minute, so a
revoked collaborator stops within it). The job carries the person's id as a comment carries
its commenter's, so the worker's own check admits and refuses them the same way. A session
from before sessions kept the id is refused with a 403 asking to sign in again. The operator
token is nobody on GitHub, so an operator acts by commenting, or signs in. The CSRF token and
the Origin of every POST are checked before any of this, by the sign-in layer
(`app.web.signin`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from app.domain.intake.authors import decide, needs_permission
from app.domain.intake.comment_commands import Command, Verb
from app.domain.intake.pair_request import CommentRef, PairRequest
from app.domain.text.sanitize import reader_text
from app.errors import ConfigError
from app.store.base import CommandRecord, NewJob, Store
from app.web.events import GITHUB, Policy, serial_key
from app.web.forge import Forge, Forges
from app.web.handling import PermissionCache
from app.web.jobs import CommandJob, Commenter
from app.web.pages.views import MAX_ANSWER_CHARS, CardView
from app.web.viewer import Viewer
from hosts.errors import HostError, NotFound
from hosts.models import Author, Permission
from hosts.vocabulary import GITHUB as GITHUB_WORDS

# What a button can send: the verbs whose arguments pairbot builds (none, or an answer's text).
BUTTONS: Final[tuple[Verb, ...]] = ("approve", "answer", "implement", "retry")
EVENT: Final = "dashboard"  # the delivery's event, as the operator's view lists it


@dataclass(frozen=True)
class Refused:
    """Why a request to act was refused: the HTTP status and a sentence for the person."""

    status: int
    text: str


def offered(card: CardView) -> tuple[Verb, ...]:
    """The verbs of `BUTTONS` the card's explanation lists among what a person can do now
    (`/pair approve`, `/pair answer <text>`, …), in the explanation's order."""
    verbs: list[Verb] = []
    for action in card.actions:
        words = action.split()
        if len(words) < 2 or not words[0].startswith("/"):
            continue  # "merge PR #4", "reply on … with a scope decision", "pairbot clean …"
        verb = next((v for v in BUTTONS if v == words[1]), None)
        takes = ["<text>"] if verb == "answer" else []
        if verb is not None and words[2:] == takes and verb not in verbs:
            verbs.append(verb)
    return tuple(verbs)


def read_answer(text: str) -> str | Refused:
    """An answer as the cycle gets it: what a reader of the typed text sees (hidden content
    gone), trimmed; a refusal naming what is needed when nothing visible is left or it is long."""
    if len(text) > MAX_ANSWER_CHARS:
        return Refused(
            400, f"an answer is at most {MAX_ANSWER_CHARS} characters; this one has {len(text)}"
        )
    visible = reader_text(text).strip()
    if not visible:
        return Refused(
            400,
            "answer needs a text: type what the card asks for in the answer box (hidden "
            "content, such as HTML comments and invisible characters, does not count)",
        )
    return visible


def command_job(
    *,
    repo: str,
    card: int,
    verb: Verb,
    text: str | None,
    login: str,
    user_id: int,
    installation: int | None,
    delivery: str,
    trigger: str,
) -> NewJob:
    """The `command` job a comment `/{trigger} {verb}` by `login` (GitHub user id `user_id`)
    on card #`card` would queue (`app.web.events`), with `delivery` in place of the webhook's
    and no comment to react to."""
    comment = CommentRef(id="", author_login=login, author_id=user_id)
    command = Command(verb, {}, text, line=1, raw=f"/{trigger} {verb}")
    request = PairRequest.from_command(card, command, comment=comment, delivery=delivery)
    commenter = Commenter(login=login, id=str(user_id))
    return NewJob(
        kind="command",
        source=GITHUB,
        repo=repo,
        installation=installation,
        target="card",
        number=card,
        dedupe_key=f"{GITHUB}:{repo}:{EVENT}:{delivery}",
        serial_key=serial_key(GITHUB, repo, "card", card),
        request=CommandJob(card, comment, commenter, request=request).to_json(),
        command=CommandRecord(
            verb=verb,
            args={},
            author_id=commenter.id,
            author_login=login,
            comment_id="",
        ),
    )


def new_delivery() -> str:
    return f"{EVENT}-{uuid.uuid4()}"


class Commands:
    """The shell: the store, the App's GitHub forges, the job handler's permission cache and
    the policy (its trigger word), as the comment path has them."""

    def __init__(
        self,
        store: Store,
        forges: Forges,
        permissions: PermissionCache,
        policy: Callable[[], Policy],
    ) -> None:
        self.store = store
        self.forges = forges
        self.permissions = permissions
        self.policy = policy

    @property
    def trigger(self) -> str:
        return self.policy().trigger

    async def installation(self, repo: str) -> int | None:
        """The App's installation on `repo` as its jobs and installation events recorded it."""
        found = await self.store.last_installation(repo)
        if found is not None:
            return found
        for record in await self.store.installations():
            if not record.suspended and any(r.lower() == repo.lower() for r in record.repos):
                return record.id
        return None

    async def forge(self, repo: str) -> Forge | Refused:
        """The App's forge on `repo`; a refusal when no installation of it is on record."""
        try:
            return self.forges(repo, await self.installation(repo))
        except ConfigError:
            return Refused(
                409,
                f"pairbot knows of no installation of the App on {repo} yet (no event or job "
                "of it is on record): comment the command on the card instead",
            )

    async def permission(self, repo: str, login: str) -> Permission | Refused:
        """`login`'s level on `repo` from GitHub, through the comment path's cache."""
        forge = await self.forge(repo)
        if isinstance(forge, Refused):
            return forge

        async def fetch() -> Permission:
            try:
                return await forge.permission(login)
            except NotFound:  # not a collaborator: GitHub does not know them on this repository
                return "none"

        try:
            return await self.permissions.get((GITHUB, repo, login.lower()), fetch)
        except HostError as error:
            return Refused(503, f"GitHub could not say what {login} may do on {repo}: {error}")

    async def may_act(self, viewer: Viewer, repo: str) -> Refused | None:
        """None when `viewer` may send commands on `repo` (the comment path's rule: an id on
        the operator's allowlist, or write permission); else why not."""
        if viewer.operator or not viewer.login:
            return Refused(
                403,
                "You are viewing as the operator, who is nobody on the code host and cannot "
                "act on a card: sign in with GitHub to act here as yourself, or comment the "
                "command on the card (on `pairbot serve --dev`: `pairbot card <n> <verb>`).",
            )
        if viewer.user_id <= 0:
            return Refused(
                403,
                f"{viewer.login}'s session does not carry a GitHub user id (it began before "
                "pairbot kept one), so the operator's allowlist cannot be checked: sign out "
                "and sign in again.",
            )
        allowlist = self.policy().allowlist
        author = Author(login=viewer.login, id=str(viewer.user_id))
        level: Permission | None = None
        if needs_permission(author, allowlist):
            found = await self.permission(repo, viewer.login)
            if isinstance(found, Refused):
                return found
            level = found
        elif isinstance(forge := await self.forge(repo), Refused):
            return forge  # allowlisted, but the job could not reach the repository
        decision = decide(author, level, allowlist, frozenset(), GITHUB_WORDS)
        if not decision.allowed:
            return Refused(
                403,
                f"{viewer.login} (id {viewer.user_id}) has {level or 'no'} permission on "
                f"{repo} and is not on the operator's allowlist (PAIR_ALLOWLIST): commands "
                "need write, maintain or admin permission, or the user's id on the allowlist, "
                "as for a comment.",
            )
        return None

    async def queue(self, viewer: Viewer, card: CardView, verb: Verb, text: str | None) -> str:
        """Queue the command job; its delivery id."""
        assert viewer.login is not None  # noqa: S101 - may_act admitted a signed-in person
        delivery = new_delivery()
        job = command_job(
            repo=card.repo,
            card=card.number,
            verb=verb,
            text=text,
            login=viewer.login,
            user_id=viewer.user_id,
            installation=await self.installation(card.repo),
            delivery=delivery,
            trigger=self.trigger,
        )
        await self.store.enqueue_delivery(
            delivery,
            EVENT,
            verb,
            [job],
            source=GITHUB,
            status=f"/{self.trigger} {verb} by {viewer.login} from the status page",
        )
        return delivery
