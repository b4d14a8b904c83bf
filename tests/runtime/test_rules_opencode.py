"""opencode's rules for the bounded postures (app/runtime/rules/opencode.py): the permission map
pairbot passes in OPENCODE_PERMISSION, as a pure function of the posture; and the ruleset the
real opencode's `build` agent ends up with under it, a user's own config included, decided the
way opencode decides (the last matching rule wins).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from app.proc import agent_environment
from app.runtime.permissions import BASELINE_DENY
from app.runtime.rules import AgentRules, RuleContext, agent_rules
from app.runtime.rules.opencode import PERMISSION_VAR, bash_pattern, report_pattern
from app.settings import Posture, ResolvedPermissions
from tests.agents.real_cli import installed

PAIRBOT = "/opt/pairbot/bin/pairbot"
ROOT = "/work/repo/.pair/worktrees/card-1"
JOURNAL = "/work/repo/.pair/batches/card-1/run/journal.jsonl"
RULES_DIR = "/home/agent/.pairbot-rules"
BASELINE = {
    "rm -rf *": "deny",
    "sudo *": "deny",
    "* > /*": "deny",
    "curl * | sh": "deny",
    "curl * | bash": "deny",
    "wget * | sh": "deny",
    "wget * | bash": "deny",
}
NETWORK = {"webfetch": "deny", "websearch": "deny", "codesearch": "deny"}


def _context(
    posture: Posture,
    *,
    pairbot: str = PAIRBOT,
    allow: Sequence[str] = (),
    deny: Sequence[str] = (),
    rules_dir: str | None = RULES_DIR,
    env: Mapping[str, str] | None = None,
) -> RuleContext:
    policy = ResolvedPermissions(posture, tuple(allow), tuple(deny), MappingProxyType({}))
    return RuleContext(
        policy, pairbot, ROOT, writable=(JOURNAL,), rules_dir=rules_dir, env=env or {}
    )


def _map(context: RuleContext) -> dict[str, Any]:
    made = agent_rules("opencode", context)
    assert made.args == () and made.files == {}
    assert set(made.env) == {PERMISSION_VAR}
    value: dict[str, Any] = json.loads(made.env[PERMISSION_VAR])
    return value


def _report(pairbot: str, summary: str = "wrote the plan") -> str:
    # app/engine/instructions.py `_report_block`: the line the prompt asks the agent to run.
    return f'{shlex.quote(pairbot)} batch report --complete "{summary}"'


def _matches(text: str, pattern: str) -> bool:
    """opencode's Wildcard.match (1.18.33): `*` is any run of characters (`/` included), `?` one
    character, everything else literal; a pattern ending in ` *` also matches without it."""
    optional_rest = pattern.endswith(" *")
    stem = pattern[:-2] if optional_rest else pattern
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in stem)
    if optional_rest:
        body += "( .*)?"
    return re.fullmatch(body, text.replace("\\", "/"), re.DOTALL) is not None


def _decide(ruleset: Sequence[Mapping[str, str]], permission: str, pattern: str) -> str:
    """opencode's Permission.evaluate: the last rule whose permission and pattern match;
    "ask" (rejected headless) when none does."""
    for rule in reversed(ruleset):
        if _matches(permission, rule["permission"]) and _matches(pattern, rule["pattern"]):
            return rule["action"]
    return "ask"


def _flat(permission: Mapping[str, Any]) -> list[dict[str, str]]:
    """opencode's Permission.fromConfig: the map as rules, in insertion order."""
    rules = []
    for key, value in permission.items():
        if isinstance(value, str):
            rules.append({"permission": key, "pattern": "*", "action": value})
        else:
            rules += [{"permission": key, "pattern": p, "action": a} for p, a in value.items()]
    return rules


def test_curated_allows_edits_in_the_tree_and_the_report_only() -> None:
    assert _map(_context("curated-allowlist")) == {
        "edit": "allow",
        "external_directory": "deny",
        "bash": {"*": "deny", f"{PAIRBOT} batch report *": "allow", **BASELINE},
        **NETWORK,
        "task": "deny",
        "skill": "deny",
    }


