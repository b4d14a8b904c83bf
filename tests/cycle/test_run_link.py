"""The tracking comment links the run that wrote it: the Action's workflow run, the App's page.

The URL is data each surface's settings object builds (`ActionContext.run_url` from
GITHUB_SERVER_URL / GITHUB_REPOSITORY / GITHUB_RUN_ID, `AppSettings.public_url` from
PAIR_PUBLIC_URL) and hands down to the cycle; nothing below reads the environment.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from action.context import ActionContext
from app.cycle.driver import handle_request
from app.domain.intake.comment_commands import Command, parse_commands
from app.domain.intake.pair_request import PairRequest
from app.domain.reports.explain import CardFacts, explain
from app.domain.reports.tracking import render_tracking
from app.errors import ConfigError
from app.web.settings import AppSettings
from tests.support.card_project import CardProject

RUN = "https://github.com/octo-org/octo-repo/actions/runs/1658821493"
FACTS = CardFacts(card=7, status="in-progress", next_step="apply", title="Add login")


def _body(run_url: str | None) -> str:
    return render_tracking(FACTS, explain(FACTS), (), run_url=run_url)


def test_the_tracking_comment_links_the_run_when_given() -> None:
    status = _body(RUN).splitlines()[2]
    assert status.endswith(f" · [the run that wrote this]({RUN})")
    assert "the run that wrote this" not in _body(None)


@pytest.mark.parametrize("unsafe", ["javascript:alert(1)", "https://x/a) [y](https://z", ""])
def test_an_unsafe_run_url_is_not_linked(unsafe: str) -> None:
    assert "the run that wrote this" not in _body(unsafe)


def _action_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    event = tmp_path / "event.json"
    event.write_text("{}")
    env = {
        "GITHUB_EVENT_NAME": "schedule",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_REPOSITORY": "octo-org/octo-repo",
        "GITHUB_API_URL": "https://api.github.com",
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_RUN_ID": "1658821493",
        "GITHUB_WORKSPACE": str(tmp_path),
    }
    env.update(extra)
    return env


def test_the_action_context_builds_its_run_url(tmp_path: Path) -> None:
    assert ActionContext.from_env(_action_env(tmp_path)).run_url == RUN
    ghes = _action_env(tmp_path, GITHUB_SERVER_URL="https://ghe.example.com/")
    assert ActionContext.from_env(ghes).run_url == (
        "https://ghe.example.com/octo-org/octo-repo/actions/runs/1658821493"
    )
    assert ActionContext.from_env(_action_env(tmp_path, GITHUB_RUN_ID="")).run_url is None


def test_the_app_reads_its_public_url(tmp_path: Path) -> None:
    given = AppSettings.from_env({"PAIR_PUBLIC_URL": "https://pair.example.com"}, root=tmp_path)
    assert given.public_url == "https://pair.example.com/"
    assert AppSettings.from_env({}, root=tmp_path).public_url is None
    with pytest.raises(ConfigError, match="is not an http"):
        AppSettings.from_env({"PAIR_PUBLIC_URL": "pair.example.com"}, root=tmp_path)


@pytest.mark.slow
def test_a_cycle_step_writes_the_run_link_into_the_tracking_comment(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path)
    env = replace(project.env(), run_url=RUN)
    parsed = parse_commands("/pair implement")
    assert parsed and isinstance(parsed[0], Command)
    request = PairRequest.from_command(project.card, parsed[0], comment=None)
    asyncio.run(handle_request(env, request))
    tracking = [c for c in project.comments(project.card) if "pair:tracking" in c["body"]]
    assert len(tracking) == 1
    assert f"[the run that wrote this]({RUN})" in tracking[0]["body"]
