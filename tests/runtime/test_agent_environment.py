"""Which of pairbot's environment reaches the agent (app/proc.py `agent_environment`)."""

from __future__ import annotations

from app.proc import agent_environment

AWS = {
    "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE",
    "AWS_SECRET_ACCESS_KEY": "secret-key-value",
    "AWS_SESSION_TOKEN": "session-token-value",
    "AWS_REGION": "us-east-1",
}


def test_forge_secrets_are_stripped_and_model_keys_kept() -> None:
    env = agent_environment(
        {"GITHUB_TOKEN": "ghs_x", "ANTHROPIC_AUTH_TOKEN": "gw", "OPENAI_API_KEY": "sk"},
        {"PAIR_CHANGE": "alpha"},
    )
    assert env == {"ANTHROPIC_AUTH_TOKEN": "gw", "OPENAI_API_KEY": "sk", "PAIR_CHANGE": "alpha"}


def test_aws_secrets_reach_the_agent_only_when_claude_runs_on_bedrock() -> None:
    plain = agent_environment(AWS, {})
    assert plain == {"AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_REGION": "us-east-1"}
    bedrock = agent_environment({**AWS, "CLAUDE_CODE_USE_BEDROCK": "1"}, {})
    assert bedrock == {**AWS, "CLAUDE_CODE_USE_BEDROCK": "1"}


def test_bedrock_switched_off_keeps_aws_secrets_out() -> None:
    for off in ("0", "false", "", "off"):
        env = agent_environment({**AWS, "CLAUDE_CODE_USE_BEDROCK": off}, {})
        assert "AWS_SECRET_ACCESS_KEY" not in env and "AWS_SESSION_TOKEN" not in env


def test_other_secrets_stay_out_on_bedrock_too() -> None:
    env = agent_environment({"CLAUDE_CODE_USE_BEDROCK": "1", "GH_TOKEN": "x", "NPM_TOKEN": "y"}, {})
    assert env == {"CLAUDE_CODE_USE_BEDROCK": "1"}
