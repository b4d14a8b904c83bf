"""End to end: the Azure Pipelines entry as a subprocess, with a pipeline job's environment.

`python -m action.azure` runs as the template's step would (docs/azure-pipelines.md): the
predefined variables (`TF_BUILD`, `SYSTEM_COLLECTIONURI`, `SYSTEM_TEAMPROJECT`,
`BUILD_REPOSITORY_NAME`, `BUILD_REASON`, `BUILD_SOURCESDIRECTORY`, `BUILD_BUILDID`,
`AGENT_TEMPDIRECTORY`) and the job's token mapped in as `SYSTEM_ACCESSTOKEN`, against the
loopback fake Azure DevOps (`tests.support.fake_azure`: REST for the SDK, and git smart HTTP
into a real bare repository). Every run starts from a fresh checkout made as `checkout: self`
makes it on a hosted agent (tests/support/checkouts.py): a DETACHED HEAD at BUILD_SOURCEVERSION,
no local branch, shallow with fetchDepth 1 (a new pipeline's default; not even
`origin/main` then), no persisted credential unless `persistCredentials: true`, and
BUILD_SOURCEBRANCH naming the branch built. What carries the card from one run to the next is
the `pair-state` branch the entry pushes with the job's token.

The whole cycle runs on fetchDepth 1 without persisted credentials; each other checkout
(fetchDepth 0, `persistCredentials: true`) takes the cycle's first step, the one that finds
the base branch and branches the card from it.

The card: a `/pair implement` work-item comment (the `workitem.commented` notification a
`resources: webhooks` run hands the entry), then scheduled runs until the card is ready for
merge. Secrets appear in the log only in the masking command.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import pytest

from hosts.models import Author, Target
from tests.cycle.azure_harness import TOKEN, AzureCardProject
from tests.e2e.azure_pipeline_harness import Pipeline, workitem_commented
from tests.support.card_project import card_journal, cycle_events
from tests.support.fake_azure import PROJECT, READ, REPO, FakeAzureDevOps, running
from tests.support.git import git

MASK = f"##vso[task.setvariable variable=pairbot.secret;issecret=true]{TOKEN}"


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeAzureDevOps]:
    with running(TOKEN, tmp_path / "fake") as server:
        yield server
    assert server.unexpected == [], "the entry sent requests the fake does not know"


def test_a_work_item_comment_then_scheduled_runs_then_an_approval_merge_the_pr(
    tmp_path: Path, fake: FakeAzureDevOps
) -> None:
    (tmp_path / "setup").mkdir()
    project = AzureCardProject.create(tmp_path / "setup", fake)
    pipeline = Pipeline(tmp_path, fake, project)
    card = Target("card", project.card)
    body = "<div>/pair implement until: merged merge: always</div>"
    implement = fake.comment_as(fake.human.author, card, body)
    notification = workitem_commented(fake, project.card, body, "6a9ee8b1-notification-1")

    code, out = pipeline.run("ResourceTrigger", notification)
    assert code == 0, out
    statuses = [pipeline.status(out)]
    assert statuses[0] not in ("ignored", "error", "duplicate"), out
    # Acknowledged once its record was pushed: a like on the work-item comment (no 👀 there).
    assert [r[:3] for r in fake.reactions] == [(project.card, int(implement), "like")]
    # The same notification again (a redelivery, a re-run) does nothing.
    code, out = pipeline.run("ResourceTrigger", notification)
    assert (code, pipeline.status(out)) == (0, "duplicate"), out

    for _ in range(12):
        code, out = pipeline.run("Schedule")
        assert code == 0, out
        statuses.append(pipeline.status(out))
        project.assert_invariants()
        if statuses[-1] == "awaiting-human":
            break
    # Ready for merge, and the merge gate waits for a person.
    assert statuses[-1] == "awaiting-human", statuses
    pull = project.pull()
    assert pull is not None
    pr = fake.pull(pull)
    assert (pr.source, pr.target, pr.created_by, pr.status) == (
        f"pair/card-{project.card}",
        "main",
        fake.pairbot,
        "active",
    )
    # The journal as the last run left it (its checkout pulled pair-state, then journaled).
    journal = card_journal(tmp_path / f"s{pipeline.runs}", project.card)
    reviewed = str(cycle_events(journal, "reviewed")[-1]["head"])
    assert pr.head == reviewed == fake.branch_sha(f"pair/card-{project.card}")
    assert [s["state"] for s in project.statuses(pull)[reviewed]][-1] == "succeeded"

    # The PR's head did not move: a `git.pullrequest.updated` notification changes nothing.
    updated = {
        "id": "notification-updated",
        "eventType": "git.pullrequest.updated",
        "resource": {
            "pullRequestId": pull,
            "sourceRefName": f"refs/heads/pair/card-{project.card}",
            "lastMergeSourceCommit": {"commitId": reviewed},
            "repository": {"name": REPO, "project": {"name": PROJECT}},
        },
    }
    code, out = pipeline.run("ResourceTrigger", updated)
    assert code == 0, out
    assert fake.pull(pull).head == reviewed and project.tags() == ["pr-state:awaiting-human"]

    # The maintainer approves with a second comment; the merge follows in that run.
    approve = "<div>/pair approve</div>"
    approval = fake.comment_as(fake.human.author, card, approve)
    code, out = pipeline.run(
        "ResourceTrigger", workitem_commented(fake, project.card, approve, "notification-2")
    )
    assert (code, pipeline.status(out)) == (0, "merged"), out
    pr = fake.pull(pull)
    assert (pr.status, pr.head) == ("completed", reviewed)
    # The succeeded pair-review status is on the PR's LAST iteration, whose head was reviewed.
    last = max(pr.iterations, key=lambda it: int(it["id"]))
    assert last["sourceRefCommit"]["commitId"] == reviewed
    on_last = [
        st["state"]
        for st in pr.statuses
        if st["iterationId"] == last["id"] and st["context"]["name"] == "pair-review"
    ]
    assert on_last and on_last[-1] == "succeeded"
    # One pr-state tag on the work item, one synthesis thread on the PR.
    assert project.tags() == ["pr-state:merged"]
    synthesis = [
        t
        for t in fake.threads(pull)
        if str(t["comments"][0]["content"]).startswith("<!-- pair:synthesis")
    ]
    assert len(synthesis) == 1
    assert [r[1] for r in fake.reactions] == [int(implement), int(approval)]
    project.assert_invariants()

    # The run-state travelled on pair-state, pushed with the job's token; no lock is left.
    state = fake.branch_sha("pair-state")
    assert state is not None
    files = git(fake.repo, "ls-tree", "-r", "--name-only", state).splitlines()
    assert ".pair/deliveries.json" in files and "lock.json" not in files
    # Secrets: the token only in its masking command, its header form nowhere.
    basic = base64.b64encode(f":{TOKEN}".encode()).decode()
    for log in pipeline.logs:
        assert log.count(TOKEN) == log.count(MASK) == 1, log
        assert basic not in log


@pytest.mark.parametrize(
    ("fetch_depth", "persist"),
    [
        pytest.param(0, False, id="fetchDepth-0"),
        pytest.param(0, True, id="fetchDepth-0-persistCredentials"),
        pytest.param(1, True, id="fetchDepth-1-persistCredentials"),
    ],
)
def test_each_checkout_takes_the_first_step_from_build_sourcebranch(
    tmp_path: Path, fake: FakeAzureDevOps, fetch_depth: int, persist: bool
) -> None:
    """The other checkouts (fetchDepth 1 without credentials runs the whole cycle above): a
    command's first step finds its base in BUILD_SOURCEBRANCH and branches the card from it,
    and a persisted header is gone before the agent runs."""
    (tmp_path / "setup").mkdir()
    project = AzureCardProject.create(tmp_path / "setup", fake)
    pipeline = Pipeline(
        tmp_path, fake, project, fetch_depth=fetch_depth, persist_credentials=persist
    )
    body = "<div>/pair implement</div>"
    fake.comment_as(fake.human.author, Target("card", project.card), body)
    code, out = pipeline.run("ResourceTrigger", workitem_commented(fake, project.card, body, "n-1"))
    assert (code, pipeline.status(out)) == (0, "in-progress"), out
    card = f"pair/card-{project.card}"
    main = git(fake.repo, "rev-parse", "main")
    assert git(fake.repo, "rev-parse", f"{card}^") == main  # the plan's commit, on main's tip
    shallow = (tmp_path / "s1" / ".git" / "shallow").exists()
    assert shallow is (fetch_depth == 1)


def test_a_forged_notification_or_a_readers_comment_runs_nothing(
    tmp_path: Path, fake: FakeAzureDevOps
) -> None:
    (tmp_path / "setup").mkdir()
    project = AzureCardProject.create(tmp_path / "setup", fake)
    pipeline = Pipeline(tmp_path, fake, project)
    body = "<div>/pair implement</div>"

    # Nobody wrote it on the work item: the payload is a claim, read back and refused.
    forged = workitem_commented(fake, project.card, body, "n-forged")
    code, out = pipeline.run("ResourceTrigger", forged)
    assert code == 1
    [error] = [line for line in out.splitlines() if line.startswith("##vso[task.logissue")]
    assert "does not hold; nothing ran" in error

    # The maintainer's command that cannot run (nothing to approve) is answered once, exit 2.
    approve = "<div>/pair approve</div>"
    fake.comment_as(fake.human.author, Target("card", project.card), approve)
    code, out = pipeline.run(
        "ResourceTrigger", workitem_commented(fake, project.card, approve, "n-approve")
    )
    assert code == 2, out
    assert [line for line in out.splitlines() if line.startswith("##vso[task.logissue")]
    answers = [c for c in project.card_comments() if str(c["text"]).startswith("<!-- pair:reply")]
    assert len(answers) == 1

    # A reader's real comment: the App's polite refusal, once, and nothing else.
    reader = Author("reader@fabrikam.example", "7d1f0c1e-reader")
    fake.grant(reader, READ)
    fake.comment_as(reader, Target("card", project.card), body)
    claim = workitem_commented(fake, project.card, body, "n-reader")
    claim["resource"]["fields"]["System.ChangedBy"] = {
        "uniqueName": reader.login,
        "id": reader.id,
    }
    code, out = pipeline.run("ResourceTrigger", claim)
    assert (code, Pipeline.status(out)) == (0, "nothing-ready"), out
    assert "refused" in out
    replies = [c for c in project.card_comments() if str(c["text"]).startswith("<!-- pair:reply")]
    assert len(replies) == 2  # the approve's answer, and the reader's refusal
    assert project.pull() is None and project.tags() == []
    assert not project.agent_calls()
    for log in pipeline.logs:
        assert log.count(TOKEN) == log.count(MASK) == 1, log


def test_a_bots_or_a_quoted_command_does_nothing(tmp_path: Path, fake: FakeAzureDevOps) -> None:
    """The build service (a service identity, `svc.` descriptor) is a bot: its command is
    ignored silently, unless its identity id is on PAIR_ALLOWLIST. A quoted command is a quote."""
    (tmp_path / "setup").mkdir()
    project = AzureCardProject.create(tmp_path / "setup", fake)
    pipeline = Pipeline(tmp_path, fake, project)
    card = Target("card", project.card)
    body = "<div>/pair implement</div>"
    bot = fake.bot
    fake.comment_as(bot.author, card, body)
    claim = workitem_commented(fake, project.card, body, "n-bot")
    claim["resource"]["fields"]["System.ChangedBy"] = {
        "displayName": bot.display_name,
        "uniqueName": bot.author.login,
        "id": bot.author.id,
        "descriptor": bot.subject,
    }
    code, out = pipeline.run("ResourceTrigger", claim)
    assert (code, Pipeline.status(out)) == (0, "ignored"), out
    assert "not on the allowlist" in out

    quoted = "<blockquote><div>/pair implement</div></blockquote><div>as asked above</div>"
    fake.comment_as(fake.human.author, card, quoted)
    code, out = pipeline.run(
        "ResourceTrigger", workitem_commented(fake, project.card, quoted, "n-quote")
    )
    assert (code, Pipeline.status(out)) == (0, "ignored"), out
    assert "holds no command" in out

    # Nothing was written, reacted to or run for either.
    assert not [c for c in project.card_comments() if str(c["text"]).startswith("<!-- pair:")]
    assert fake.reactions == [] and project.pull() is None and project.tags() == []
    assert not project.agent_calls()
    for log in pipeline.logs:
        assert log.count(TOKEN) == log.count(MASK) == 1, log
