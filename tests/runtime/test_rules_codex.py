"""codex's rules for the bounded postures (app/runtime/rules/codex.py): argv, environment and
files, as a pure function of the posture; the rule file checked by the real codex's own
`codex execpolicy check` against the report line as the prompt spells it."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path
from types import MappingProxyType

import pytest

from app.runtime.permissions import resolve_permission_flags
from app.runtime.rules import AgentRules, RuleContext, agent_rules
from app.runtime.rules.codex import CURATED_TMP, HOME, RULES_FILE, report_rule, rules
from app.settings import Posture, ResolvedPermissions
from tests.agents.real_cli import installed

PAIRBOT = "/opt/pairbot/bin/pairbot"
ROOT = "/work/repo/.pair/worktrees/card-1"
JOURNAL = "/work/repo/.pair/batches/card-1/run/journal.jsonl"


def _context(
    posture: Posture,
    rules_dir: str | None = "/home/agent/.pairbot-rules",
    pairbot: str = PAIRBOT,
    env: dict[str, str] | None = None,
) -> RuleContext:
    policy = ResolvedPermissions(posture, (), (), MappingProxyType({}))
    return RuleContext(
        policy=policy,
        pairbot=pairbot,
        root=ROOT,
        writable=(JOURNAL,),
        rules_dir=rules_dir,
        env=env or {},
    )


def test_sandboxed_allows_the_report_in_a_codex_home_of_its_own() -> None:
    made = rules(_context("repo-sandboxed-permissive"))
    assert made.args == ()
    assert made.env == {"CODEX_HOME": f"/home/agent/.pairbot-rules/{HOME}"}
    assert made.files == {RULES_FILE: report_rule(PAIRBOT)}
    assert RULES_FILE.startswith(f"{HOME}/rules/") and RULES_FILE.endswith(".rules")


def test_curated_also_takes_tmp_out_of_the_sandbox() -> None:
    made = rules(_context("curated-allowlist"))
    assert made.args == CURATED_TMP
    assert made.args == (
        "-c",
        "sandbox_workspace_write.exclude_slash_tmp=true",
        "-c",
        "sandbox_workspace_write.exclude_tmpdir_env_var=true",
    )
    assert made.files == {RULES_FILE: report_rule(PAIRBOT)}


@pytest.mark.parametrize("posture", ["repo-sandboxed-permissive", "curated-allowlist"])
def test_both_bounded_postures_run_the_workspace_write_sandbox(posture: Posture) -> None:
    # read-only rejects every apply_patch edit, so curated writes the tree too.
    policy = ResolvedPermissions(posture, (), (), MappingProxyType({}))
    flags = resolve_permission_flags("codex", policy, ROOT, PAIRBOT)
    assert flags == ("--sandbox", "workspace-write")


def test_no_rules_dir_means_no_file_and_no_codex_home() -> None:
    assert rules(_context("repo-sandboxed-permissive", rules_dir=None)) == AgentRules()
    assert rules(_context("curated-allowlist", rules_dir=None)) == AgentRules(args=CURATED_TMP)


def test_full_autonomy_needs_nothing() -> None:
    assert agent_rules("codex", _context("full-autonomy")) == AgentRules()


def test_the_operators_codex_home_config_and_rules_are_carried_not_their_login(
    tmp_path: Path,
) -> None:
    home = tmp_path / "codex"
    (home / "rules").mkdir(parents=True)
    (home / "config.toml").write_text('model = "gpt-x"\n')
    (home / "rules" / "mine.rules").write_text('prefix_rule(pattern = ["make"])\n')
    (home / "rules" / "notes.txt").write_text("not a rule file\n")
    (home / "auth.json").write_text('{"OPENAI_API_KEY": "sk-secret"}\n')
    (home / "sessions").mkdir()
    made = rules(_context("curated-allowlist", env={"CODEX_HOME": str(home)}))
    assert made.files == {
        f"{HOME}/config.toml": 'model = "gpt-x"\n',
        f"{HOME}/rules/mine.rules": 'prefix_rule(pattern = ["make"])\n',
        RULES_FILE: report_rule(PAIRBOT),
    }
    assert made.env == {"CODEX_HOME": f"/home/agent/.pairbot-rules/{HOME}"}


def test_an_operators_codex_home_that_is_missing_carries_nothing(tmp_path: Path) -> None:
    made = rules(_context("repo-sandboxed-permissive", env={"CODEX_HOME": str(tmp_path / "no")}))
    assert made.files == {RULES_FILE: report_rule(PAIRBOT)}


@pytest.mark.parametrize(
    "pairbot",
    [PAIRBOT, "/opt/my tools/pairbot", '/opt/it\'s "odd" \\ été/pairbot', "pairbot"],
)
def test_the_rule_allows_exactly_the_prompts_report_line(tmp_path: Path, pairbot: str) -> None:
    binary = installed("codex")
    if binary is None:
        pytest.skip("codex CLI not installed (python3 dev.py test installs it with npm)")
    made = rules(_context("curated-allowlist", rules_dir=str(tmp_path), pairbot=pairbot))
    rule_file = tmp_path / RULES_FILE
    rule_file.parent.mkdir(parents=True)
    rule_file.write_text(made.files[RULES_FILE])
    codex_home = tmp_path / "home"
    codex_home.mkdir()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(codex_home)}
    env["CODEX_HOME"] = str(codex_home)

    def decision(line: str) -> str | None:
        # The words of the line as the shell gives them to the command (codex parses the same).
        run = subprocess.run(
            [str(binary), "execpolicy", "check", "--rules", str(rule_file), *shlex.split(line)],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=True,
        )
        verdict: str | None = json.loads(run.stdout).get("decision")
        return verdict

    # app/engine/instructions.py shell-quotes pairbot in the prompt's report line.
    quoted = shlex.quote(pairbot)
    assert decision(f'{quoted} batch report --complete "wrote the plan"') == "allow"
    assert decision(f"{quoted} batch report --blocker x") == "allow"
    assert decision(f"{quoted} batch status") is None
    assert decision(f"{quoted} report") is None
    assert decision('sh -c "pairbot batch report --complete x"') is None