def test_sandboxed_lets_the_shell_run_in_the_tree_but_the_deny_list() -> None:
    assert _map(_context("repo-sandboxed-permissive")) == {
        "edit": "allow",
        "external_directory": "deny",
        "bash": {"*": "allow", f"{PAIRBOT} batch report *": "allow", **BASELINE},
        **NETWORK,
    }


def test_the_baseline_deny_list_is_pairbots() -> None:
    assert [f"Bash({pattern})" for pattern in BASELINE] == list(BASELINE_DENY)


def test_full_autonomy_needs_no_rules() -> None:
    assert agent_rules("opencode", _context("full-autonomy")) == AgentRules()


@pytest.mark.parametrize("posture", ["repo-sandboxed-permissive", "curated-allowlist"])
def test_no_rules_directory_same_rules(posture: Posture) -> None:
    # A docker or remote locus: the map is an environment variable, no file is needed.
    with_dir = agent_rules("opencode", _context(posture))
    assert agent_rules("opencode", _context(posture, rules_dir=None)) == with_dir
    assert with_dir.files == {}


def test_the_operators_shell_entries_translate_and_the_deny_list_comes_last() -> None:
    context = _context(
        "curated-allowlist",
        allow=("Bash(npm test:*)", "Bash(git status)", "Read", "Edit(//x/**)"),
        deny=("Bash(git push *)", "WebFetch"),
    )
    bash = _map(context)["bash"]
    assert list(bash.items()) == [
        ("*", "deny"),
        ("npm test *", "allow"),
        ("git status", "allow"),
        (f"{PAIRBOT} batch report *", "allow"),
        ("git push *", "deny"),
        *BASELINE.items(),
    ]


def test_sandboxed_with_an_allow_list_runs_that_list_and_the_report() -> None:
    bash = _map(_context("repo-sandboxed-permissive", allow=("Bash(make *)",)))["bash"]
    assert list(bash)[:3] == ["*", "make *", f"{PAIRBOT} batch report *"]
    assert bash["*"] == "deny"
    everything = _map(_context("repo-sandboxed-permissive", allow=("Bash", "Read")))["bash"]
    # `Bash` in the list: every command, as claude's `--allowedTools Bash`.
    assert list(everything.items())[:2] == [("*", "allow"), (f"{PAIRBOT} batch report *", "allow")]


@pytest.mark.parametrize(
    ("entry", "pattern"),
    [
        ("Bash", "*"),
        ("Bash(rm -rf *)", "rm -rf *"),
        ("Bash(npm run test:*)", "npm run test *"),
        ("Bash()", None),
        ("Read", None),
        ("Edit(//repo/**)", None),
        ("mcp__github", None),
    ],
)
def test_bash_pattern(entry: str, pattern: str | None) -> None:
    assert bash_pattern(entry) == pattern


@pytest.mark.parametrize(
    "pairbot", [PAIRBOT, "/opt/my tools/pairbot", "/srv/it's/pairbot", "pairbot"]
)
@pytest.mark.parametrize("posture", ["repo-sandboxed-permissive", "curated-allowlist"])
def test_the_report_rule_matches_the_prompts_report_line(posture: Posture, pairbot: str) -> None:
    rules = _flat(_map(_context(posture, pairbot=pairbot)))
    assert report_pattern(pairbot) == f"{shlex.quote(pairbot)} batch report *"
    for line in (
        _report(pairbot),
        _report(pairbot, "a summary with 'quotes'"),
        f'{shlex.quote(pairbot)} batch report --blocker "stuck"',
    ):
        assert _decide(rules, "bash", line) == "allow", line
    if posture == "curated-allowlist":
        for line in (
            f"{shlex.quote(pairbot)} batch apply demo",
            f"{shlex.quote(pairbot)} batch reporter",
            f"/tmp/evil/{pairbot} batch report --complete x",
            "touch stray.txt",
        ):
            assert _decide(rules, "bash", line) == "deny", line
    for denied in ("sudo true", "rm -rf /", "echo x > /etc/passwd"):
        assert _decide(rules, "bash", denied) == "deny", denied
    assert _decide(rules, "edit", ".pair/changes/alpha/plan.md") == "allow"
    assert _decide(rules, "external_directory", "/etc/*") == "deny"
    assert _decide(rules, "webfetch", "https://example.com") == "deny"


