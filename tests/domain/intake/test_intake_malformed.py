"""A number no host would send (-5, 0, "5", 5.0, true, none) is refused in one line, on both
surfaces, before anything is queued or run.

The App: `route_github` / `route_azure` as the webhook edge calls them; a number that is there
but invalid refuses the delivery (`Routed.refused`, app.domain.intake.identifiers: the edge
answers 422 with its reason, its one log line), a missing one is a `Malformed` reading that
queues no job (the edge answers 200 "ignored"). The
Action: `python -m action`'s `main` in this process over an Actions environment; it exits 1
with one `::error::` line naming the field, and nothing else runs (no lock, no git).
"""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from typing import Any

import pytest

from action.__main__ import main
from app.domain.intake.intent import Malformed, Policy, positive_reason
from app.web.events import route_azure, route_github
from tests.web.conftest import fixture
from tests.web.test_routing import azure_workitem

POLICY = Policy(trigger="pair", app_slug="pairbot", app_id=123456)
BAD = [
    pytest.param(-5, "-5", id="negative"),
    pytest.param(0, "0", id="zero"),
    pytest.param("5", "'5'", id="string"),
    pytest.param(5.0, "5.0", id="float"),
    pytest.param(True, "True", id="bool"),
    pytest.param(None, "None", id="missing"),
]


def comment_on(number: Any) -> dict[str, Any]:
    payload: dict[str, Any] = copy.deepcopy(
        fixture("github-webhooks/issue_comment/created.with-installation.json")
    )
    payload["comment"]["body"] = "/pair approve"
    payload["issue"]["number"] = number
    return payload


@pytest.mark.parametrize(("number", "shown"), BAD)
def test_the_app_queues_nothing_for_a_bad_issue_number(number: Any, shown: str) -> None:
    routed = route_github("issue_comment", "created", comment_on(number), POLICY, "d-1")
    assert routed.refused == (number is not None)
    assert routed.refused or isinstance(routed.intent, Malformed)
    assert routed.jobs == ()
    assert routed.reason == (f"issue_comment: issue.number must be a positive integer, got {shown}")


@pytest.mark.parametrize(("number", "shown"), BAD)
def test_the_action_exits_with_one_line_for_a_bad_issue_number(
    tmp_path: Path, number: Any, shown: str
) -> None:
    event = tmp_path / "event.json"
    event.write_text(json.dumps(comment_on(number)))
    out = io.StringIO()
    env = {
        "GITHUB_EVENT_NAME": "issue_comment",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_REPOSITORY": "Codertocat/Hello-World",
        "GITHUB_RUN_ID": "7",
        "GITHUB_WORKSPACE": str(tmp_path / "absent"),  # never reached: nothing runs
        "INPUT_GITHUB_TOKEN": "ghs_notarealtoken",
    }
    assert main(env, out) == 1
    errors = [line for line in out.getvalue().splitlines() if line.startswith("::error::")]
    assert errors == [
        f"::error::issue_comment: issue.number must be a positive integer, got {shown}"
    ]
    assert "Traceback" not in out.getvalue()
    assert not (tmp_path / "absent").exists()


def test_azure_comments_and_pulls_with_a_bad_number_queue_nothing() -> None:
    workitem = azure_workitem("<div>/pair implement</div>")
    workitem["resource"]["id"] = -5
    routed = route_azure(workitem, POLICY, "n-1")
    assert routed.jobs == () and routed.refused
    assert routed.reason == "workitem.commented: resource.id must be a positive integer, got -5"

    updated = fixture("azure-devops/git.pullrequest.created.json")
    updated["eventType"] = "git.pullrequest.updated"
    updated["resource"]["sourceRefName"] = "refs/heads/pair/card-5"
    updated["resource"]["pullRequestId"] = -5
    routed = route_azure(updated, POLICY, "n-2")
    assert routed.jobs == () and routed.refused
    assert routed.reason == (
        "git.pullrequest.updated: resource.pullRequestId must be a positive integer, got -5"
    )


def test_a_refusal_shows_a_bounded_one_line_value() -> None:
    reason = positive_reason("9" * 10_000 + "\n-1", "x.number")
    assert reason is not None and "\n" not in reason and len(reason) < 120
    assert positive_reason(1, "x") is None
