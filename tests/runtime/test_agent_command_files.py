"""Commands in the spawn locus: rendered once from one definition, verified untouched after."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.runtime.commands import (
    DEFINITIONS,
    STYLES,
    SkillLocusError,
    delegate,
    ensure_command_in_spawn_locus,
    invocation,
)


@pytest.mark.parametrize(
    ("agent", "relative", "token"),
    [
        pytest.param("claude", ".claude/commands/pair/apply.md", "/pair:apply", id="claude"),
        pytest.param("cursor", ".cursor/commands/pair-apply.md", "/pair-apply", id="cursor"),
        pytest.param("gemini", ".gemini/commands/pair-apply.toml", "/pair-apply", id="gemini"),
        pytest.param("opencode", ".opencode/commands/pair-apply.md", "/pair-apply", id="opencode"),
        pytest.param("codex", ".agents/skills/pair-apply/SKILL.md", "$pair-apply", id="codex"),
    ],
)
def test_each_agent_gets_its_own_path_and_token(
    tmp_path: Path, agent: str, relative: str, token: str
) -> None:
    assert ensure_command_in_spawn_locus("apply", agent, "local", tmp_path, {}) == "rendered"
    path = tmp_path / relative
    text = path.read_text()
    assert "Implement the unchecked tasks" in text
    assert invocation(agent, "apply") == token
    assert ensure_command_in_spawn_locus("apply", agent, "docker", tmp_path, {}) == "verified"


def test_gemini_commands_are_toml_with_its_argument_placeholder(tmp_path: Path) -> None:
    ensure_command_in_spawn_locus("verify", "gemini", "local", tmp_path, {})
    text = (tmp_path / ".gemini/commands/pair-verify.toml").read_text()
    assert text.startswith('description = "')
    assert "{{args}}" in text and "$ARGUMENTS" not in text


def test_codex_gets_a_repository_skill_not_a_prompt_in_its_home(tmp_path: Path) -> None:
    home = tmp_path / "codex-home"
    ensure_command_in_spawn_locus(
        "fix", "codex", "local", tmp_path / "repo", {"CODEX_HOME": str(home)}
    )
    text = (tmp_path / "repo/.agents/skills/pair-fix/SKILL.md").read_text()
    assert text.startswith("---\nname: pair-fix\ndescription: ")
    assert not home.exists()


@pytest.mark.parametrize("agent", ["claude", "codex", "gemini", "cursor", "opencode", "command"])
def test_every_agent_gets_the_definition_inline(agent: str) -> None:
    block = delegate(agent, "apply", "alpha", ["> keep it small"])
    assert block.splitlines()[0] == "Your task (apply):"
    assert "Implement the unchecked tasks" in block and "$ARGUMENTS" not in block
    assert block.endswith("Arguments:\nalpha\n> keep it small")


def test_an_existing_command_is_verified_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / ".claude/commands/pair/propose.md"
    path.parent.mkdir(parents=True)
    path.write_text("the maintainer's own wording\n")
    assert ensure_command_in_spawn_locus("propose", "claude", "local", tmp_path, {}) == "verified"
    assert path.read_text() == "the maintainer's own wording\n"


@pytest.mark.parametrize("agent", sorted(STYLES))
def test_the_remote_locus_renders_nothing_the_prompt_carries_the_command(
    tmp_path: Path, agent: str
) -> None:
    # Was a refusal; the file is for interactive use, on a disk pairbot does not control.
    assert ensure_command_in_spawn_locus("verify", agent, "remote", tmp_path, {}) == "inline"
    assert list(tmp_path.iterdir()) == []
    assert "Review the change" in delegate(agent, "verify", "alpha", [])


def test_a_write_failure_names_the_command_and_path(tmp_path: Path) -> None:
    # A regular file where a directory must go fails for every user.
    (tmp_path / ".claude").write_text("not a directory")
    with pytest.raises(
        SkillLocusError,
        match=r"cannot render the /apply command .* at .*\.claude/commands/pair/apply\.md",
    ):
        ensure_command_in_spawn_locus("apply", "claude", "local", tmp_path, {})


def test_the_command_adapter_is_inline_and_touches_nothing(tmp_path: Path) -> None:
    assert ensure_command_in_spawn_locus("apply", "command", "remote", tmp_path, {}) == "inline"
    assert list(tmp_path.iterdir()) == []
    assert invocation("command", "apply") is None


def test_every_definition_speaks_of_its_arguments_and_how_to_report() -> None:
    for definition in DEFINITIONS.values():
        assert "$ARGUMENTS" in definition.body
        assert "pairbot batch report" in definition.body
