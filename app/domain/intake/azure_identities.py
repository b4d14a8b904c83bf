"""Who wrote an Azure DevOps comment, as the notification says it, and who the allowlist names.

A service hook names a commenter in one of three shapes, and pairbot reads each for what it
carries (https://learn.microsoft.com/azure/devops/service-hooks/events):

    an IdentityRef              `{id, uniqueName, displayName, descriptor, isContainer}`: a PR
                                comment's `author`, an update's `revisedBy`, a work item's
                                identity fields when the hook sends them as objects
    `Name <account>` text       what `System.ChangedBy` holds in a `workitem.commented`
                                resource: `Jamal Hartnett <fabrikamfiber4@hotmail.com>` (the
                                account is the identity's unique name: an e-mail or UPN, or
                                `DOMAIN\\user` on Azure DevOps Server)
    a bare display name         `Jamal Hartnett`: no account at all (Microsoft's own sample)

`commenter` turns any of them into an `Author` whose `login` is the account (the unique name)
and whose `id` is the identity id when the shape carries one, else the account; a descriptor
or a display name tells a service identity from a person (`hosts.identities`).
`workitem_commenter` prefers the resource's `revisedBy` (an IdentityRef, with the id) over the
text of `System.ChangedBy`.

`PAIR_ALLOWLIST` on Azure DevOps takes identity ids (GUIDs, any case) and accounts
(`alice@contoso.com`, `FABRIKAM\\alice`; compared case-insensitively, as Azure DevOps compares
unique names): `parse_identity_allowlist`. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from hosts.identities import is_service_identity
from hosts.models import Author

__all__ = ["commenter", "is_identity_id", "parse_identity_allowlist", "workitem_commenter"]

# An Azure DevOps identity id: a GUID in its 8-4-4-4-12 form.
_GUID: Final = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE
)
# An account (an identity's unique name): `user@domain` (Azure AD / Microsoft account) or
# `DOMAIN\user` (Azure DevOps Server, Active Directory). No spaces, no separators.
_ACCOUNT: Final = re.compile(
    r"[^\s,;<>@\\]+@[^\s,;<>@\\]+\.[^\s,;<>@\\]+|[^\s,;<>@\\]+\\[^\s,;<>@\\]+"
)
# `Display Name <account>` as work-item identity fields hold it as text.
_NAMED: Final = re.compile(r"(?P<name>.*?)\s*<(?P<account>[^<>]+)>\s*\Z", re.DOTALL)


def is_identity_id(text: str) -> bool:
    """Whether `text` is an Azure DevOps identity id (a GUID)."""
    return _GUID.fullmatch(text) is not None


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def commenter(value: Any) -> Author:
    """An IdentityRef, `Name <account>` text or a bare name as an `Author` (see the module
    docstring); an empty `Author` for anything else."""
    if isinstance(value, Mapping):
        account = _text(value.get("uniqueName"))
        name = _text(value.get("displayName")) or _text(value.get("name"))
        ident = _text(value.get("id"))
        descriptor = _text(value.get("descriptor")) or _text(value.get("subjectDescriptor"))
        is_bot = is_service_identity(
            descriptor=descriptor,
            display_name=name,
            is_container=value.get("isContainer") is True,
            subject_kind=_text(value.get("subjectKind")),
        )
        login = account or name
        return Author(login=login, id=ident or account or name, is_bot=is_bot)
    text = _text(value)
    named = _NAMED.fullmatch(text)
    if named is None:
        # A display name only: nothing to match an allowlist entry on, nor an id.
        return Author(login=text, id=text, is_bot=is_service_identity(display_name=text))
    account, name = named.group("account").strip(), named.group("name").strip()
    return Author(login=account, id=account, is_bot=is_service_identity(display_name=name))


def workitem_commenter(resource: Mapping[str, Any], fields: Mapping[str, Any]) -> Author:
    """Who wrote a `workitem.commented` notification's comment: the resource's `revisedBy`
    when it names someone (an IdentityRef: the id and the descriptor come with it), else
    `System.ChangedBy` (an IdentityRef or `Name <account>` text)."""
    revised = resource.get("revisedBy")
    if isinstance(revised, Mapping) and (revised.get("uniqueName") or revised.get("id")):
        found = commenter(revised)
        changed = commenter(fields.get("System.ChangedBy"))
        # The text names the account when revisedBy carries the id alone.
        if not _text(revised.get("uniqueName")) and changed.login:
            return Author(login=changed.login, id=found.id, is_bot=found.is_bot or changed.is_bot)
        return found
    return commenter(fields.get("System.ChangedBy"))


def parse_identity_allowlist(text: str, name: str) -> frozenset[str]:
    """The Azure DevOps allowlist in variable `name`: identity ids (GUIDs) and accounts
    (`alice@contoso.com`, `FABRIKAM\\alice`), separated by commas or whitespace, case-folded.
    Pure.

    `ValueError` names the first bad entry and the allowed forms."""
    entries: set[str] = set()
    for entry in re.split(r"[\s,;]+", text.strip()):
        if not entry:
            continue
        if not (_GUID.fullmatch(entry) or _ACCOUNT.fullmatch(entry)):
            shown = entry if len(entry) <= 60 else entry[:59] + "…"
            raise ValueError(
                f"{name} entry {shown!r} is neither an Azure DevOps account nor an identity id; "
                "allowed: accounts as Azure DevOps shows them (alice@contoso.com, or "
                "FABRIKAM\\alice on Azure DevOps Server) and identity ids (GUIDs such as "
                "6b1f8ce2-53a3-4a8b-9d14-0d2f5f3c1a7e), separated by commas"
            )
        entries.add(entry.casefold())
    return frozenset(entries)
