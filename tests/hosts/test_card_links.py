"""How a card's pull request names and links its card, on each host (`Host.closing_reference`,
`Host.link_card`, `hosts.vocabulary`), and what completing it does to an Azure DevOps work item.

GitHub: the description opens with `Closes #7.` (GitHub closes the issue when the pull request
merges into the default branch). Azure DevOps: the work item gets a Pull Request artifact link
(the pull request's Work Items panel), the description names it with Azure Repos' `#7` mention,
and the completion carries `transitionWorkItems` (on by default), which moves the work item to
its resolved or done state. The local forge: a neutral sentence, nothing linked.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.cycle.state import pull_text
from app.errors import ConfigError
from app.hosting import HostSettings
from hosts.azure_devops import AzureDevOpsHost
from hosts.azure_devops.convert import pull_artifact
from hosts.errors import HostUnavailable
from hosts.github import GitHubCredentials, GitHubHost
from hosts.local import LocalHost
from hosts.models import Card
from hosts.vocabulary import AZURE_DEVOPS, GITHUB, LOCAL, ack_word, vocabulary_for
from tests.support.fake_azure import PROJECT, PROJECT_ID, REPO, REPO_ID, FakeAzureDevOps, running

TOKEN = "azdopat" + "5" * 45  # shaped like a PAT; never a real one
CARD = Card(number=7, title="Add the export button", body="")


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def _no_sleep(seconds: float) -> None:
    return None


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeAzureDevOps]:
    with running(TOKEN, tmp_path / "fake") as server:
        yield server
    assert server.unexpected == [], "the adapter sent requests the fake does not know"


def azure(fake: FakeAzureDevOps, tmp_path: Path, **options: Any) -> AzureDevOpsHost:
    return AzureDevOpsHost(
        fake.base_url,
        PROJECT,
        REPO,
        TOKEN,
        timeout_s=10,
        cache_dir=tmp_path / "cache",
        sleep=_no_sleep,
        **options,
    )


def test_each_host_writes_its_own_closing_reference(tmp_path: Path) -> None:
    github = GitHubHost("octo/demo", GitHubCredentials.token("t0ken"))
    local = LocalHost(tmp_path / "forge")
    board = AzureDevOpsHost("https://dev.azure.com/fabrikam", PROJECT, REPO, TOKEN)
    quiet = AzureDevOpsHost(
        "https://dev.azure.com/fabrikam", PROJECT, REPO, TOKEN, transition_work_items=False
    )
    assert github.closing_reference(7) == "Closes #7."
    assert board.closing_reference(7) == (
        "Work item #7 is linked to this pull request. Completing the pull request moves #7 to "
        "its resolved or done state."
    )
    assert quiet.closing_reference(7) == "Work item #7 is linked to this pull request."
    assert local.closing_reference(7) == "Implements card #7."
    # The description opens with it, in the host's words; GitHub's keyword never reaches Azure.
    title, body = pull_text(CARD, board)
    assert title == "pair: Add the export button"
    assert body.startswith("Work item #7 is linked") and "Closes" not in body
    assert "each iteration of this pull request (the `pair-review` pull request status)" in body
    assert pull_text(CARD, github)[1].startswith("Closes #7.\n\n")
    assert "commit status" in pull_text(CARD, github)[1]


def test_the_vocabulary_is_one_table() -> None:
    assert (GITHUB.label, AZURE_DEVOPS.label, LOCAL.label) == ("label", "tag", "label")
    assert (GITHUB.card, AZURE_DEVOPS.card) == ("issue", "work item")
    assert vocabulary_for("azure-devops") is AZURE_DEVOPS
    assert vocabulary_for("local") is LOCAL and vocabulary_for("github") is GITHUB
    assert (ack_word("eyes"), ack_word("+1")) == ("👀", "like")


def test_a_pull_is_linked_to_its_work_item_once(fake: FakeAzureDevOps, tmp_path: Path) -> None:
    host = azure(fake, tmp_path)
    card = fake.seed_card("Export button", "")
    pull = fake.seed_pull("pair/card-export")
    run(host.link_card(pull, card))
    assert fake.linked_pulls(card) == [pull]
    writes = fake.writes()
    run(host.link_card(pull, card))  # linked already: read, not written again
    assert fake.writes() == writes and fake.linked_pulls(card) == [pull]


def test_a_link_whose_write_failed_after_it_was_stored_counts(
    fake: FakeAzureDevOps, tmp_path: Path
) -> None:
    host = azure(fake, tmp_path)
    card = fake.seed_card("Export button", "")
    pull = fake.seed_pull("pair/card-export")
    fake.fail_after_store("PATCH", rf"/workItems/{card}$", 503)
    run(host.link_card(pull, card))
    assert fake.linked_pulls(card) == [pull]
    # One that did not land is the error.
    other = fake.seed_card("Another", "")
    fake.fail_next("PATCH", rf"/workItems/{other}$", 503)
    with pytest.raises(HostUnavailable):
        run(host.link_card(pull, other))
    assert fake.linked_pulls(other) == []


def test_completing_a_linked_pull_moves_the_work_item_to_resolved(
    fake: FakeAzureDevOps, tmp_path: Path
) -> None:
    host = azure(fake, tmp_path)
    card = fake.seed_card("Export button", "")
    pull = fake.seed_pull("pair/card-export")
    run(host.link_card(pull, card))
    assert run(host.merge(pull, fake.head_of(pull), "squash")).merged
    assert fake.pull(pull).completion == {"mergeStrategy": "squash", "transitionWorkItems": True}
    assert fake.card(card)["System.State"] == "Resolved"
    assert run(host.get_card(card)).state == "closed"  # the card follows


def test_with_the_transition_off_the_work_item_stays(fake: FakeAzureDevOps, tmp_path: Path) -> None:
    host = azure(fake, tmp_path, transition_work_items=False)
    card = fake.seed_card("Export button", "")
    pull = fake.seed_pull("pair/card-export")
    run(host.link_card(pull, card))
    assert run(host.merge(pull, fake.head_of(pull), "merge")).merged
    completion = fake.pull(pull).completion
    assert completion == {"mergeStrategy": "noFastForward", "transitionWorkItems": False}
    assert fake.card(card)["System.State"] == "New"
    assert run(host.get_card(card)).state == "open"


def test_the_artifact_link_names_the_pull_request() -> None:
    assert pull_artifact(PROJECT_ID, REPO_ID, 12) == (
        f"vstfs:///Git/PullRequestId/{PROJECT_ID}%2F{REPO_ID}%2F12"
    )


def test_the_transition_is_a_host_setting() -> None:
    assert HostSettings.from_env({}).azure_transition_work_items is True
    off = {"PAIR_AZURE_DEVOPS_TRANSITION_WORK_ITEMS": "False"}
    assert HostSettings.from_env(off).azure_transition_work_items is False
    with pytest.raises(ConfigError, match="TRANSITION_WORK_ITEMS='maybe' is not a switch"):
        HostSettings.from_env({"PAIR_AZURE_DEVOPS_TRANSITION_WORK_ITEMS": "maybe"})
