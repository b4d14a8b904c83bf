"""Azure DevOps commenters as the notification names them, the allowlist of accounts and ids,
and the refusal in Azure DevOps' words (app/domain/intake/azure_identities.py, `decide`)."""

from __future__ import annotations

from typing import Any

import pytest

from app.domain.intake.authors import decide, needs_permission
from app.domain.intake.azure_hooks import read_azure_hook
from app.domain.intake.azure_identities import (
    commenter,
    parse_identity_allowlist,
    workitem_commenter,
)
from app.domain.intake.comment_commands import refusal
from app.domain.intake.intent import Comment, Policy
from hosts.models import Author
from hosts.vocabulary import AZURE_DEVOPS, GITHUB

JAMAL_ID = "54d1a2b3-0000-4000-8000-00000000abcd"


def workitem_commented(changed_by: Any, **resource: Any) -> dict[str, Any]:
    """Microsoft's `workitem.commented` sample (service-hooks events), with its ChangedBy."""
    return {
        "id": "fb2617ed-60df-4518-81fa-749faa6c5cd6",
        "eventType": "workitem.commented",
        "publisherId": "tfs",
        "resource": {
            "id": 5,
            "rev": 4,
            "fields": {
                "System.TeamProject": "FabrikamCloud",
                "System.WorkItemType": "Bug",
                "System.State": "New",
                "System.ChangedBy": changed_by,
                "System.History": "<div>/pair implement</div>",
            },
            **resource,
        },
    }


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(
            "Jamal Hartnett <fabrikamfiber4@hotmail.com>",
            Author("fabrikamfiber4@hotmail.com", "fabrikamfiber4@hotmail.com"),
            id="name-and-account-text",
        ),
        pytest.param(
            "Jamal Hartnett <FABRIKAM\\jamal>",
            Author("FABRIKAM\\jamal", "FABRIKAM\\jamal"),
            id="server-account-text",
        ),
        pytest.param("Jamal Hartnett", Author("Jamal Hartnett", "Jamal Hartnett"), id="name-only"),
        pytest.param(
            {"uniqueName": "jamal@fabrikam.com", "id": JAMAL_ID, "displayName": "Jamal"},
            Author("jamal@fabrikam.com", JAMAL_ID),
            id="identity-ref",
        ),
        pytest.param(
            "Project Collection Build Service (fabrikam) <build@fabrikam>",
            Author("build@fabrikam", "build@fabrikam", is_bot=True),
            id="build-service-text",
        ),
        pytest.param(
            {"uniqueName": "x", "id": "9", "descriptor": "svc.ABC"},
            Author("x", "9", is_bot=True),
            id="service-descriptor",
        ),
        pytest.param(None, Author("", ""), id="nothing"),
    ],
)
def test_a_commenter_is_read_from_what_the_notification_carries(
    value: Any, expected: Author
) -> None:
    assert commenter(value) == expected


def test_revised_by_gives_the_identity_id_and_the_text_the_account() -> None:
    fields = {"System.ChangedBy": "Jamal Hartnett <fabrikamfiber4@hotmail.com>"}
    revised = {"id": JAMAL_ID, "uniqueName": "fabrikamfiber4@hotmail.com", "descriptor": "aad.x"}
    assert workitem_commenter({"revisedBy": revised}, fields) == Author(
        "fabrikamfiber4@hotmail.com", JAMAL_ID
    )
    # revisedBy with the id only: the account comes from the text.
    assert workitem_commenter({"revisedBy": {"id": JAMAL_ID}}, fields) == Author(
        "fabrikamfiber4@hotmail.com", JAMAL_ID
    )
    # No revisedBy: the text alone.
    assert workitem_commenter({}, fields).login == "fabrikamfiber4@hotmail.com"


def test_a_workitem_comment_by_an_account_on_the_allowlist_acts_without_a_lookup() -> None:
    payload = workitem_commented("Jamal Hartnett <FabrikamFiber4@hotmail.com>")
    allow = parse_identity_allowlist("fabrikamfiber4@HOTMAIL.com", "PAIR_ALLOWLIST")
    intent = read_azure_hook(payload, Policy(identity_allowlist=allow)).intent
    assert isinstance(intent, Comment)
    assert intent.author.login == "FabrikamFiber4@hotmail.com"
    assert not needs_permission(intent.author, frozenset(), allow)
    decision = decide(intent.author, None, frozenset(), allow)
    assert decision.allowed and "FabrikamFiber4@hotmail.com" in decision.reason
    # The same person named by identity id (revisedBy) is on the list by account too.
    by_id = Author("fabrikamfiber4@hotmail.com", JAMAL_ID)
    assert decide(by_id, None, frozenset(), allow).allowed
    assert decide(by_id, None, frozenset(), frozenset({JAMAL_ID})).allowed


def test_a_readers_refusal_speaks_azure_devops() -> None:
    reader = commenter("Jamal Hartnett <fabrikamfiber4@hotmail.com>")
    decision = decide(reader, "read", frozenset(), frozenset())
    assert not decision.allowed and not decision.silent
    text = decision.reason
    assert "(id -1)" not in text and "user ids" not in text
    assert text.startswith("Sorry, fabrikamfiber4@hotmail.com has read permission")
    assert "Contribute permission" in text
    assert "adding that account (or its identity id) to PAIR_ALLOWLIST" in text
    # Said explicitly, it is the same text.
    assert decide(reader, "read", frozenset(), frozenset(), AZURE_DEVOPS).reason == text


def test_github_refusals_keep_their_words() -> None:
    text = refusal("mallory", 583231, "read", GITHUB)
    assert text == (
        "Sorry, mallory (id 583231) has read permission on this repository: pairbot takes "
        "commands from people with write, maintain or admin permission, or from user ids on "
        "the operator's allowlist."
    )
    assert decide(Author("mallory", "583231"), "read", frozenset(), frozenset()).reason == text


def test_an_azure_bot_off_the_allowlist_is_named_by_account_not_a_made_up_id() -> None:
    bot = commenter("Fabrikam Build Service (fabrikam) <build@fabrikam.example>")
    decision = decide(bot, None, frozenset(), frozenset())
    assert (decision.allowed, decision.silent) == (False, True)
    assert decision.reason == "bot build@fabrikam.example is not on the operator's allowlist"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("alice@contoso.com", {"alice@contoso.com"}),
        ("Alice@Contoso.com; FABRIKAM\\Bob", {"alice@contoso.com", "fabrikam\\bob"}),
        (f"{JAMAL_ID.upper()},alice@contoso.com", {JAMAL_ID, "alice@contoso.com"}),
    ],
)
def test_the_allowlist_takes_accounts_and_identity_ids(text: str, expected: set[str]) -> None:
    assert parse_identity_allowlist(text, "PAIR_ALLOWLIST") == expected
