"""Agent permissions: translate the merged policy into each agent's argv flags (docs/runtime.md).

`resolve_permission_flags` is pure: a posture, the allow/deny lists and the per-agent `raw`
fragments go in, an argv fragment comes out. The adapters append it after their base args and
model flag. The three postures (docs/runtime.md) are spelled with the flags of the CLI versions
in `app.runtime.supported` (each from the CLI's own `--help`):

    agent     repo-sandboxed-permissive         curated-allowlist            full-autonomy
    claude    --permission-mode acceptEdits     --permission-mode manual     --permission-mode
              --permission-prompts none         --permission-prompts none      bypassPermissions
              --add-dir <repoRoot>              --allowedTools <allow>…
              --allowedTools <allow, or Bash>…    Edit(//<repoRoot>/**) <report>
                [<report>]                      --disallowedTools <deny>…
              --disallowedTools <deny>…
    gemini    --approval-mode auto_edit         --approval-mode default      --approval-mode yolo
              + policy file (rules/gemini.py)   + policy file
    codex     --sandbox workspace-write         --sandbox workspace-write    --dangerously-bypass-
              + execpolicy (rules/codex.py)     + the same, no /tmp          approvals-and-sandbox
    cursor    (none: own gating; warning)       (none: own gating; warning)  --force
    opencode  OPENCODE_PERMISSION               OPENCODE_PERMISSION          --auto
              (rules/opencode.py)

`<report>` is `Bash(<PAIRBOT> batch report:*)`: every bounded posture lets a step edit its tree
and run pairbot's report command, and the narrowest rule each agent's own permission system
has for that ships by default — claude's on its command line (here), the others' in the files
or variables app/runtime/rules writes for the step.

Why these spellings:

- claude: 2.1.x renamed the `default` permission mode `manual`. `--permission-prompts none`
  denies whatever would prompt (nobody answers a prompt under `-p`), so a headless step is
  refused at once instead of stalling. full-autonomy is the documented `bypassPermissions`
  mode; claude refuses it when run as root outside a deliberate sandbox (`IS_SANDBOX=1`,
  which the docker locus sets for its container's root), so elsewhere pairbot must not run
  the agent as root.
- codex: `exec` is always headless: it takes no `--ask-for-approval` and ignores
  `-c approval_policy=…`; anything outside the sandbox fails back to the model. The posture
  is therefore the sandbox, and both bounded postures need a writable tree: `read-only`
  rejects every edit. codex's own allow list is its execpolicy `.rules` files
  (app/runtime/rules/codex.py). full-autonomy is `--full-auto`'s successor, the documented
  `--dangerously-bypass-approvals-and-sandbox`.
- gemini: `--approval-mode yolo` is the documented spelling of `--yolo`.
- opencode: `--auto` is the documented flag; `--dangerously-skip-permissions` is a hidden alias.

Choices made here:

- claude's list flags take one flag followed by one argv element per pattern
  (`--disallowedTools 'Bash(rm -rf *)' 'Bash(sudo *)'`), the form Claude Code's CLI reference
  shows (https://docs.anthropic.com/en/docs/claude-code/cli-reference). Repeated flags are not
  documented, and a comma-joined single value would break patterns that contain a comma. Each
  pattern is its own argv element, so the spaces inside `Bash(rm -rf *)` never reach a shell.
  Because these flags are variadic, nothing positional may follow them: the instructions go on
  stdin, and `raw` entries are expected to be flags.
- claude's sandboxed `--allowedTools` is the operator's allow list, or `Bash` when it is empty
  (the posture's promise: any shell command, unprompted, unless the operator narrows it),
  plus `<report>` when the list lacks `Bash`. An
  operator who sets `allow` and still wants every shell command unprompted lists `Bash` in it.
- The effective deny list is `policy.deny` (nearest scope first) followed by the baseline
  patterns it does not already name, for the sandboxed and curated postures. full-autonomy
  bypasses every check, so no deny list is passed.

Only claude can take allow/deny on its command line; opencode gets them translated into its
permission map (app/runtime/rules/opencode.py); gemini and codex keep them in their own config.
cursor has no bounded mode pairbot can set, so under the sandboxed and curated postures its own
per-action approval applies: `permission_warning` says so, and `WarnOnce` lets a process say it
once per agent (the caller prints it).

`raw` is the escape hatch: the entry for the spawned agent is appended after the posture flags;
entries for other agents are ignored. An agent name with no table here (e.g. `command`) gets no
posture flags but still its `raw` entry.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Final

from app.settings import Posture, ResolvedPermissions

__all__ = [
    "BASELINE_DENY",
    "GATED_AGENTS",
    "WarnOnce",
    "effective_deny",
    "permission_warning",
    "report_rule",
    "resolve_permission_flags",
]

BASELINE_DENY: Final[tuple[str, ...]] = (
    "Bash(rm -rf *)",
    "Bash(sudo *)",
    "Bash(* > /*)",
    "Bash(curl * | sh)",
    "Bash(curl * | bash)",
    "Bash(wget * | sh)",
    "Bash(wget * | bash)",
)
"""Destructive or exfiltrating shell patterns denied under every posture but full-autonomy."""

# Fixed flags for the agents whose translation ignores allow/deny and the repo root.
_FIXED: Final[Mapping[str, Mapping[Posture, tuple[str, ...]]]] = {
    # gemini's auto_edit covers file edits only; headless, 0.61 offers no shell tool then. The
    # policy file app/runtime/rules/gemini.py writes allows the report command (and, curated,
    # the edits in the tree).
    "gemini": {
        "repo-sandboxed-permissive": ("--approval-mode", "auto_edit"),
        "curated-allowlist": ("--approval-mode", "default"),
        "full-autonomy": ("--approval-mode", "yolo"),
    },
    "codex": {
        "repo-sandboxed-permissive": ("--sandbox", "workspace-write"),
        "curated-allowlist": ("--sandbox", "workspace-write"),
        "full-autonomy": ("--dangerously-bypass-approvals-and-sandbox",),
    },
    "cursor": {
        "repo-sandboxed-permissive": (),
        "curated-allowlist": (),
        "full-autonomy": ("--force",),
    },
    "opencode": {
        "repo-sandboxed-permissive": (),
        "curated-allowlist": (),
        "full-autonomy": ("--auto",),
    },
}

GATED_AGENTS: Final[frozenset[str]] = frozenset({"cursor"})
"""Agents pairbot cannot bound under the sandboxed and curated postures (their own approval
applies). opencode left this set once its permission map shipped (app/runtime/rules)."""


def effective_deny(policy: ResolvedPermissions) -> tuple[str, ...]:
    """`policy.deny` then the baseline patterns it lacks; empty under full-autonomy."""
    if policy.posture == "full-autonomy":
        return ()
    return tuple(dict.fromkeys((*policy.deny, *BASELINE_DENY)))


def report_rule(pairbot: str) -> str:
    """claude's rule allowing exactly pairbot's report command, pairbot spelled as the prompt
    spells it (app/engine/instructions.py quotes it the same way)."""
    return f"Bash({shlex.quote(pairbot)} batch report:*)"


def _claude(policy: ResolvedPermissions, repo_root: str, pairbot: str) -> tuple[str, ...]:
    deny = effective_deny(policy)
    if policy.posture == "full-autonomy":
        return ("--permission-mode", "bypassPermissions")
    if policy.posture == "repo-sandboxed-permissive":
        # acceptEdits covers file edits only; without an allowed Bash a headless shell call is
        # denied, hence the default. An operator's own list still lets the agent report.
        allow = policy.allow or ("Bash",)
        if "Bash" not in allow:
            allow = (*allow, report_rule(pairbot))
        return (
            "--permission-mode",
            "acceptEdits",
            "--permission-prompts",
            "none",
            "--add-dir",
            repo_root,
            "--allowedTools",
            *allow,
            "--disallowedTools",
            *deny,
        )
    # Curated: the operator's list, plus what every step needs — edits in the working tree and
    # the report command — so a step can be done at all. Nothing else runs unprompted.
    flags: list[str] = ["--permission-mode", "manual", "--permission-prompts", "none"]
    flags += ["--allowedTools", *policy.allow, *_curated_rules(repo_root, pairbot)]
    if deny:
        flags += ["--disallowedTools", *deny]
    return tuple(flags)


def _curated_rules(repo_root: str, pairbot: str) -> tuple[str, ...]:
    # `Edit(//abs/**)`: claude's edit rules take gitignore patterns, `//` marking an absolute
    # path; the Edit rule covers Write and MultiEdit too.
    tree = "//" + repo_root.lstrip("/").rstrip("/")
    return (f"Edit({tree}/**)", report_rule(pairbot))


def resolve_permission_flags(
    agent: str, policy: ResolvedPermissions, repo_root: str, pairbot: str = "pairbot"
) -> tuple[str, ...]:
    """The argv fragment for `agent` under `policy`: posture flags, then the agent's `raw` entry.
    `pairbot` is how the agent runs pairbot (its PAIRBOT), the one command a bounded posture
    always allows."""
    if agent == "claude":
        posture_flags = _claude(policy, repo_root, pairbot)
    else:
        posture_flags = _FIXED.get(agent, {}).get(policy.posture, ())
    return (*posture_flags, *policy.raw.get(agent, ()))


def permission_warning(agent: str, posture: Posture) -> str | None:
    """The warning for an agent whose own approval gating replaces the posture, else None."""
    if agent not in GATED_AGENTS or posture == "full-autonomy":
        return None
    return (
        f"warning: {agent} has no command-line permission mode for posture {posture!r}: "
        f"{agent}'s own per-action approval applies (an action that needs approval may be "
        "rejected or stall in headless mode), and the policy's allow/deny lists, baseline "
        f"included, are not passed to it — set them in {agent}'s own permission config, or use "
        "posture 'full-autonomy'"
    )


class WarnOnce:
    """Hands out each agent's permission warning once; keep one per process (the caller prints).

    Not thread-safe on purpose: the engine spawns one agent per step, from one thread.
    """

    def __init__(self) -> None:
        self._warned: set[str] = set()

    def __call__(self, agent: str, posture: Posture) -> str | None:
        """The warning the first time `agent` needs one, then None."""
        if agent in self._warned:
            return None
        text = permission_warning(agent, posture)
        if text is not None:
            self._warned.add(agent)
        return text
