"""gemini's rules for a bounded posture (app/runtime/rules/__init__.py): one Policy Engine file.

gemini 0.61 decides from its policy rules both which tools the model is offered and whether a
call runs (docs/reference/policy-engine.md in the package; packages/core/src/policy in
google-gemini/gemini-cli). Its built-in write.toml denies `write_file`, `replace` and
`run_shell_command` headless at the default tier (priority 1.010, `interactive = false`),
and auto_edit allows the two edit tools above that (1.015). A tool whose highest matching rule
is a deny without an argument pattern is not offered at all (`PolicyEngine.getExcludedTools`);
one whose highest rule allows on an argument pattern is offered, and each call is then checked
against the patterns, falling back to the built-in deny. So the file pairbot writes allows, at
the user tier (`--policy` files load there: 4 + priority/1000):

    both bounded postures   run_shell_command whose top-level `command` starts with
                            `<PAIRBOT> batch report` (pairbot quoted as the prompt quotes it)
    curated-allowlist       also write_file and replace whose `file_path` is inside the
                            working tree (absolute under `root`, or relative without `..`);
                            repo-sandboxed-permissive has them from auto_edit already

Everything else keeps gemini's headless deny. A command is checked part by part (`a && b`, a
`$(…)` inside it): every part must be allowed on its own (`PolicyEngine.checkShellCommand`), so
the report prefix lets nothing else run (under auto_edit gemini lets a matching command
redirect its output, `shouldDowngradeForRedirection`: pairbot's one line, to a file the agent
may write anyway). The shell rule is gemini's `commandPrefix` spelled as
the `argsPattern` it expands to (`buildArgsPatterns`), anchored on the NUL that
`stableStringify` puts around each top-level argument only, so a `"command":…` nested in another
argument cannot match.

gemini reads its rule files at start from `--policy <file>` (a yargs array: several `--policy`
accumulate, the operator's own through `permissions.raw.gemini` included, each value split on
commas, so a path with a comma cannot be named). Given any `--policy`, gemini no longer loads
its default user directory (`~/.gemini/policies`, `getPolicyDirectories`) nor the settings'
`policyPaths`: where the operator points gemini's home elsewhere (GEMINI_CLI_HOME, which the
isolated agent keeps), that directory is passed back; an isolated agent's own HOME is fresh.

The file is the same on every locus: in the isolated agent's fresh HOME (or a private
temporary directory) locally, and on docker and remote in a 0700 directory of the step's run
directory on the agent's side, written through the swerex runtime before gemini starts and
removed with it (app/runtime/rex/rulefiles.py); `--policy` names it there. A write that fails
fails the step: gemini never runs without its policy. With `rules_dir` None (no directory
made) nothing is returned.
"""

from __future__ import annotations

import json
import posixpath
import shlex

from app.runtime.rules import AgentRules, RuleContext

__all__ = ["POLICY_FILE", "PRIORITY", "report_prefix", "rules"]

POLICY_FILE = "gemini-policy.toml"
# Within the user tier: above gemini's own defaults (tier 1), below gemini's settings-made
# rules (tools.exclude is 4.4, an MCP exclusion 4.9), so an operator's exclusion still wins.
PRIORITY = 100
_EDIT_TOOLS = ("write_file", "replace")
_REGEX_SPECIAL = frozenset("\\^$.|?*+()[]{}/")
# A `..` path segment anywhere in the JSON string value being matched.
_NO_PARENT = r'(?!\.\.(?:/|"))(?![^"]*/\.\.(?:/|"))'


def rules(context: RuleContext) -> AgentRules:
    """The rules gemini needs to edit and report under `context.policy.posture`."""
    if context.rules_dir is None:  # gemini's policy is a file: no directory, nothing to name
        return AgentRules()
    blocks = [_report_rule(context.pairbot)]
    if context.policy.posture == "curated-allowlist":
        blocks.append(_edit_rule(context.root))
    text = (
        "# Written by pairbot for one step: what it allows beside gemini's defaults.\n"
        + "\n".join(blocks)
    )
    args = ["--policy", posixpath.join(context.rules_dir, POLICY_FILE)]
    home = context.env.get("GEMINI_CLI_HOME")
    if home and "," not in home:
        args += ["--policy", posixpath.join(home, ".gemini", "policies")]
    return AgentRules(args=tuple(args), files={POLICY_FILE: text})


def report_prefix(pairbot: str) -> str:
    """The report command's start, pairbot spelled as the prompt spells it
    (app/engine/instructions.py quotes it the same way)."""
    return f"{shlex.quote(pairbot)} batch report"


def _report_rule(pairbot: str) -> str:
    # gemini's commandPrefix pattern: `"command":"<prefix>` then a space, a quote or `\"`.
    pattern = r"\x00" + _regex(_json_text("command") + ':"' + _json_body(report_prefix(pairbot)))
    pattern += r'(?:[\s"]|\\")'
    return _rule("run_shell_command", pattern, "pairbot's report command")


def _edit_rule(root: str) -> str:
    tree = root.rstrip("/")
    # The value: no `..` segment, no escaped character, and either under the tree or relative
    # (not `/…`, `~…`, or gemini's `@…` workspace shorthand).
    value = _NO_PARENT + "(?:" + _regex(_json_body(tree) + "/") + r'|(?![/~@]))[^"\\]+"'
    pattern = r"\x00" + _regex(_json_text("file_path") + ':"') + value + r"\x00"
    return _rule(list(_EDIT_TOOLS), pattern, "edits in the working tree")


def _rule(tool: str | list[str], pattern: str, why: str) -> str:
    return (
        f"# {why}\n"
        "[[rule]]\n"
        f"toolName = {json.dumps(tool)}\n"
        f"argsPattern = {_toml_string(pattern)}\n"
        'decision = "allow"\n'
        f"priority = {PRIORITY}\n"
    )


def _json_text(value: str) -> str:
    """`value` as JSON.stringify writes it, quotes included."""
    return json.dumps(value, ensure_ascii=False)


def _json_body(value: str) -> str:
    """`value` as JSON.stringify writes it inside its quotes."""
    return _json_text(value)[1:-1]


def _regex(text: str) -> str:
    """`text` matched literally by a JavaScript RegExp without flags."""
    return "".join("\\" + c if c in _REGEX_SPECIAL else c for c in text)


def _toml_string(text: str) -> str:
    """A TOML basic string: JSON's escapes are TOML's, but DEL must be escaped too."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")
