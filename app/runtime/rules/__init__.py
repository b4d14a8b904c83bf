"""The narrowest rules each agent's own permission system needs for one step under a bounded
posture: edit files in its working tree and run `<PAIRBOT> batch report …`, nothing more.

claude takes its rules on the command line (app/runtime/permissions.py). The others read theirs
from their own configuration, each built by its module here: gemini a policy file (gemini.py),
codex execpolicy rules (codex.py), opencode a permission map (opencode.py).

`agent_rules` is pure: it says which files to write into a directory the launcher makes for the
step (`RuleContext.rules_dir`: in the isolated agent's fresh HOME, or a temporary directory),
and which argv and environment point the agent at them. Under `full-autonomy` nothing is
needed. Where no file can be written beside the agent (a docker or remote locus,
`rules_dir` None) a builder returns only what needs no file.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from app.settings import ResolvedPermissions

__all__ = ["RULE_AGENTS", "AgentRules", "RuleContext", "agent_rules"]

# The agents with a module here; claude's rules are argv (permissions.py), cursor is untested.
RULE_AGENTS = frozenset({"codex", "gemini", "opencode"})


@dataclass(frozen=True)
class RuleContext:
    """What a step's rules are built from."""

    policy: ResolvedPermissions
    pairbot: str  # how the agent runs pairbot (its PAIRBOT): the one command it must run
    root: str  # the working tree as the agent sees it
    writable: tuple[str, ...] = ()  # files outside `root` the agent writes (its journal)
    rules_dir: str | None = None  # where `files` go; None: nowhere beside the agent
    env: Mapping[str, str] = field(default_factory=dict)  # the agent's environment so far


@dataclass(frozen=True)
class AgentRules:
    """Argv appended after the posture flags, environment added, files written in `rules_dir`
    (relative path → text) before the agent starts."""

    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    files: Mapping[str, str] = field(default_factory=dict)


def agent_rules(agent: str, context: RuleContext) -> AgentRules:
    """The rules `agent` needs for a step in `context` (empty for an agent with none)."""
    if agent not in RULE_AGENTS or context.policy.posture == "full-autonomy":
        return AgentRules()
    # One module per agent, loaded for the agent that runs only.
    module = importlib.import_module(f"app.runtime.rules.{agent}")
    rules: AgentRules = module.rules(context)
    return rules
