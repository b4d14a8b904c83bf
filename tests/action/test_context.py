"""`ActionContext.from_env`: the standard Actions variables and the inputs, validated once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from action.context import AGENT_KEY_INPUTS, INPUTS, ActionContext
from app.domain.card.autonomy import GateCondition
from app.errors import UserError

# Shaped like a PEM key (the context checks the armour, not the key): not a real key.
FAKE_PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEpAIBAAKCAQEAnotarealkeynotarealkeynotarealkey\n"
    "c2Vjb25kbGluZW9mdGhlZmFrZWtleQ==\n"
    "-----END RSA PRIVATE KEY-----\n"
)


def base_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    event = tmp_path / "event.json"
    if not event.exists():
        event.write_text(json.dumps({"schedule": "*/15 * * * *"}), encoding="utf-8")
    env = {
        "GITHUB_EVENT_NAME": "schedule",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_REPOSITORY": "octo-org/octo-repo",
        "GITHUB_API_URL": "https://api.github.com",
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_RUN_ID": "1658821493",
        "GITHUB_WORKSPACE": str(tmp_path),
        "GITHUB_OUTPUT": str(tmp_path / "output"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary"),
        "INPUT_GITHUB_TOKEN": "ghs_faketoken0123456789",
    }
    env.update(extra)
    return env


def test_a_full_environment_is_read_into_typed_values(tmp_path: Path) -> None:
    env = base_env(
        tmp_path,
        GITHUB_ACTOR_ID="21031067",
        INPUT_AGENT="claude",
        INPUT_LOCUS="docker",
        INPUT_APP_ID="123456",
        INPUT_PRIVATE_KEY=FAKE_PEM,
        INPUT_BATCH="release-2.0",
        INPUT_UNTIL="merged",
        INPUT_MERGE="when has:risky lacks:tested",
        INPUT_TRIGGER="bot",
        INPUT_ALLOWLIST="583231, 9919\n41898282",
        INPUT_ANTHROPIC_API_KEY="sk-ant-fake",
        INPUT_GEMINI_API_KEY="gm-fake",
        PAIR_GITHUB_INSTALLATION_ID="375706",
        PAIR_APP_SLUG="octo-pair",
    )
    ctx = ActionContext.from_env(env)
    assert ctx.event_name == "schedule"
    assert ctx.repository == "octo-org/octo-repo"
    assert ctx.run_id == "1658821493"
    assert ctx.output_path == tmp_path / "output"
    assert ctx.actor_id == 21031067
    assert ctx.agent == "claude"
    assert ctx.locus == "docker"
    assert ctx.batch == "release-2.0"
    assert ctx.until == "merged"
    assert ctx.merge == GateCondition("when", has=("risky",), lacks=("tested",))
    assert ctx.trigger == "bot"
    assert ctx.allowlist == frozenset({583231, 9919, 41898282})
    assert ctx.installation_id == 375706
    assert ctx.app_slug == "octo-pair"
    assert ctx.agent_env() == {"ANTHROPIC_API_KEY": "sk-ant-fake", "GEMINI_API_KEY": "gm-fake"}
    assert ctx.settings_env() == {"PAIR_AGENT": "claude", "PAIR_LOCUS": "docker"}
    # Values are trimmed: a trailing newline pasted into a secret is never part of it.
    secrets = {"ghs_faketoken0123456789", FAKE_PEM.strip(), "sk-ant-fake", "gm-fake"}
    assert set(ctx.secrets()) == secrets
    # The App, with its installation known, is how the host authenticates.
    hosts = ctx.host_settings()
    assert hosts.github_app_id == "123456"
    assert hosts.github_installation_id == 375706
    assert hosts.github_repository == "octo-org/octo-repo"


def test_secrets_never_appear_in_the_repr(tmp_path: Path) -> None:
    env = base_env(
        tmp_path,
        INPUT_APP_ID="1",
        INPUT_PRIVATE_KEY=FAKE_PEM,
        INPUT_OPENAI_API_KEY="sk-openai-fake",
    )
    text = repr(ActionContext.from_env(env))
    for secret in ("ghs_faketoken0123456789", "MIIEpAIBAAKCAQEA", "sk-openai-fake"):
        assert secret not in text


def test_defaults_when_only_the_runner_variables_are_set(tmp_path: Path) -> None:
    env = base_env(tmp_path)
    for name in ("GITHUB_API_URL", "GITHUB_SERVER_URL", "GITHUB_RUN_ID", "GITHUB_OUTPUT"):
        env[name] = ""
    ctx = ActionContext.from_env(env)
    assert ctx.api_url == "https://api.github.com"
    assert ctx.server_url == "https://github.com"
    assert not ctx.run_id
    assert ctx.output_path is None
    assert ctx.trigger == "pair"
    assert ctx.allowlist == frozenset()
    assert (ctx.lock_wait_s, ctx.stale_after_s) == (15 * 60.0, 30 * 60.0)
    assert (ctx.agent, ctx.locus, ctx.until, ctx.merge, ctx.batch) == (None,) * 5
    assert ctx.settings_env() == {}
    assert ctx.agent_env() == {}
    # Without an App the token is what the host uses.
    hosts = ctx.host_settings()
    assert hosts.github_app_id is None
    assert hosts.github_token is not None
    assert hosts.github_token.get_secret_value() == "ghs_faketoken0123456789"


def test_the_runners_hyphenated_spelling_is_accepted_and_the_underscore_one_wins(
    tmp_path: Path,
) -> None:
    env = base_env(tmp_path, **{"INPUT_AGENT-COMMAND": "python agent.py"})
    del env["INPUT_GITHUB_TOKEN"]
    env["INPUT_GITHUB-TOKEN"] = "ghs_hyphenated"
    ctx = ActionContext.from_env(env)
    assert ctx.github_token is not None
    assert ctx.github_token.get_secret_value() == "ghs_hyphenated"
    assert ctx.agent == "command"
    assert ctx.agent_command == ("python", "agent.py")
    env["INPUT_GITHUB_TOKEN"] = "ghs_underscored"  # noqa: S105  # a fake token
    ctx = ActionContext.from_env(env)
    assert ctx.github_token is not None
    assert ctx.github_token.get_secret_value() == "ghs_underscored"


def test_every_input_has_an_env_spelling_the_context_reads(tmp_path: Path) -> None:
    # A value the context would reject proves it reads that variable.
    for name in ("locus", "until", "merge", "allowlist", "batch", "agent"):
        assert name in INPUTS
        env = base_env(tmp_path, **{"INPUT_" + name.upper().replace("-", "_"): "bogus value!"})
        with pytest.raises(UserError, match=f"input {name}"):
            ActionContext.from_env(env)
    for name, variable in AGENT_KEY_INPUTS.items():
        env = base_env(tmp_path, **{"INPUT_" + name.upper().replace("-", "_"): "k"})
        assert ActionContext.from_env(env).agent_env() == {variable: "k"}


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        pytest.param(
            "INPUT_UNTIL",
            "bogus",
            r"input until='bogus' is not allowed; allowed: ready-for-merge \| merged",
            id="until-bogus",
        ),
        pytest.param(
            "INPUT_ALLOWLIST",
            "alice",
            r"input allowlist: 'alice' is not a numeric user id; allowed: GitHub user ids",
            id="allowlist-login",
        ),
        pytest.param(
            "INPUT_ALLOWLIST",
            "583231,-5",
            r"'-5' is not a numeric user id",
            id="allowlist-negative",
        ),
        pytest.param(
            "INPUT_LOCUS",
            "cloud",
            r"input locus='cloud' is not a locus; allowed: local, docker, remote",
            id="locus",
        ),
        pytest.param(
            "INPUT_MERGE",
            "sometimes",
            r"input merge='sometimes' is not a gate; allowed: always \| never \| when has:",
            id="merge",
        ),
        pytest.param(
            "INPUT_MERGE",
            "when",
            r"input merge='when' is not a gate",
            id="merge-when-without-condition",
        ),
        pytest.param(
            "INPUT_TRIGGER",
            "pair bot",
            r"input trigger='pair bot' is not a command word",
            id="trigger",
        ),
        pytest.param(
            "INPUT_AGENT",
            "gpt",
            r"input agent='gpt' is not an agent; allowed: claude, codex, command, cursor",
            id="agent-unknown",
        ),
        pytest.param(
            "INPUT_AGENT",
            "command",
            r"input agent='command' needs agent-command",
            id="agent-command-missing",
        ),
        pytest.param(
            "INPUT_AGENT_COMMAND",
            "python 'unterminated",
            r"input agent-command=\"python 'unterminated\" is not a command line",
            id="agent-command-quoting",
        ),
        pytest.param(
            "INPUT_BATCH",
            "Release 2",
            r"input batch='Release 2' is not a batch name",
            id="batch",
        ),
        pytest.param(
            "INPUT_APP_ID",
            "my-app",
            r"input app-id='my-app' is not a GitHub App id",
            id="app-id",
        ),
        pytest.param(
            "GITHUB_REPOSITORY",
            "just-a-name",
            r"GITHUB_REPOSITORY='just-a-name' is not 'owner/name'",
            id="repository",
        ),
        pytest.param(
            "GITHUB_ACTOR_ID",
            "octocat",
            r"GITHUB_ACTOR_ID='octocat' is not a numeric user id",
            id="actor-id",
        ),
        pytest.param(
            "INPUT_AGENT_COMMAND",
            "''",
            r"input agent-command=\"''\" names no program",
            id="agent-command-empty",
        ),
        pytest.param(
            "PAIR_APP_SLUG",
            "Octo Pair",
            r"PAIR_APP_SLUG='Octo Pair' is not a GitHub App slug",
            id="app-slug",
        ),
        pytest.param(
            "PAIR_STATE_LOCK_WAIT_S",
            "forever",
            r"PAIR_STATE_LOCK_WAIT_S='forever' is not allowed; allowed: a number of seconds",
            id="lock-wait",
        ),
        pytest.param(
            "PAIR_STATE_LOCK_WAIT_S",
            "99999",
            r"from 0 to 21600",
            id="lock-wait-beyond-a-job",
        ),
        pytest.param(
            "PAIR_STATE_STALE_AFTER_S",
            "0",
            r"PAIR_STATE_STALE_AFTER_S='0' is not allowed; allowed: a number of seconds above 0",
            id="stale-after-zero",
        ),
        pytest.param(
            "PAIR_STATE_STALE_AFTER_S",
            "inf",
            r"PAIR_STATE_STALE_AFTER_S='inf' is not allowed",
            id="stale-after-infinite",
        ),
        pytest.param(
            "PAIR_GITHUB_INSTALLATION_ID",
            "abc",
            r"PAIR_GITHUB_INSTALLATION_ID='abc' is not a numeric id",
            id="installation-id",
        ),
    ],
)
def test_an_invalid_value_names_the_input_the_value_and_what_is_allowed(
    tmp_path: Path, variable: str, value: str, message: str
) -> None:
    with pytest.raises(UserError, match=message):
        ActionContext.from_env(base_env(tmp_path, **{variable: value}))


@pytest.mark.parametrize(
    ("variable", "value", "attribute", "expected"),
    [
        pytest.param("INPUT_UNTIL", "ready-for-merge", "until", "ready-for-merge", id="until"),
        pytest.param("INPUT_MERGE", "never", "merge", GateCondition("never"), id="merge"),
        pytest.param(
            "INPUT_ALLOWLIST", ", 42,,\t7 ,", "allowlist", frozenset({42, 7}), id="allowlist"
        ),
        pytest.param("INPUT_LOCUS", "remote", "locus", "remote", id="locus"),
        pytest.param("PAIR_STATE_LOCK_WAIT_S", "0", "lock_wait_s", 0.0, id="lock-wait-zero"),
        pytest.param("PAIR_STATE_STALE_AFTER_S", "2.5", "stale_after_s", 2.5, id="stale-after"),
    ],
)
def test_valid_values(
    tmp_path: Path, variable: str, value: str, attribute: str, expected: object
) -> None:
    ctx = ActionContext.from_env(base_env(tmp_path, **{variable: value}))
    assert getattr(ctx, attribute) == expected


def test_agent_command_with_another_agent_is_refused(tmp_path: Path) -> None:
    env = base_env(tmp_path, INPUT_AGENT="claude", INPUT_AGENT_COMMAND="./my-agent")
    with pytest.raises(UserError, match="agent-command is set but agent='claude'"):
        ActionContext.from_env(env)
    env = base_env(tmp_path, INPUT_AGENT="command", INPUT_AGENT_COMMAND="./my-agent --fast")
    assert ActionContext.from_env(env).agent_command == ("./my-agent", "--fast")


def test_app_id_and_private_key_come_together(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="input app-id is set but private-key is not"):
        ActionContext.from_env(base_env(tmp_path, INPUT_APP_ID="123"))
    with pytest.raises(UserError, match="input private-key is set but app-id is not"):
        ActionContext.from_env(base_env(tmp_path, INPUT_PRIVATE_KEY=FAKE_PEM))


def test_an_invalid_private_key_is_refused_without_echoing_it(tmp_path: Path) -> None:
    env = base_env(tmp_path, INPUT_APP_ID="123", INPUT_PRIVATE_KEY="hunter2-not-a-key")
    with pytest.raises(UserError, match="input private-key is not a PEM private key") as caught:
        ActionContext.from_env(env)
    assert "hunter2" not in str(caught.value)


def test_a_key_stored_with_escaped_newlines_is_accepted(tmp_path: Path) -> None:
    one_line = FAKE_PEM.replace("\n", "\\n")
    env = base_env(tmp_path, INPUT_APP_ID="123", INPUT_PRIVATE_KEY=one_line)
    ctx = ActionContext.from_env(env)
    assert ctx.private_key is not None
    assert ctx.private_key.get_secret_value() == FAKE_PEM.strip()


def test_the_app_is_used_only_once_its_installation_is_known(tmp_path: Path) -> None:
    env = base_env(tmp_path, INPUT_APP_ID="123", INPUT_PRIVATE_KEY=FAKE_PEM)
    assert ActionContext.from_env(env).host_settings().github_app_id is None


@pytest.mark.parametrize(
    "variable", ["GITHUB_EVENT_NAME", "GITHUB_EVENT_PATH", "GITHUB_REPOSITORY", "GITHUB_WORKSPACE"]
)
def test_a_missing_runner_variable_says_where_the_action_runs(
    tmp_path: Path, variable: str
) -> None:
    env = base_env(tmp_path)
    del env[variable]
    message = f"{variable} is not set: `python -m action` runs as a step"
    with pytest.raises(UserError, match=message):
        ActionContext.from_env(env)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(None, r"cannot be read", id="missing"),
        pytest.param(b"{not json", r"is not valid JSON \(line 1, column 2", id="invalid-json"),
        pytest.param(b"[1, 2]", r"holds a JSON list, not the event object", id="not-an-object"),
        pytest.param(b"\xff\xfe{}", r"is not UTF-8 text", id="not-utf8"),
        pytest.param(
            b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
            r"nests arrays and objects too deep to be an event payload",
            id="100k-deep",
        ),
    ],
)
def test_an_unreadable_event_file_is_a_clear_error(
    tmp_path: Path, content: bytes | None, message: str
) -> None:
    path = tmp_path / "payload.json"
    if content is not None:
        path.write_bytes(content)
    ctx = ActionContext.from_env(base_env(tmp_path, GITHUB_EVENT_PATH=str(path)))
    with pytest.raises(UserError, match=r"GITHUB_EVENT_PATH='.*payload\.json' " + message):
        ctx.read_event()


def test_the_event_file_is_read_as_an_object(tmp_path: Path) -> None:
    ctx = ActionContext.from_env(base_env(tmp_path))
    assert ctx.read_event() == {"schedule": "*/15 * * * *"}


def test_the_agent_and_locus_names_are_the_engines() -> None:
    # Spelled in action.context so that reading the inputs loads neither pydantic nor the
    # runtime; these two lists must not drift from the engine's.
    from action.context import AGENTS, LOCI
    from app.runtime.adapters import ADAPTERS
    from app.settings import LOCI as ENGINE_LOCI

    assert sorted(AGENTS) == sorted(ADAPTERS)
    assert LOCI == ENGINE_LOCI


def test_the_hosts_variables_are_read_when_the_hosts_are_built(tmp_path: Path) -> None:
    env = base_env(tmp_path, PAIR_GITHUB_WRITE_SPACING_S="0.25")
    env["GITHUB_TOKEN"] = "ghs_envtoken"  # noqa: S105  # a fake token
    ctx = ActionContext.from_env(env)
    assert "ghs_envtoken" not in repr(ctx)  # the environment is kept, never shown
    hosts = ctx.host_settings()
    assert hosts.github_write_spacing_s == 0.25
    # The input wins over the environment's token.
    assert hosts.github_token is not None
    assert hosts.github_token.get_secret_value() == "ghs_faketoken0123456789"
