"""Which Azure DevOps identities are not people: one pure rule for the adapter and the intake.

Azure DevOps marks no comment "written by a bot" the way GitHub's `user.type == "Bot"` does.
What it does give (https://learn.microsoft.com/azure/devops/organizations/security/
about-security-identity and the Graph API's subject descriptors,
https://learn.microsoft.com/rest/api/azure/devops/graph/) is enough to tell:

    descriptor  a subject descriptor's prefix says its kind: `aad.`/`msa.`/`vss.` people,
                `svc.` service identities (the build services among them), `s2s.`
                service-to-service identities, `aadsp.` Azure AD service principals (apps and
                managed identities); an identity descriptor names its type the same way
                (`Microsoft.TeamFoundation.ServiceIdentity;…`,
                `Microsoft.VisualStudio.Services.Claims.AadServicePrincipal;…`)
    isContainer a group or team: never one person
    subjectKind `servicePrincipal` or `group` (Graph subjects)
    displayName the build service accounts every project has, `Project Collection Build
                Service (<org>)` and `<project> Build Service (<org>)`, which also reach a
                work item's fields as plain `Name <account>` text with no descriptor at all

`is_service_identity` is pure: no I/O, no SDK.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["is_service_identity"]

# Subject descriptors (Graph) of identities that are not people.
SERVICE_SUBJECT_PREFIXES: Final = ("svc.", "s2s.", "aadsp.")
# Identity descriptors (Identities API): `<type>;<id>` for the same kinds.
SERVICE_IDENTITY_TYPES: Final = (
    "microsoft.teamfoundation.serviceidentity;",
    "microsoft.visualstudio.services.claims.aadserviceprincipal;",
    "microsoft.teamfoundation.identity;",  # a group (a container) in identity form
)
SERVICE_SUBJECT_KINDS: Final = frozenset({"serviceprincipal", "group"})
# `Project Collection Build Service (fabrikam)`, `Fabrikam-Fiber Build Service (fabrikam)`.
_BUILD_SERVICE: Final = re.compile(r".*\bBuild Service \([^()]+\)\s*\Z", re.IGNORECASE)


def is_service_identity(
    *,
    descriptor: str = "",
    display_name: str = "",
    is_container: bool = False,
    subject_kind: str = "",
) -> bool:
    """Whether an identity is a service, an app or a group rather than a person. Pure."""
    if is_container or subject_kind.casefold() in SERVICE_SUBJECT_KINDS:
        return True
    described = descriptor.strip().casefold()
    if described.startswith(SERVICE_SUBJECT_PREFIXES + SERVICE_IDENTITY_TYPES):
        return True
    return bool(_BUILD_SERVICE.fullmatch(display_name.strip()))
