"""The Azure Pipelines entry's own decisions, in process: what a run is for, the notification
file, the handled notifications, and the one error line (`python -m action.azure`)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from action import deliveries
from action.azure.__main__ import main
from action.azure.hook import MAX_PAYLOAD_BYTES, read_notification
from action.event import MalformedEventError
from app.domain.intake.intent import Comment, Ignore, Policy
from app.errors import UserError
from tests.action.test_azure_settings import TOKEN, pipeline_env

MASK = f"##vso[task.setvariable variable=pairbot.secret;issecret=true]{TOKEN}"


def notification(history: str, **over: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "id": "n-1",
        "eventType": "workitem.commented",
        "resource": {
            "id": 7,
            "rev": 2,
            "fields": {
                "System.TeamProject": "Fabrikam",
                "System.ChangedBy": {"uniqueName": "jamal@fabrikam.com", "id": "54d1"},
                "System.History": history,
            },
        },
    }
    payload.update(over)
    return payload


def run(tmp_path: Path, payload: Any | None = None, **over: str) -> tuple[int, list[str]]:
    env = pipeline_env(AGENT_TEMPDIRECTORY=str(tmp_path / "temp"), **over)
    if payload is not None:
        path = tmp_path / "hook.json"
        path.write_text(payload if isinstance(payload, str) else json.dumps(payload))
        env |= {"BUILD_REASON": "ResourceTrigger", "PAIR_WEBHOOK_PAYLOAD_PATH": str(path)}
    out = io.StringIO()
    code = main(env, out)
    return code, out.getvalue().splitlines()


def test_the_notification_file_reads_into_the_apps_reading(tmp_path: Path) -> None:
    path = tmp_path / "hook.json"
    path.write_text(json.dumps(notification("<div>/pair implement</div>")))
    read = read_notification(path, Policy())
    assert read.id == "n-1"
    assert isinstance(read.hook.intent, Comment) and read.hook.repo == "Fabrikam"
    assert read.hook.intent.author.login == "jamal@fabrikam.com"
    quoted = notification("<blockquote>/pair implement</blockquote>")
    path.write_text(json.dumps(quoted))
    assert isinstance(read_notification(path, Policy()).hook.intent, Ignore)


@pytest.mark.parametrize(
    ("content", "error", "says"),
    [
        (None, UserError, "cannot be read"),
        ("{not json", UserError, "is not a JSON notification"),
        ("[1]", UserError, "holds a JSON list"),
        ("x" * (MAX_PAYLOAD_BYTES + 1), UserError, "holds more than"),
        (json.dumps({"eventType": "workitem.commented"}), MalformedEventError, "no notification"),
    ],
)
def test_a_bad_notification_file_is_one_line(
    tmp_path: Path, content: str | None, error: type[Exception], says: str
) -> None:
    path = tmp_path / "hook.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(error, match=says):
        read_notification(path, Policy())


def test_a_notification_holding_a_secret_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "hook.json"
    path.write_text(json.dumps(notification(f"<div>/pair implement {TOKEN}</div>")))
    with pytest.raises(UserError, match="holds a secret of this job") as caught:
        read_notification(path, Policy(), (TOKEN,))
    assert TOKEN not in str(caught.value)


def test_handled_notifications_are_remembered_newest_last(tmp_path: Path) -> None:
    said: list[str] = []
    assert not deliveries.seen(tmp_path, "a", said.append)
    for n in range(deliveries.KEEP + 2):
        deliveries.remember(tmp_path, f"n{n}", said.append)
    assert deliveries.seen(tmp_path, f"n{deliveries.KEEP + 1}", said.append)
    assert not deliveries.seen(tmp_path, "n0", said.append)  # the oldest went
    assert said == []


@pytest.mark.parametrize("content", ["{", "[]", '{"version": 9, "handled": []}'])
def test_a_foreign_deliveries_file_reads_as_nothing_handled(tmp_path: Path, content: str) -> None:
    (tmp_path / ".pair").mkdir()
    (tmp_path / ".pair" / "deliveries.json").write_text(content)
    said: list[str] = []
    assert not deliveries.seen(tmp_path, "n", said.append)
    assert len(said) == 1


def test_the_token_is_masked_first_and_a_ci_run_does_nothing(tmp_path: Path) -> None:
    code, lines = run(tmp_path, BUILD_REASON="IndividualCI")
    assert code == 0
    assert lines[0] == MASK
    assert lines[-1].startswith("pairbot: ignored BUILD_REASON=IndividualCI")
    summary = tmp_path / "temp" / "pairbot-summary.md"
    assert f"##vso[task.uploadsummary]{summary}" in lines
    assert "**ignored**" in summary.read_text()
    assert sum(TOKEN in line for line in lines) == 1


def test_a_missing_variable_is_one_logissue_line_and_exit_2(tmp_path: Path) -> None:
    code, lines = run(tmp_path, SYSTEM_TEAMPROJECT="-")
    assert code == 2
    assert lines == [
        "##vso[task.logissue type=error]SYSTEM_TEAMPROJECT is not set: `python -m action.azure` "
        "runs as a step of an Azure Pipelines job, where the agent sets it (to run pairbot "
        "elsewhere, use the `pairbot` CLI)"
    ]


def test_an_unreadable_notification_is_one_logissue_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines = run(tmp_path, "{oops")
    assert code == 2
    assert "Traceback" not in capsys.readouterr().err
    run(tmp_path, "{oops", SYSTEM_DEBUG="true")  # System.Debug: the traceback too
    assert "Traceback" in capsys.readouterr().err
    [error] = [line for line in lines if line.startswith("##vso[task.logissue")]
    assert "is not a JSON notification" in error
    assert lines[-1].startswith("pairbot: error")


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (notification("<blockquote>/pair implement</blockquote>"), "no command"),
        (notification("<!-- pair:tracking #7 -->\nqueued"), "pairbot's own comment"),
        ({"id": "n-2", "eventType": "git.push"}, "git.push is not for pairbot"),
        (
            notification(
                "<div>/pair implement</div>",
                resource={
                    "id": 7,
                    "fields": {
                        "System.TeamProject": "Elsewhere",
                        "System.ChangedBy": "J <j@x>",
                        "System.History": "/pair implement",
                    },
                },
            ),
            "the notification is for Elsewhere",
        ),
    ],
)
def test_a_notification_with_nothing_for_this_pipeline_is_ignored_before_any_lock(
    tmp_path: Path, payload: dict[str, Any], reason: str
) -> None:
    code, lines = run(tmp_path, payload)
    assert code == 0
    assert lines[-1].startswith("pairbot: ignored"), lines
    assert reason in lines[-1]
    assert not (tmp_path / ".pair").exists()
