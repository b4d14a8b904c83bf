"""The Azure Pipelines entry as an Azure DevOps team expects it, end to end (issue #28).

`python -m action.azure` runs as a pipeline job runs it (tests/e2e/azure_pipeline_harness.py: a
`checkout: self`, the job's variables and token) against the loopback fake Azure DevOps, fed
`workitem.commented` notifications in the shape a service hook sends: `System.ChangedBy` as
`Name <account>` text, no identity id. What it must do:

- the commenter is recognised by that account (and the identity Azure DevOps names when the
  comment is read back): a maintainer acts, a reader is refused in Azure DevOps' words, a reader
  whose account is on PAIR_ALLOWLIST acts;
- the card's pull request is linked to its work item through the API, its description names
  the work item as Azure Repos does (never GitHub's `Closes #7`), and completing it moves the
  work item to its resolved state (`transitionWorkItems`); the card follows (closed);
- the tracking comment says `tag` where GitHub says `label`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hosts.models import Author, Target
from tests.cycle.azure_harness import TOKEN, AzureCardProject
from tests.e2e.azure_pipeline_harness import Pipeline, workitem_commented
from tests.support.fake_azure import READ, FakeAzureDevOps, running


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeAzureDevOps]:
    with running(TOKEN, tmp_path / "fake") as server:
        yield server
    assert server.unexpected == [], "the entry sent requests the fake does not know"


def as_text(payload: dict[str, Any], name: str, account: str) -> dict[str, Any]:
    """The notification as a service hook sends it: `System.ChangedBy` is `Name <account>`."""
    payload["resource"]["fields"]["System.ChangedBy"] = f"{name} <{account}>"
    return payload


def comment(
    project: AzureCardProject, who: Author, name: str, html: str, nid: str
) -> dict[str, Any]:
    """`who` comments `html` on the card; the notification of it, in text form."""
    fake = project.fake
    fake.comment_as(who, Target("card", project.card), html)
    return as_text(workitem_commented(fake, project.card, html, nid), name, who.login)


def test_a_text_commenter_takes_the_card_to_a_linked_pull_completed_with_its_work_item(
    tmp_path: Path, fake: FakeAzureDevOps
) -> None:
    (tmp_path / "setup").mkdir()
    project = AzureCardProject.create(tmp_path / "setup", fake)
    pipeline = Pipeline(tmp_path, fake, project)
    human, name = fake.human.author, fake.human.display_name
    body = "<div>/pair implement until: merged merge: always</div>"
    code, out = pipeline.run("ResourceTrigger", comment(project, human, name, body, "n-1"))
    assert code == 0 and Pipeline.status(out) not in ("ignored", "error"), out

    statuses = []
    for _ in range(12):
        code, out = pipeline.run("Schedule")
        assert code == 0, out
        statuses.append(Pipeline.status(out))
        if statuses[-1] == "awaiting-human":
            break
    assert statuses[-1] == "awaiting-human", statuses
    pull = project.pull()
    assert pull is not None
    # Linked through the API (the PR's Work Items panel), described in Azure's words.
    assert fake.linked_pulls(project.card) == [pull]
    description = fake.pull(pull).description
    assert description.startswith(
        f"Work item #{project.card} is linked to this pull request. Completing the pull "
        f"request moves #{project.card} to its resolved or done state."
    )
    assert "Closes" not in description and "commit status" not in description
    tracking = [c["text"] for c in project.card_comments() if "pair:tracking" in c["text"]]
    assert tracking and "(tag `pr-state:awaiting-human`)" in tracking[-1]
    assert "(label `" not in tracking[-1]

    approve = "<div>/pair approve</div>"
    code, out = pipeline.run("ResourceTrigger", comment(project, human, name, approve, "n-2"))
    assert (code, Pipeline.status(out)) == (0, "merged"), out
    pr = fake.pull(pull)
    assert pr.status == "completed"
    assert pr.completion == {"mergeStrategy": "squash", "transitionWorkItems": True}
    # Azure DevOps' "complete associated work items": Active/New -> Resolved.
    assert fake.card(project.card)["System.State"] == "Resolved"
    assert project.tags() == ["pr-state:merged"]
    # Every command was liked once its record was pushed (no 👀 on Azure DevOps).
    assert [r[2] for r in fake.reactions] == ["like", "like"]


def test_a_reader_is_refused_in_azure_words_and_acts_once_allowlisted_by_account(
    tmp_path: Path, fake: FakeAzureDevOps
) -> None:
    (tmp_path / "setup").mkdir()
    project = AzureCardProject.create(tmp_path / "setup", fake)
    pipeline = Pipeline(tmp_path, fake, project)
    reader = Author("reader@fabrikam.example", "7d1f0c1e-5b9e-4c1a-9d7e-0c1f0e2d3a4b")
    fake.grant(reader, READ)
    status = "<div>/pair status</div>"
    code, out = pipeline.run(
        "ResourceTrigger", comment(project, reader, "Rea Der", status, "n-reader")
    )
    assert (code, Pipeline.status(out)) == (0, "nothing-ready"), out
    [reply] = [c["text"] for c in project.card_comments() if "pair:reply" in c["text"]]
    # As a reader sees it (the reply defuses mentions and escapes Markdown).
    refusal = reply.replace("\u200b", "").replace("\\", "")
    assert "Sorry, reader@fabrikam.example has read permission on this repository" in refusal
    assert "Contribute permission" in refusal and "PAIR_ALLOWLIST" in refusal
    assert "(id -1)" not in refusal and "user ids" not in refusal
    assert fake.reactions == []

    # The operator adds the account (any case): the same reader's next command runs.
    allow = {"PAIR_ALLOWLIST": "Reader@Fabrikam.example"}
    again = comment(project, reader, "Rea Der", status, "n-reader-2")
    code, out = pipeline.run("ResourceTrigger", again, extra_env=allow)
    assert code in (0, 2), out  # `/pair status` on a card with no cycle is answered, not run
    replies = [c["text"] for c in project.card_comments() if "pair:reply" in c["text"]]
    assert len(replies) == 2 and "Sorry" not in replies[-1], replies
    assert "has no pairbot cycle yet" in replies[-1]
