"""opencode's rules for a bounded posture (app/runtime/rules/__init__.py): one permission map.

opencode 1.18.33 has no argv flag for a bounded posture, but its own permission system is a
map of permission → action or {pattern: action} (`allow`, `ask`, `deny`), read from its config
and, last, from the `OPENCODE_PERMISSION` variable: after every config source (the global
config, `OPENCODE_CONFIG`, the project's `opencode.json`, `.opencode/`, `OPENCODE_CONFIG_CONTENT`,
the managed config) opencode deep-merges that JSON into the top-level `permission`
(`Config.loadInstanceState` in its binary: `permission = mergeDeep(permission,
JSON.parse(OPENCODE_PERMISSION))`). So pairbot's map goes there, and the user's own config,
their provider in `OPENCODE_CONFIG_CONTENT` included, is left as it is. Where the user set
`OPENCODE_PERMISSION` themselves, pairbot's map is merged into theirs the way opencode merges
it into a config file's map: pairbot's keys win.

How opencode decides (its `Permission.evaluate` and `fromConfig`): the map becomes a list of
rules in insertion order, after the agent's defaults (`"*": "allow"`, `external_directory` and
`doom_loop` "ask", reading `*.env` "ask"); a tool call is allowed, denied or asked by the LAST
rule whose permission and pattern match (`*` matches anything, `/` included; a pattern ending
in ` *` also matches without the rest). Headless, `opencode run` rejects every "ask" at once
("permission requested: …; auto-rejecting"), so nothing stalls, but a rejected call fails back
to the model; the map therefore says allow or deny, never ask. A tool whose last rule for its
permission is a deny of `*` is not even offered to the model (`Permission.disabled`).

    permission            sandboxed                         curated
    edit                  allow                             allow
    external_directory    deny                              deny
    bash                  allow, or only the operator's     deny, then the operator's Bash
                          Bash patterns when it lists any;  patterns; then the report; then
                          then the report; then the deny    the deny list
                          list
    webfetch, websearch,  deny                              deny
    codesearch
    task, skill           (opencode's default)              deny

- `edit` covers opencode's `write`, `edit` and `apply_patch` tools; its pattern is the file's
  path relative to the project, so the tree is the reach of `external_directory`: any file
  outside the working tree (an edit, a read, a `cd`/`rm`/`cp`… argument of a shell command,
  or a shell `workdir`) asks for it, and is denied. opencode itself adds an allow for its own
  truncated tool outputs after the user's rules.
- `bash` is checked per command: opencode parses the line (tree-sitter) and asks for the text
  of every command in it, those inside `$(…)`, a pipeline or a list included, so
  `<PAIRBOT> batch report *` (pairbot quoted as the prompt quotes it, app/engine/instructions.py)
  lets nothing else run.
- The operator's `allow`/`deny` lists are claude's syntax; their shell entries translate
  (`Bash` → `*`, `Bash(<pattern>)` → `<pattern>`, a trailing `:*` → ` *`). The deny list,
  baseline included, comes last, so it wins as it does for claude. Other entries name claude's
  tools and are not passed.
- The sandboxed posture lets the shell run like claude's (`--allowedTools Bash` unless the
  operator lists their own), confined to the tree by `external_directory`; curated lets
  nothing but the report and the operator's own patterns run.

A top-level `"*"` rule is avoided on purpose: opencode's deep merge keeps a key where the
user's config first put it, so a `"*": "deny"` would land after, and override, every key the
user's config shares with pairbot's map (their `edit` would become denied). Tools the map does
not name (an MCP server's, a plugin's) keep the user's or opencode's own rules. A per-agent
`permission` in the user's config is evaluated after the top-level map, and wins for that
agent (opencode's documented precedence).

Only the environment is needed, so the rules also apply where no file can be written beside
the agent (`rules_dir` None).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Mapping
from typing import Any

from app.runtime.permissions import effective_deny
from app.runtime.rules import AgentRules, RuleContext

__all__ = ["PERMISSION_VAR", "bash_pattern", "permission_map", "report_pattern", "rules"]

PERMISSION_VAR = "OPENCODE_PERMISSION"
# Tools that reach the network: denied under both bounded postures (claude's would prompt).
_NETWORK = ("webfetch", "websearch", "codesearch")
# What curated denies besides: subagents (`task`) and loading skills.
_CURATED_DENIED = ("task", "skill")


def rules(context: RuleContext) -> AgentRules:
    """The rules opencode needs to edit and report under `context.policy.posture`."""
    if context.policy.posture == "full-autonomy":
        return AgentRules()
    ours = permission_map(context)
    mine = _user_map(context.env.get(PERMISSION_VAR))
    merged = _merge_deep(mine, ours) if mine is not None else ours
    return AgentRules(env={PERMISSION_VAR: json.dumps(merged)})


def report_pattern(pairbot: str) -> str:
    """The bash pattern allowing exactly pairbot's report command, pairbot spelled as the
    prompt spells it."""
    return f"{shlex.quote(pairbot)} batch report *"


def bash_pattern(entry: str) -> str | None:
    """An operator's claude-syntax entry as an opencode bash pattern; None when it names
    another tool."""
    if entry == "Bash":
        return "*"
    if not (entry.startswith("Bash(") and entry.endswith(")")):
        return None
    pattern = entry[len("Bash(") : -1].strip()
    if pattern.endswith(":*"):  # claude's older prefix form
        pattern = pattern[:-2].rstrip() + " *"
    return pattern or None


def permission_map(context: RuleContext) -> dict[str, Any]:
    """pairbot's `permission` map for the posture (see the module docstring's table)."""
    policy = context.policy
    allowed = _patterns(policy.allow)
    bash: dict[str, str] = {}
    if policy.posture == "repo-sandboxed-permissive" and not policy.allow:
        bash["*"] = "allow"
    else:
        bash["*"] = "deny"
        bash.update((pattern, "allow") for pattern in allowed)
    bash[report_pattern(context.pairbot)] = "allow"
    for pattern in _patterns(effective_deny(policy)):
        bash.pop(pattern, None)  # re-inserted last: a deny is the last word, as for claude
        bash[pattern] = "deny"
    permission: dict[str, Any] = {
        "edit": "allow",
        "external_directory": "deny",
        "bash": bash,
    }
    permission.update((tool, "deny") for tool in _NETWORK)
    if policy.posture == "curated-allowlist":
        permission.update((tool, "deny") for tool in _CURATED_DENIED)
    return permission


def _patterns(entries: Iterable[str]) -> list[str]:
    found = (bash_pattern(entry) for entry in entries)
    return list(dict.fromkeys(pattern for pattern in found if pattern is not None))


def _user_map(text: str | None) -> dict[str, Any] | None:
    """The user's own OPENCODE_PERMISSION, when it is a JSON object (opencode skips it too
    otherwise)."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _merge_deep(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """`over` merged into `base` as opencode merges configs (remeda's mergeDeep): keys keep
    `base`'s order, new keys follow, two objects merge, anything else is replaced."""
    merged = {**base, **over}
    for key, value in over.items():
        mine = base.get(key)
        if isinstance(mine, dict) and isinstance(value, dict):
            merged[key] = _merge_deep(mine, value)
    return merged
