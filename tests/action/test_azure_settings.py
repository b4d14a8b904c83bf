"""The Azure Pipelines entry's settings and logging commands (action.azure.settings, .vso)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from action.azure.settings import PipelineSettings
from action.azure.vso import (
    agent_log,
    escape_property,
    group,
    log_error,
    mask,
    neutralize,
    upload_summary,
)
from app.errors import UserError

TOKEN = "job" + "t" * 40


def pipeline_env(**over: str) -> dict[str, str]:
    env = {
        "SYSTEM_COLLECTIONURI": "https://dev.azure.com/fabrikam/",
        "SYSTEM_TEAMPROJECT": "Fabrikam",
        "BUILD_REPOSITORY_NAME": "demo",
        "BUILD_REASON": "Schedule",
        "SYSTEM_ACCESSTOKEN": TOKEN,
        "BUILD_SOURCESDIRECTORY": "/agent/_work/1/s",
        "BUILD_BUILDID": "42",
        "AGENT_TEMPDIRECTORY": "/agent/_work/_temp",
    }
    env.update(over)
    return {k: v for k, v in env.items() if v != "-"}


def test_the_predefined_variables_are_read_once_into_one_typed_object() -> None:
    settings = PipelineSettings.from_env(pipeline_env(ANTHROPIC_API_KEY="sk-ant-1"))
    assert settings.collection_uri == "https://dev.azure.com/fabrikam"
    assert (settings.project, settings.repository, settings.reason) == ("Fabrikam", "demo", "tick")
    assert settings.sources == Path("/agent/_work/1/s")
    assert settings.run_url == "https://dev.azure.com/fabrikam/Fabrikam/_build/results?buildId=42"
    assert settings.secrets() == (TOKEN, "sk-ant-1")
    assert TOKEN not in repr(settings)
    hosts = settings.host_settings()
    assert (hosts.azure_organization_url, hosts.azure_project, hosts.azure_repository) == (
        "https://dev.azure.com/fabrikam",
        "Fabrikam",
        "demo",
    )
    assert hosts.azure_token is not None and hosts.azure_token.get_secret_value() == TOKEN


@pytest.mark.parametrize(
    ("reason", "expected"),
    [("Schedule", "tick"), ("Manual", "tick"), ("IndividualCI", "other"), ("PullRequest", "other")],
)
def test_the_build_reason_says_what_the_run_is_for(reason: str, expected: str) -> None:
    assert PipelineSettings.from_env(pipeline_env(BUILD_REASON=reason)).reason == expected


def test_a_webhook_run_reads_its_payload_path() -> None:
    env = pipeline_env(BUILD_REASON="ResourceTrigger", PAIR_WEBHOOK_PAYLOAD_PATH="/tmp/hook.json")
    settings = PipelineSettings.from_env(env)
    assert (settings.reason, settings.payload_path) == ("webhook", Path("/tmp/hook.json"))


@pytest.mark.parametrize(
    ("over", "names"),
    [
        ({"SYSTEM_TEAMPROJECT": "-"}, "SYSTEM_TEAMPROJECT is not set"),
        ({"SYSTEM_ACCESSTOKEN": ""}, "SYSTEM_ACCESSTOKEN is not set"),
        ({"SYSTEM_ACCESSTOKEN": "$(System.AccessToken)"}, "not mapped into the step"),
        ({"SYSTEM_COLLECTIONURI": "fabrikam"}, "is not the organization's URL"),
        ({"BUILD_REASON": "ResourceTrigger"}, "PAIR_WEBHOOK_PAYLOAD_PATH is not set"),
        ({"PAIR_TRIGGER": "pa ir"}, "PAIR_TRIGGER='pa ir' is not a command word"),
        ({"PAIR_STATE_LOCK_WAIT_S": "forever"}, "PAIR_STATE_LOCK_WAIT_S='forever'"),
        ({"PAIR_STATE_STALE_AFTER_S": "0"}, "PAIR_STATE_STALE_AFTER_S='0'"),
    ],
)
def test_every_bad_variable_is_one_line_naming_it(over: dict[str, str], names: str) -> None:
    with pytest.raises(UserError, match=r"allowed|not set") as caught:
        PipelineSettings.from_env(pipeline_env(**over))
    assert names in str(caught.value)
    assert "\n" not in str(caught.value)


def test_knobs_take_their_values() -> None:
    settings = PipelineSettings.from_env(
        pipeline_env(PAIR_STATE_LOCK_WAIT_S="0", PAIR_STATE_STALE_AFTER_S="60", SYSTEM_DEBUG="True")
    )
    assert (settings.lock_wait_s, settings.stale_after_s, settings.debug) == (0.0, 60.0, True)


# -- logging commands ---------------------------------------------------------------------------


def test_mask_registers_the_secret_as_a_secret_variable_before_anything_else() -> None:
    out = io.StringIO()
    mask(TOKEN, out)
    mask("  ", out)  # blank: never registered (it would blank the log)
    assert out.getvalue() == (
        f"##vso[task.setvariable variable=pairbot.secret;issecret=true]{TOKEN}\n"
    )


def test_a_multi_line_secret_is_masked_line_by_line() -> None:
    out = io.StringIO()
    mask("-----BEGIN-----\nabc\n-----END-----", out)
    lines = out.getvalue().splitlines()
    assert [line.rsplit("]", 1)[1] for line in lines] == ["-----BEGIN-----", "abc", "-----END-----"]


def test_error_and_summary_commands_escape_what_would_end_them() -> None:
    out = io.StringIO()
    log_error("100% broken\n##vso[task.complete result=Succeeded]", out)
    upload_summary(Path("/tmp/a summary.md"), out)
    assert out.getvalue().splitlines() == [
        "##vso[task.logissue type=error]100%AZP25 broken%0A##vso[task.complete result=Succeeded]",
        "##vso[task.uploadsummary]/tmp/a summary.md",
    ]
    assert escape_property("a;b]c") == "a%3Bb%5Dc"


def test_agent_output_cannot_issue_a_command() -> None:
    out = io.StringIO()
    with agent_log("agent", out) as log:
        log.line("##vso[task.setvariable variable=x]1")
        log.line("ok ##VSO[task.complete result=Failed]\n##[endgroup]")
    lines = out.getvalue().splitlines()
    assert lines[0] == "##[group]agent" and lines[-1] == "##[endgroup]"
    inner = lines[1:-1]
    assert inner == [
        "##vso task.setvariable variable=x]1",
        "ok ##vso task.complete result=Failed]",
        "# #[endgroup]",
    ]
    assert all("##vso[" not in line.lower() for line in inner)
    assert neutralize("  ##[error]x") == "  # #[error]x"


def test_a_group_closes_when_its_body_raises() -> None:
    out = io.StringIO()
    with pytest.raises(RuntimeError), group("step", out):
        raise RuntimeError
    assert out.getvalue() == "##[group]step\n##[endgroup]\n"


def test_the_allowlist_is_identity_ids_and_accounts_and_a_bad_entry_is_named() -> None:
    guid = "2b1c4c5b-8e1a-4f3e-9c1d-0a1b2c3d4e5f"
    allow = f"{guid.upper()}, Alice@Contoso.com FABRIKAM\\bob"
    settings = PipelineSettings.from_env(pipeline_env(PAIR_ALLOWLIST=allow))
    assert settings.allowlist == frozenset({guid, "alice@contoso.com", "fabrikam\\bob"})
    with pytest.raises(
        UserError, match=r"PAIR_ALLOWLIST entry '583231' is neither an Azure DevOps account"
    ):
        PipelineSettings.from_env(pipeline_env(PAIR_ALLOWLIST=f"{guid},583231"))
