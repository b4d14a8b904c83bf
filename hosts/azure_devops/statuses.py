"""`AzurePullStatuses`: what is reported on a head: pairbot's `pair-review` and everyone else's.

Statuses are per iteration on Azure Repos: the review status is a PR status (context
{genre: pair, name: pair-review}) posted on the iteration whose source commit is the reviewed
head, so a moved head has none. `head_checks` is the outside evidence a review weighs: the
other services' statuses on the head's iterations and, while it is the PR's head, its build
policy evaluations.
"""

from __future__ import annotations

from hosts.azure_devops import convert
from hosts.azure_devops.project import AzureProject
from hosts.azure_devops.sdk import Sdk, models
from hosts.errors import Conflict
from hosts.models import REVIEW_CONTEXT, HeadCheck, ReviewState, ReviewStatus


class AzurePullStatuses(AzureProject):
    """The review status on a head, and the other checks on it."""

    async def _iterations_of(self, pull: int, head_sha: str) -> list[int]:
        """The ids of the pull's iterations whose source commit is `head_sha`, newest first."""
        iterations = await self._call(
            f"iterations of PR #{pull}",
            lambda c: c.git.get_pull_request_iterations(
                self.repository, pull, project=self.project
            ),
        )
        sha = head_sha.lower()
        ids = [
            int(it.id)
            for it in iterations or []
            if convert.commit(it.source_ref_commit).lower() == sha
        ]
        return sorted(ids, reverse=True)

    async def _iteration_statuses(self, pull: int, iteration: int) -> list[Sdk]:
        statuses = await self._call(
            f"statuses of PR #{pull} iteration {iteration}",
            lambda c: c.git.get_pull_request_iteration_statuses(
                self.repository, pull, iteration, project=self.project
            ),
        )
        return list(statuses or [])

    async def _our_statuses(self, pull: int, iteration: int) -> list[Sdk]:
        statuses = await self._iteration_statuses(pull, iteration)
        ours = [
            s
            for s in statuses or []
            if s.context is not None
            and s.context.genre == convert.REVIEW_GENRE
            and s.context.name == REVIEW_CONTEXT
        ]
        return sorted(ours, key=lambda s: int(s.id or 0))

    async def set_review_status(
        self, pull: int, head_sha: str, state: ReviewState, description: str
    ) -> ReviewStatus:
        if state not in convert.TO_AZURE_STATE:
            raise ValueError(f"{state!r} is not a review state")
        iterations = await self._iterations_of(pull, head_sha)
        if not iterations:
            raise Conflict(f"PR #{pull} has no iteration with head {head_sha[:12]}: it moved")
        iteration = iterations[0]
        wanted = ReviewStatus(head_sha=head_sha, state=state, description=description)
        ours = await self._our_statuses(pull, iteration)
        if ours and (str(ours[-1].state), ours[-1].description or "") == (
            convert.TO_AZURE_STATE[state],
            description,
        ):
            return wanted  # already so: re-setting the same status writes nothing
        git, _ = models()
        status = git.GitPullRequestStatus(
            state=convert.TO_AZURE_STATE[state],
            description=description,
            context=git.GitStatusContext(genre=convert.REVIEW_GENRE, name=REVIEW_CONTEXT),
        )
        await self._call(
            f"set pair-review on PR #{pull}",
            lambda c: c.git.create_pull_request_iteration_status(
                status, self.repository, pull, iteration, project=self.project
            ),
            write=True,
        )
        return wanted

    async def get_review_status(self, pull: int, head_sha: str) -> ReviewStatus | None:
        for iteration in await self._iterations_of(pull, head_sha):
            ours = await self._our_statuses(pull, iteration)
            if ours:
                latest = ours[-1]
                return ReviewStatus(
                    head_sha=head_sha,
                    state=convert.FROM_AZURE_STATE.get(str(latest.state), "error"),
                    description=str(latest.description or ""),
                )
        return None

    # -- outside evidence -----------------------------------------------------------------------

    async def head_checks(self, pull: int, head_sha: str) -> list[HeadCheck]:
        """The other services' PR statuses on the iterations whose head is `head_sha`, the
        newest per name; `pair-review` left out. A status posted on the pull request without
        an iteration is bound to no head and is not read. Azure DevOps does not say whether a
        status is required here (a branch policy does, elsewhere): `required` stays False."""
        latest: dict[str, tuple[int, HeadCheck]] = {}
        for iteration in await self._iterations_of(pull, head_sha):
            for status in await self._iteration_statuses(pull, iteration):
                if status.context is None or convert.is_review_status(status):
                    continue
                check = convert.head_check(status)
                rank = (iteration << 32) + int(status.id or 0)
                if check.name not in latest or latest[check.name][0] < rank:
                    latest[check.name] = (rank, check)
        checks = [check for _, check in sorted(latest.values(), key=lambda item: item[1].name)]
        return checks + await self._build_checks(pull, head_sha)

    async def _build_checks(self, pull: int, head_sha: str) -> list[HeadCheck]:
        """The PR's build policy evaluations, while `head_sha` is the PR's head: they are
        the policy's state for the PR as it is now, so for an older head they say nothing."""
        pr = await self._pr(pull)
        if convert.commit(pr.last_merge_source_commit).lower() != head_sha.lower():
            return []
        repo = await self._repository()
        artifact = f"vstfs:///CodeReview/CodeReviewId/{repo.project_id}/{pull}"
        records = await self._call(
            f"policy evaluations of PR #{pull}",
            lambda c: c.policy.get_policy_evaluations(self.project, artifact),
        )
        web = f"{self.organization_url}/{self.project}"
        found = (convert.build_check(record, web) for record in records or [])
        return sorted((c for c in found if c is not None), key=lambda c: c.name)
