"""`AzurePullRequests`: Azure Repos pull requests: opened, read, labelled, completed, abandoned.

`open_pull` returns the active pull request of a head branch if there is one (a create that
raced one, TF401179, or failed after being stored is re-read, not retried). `merge_methods`
says what the default branch's "Require a merge strategy" policy allows (`merge_policy`), and
`merge` completes the pull request at the reviewed head (squash or merge; a draft is published
first) once the policy of the branch it targets allows that method, and polls a queued
completion a bounded number of times, with `transitionWorkItems` as the host is set
(on by default: the linked work item moves to its resolved or done state, as Azure DevOps'
"Complete associated work items after merging" does). A pull's state labels are its PR labels.
"""

from __future__ import annotations

from hosts.adapter import Labels
from hosts.azure_devops import convert
from hosts.azure_devops.merge_policy import EVERY, MergePolicy
from hosts.azure_devops.sdk import Sdk, models
from hosts.errors import Conflict, HostUnavailable, Unsupported
from hosts.labels import LabelPlan
from hosts.models import MergeMethod, MergeResult, Pull


class AzurePullRequests(MergePolicy):
    """Open, read, label, complete and abandon pull requests."""

    def closing_reference(self, card: int) -> str:
        """`Work item #7 is linked to this pull request.` (the link itself is `link_card`'s),
        and what completing it does when `transition_work_items` is on. `#7` is Azure Repos'
        work item mention; GitHub's `Closes #7` means nothing here."""
        return self.vocabulary.closing_reference(card, transitions=self.transition_work_items)

    def _pull_from(self, pr: Sdk, web_url: str) -> Pull:
        mergeable = convert.MERGEABLE.get(
            str(pr.merge_status or "")
        )  # queued / notSet: not known yet
        reviewers = [r for r in pr.reviewers or [] if not r.is_container]
        return Pull(
            number=int(pr.pull_request_id),
            head_branch=convert.branch(pr.source_ref_name),
            head_sha=convert.commit(pr.last_merge_source_commit),
            base_branch=convert.branch(pr.target_ref_name),
            state=convert.PULL_STATE.get(str(pr.status), "open"),
            draft=bool(pr.is_draft),
            mergeable=mergeable,
            title=str(pr.title or ""),
            body=str(pr.description or ""),
            url=f"{web_url}/pullrequest/{pr.pull_request_id}",
            labels=tuple(str(lb.name) for lb in pr.labels or [] if lb.active is not False),
            assignees=tuple(convert.author_from(r).login for r in reviewers),
        )

    async def get_pull(self, number: int) -> Pull:
        pr = await self._pr(number)
        return self._pull_from(pr, (await self._repository()).web_url)

    async def _active_pull_for(self, head: str) -> Sdk | None:
        git, _ = models()
        criteria = git.GitPullRequestSearchCriteria(
            source_ref_name=f"refs/heads/{head}", status="active"
        )
        found = await self._call(
            f"pull requests from {head!r}",
            lambda c: c.git.get_pull_requests(self.repository, criteria, project=self.project),
        )
        mine = sorted(found or [], key=lambda pr: int(pr.pull_request_id))
        return mine[0] if mine else None

    async def open_pull(
        self, head: str, base: str, title: str, body: str, *, draft: bool = True
    ) -> Pull:
        web_url = (await self._repository()).web_url
        existing = await self._active_pull_for(head)
        if existing is not None:
            return self._pull_from(existing, web_url)
        if head == base:
            raise Conflict(f"a pull request needs two branches; head and base are {head!r}")
        git, _ = models()
        new = git.GitPullRequest(
            source_ref_name=f"refs/heads/{head}",
            target_ref_name=f"refs/heads/{base}",
            title=title,
            description=convert.truncate_description(body),
            is_draft=draft,
        )
        try:
            pr = await self._call(
                f"open_pull {head!r}",
                lambda c: c.git.create_pull_request(new, self.repository, project=self.project),
                write=True,
            )
        except (Conflict, HostUnavailable):
            # Opened meanwhile (TF401179), or stored before a 5xx: return that one.
            existing = await self._active_pull_for(head)
            if existing is None:
                raise
            pr = existing
        return self._pull_from(pr, web_url)

    async def _abandon_pull(self, number: int) -> None:
        """Abandon an active pull request (an abandoned one stays; a completed one cannot)."""
        pr = await self._pr(number)
        if str(pr.status) == "completed":
            raise Conflict(f"PR #{number} is completed; it cannot be abandoned")
        if str(pr.status) == "abandoned":
            return
        git, _ = models()
        await self._call(
            f"abandon PR #{number}",
            lambda c: c.git.update_pull_request(
                git.GitPullRequest(status="abandoned"),
                self.repository,
                number,
                project=self.project,
            ),
            write=True,
        )

    # -- labels (a pull's state labels) ---------------------------------------------------------

    async def _pull_labels(self, pull: int) -> Labels:
        """The pull request's active labels."""
        labels = await self._call(
            f"labels of PR #{pull}",
            lambda c: c.git.get_pull_request_labels(self.repository, pull, project=self.project),
        )
        return Labels(tuple(str(lb.name) for lb in labels or [] if lb.active is not False))

    async def _write_pull_labels(self, pull: int, plan: LabelPlan) -> None:
        """Remove, then add (never two state labels at once)."""
        for name in plan.remove:
            await self._pull_label(pull, name, add=False)
        for name in plan.add:
            await self._pull_label(pull, name, add=True)

    async def _pull_label(self, pull: int, name: str, *, add: bool) -> None:
        if add:
            git, _ = models()
            await self._call(
                f"add label {name!r} to PR #{pull}",
                lambda c: c.git.create_pull_request_label(
                    git.WebApiCreateTagRequestData(name=name),
                    self.repository,
                    pull,
                    project=self.project,
                ),
                write=True,
            )
            return
        await self._call(
            f"remove label {name!r} from PR #{pull}",
            lambda c: c.git.delete_pull_request_labels(
                self.repository, pull, name, project=self.project
            ),
            write=True,
        )

    # -- merge ----------------------------------------------------------------------------------

    async def merge_methods(self) -> frozenset[MergeMethod] | None:
        """What the default branch's merge-strategy policy allows (squash, merge, rebase);
        without one, the completions pairbot makes: squash and merge. Rebase is named when the
        policy allows it, so that a branch allowing only rebase stops the card with `merge`'s
        reason (a rebase completion updates the source branch, so the merged commits would not
        be the reviewed ones) rather than with a completion the policy refuses."""
        branch = (await self._repository()).default_branch
        allowed = await self._allowed_on(branch) if branch else None
        if allowed is None:
            return frozenset(m for m in EVERY if m in convert.MERGE_STRATEGY)
        return allowed

    async def merge(self, pull: int, head_sha: str, method: MergeMethod) -> MergeResult:
        strategy = convert.MERGE_STRATEGY.get(method)
        if strategy is None:
            raise Unsupported(
                f"merge:{method}",
                "pairbot completes Azure DevOps pull requests by squash or merge only: a rebase "
                "completion rewrites the source branch, so the merged commits are not the reviewed",
            )
        pr = await self._pr(pull)
        same_head = convert.commit(pr.last_merge_source_commit).lower() == head_sha.lower()
        if str(pr.status) == "completed" and same_head:
            # Idempotent: a resumed merge of the same reviewed head gets the first result.
            return MergeResult(merged=True, sha=convert.commit(pr.last_merge_commit) or None)
        if str(pr.status) != "active":
            raise Conflict(f"PR #{pull} is {pr.status}, not active")
        if not same_head:
            raise Conflict(
                f"PR #{pull} head is {convert.commit(pr.last_merge_source_commit)[:12]}, "
                f"not the reviewed {head_sha[:12]}"
            )
        target = convert.branch(pr.target_ref_name)
        allowed = await self._allowed_on(target)
        if allowed is not None and method not in allowed:
            named = ", ".join(m for m in ("squash", "merge", "rebase") if m in allowed)
            raise Conflict(
                f"PR #{pull} cannot be completed by {method}: the merge strategy policy of "
                f"{target!r} allows {named or 'no merge type'}; set cycle.mergeMethod to one "
                "of those (or auto), or change the branch policy"
            )
        if pr.completion_options is not None and str(pr.merge_status) == "queued":
            # A completion an earlier call requested is still running: wait for it rather than
            # request it again (a write whose effect on a queued completion is not documented).
            return await self._await_completion(pull, pr)
        git, _ = models()
        if pr.is_draft:
            # Azure DevOps cannot complete a draft: publish it first (as GitHub marks it ready).
            await self._call(
                f"publish draft PR #{pull}",
                lambda c: c.git.update_pull_request(
                    git.GitPullRequest(is_draft=False), self.repository, pull, project=self.project
                ),
                write=True,
            )
        update = git.GitPullRequest(
            status="completed",
            last_merge_source_commit=git.GitCommitRef(commit_id=head_sha),
            completion_options=git.GitPullRequestCompletionOptions(
                merge_strategy=strategy, transition_work_items=self.transition_work_items
            ),
        )
        done = await self._call(
            f"complete PR #{pull}",
            lambda c: c.git.update_pull_request(
                update, self.repository, pull, project=self.project
            ),
            write=True,
        )
        return await self._await_completion(pull, done)

    async def _await_completion(self, pull: int, done: Sdk) -> MergeResult:
        """Completion can be queued: poll a bounded number of times; merged=False when it is
        still running after them (the caller asks again later)."""
        for _ in range(self._merge_polls):
            if str(done.status) == "completed":
                return MergeResult(merged=True, sha=convert.commit(done.last_merge_commit) or None)
            if str(done.status) == "abandoned" or str(done.merge_status) in (
                "conflicts",
                "failure",
                "rejectedByPolicy",
            ):
                reason = done.merge_failure_message or done.merge_status or done.status
                raise Conflict(f"PR #{pull} did not complete: {reason}")
            await self._sleep(1.0)
            done = await self._pr(pull)
        if str(done.status) == "completed":
            return MergeResult(merged=True, sha=convert.commit(done.last_merge_commit) or None)
        return MergeResult(merged=False)
