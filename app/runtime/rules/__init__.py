"""The narrowest rules each agent's own permission system needs for one step under a bounded
posture: edit files in its working tree and run `<PAIRBOT> batch report …`, nothing more.

claude takes its rules on the command line (app/runtime/permissions.py). The others read theirs
from their own configuration, each built by its module here: gemini a policy file (gemini.py),
codex execpolicy rules (codex.py), opencode a permission map (opencode.py).

`agent_rules` is pure: it says which files to write into a directory made for the step
(`RuleContext.rules_dir`), and which argv and environment point the agent at them. Under
`full-autonomy` nothing is needed. Where the directory is depends on where the agent runs
(app/runtime/launcher.py):

    local, isolated      `.pairbot-rules` in the agent's fresh HOME, written before it is lent
    local, not isolated  a temporary directory of pairbot's user (0700), removed after the step
    docker, remote       `rules/` in the step's run directory on the agent's side (0700, files
                         0600), written through the swerex runtime before the agent starts and
                         removed with the run directory (app/runtime/rex/rulefiles.py); the
                         path is only known there, so the launcher hands the runtime a
                         `RulesFor` and the runtime adds the argv and environment it returns

A write that fails there fails the step before the agent starts. `rules_need_files` says which
agents' rules are files (codex's, gemini's); with `rules_dir` None a builder returns only what
needs no file (opencode's variable needs none).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from app.settings import ResolvedPermissions

__all__ = [
    "FILE_AGENTS",
    "RULE_AGENTS",
    "AgentRules",
    "RuleContext",
    "RulesFor",
    "agent_rules",
    "rules_need_files",
]

# The agents with a module here; claude's rules are argv (permissions.py), cursor is untested.
RULE_AGENTS = frozenset({"codex", "gemini", "opencode"})
# Those whose bounded rules are files (a CODEX_HOME, a `--policy` file), not only argv or env.
FILE_AGENTS = frozenset({"codex", "gemini"})


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


# The rules for a step given the directory (on the agent's side) their files go in.
RulesFor = Callable[[str], AgentRules]


def rules_need_files(agent: str, policy: ResolvedPermissions) -> bool:
    """Whether `agent`'s rules under `policy` include files (a directory must be made for them)."""
    return agent in FILE_AGENTS and policy.posture != "full-autonomy"


def agent_rules(agent: str, context: RuleContext) -> AgentRules:
    """The rules `agent` needs for a step in `context` (empty for an agent with none)."""
    if agent not in RULE_AGENTS or context.policy.posture == "full-autonomy":
        return AgentRules()
    # One module per agent, loaded for the agent that runs only.
    module = importlib.import_module(f"app.runtime.rules.{agent}")
    rules: AgentRules = module.rules(context)
    return rules