def test_a_users_own_permission_variable_is_kept_pairbots_keys_winning() -> None:
    mine = {"bash": {"git *": "allow"}, "edit": "ask", "lsp": "allow"}
    made = _map(_context("curated-allowlist", env={PERMISSION_VAR: json.dumps(mine)}))
    assert list(made)[:3] == ["bash", "edit", "lsp"]  # opencode's merge keeps their order
    assert made["edit"] == "allow" and made["lsp"] == "allow"
    assert list(made["bash"].items())[:3] == [
        ("git *", "allow"),
        ("*", "deny"),
        (f"{PAIRBOT} batch report *", "allow"),
    ]
    # Not a JSON object: opencode skips it too, pairbot's map alone is passed.
    alone = _map(_context("curated-allowlist"))
    assert _map(_context("curated-allowlist", env={PERMISSION_VAR: "{oops"})) == alone
    assert _map(_context("curated-allowlist", env={PERMISSION_VAR: "[1]"})) == alone


def test_the_variable_reaches_the_agent() -> None:
    made = agent_rules("opencode", _context("curated-allowlist"))
    assert agent_environment(dict(made.env), {}) == dict(made.env)


# A user's own config sharing keys with pairbot's map, in their OPENCODE_CONFIG_CONTENT.
USER_CONFIG = {
    "permission": {"edit": "ask", "bash": {"git *": "allow", "*": "ask"}, "read": "allow"},
    "agent": {"reviewer": {"mode": "subagent", "description": "reviews"}},
}


@pytest.mark.skipif(installed("opencode") is None, reason="opencode CLI not installed")
@pytest.mark.parametrize("posture", ["repo-sandboxed-permissive", "curated-allowlist"])
def test_the_real_opencode_build_agent_decides_as_the_rules_say(posture: Posture) -> None:
    """`opencode debug agent build` prints the ruleset the default agent runs with: opencode's
    defaults, the user's own map, pairbot's map merged in from OPENCODE_PERMISSION."""
    binary = installed("opencode")
    assert binary is not None
    made = agent_rules("opencode", _context(posture))
    with tempfile.TemporaryDirectory(prefix="pairbot-opencode-") as tmp:
        home, repo = Path(tmp) / "home", Path(tmp) / "repo"
        home.mkdir()
        repo.mkdir()
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "OPENCODE_CONFIG_CONTENT": json.dumps(USER_CONFIG),
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            **made.env,
        }
        run = subprocess.run(  # the pinned CLI, offline: it only resolves its config
            [str(binary), "debug", "agent", "build"],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert run.returncode == 0, run.stderr[-2000:]
    ruleset = json.loads(run.stdout[run.stdout.index("{") :])["permission"]
    assert _decide(ruleset, "edit", ".pair/changes/alpha/plan.md") == "allow"
    assert _decide(ruleset, "bash", _report(PAIRBOT)) == "allow"
    assert _decide(ruleset, "bash", "sudo true") == "deny"
    assert _decide(ruleset, "external_directory", "/etc/*") == "deny"
    assert _decide(ruleset, "webfetch", "*") == "deny"
    assert _decide(ruleset, "read", "src/app.py") == "allow"
    # Curated overrides the user's own shell allowance; sandboxed lets the shell run anyway.
    expected = "deny" if posture == "curated-allowlist" else "allow"
    assert _decide(ruleset, "bash", "git status") == expected
    assert _decide(ruleset, "bash", "touch stray.txt") == expected
