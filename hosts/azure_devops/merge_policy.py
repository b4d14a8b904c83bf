"""The merge types a branch allows on Azure Repos: its "Require a merge strategy" policy.

    allowed_by_policy(configurations) -> frozenset[MergeMethod] | None    pure
    MergePolicy (mixin of AzurePullRequests): await ._allowed_on(branch)  one listing

Azure Repos limits how a pull request into a branch may be completed with a branch policy of
type "Require a merge strategy" (id `fa4e907d-c16b-4a4c-9dfa-4916e5d171ab`; older
organisations call it "Limit merge types"). Its settings say which completions are allowed:
`allowSquash` (squash), `allowNoFastForward` (a merge commit), `allowRebase` (rebase and
fast-forward) and `allowRebaseMerge` (semi-linear: rebase, then a merge commit). An older form
has only `useSquashMerge: true` (squash required). pairbot names them as every host does:
squash, merge, and rebase for either rebase form.
https://learn.microsoft.com/en-us/azure/devops/repos/git/branch-policies#limit-merge-types
https://learn.microsoft.com/en-us/cli/azure/repos/policy/merge-strategy

They are read with Git's "Policy Configurations - Get" for the repository, the branch's full
ref name and the policy type (`GET {project}/_apis/git/policy/configurations?repositoryId=
&refName=&policyType=`), which also returns the project-wide and prefix-scoped policies that
apply to that ref. Only an enabled, blocking, not deleted policy limits a completion (an
optional one only advises); where several apply, a completion must satisfy each, so the
allowed sets intersect. None: no policy limits the branch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from hosts.azure_devops.project import AzureProject
from hosts.azure_devops.sdk import Clients, Sdk
from hosts.models import MergeMethod

MERGE_POLICY_TYPE: Final = "fa4e907d-c16b-4a4c-9dfa-4916e5d171ab"
# The policy's settings, by the method each allows.
POLICY_SETTINGS: Final[Mapping[str, MergeMethod]] = {
    "allowSquash": "squash",
    "allowNoFastForward": "merge",
    "allowRebase": "rebase",
    "allowRebaseMerge": "rebase",
}
EVERY: Final[frozenset[MergeMethod]] = frozenset({"squash", "merge", "rebase"})
MAX_PAGES: Final = 10  # of policy configurations for one ref (a handful in practice)


def allowed_by_policy(configurations: Iterable[Any]) -> frozenset[MergeMethod] | None:
    """What the merge-strategy policies among `configurations` allow (SDK
    `PolicyConfiguration`s, read tolerantly); None when none of them limits a completion."""
    allowed: frozenset[MergeMethod] | None = None
    for config in configurations:
        kind = getattr(getattr(config, "type", None), "id", None)
        if str(kind or "").lower() != MERGE_POLICY_TYPE:
            continue
        if getattr(config, "is_deleted", False) or getattr(config, "is_enabled", True) is False:
            continue
        if getattr(config, "is_blocking", True) is False:
            continue
        settings = getattr(config, "settings", None)
        these = _methods(settings if isinstance(settings, Mapping) else {})
        allowed = these if allowed is None else allowed & these
    return allowed


def _methods(settings: Mapping[str, Any]) -> frozenset[MergeMethod]:
    if not any(key in settings for key in POLICY_SETTINGS):
        # The older form: `useSquashMerge: true` requires squash; without it, no limit.
        return frozenset({"squash"}) if settings.get("useSquashMerge") is True else EVERY
    return frozenset(m for key, m in POLICY_SETTINGS.items() if settings.get(key) is True)


class MergePolicy(AzureProject):
    """Reads a branch's merge-strategy policies (see the module docstring)."""

    async def _allowed_on(self, branch: str) -> frozenset[MergeMethod] | None:
        """The merge types the policies on `branch` allow; None when none limits it."""
        repo = await self._repository()
        ref = f"refs/heads/{branch}"
        configurations: list[Sdk] = []
        token: str | None = None
        for _ in range(MAX_PAGES):

            def listing(c: Clients, token: str | None = token) -> Sdk:
                return c.git.get_policy_configurations(
                    self.project,
                    repository_id=repo.id,
                    ref_name=ref,
                    policy_type=MERGE_POLICY_TYPE,
                    continuation_token=token,
                )

            page = await self._call(f"merge strategy policies of {ref}", listing)
            configurations += list(getattr(page, "policy_configurations", None) or [])
            token = getattr(page, "continuation_token", None) or None
            if token is None:
                break
        return allowed_by_policy(configurations)
