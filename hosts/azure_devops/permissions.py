"""`AzurePermissions`: what a user may do, read from the Git security namespace's ACLs.

A user's permission is their effective bits on the repository and on its default branch (the
base of pairbot's pull requests), the branch's deny winning (`convert.branch_bits`), mapped by
`convert.permission_from_bits`. An identity that does not match exactly one account is `none`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from hosts.azure_devops import convert
from hosts.azure_devops.project import AzureProject
from hosts.azure_devops.sdk import Sdk
from hosts.models import Permission

log = logging.getLogger(__name__)


class AzurePermissions(AzureProject):
    """A user's permission on the repository's default branch."""

    async def permission(self, user: str) -> Permission:
        """The user's effective permission on the repository's default branch — the base of
        pairbot's pull requests — with that branch's overrides (see `permission_from_bits`)."""
        identities = await self._call(
            f"identity {user!r}",
            lambda c: c.identity.read_identities(search_filter="General", filter_value=user),
        )
        found = list(identities or [])

        def account(identity: Sdk) -> str:
            props = identity.properties if isinstance(identity.properties, Mapping) else {}
            value = props.get("Account")
            return str(value.get("$value", "")) if isinstance(value, Mapping) else ""

        exact = [i for i in found if account(i).casefold() == user.casefold()]
        chosen = exact or found
        if len(chosen) != 1:
            log.info("permission: %d identities match %r; treating as none", len(chosen), user)
            return "none"
        descriptor = str(chosen[0].descriptor)
        repo = await self._repository()
        allow, deny = await self._bits(user, descriptor, f"repoV2/{repo.project_id}/{repo.id}")
        if not repo.default_branch:  # an empty repository has no branch to override anything
            return convert.permission_from_bits(allow & ~deny)
        token = convert.branch_token(repo.project_id, repo.id, repo.default_branch)
        on_branch, denied_on_branch = await self._bits(user, descriptor, token)
        return convert.permission_from_bits(
            convert.branch_bits(allow, deny, on_branch, denied_on_branch)
        )

    async def _bits(self, user: str, descriptor: str, token: str) -> tuple[int, int]:
        """The identity's effective (allow, deny) bits on one Git security token."""
        acls = await self._call(
            f"permissions of {user!r}",
            lambda c: c.security.query_access_control_lists(
                convert.GIT_NAMESPACE,
                token=token,
                descriptors=descriptor,
                include_extended_info=True,
            ),
        )
        allow = deny = 0
        for acl in acls or []:
            for key, ace in (acl.aces_dictionary or {}).items():
                if str(key).casefold() != descriptor.casefold():
                    continue
                info = ace.extended_info
                allow |= int((info.effective_allow if info else None) or ace.allow or 0)
                deny |= int((info.effective_deny if info else None) or ace.deny or 0)
        return allow, deny
