"""Who may act on a command: the operator's allowlist and the permission decision for the
author of a comment (or of a command from a card's page), on every host. Pure.

    needs_permission(author, allowlist, identities)   is the permission lookup (one API call)
                                                      needed to decide?
    decide(author, permission, allowlist, …)          may they act, and why not (`Decision`)
"""

from __future__ import annotations

from app.domain.intake.comment_commands import Decision, may_act
from hosts.models import Author
from hosts.vocabulary import AZURE_DEVOPS, GITHUB, LOCAL, Vocabulary

__all__ = ["allowlisted", "decide", "needs_permission", "numeric_id"]


def numeric_id(ident: str) -> int | None:
    """A GitHub user id as a number; None where ids are not numbers (Azure DevOps GUIDs)."""
    return int(ident) if ident.isascii() and ident.isdigit() else None


def allowlisted(
    author: Author, allowlist: frozenset[int], identities: frozenset[str] = frozenset()
) -> bool:
    """Whether the author is on the operator's allowlist: a numeric GitHub user id in
    `allowlist`, or on Azure DevOps an identity id (a GUID) or an account (the unique name,
    `alice@contoso.com`) in `identities`, any case (`azure_identities`)."""
    if numeric_id(author.id) in allowlist:
        return True
    named = {author.id.casefold(), author.login.casefold()} - {""}
    return bool(named & identities)


def needs_permission(
    author: Author, allowlist: frozenset[int], identities: frozenset[str] = frozenset()
) -> bool:
    """Whether `decide` needs the author's permission level (one API call) to decide.

    Bots and allowlisted ids are decided without it (`may_act` never reads it for them).
    """
    return (
        not author.is_bot and not allowlisted(author, allowlist, identities) and bool(author.login)
    )


def decide(
    author: Author,
    permission: str | None,
    allowlist: frozenset[int],
    identities: frozenset[str] = frozenset(),
    words: Vocabulary | None = None,
) -> Decision:
    """`may_act` for a comment's author; pairbot's own never get here (the intake drops them).

    An Azure DevOps identity id or account on `identities` may act like an allowlisted GitHub
    id. `words`: the host's vocabulary a refusal speaks; by default the one the author's id
    belongs to (a number: GitHub's; `local:…`: the local forge's; else Azure DevOps')."""
    uid = numeric_id(author.id)
    if uid is None and allowlisted(author, allowlist, identities):
        kind = "bot" if author.is_bot else "user"
        who = author.login or author.id
        return Decision(True, f"{kind} {who} is on the operator's allowlist", False)
    if uid is None and author.is_bot:
        who = author.login or author.id
        return Decision(False, f"bot {who} is not on the operator's allowlist", silent=True)
    return may_act(
        author_id=uid if uid is not None else -1,
        author_login=author.login,
        author_is_bot=author.is_bot,
        permission=permission,
        allowlist=allowlist,
        own_bot_id=None,
        words=words or _words_of(author.id),
    )


def _words_of(author_id: str) -> Vocabulary:
    """The vocabulary of the host an author id comes from, when the caller did not say."""
    if numeric_id(author_id) is not None:
        return GITHUB
    return LOCAL if author_id.startswith("local:") else AZURE_DEVOPS
