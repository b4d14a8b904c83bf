"""The Azure DevOps adapter reads a branch's "Require a merge strategy" policy: what
`merge_methods` says the default branch allows, and what `merge` checks on the branch a pull
request targets before completing it. Against the loopback fake (tests/support/fake_azure.py),
whose policy configurations have the shape of the policy REST reference and whose completion
refuses a strategy a blocking policy does not allow."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from hosts.azure_devops import AzureDevOpsHost
from hosts.azure_devops.merge_policy import MERGE_POLICY_TYPE, allowed_by_policy
from hosts.errors import Conflict, Unsupported
from tests.hosts.test_azure_devops import TOKEN, cache_dir, clock, fake, host, run
from tests.support.fake_azure import PROJECT, REPO, FakeAzureDevOps

__all__ = ["cache_dir", "clock", "fake", "host"]  # the fixtures this module uses


def configuration(
    *, kind: str = MERGE_POLICY_TYPE, enabled: bool = True, blocking: bool = True, **settings: Any
) -> Any:
    """An SDK `PolicyConfiguration` as the adapter reads it (attributes, `settings` a dict)."""
    return SimpleNamespace(
        type=SimpleNamespace(id=kind),
        is_enabled=enabled,
        is_blocking=blocking,
        is_deleted=False,
        settings=settings,
    )


@pytest.mark.parametrize(
    ("configurations", "allowed"),
    [
        pytest.param([], None, id="no-policy"),
        pytest.param([configuration(allowSquash=True)], {"squash"}, id="squash-only"),
        pytest.param(
            [configuration(allowNoFastForward=True, allowRebaseMerge=True)],
            {"merge", "rebase"},
            id="merge-and-semi-linear",
        ),
        pytest.param([configuration(allowRebase=True)], {"rebase"}, id="rebase-only"),
        pytest.param([configuration(useSquashMerge=True)], {"squash"}, id="legacy-squash"),
        pytest.param(
            [configuration(useSquashMerge=False)], {"squash", "merge", "rebase"}, id="legacy-off"
        ),
        pytest.param(
            [
                configuration(allowSquash=True, allowNoFastForward=True),
                configuration(allowSquash=True, allowRebase=True),
            ],
            {"squash"},
            id="two-policies-intersect",
        ),
        pytest.param(
            [
                configuration(allowRebase=True, enabled=False),
                configuration(allowRebase=True, blocking=False),
                configuration(kind="0609b952-1397-4640-95ec-e00a01b2c241", allowRebase=True),
            ],
            None,
            id="disabled-optional-other-type",
        ),
        pytest.param([configuration(allowSquash=False)], set(), id="allows-nothing"),
    ],
)
def test_what_a_merge_strategy_policy_allows(configurations: list[Any], allowed: Any) -> None:
    assert allowed_by_policy(configurations) == allowed


def test_merge_methods_are_what_the_default_branchs_policy_allows(
    host: AzureDevOpsHost, fake: FakeAzureDevOps
) -> None:
    fake.require_merge_strategy("refs/heads/main", allowSquash=True, allowRebase=True)
    fake.require_merge_strategy("refs/heads/release", allowNoFastForward=True)  # another branch
    assert run(host.merge_methods()) == {"squash", "rebase"}
    asked = [r for r in fake.requests if r.path.endswith("/_apis/git/policy/configurations")]
    assert len(asked) == 1 and "refName=refs%2Fheads%2Fmain" in asked[0].query
    assert f"policyType={MERGE_POLICY_TYPE}" in asked[0].query


def test_a_prefix_policy_for_every_repository_applies_too(
    host: AzureDevOpsHost, fake: FakeAzureDevOps
) -> None:
    fake.require_merge_strategy("refs/heads/", match="Prefix", repository=None, allowRebase=True)
    assert run(host.merge_methods()) == {"rebase"}


def test_a_merge_the_target_branchs_policy_refuses_stops_before_completing(
    host: AzureDevOpsHost, fake: FakeAzureDevOps
) -> None:
    fake.require_merge_strategy("refs/heads/main", allowSquash=True)
    pull = fake.seed_pull("pair/limited")
    before = fake.writes()
    with pytest.raises(Conflict) as refused:
        run(host.merge(pull, fake.head_of(pull), "merge"))
    assert "the merge strategy policy of 'main' allows squash" in str(refused.value)
    assert "cycle.mergeMethod" in str(refused.value)
    assert fake.writes() == before  # nothing was asked of the pull request
    done = run(host.merge(pull, fake.head_of(pull), "squash"))
    assert done.merged and fake.pull(pull).completion is not None
    assert fake.pull(pull).completion["mergeStrategy"] == "squash"


def test_a_branch_allowing_only_rebase_names_it_and_the_merge_says_why_not(
    host: AzureDevOpsHost, fake: FakeAzureDevOps
) -> None:
    """pairbot makes no rebase completion (it updates the source branch, so the merged commits
    are not the reviewed ones): the card stops with that reason, not a policy rejection."""
    fake.require_merge_strategy("refs/heads/main", allowRebase=True, allowRebaseMerge=True)
    assert run(host.merge_methods()) == {"rebase"}
    pull = fake.seed_pull("pair/rebase-only")
    with pytest.raises(Unsupported) as unsupported:
        run(host.merge(pull, fake.head_of(pull), "rebase"))
    assert unsupported.value.capability == "merge:rebase"


def test_the_fake_refuses_what_the_policy_does_not_allow(fake: FakeAzureDevOps) -> None:
    """The fake checks what the service checks: a direct completion the policy refuses."""
    fake.require_merge_strategy("refs/heads/main", allowSquash=True)
    pull = fake.seed_pull("pair/direct")
    body = {
        "status": "completed",
        "lastMergeSourceCommit": {"commitId": fake.head_of(pull)},
        "completionOptions": {"mergeStrategy": "noFastForward"},
    }
    url = f"{fake.base_url}/{PROJECT}/_apis/git/repositories/{REPO}/pullRequests/{pull}"
    answer = httpx.patch(
        url,
        params={"api-version": "7.1"},
        json=body,
        auth=("", TOKEN),
        headers={"Accept": "application/json;api-version=7.1"},
        timeout=30,
    )
    assert answer.status_code == 400 and "not allowed by the policy" in answer.text
