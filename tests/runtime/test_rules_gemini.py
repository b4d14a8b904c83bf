"""gemini's rules (app/runtime/rules/gemini.py): a posture in, a policy file and its flag out.

The patterns are checked the way gemini 0.61 checks a call: the tool's arguments written as
`stableStringify` writes them (keys sorted, each top-level `"key":value` between NUL
characters, no spaces) and tested with the pattern. Python's `re` reads these patterns as
JavaScript's `RegExp` does (they use only escapes, classes and lookaheads both share). That
the real gemini offers the tools and obeys the file is tests/agents/test_matrix_gemini.py.
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import pytest

from app.runtime.rules import AgentRules, RuleContext, agent_rules
from app.settings import Posture, ResolvedPermissions

ROOT = "/work/repo"
PAIRBOT = "/usr/local/bin/pairbot"
RULES_DIR = "/tmp/pairbot-agent-home-x/.pairbot-rules"
POLICY = f"{RULES_DIR}/gemini-policy.toml"

# Spelled out, not built, so a slip in the module cannot hide behind the test.
SANDBOXED = "\n".join(
    [
        "# Written by pairbot for one step: what it allows beside gemini's defaults.",
        "# pairbot's report command",
        "[[rule]]",
        'toolName = "run_shell_command"',
        r'argsPattern = "\\x00\"command\":\"\\/usr\\/local\\/bin\\/pairbot batch report'
        r'(?:[\\s\"]|\\\\\")"',
        'decision = "allow"',
        "priority = 100",
        "",
    ]
)
EDIT_RULE = "\n".join(
    [
        "# edits in the working tree",
        "[[rule]]",
        'toolName = ["write_file", "replace"]',
        r'argsPattern = "\\x00\"file_path\":\"(?!\\.\\.(?:/|\"))(?![^\"]*/\\.\\.(?:/|\"))'
        r'(?:\\/work\\/repo\\/|(?![/~@]))[^\"\\\\]+\"\\x00"',
        'decision = "allow"',
        "priority = 100",
        "",
    ]
)


def _context(
    posture: Posture,
    *,
    pairbot: str = PAIRBOT,
    root: str = ROOT,
    rules_dir: str | None = RULES_DIR,
    env: Mapping[str, str] | None = None,
) -> RuleContext:
    policy = ResolvedPermissions(posture, (), (), MappingProxyType({}))
    return RuleContext(policy, pairbot, root, rules_dir=rules_dir, env=env or {})


def _rules(context: RuleContext) -> list[dict[str, Any]]:
    made = agent_rules("gemini", context)
    rules: list[dict[str, Any]] = tomllib.loads(made.files["gemini-policy.toml"])["rule"]
    return rules


def _stringify(args: Mapping[str, object]) -> str:
    """gemini's stableStringify of a tool call's flat arguments."""
    pairs = (f"\0{_json(key)}:{_json(value)}\0" for key, value in sorted(args.items()))
    return "{" + ",".join(pairs) + "}"


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _allows(rule: Mapping[str, Any], args: Mapping[str, object]) -> bool:
    return re.search(rule["argsPattern"], _stringify(args)) is not None


def _shell(rules: list[dict[str, Any]]) -> dict[str, Any]:
    [rule] = [r for r in rules if r["toolName"] == "run_shell_command"]
    return rule


def _edits(rules: list[dict[str, Any]]) -> dict[str, Any]:
    [rule] = [r for r in rules if r["toolName"] == ["write_file", "replace"]]
    return rule


def _report(pairbot: str, summary: str = "wrote the plan") -> str:
    # app/engine/instructions.py `_report_block`: the line the prompt asks the agent to run.
    return f'{shlex.quote(pairbot)} batch report --complete "{summary}"'


def test_sandboxed_allows_the_report_only() -> None:
    made = agent_rules("gemini", _context("repo-sandboxed-permissive"))
    assert made == AgentRules(args=("--policy", POLICY), files={"gemini-policy.toml": SANDBOXED})


def test_curated_allows_the_report_and_edits_in_the_tree() -> None:
    made = agent_rules("gemini", _context("curated-allowlist"))
    assert made == AgentRules(
        args=("--policy", POLICY), files={"gemini-policy.toml": SANDBOXED + "\n" + EDIT_RULE}
    )


def test_full_autonomy_needs_no_rules() -> None:
    assert agent_rules("gemini", _context("full-autonomy")) == AgentRules()


@pytest.mark.parametrize("posture", ["repo-sandboxed-permissive", "curated-allowlist"])
def test_no_rules_directory_no_rules(posture: Posture) -> None:
    # A docker or remote locus: gemini's policy is a file, and there is nowhere to write it.
    assert agent_rules("gemini", _context(posture, rules_dir=None)) == AgentRules()


@pytest.mark.parametrize(
    "pairbot", [PAIRBOT, "/opt/my tools/pairbot", "/srv/it's/pairbot", "pairbot"]
)
def test_the_report_rule_matches_the_prompts_report_line_only(pairbot: str) -> None:
    rule = _shell(_rules(_context("repo-sandboxed-permissive", pairbot=pairbot)))
    assert rule["decision"] == "allow"
    for line in (
        _report(pairbot),
        _report(pairbot, 'a "quoted" summary'),
        f'{shlex.quote(pairbot)} batch report --blocker "stuck"',
    ):
        assert _allows(rule, {"command": line, "description": "report"}), line
    for line in (
        f"{shlex.quote(pairbot)} batch reporter",
        f"{shlex.quote(pairbot)} batch apply",
        f"touch x; {_report(pairbot)}",
        "/elsewhere/pairbot batch report --complete x",
    ):
        assert not _allows(rule, {"command": line}), line


def test_a_command_nested_in_another_argument_does_not_match() -> None:
    # gemini's own commandPrefix would match `"command":"…` anywhere in the JSON; the rule is
    # anchored on the NUL around top-level arguments.
    rule = _shell(_rules(_context("curated-allowlist")))
    args = {"additional_permissions": {"command": _report(PAIRBOT)}, "command": "rm -rf ~"}
    assert '"command":"/usr/local/bin/pairbot batch report ' in _stringify(args)
    assert not _allows(rule, args)


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        (f"{ROOT}/.pair/changes/alpha/plan.md", True),
        (f"{ROOT}/src/a..b/c.py", True),
        (".pair/changes/alpha/plan.md", True),
        ("plan.md", True),
        (ROOT, False),
        (f"{ROOT}/", False),
        (f"{ROOT}x/plan.md", False),
        (f"{ROOT}/../outside", False),
        (f"{ROOT}/a/../../outside", False),
        (f"{ROOT}/a/..", False),
        ("../outside", False),
        ("a/../../outside", False),
        ("..", False),
        ("/etc/passwd", False),
        ("~/.bashrc", False),
        ("@../outside", False),
        (f'{ROOT}/a"b', False),
    ],
)
def test_the_edit_rule_keeps_to_the_tree(path: str, allowed: bool) -> None:
    rule = _edits(_rules(_context("curated-allowlist")))
    assert _allows(rule, {"file_path": path, "content": "x"}) is allowed
    assert _allows(rule, {"file_path": path, "old_string": "a", "new_string": "b"}) is allowed


def test_the_edit_rule_reads_a_tree_with_special_characters_literally() -> None:
    root = "/w/a+b (c) [d] $e.f"
    rule = _edits(_rules(_context("curated-allowlist", root=root)))
    assert _allows(rule, {"file_path": f"{root}/plan.md", "content": "x"})
    assert not _allows(rule, {"file_path": "/w/aab (c) [d] $exf/plan.md", "content": "x"})


def test_a_content_that_spells_a_path_does_not_match() -> None:
    rule = _edits(_rules(_context("curated-allowlist")))
    fake = f'\0"file_path":"{ROOT}/x"\0'
    assert not _allows(rule, {"content": fake, "file_path": "/etc/passwd"})


@pytest.mark.parametrize("posture", ["repo-sandboxed-permissive", "curated-allowlist"])
def test_patterns_pass_geminis_regex_checks(posture: Posture) -> None:
    # toml-loader.ts isSafeRegExp: at most 2048 characters, no nested quantifier.
    nested = re.compile(r"\([^)]*[*+?{].*\)[*+?{]")
    for rule in _rules(_context(posture, root="/w/a (b)+ {c}*", pairbot="/p (x)+/pairbot")):
        assert len(rule["argsPattern"]) <= 2048
        assert nested.search(rule["argsPattern"]) is None, rule["argsPattern"]


def test_geminis_own_user_policies_stay_when_its_home_is_moved() -> None:
    # Any --policy stops gemini loading <home>/.gemini/policies; GEMINI_CLI_HOME names it.
    env = {"GEMINI_CLI_HOME": "/srv/gemini"}
    made = agent_rules("gemini", _context("curated-allowlist", env=env))
    assert made.args == ("--policy", POLICY, "--policy", "/srv/gemini/.gemini/policies")
