"""Which Azure DevOps identities are bots (hosts.identities): the one rule the adapter and the
service-hook intake share."""

from __future__ import annotations

from typing import Any

import pytest

from hosts.identities import is_service_identity


@pytest.mark.parametrize(
    ("identity", "is_bot"),
    [
        pytest.param({"descriptor": "aad.NzY0ZTQ", "display_name": "Jamal"}, False, id="aad-user"),
        pytest.param({"descriptor": "msa.NzY0ZTQ"}, False, id="msa-user"),
        pytest.param({"descriptor": "svc.NzY0ZTQ"}, True, id="service-identity"),
        pytest.param({"descriptor": "s2s.NzY0ZTQ"}, True, id="service-to-service"),
        pytest.param({"descriptor": "AADSP.NzY0ZTQ"}, True, id="service-principal-any-case"),
        pytest.param(
            {"descriptor": "Microsoft.TeamFoundation.ServiceIdentity;abc:Build:def"},
            True,
            id="identity-descriptor-service",
        ),
        pytest.param(
            {"descriptor": "Microsoft.VisualStudio.Services.Claims.AadServicePrincipal;x"},
            True,
            id="identity-descriptor-app",
        ),
        pytest.param(
            {"descriptor": "Microsoft.IdentityModel.Claims.ClaimsIdentity;t\\jamal@x"},
            False,
            id="identity-descriptor-person",
        ),
        pytest.param({"is_container": True}, True, id="group"),
        pytest.param({"subject_kind": "servicePrincipal"}, True, id="graph-service-principal"),
        pytest.param({"subject_kind": "user"}, False, id="graph-user"),
        pytest.param(
            {"display_name": "Project Collection Build Service (fabrikam)"}, True, id="pcbs"
        ),
        pytest.param(
            {"display_name": "Fabrikam-Fiber-Git Build Service (fabrikam)"},
            True,
            id="project-build-service",
        ),
        pytest.param({"display_name": "Build Service Fan"}, False, id="a-person-named-so"),
        pytest.param({}, False, id="nothing-known"),
    ],
)
def test_service_identities_apps_and_groups_are_bots(
    identity: dict[str, Any], is_bot: bool
) -> None:
    assert is_service_identity(**identity) is is_bot
