"""codex's rules for a bounded posture (app/runtime/rules/__init__.py): one execpolicy rule
letting pairbot's report command out of codex's sandbox, in a CODEX_HOME of the step's own.

Both bounded postures run `codex exec --sandbox workspace-write` (app/runtime/permissions.py).
`exec` never prompts; every command runs inside codex's sandbox (bubblewrap + seccomp on Linux)
and `apply_patch` edits are accepted exactly where that sandbox may write: the working tree.
`read-only` rejects every edit ("patch rejected: writing is blocked by read-only sandbox"), so
no posture that edits can be narrower than a writable tree.

    repo-sandboxed-permissive   the tree, /tmp and $TMPDIR writable (codex's defaults)
    curated-allowlist           the tree only: `-c sandbox_workspace_write.exclude_slash_tmp`
                                and `exclude_tmpdir_env_var`
    both                        `pairbot batch report` allowed outside the sandbox

A card step's journal is outside its worktree, where the sandbox may not write. codex's own
allow list is its execpolicy: a `prefix_rule(decision = "allow")` whose literal prefix matches a
command runs that command outside the sandbox (codex 0.171 does so even under `read-only`).
The rule here allows exactly `<PAIRBOT> batch report`, pairbot spelled as the prompt spells it.
Other ways to reach the journal fail: `--add-dir` of its directory (a file cannot be a root)
makes bubblewrap create read-only `.git`/`.codex`/`.agents`/`.aws` mount points inside it, and
the isolated agent may not create anything there (app/runtime/lending.py lends it the journal
file, not its directory), so every command and edit fails.

codex 0.171 loads `.rules` files only from `$CODEX_HOME/rules/` (and the system and
trusted-project layers); no flag or `-c` key names another file. So the step gets a CODEX_HOME
of its own in `rules_dir` (the isolated agent's HOME, writable by it: codex writes its state
there and refuses to start in a CODEX_HOME it cannot write). When the operator set CODEX_HOME,
their `config.toml` and `rules/*.rules` are carried into it; their login (`auth.json`) is not —
a refreshed login would be written to the step's copy — so a bounded posture authenticates
with OPENAI_API_KEY or CODEX_API_KEY.

No rule can make an unlisted command ask: `prefix_rule` patterns are literal prefixes (no
wildcard), and the approval policy that asked for every unlisted command, `untrusted`, is
refused by 0.171 ("approval_policy = \"untrusted\" is no longer supported"). So under curated,
as under sandboxed, other commands still run — confined to what the sandbox lets them write,
with no network.

The same rules hold on every locus. Locally `rules_dir` is the isolated agent's fresh HOME
(or a private temporary directory); on docker and remote, where the agent's disk is not
pairbot's, it is a 0700 directory in the step's run directory on the agent's side, written
through the swerex runtime before codex starts and removed with it
(app/runtime/rex/rulefiles.py); the operator's `config.toml` and rules are read from
pairbot's CODEX_HOME and carried there. A write that fails there fails the step: codex
never runs without its rule. With `rules_dir` None (no directory made) only the argv is
returned.
"""

from __future__ import annotations

import json
from pathlib import Path

from app.runtime.rules import AgentRules, RuleContext

HOME = "codex-home"  # the step's CODEX_HOME, inside rules_dir
RULES_FILE = f"{HOME}/rules/pairbot-report.rules"

# `-c` overrides of codex's `[sandbox_workspace_write]` table: no /tmp, no $TMPDIR.
CURATED_TMP: tuple[str, ...] = (
    "-c",
    "sandbox_workspace_write.exclude_slash_tmp=true",
    "-c",
    "sandbox_workspace_write.exclude_tmpdir_env_var=true",
)


def report_rule(pairbot: str) -> str:
    """The execpolicy rule allowing exactly `<pairbot> batch report …` outside the sandbox.

    The pattern's tokens are the command's words after shell parsing, so the path is the plain
    path even where the prompt shell-quotes it. A JSON string is a valid Starlark string."""
    pattern = ", ".join(json.dumps(token, ensure_ascii=False) for token in (pairbot, "batch"))
    return (
        "# pairbot: a step's completion report, the one command run outside the sandbox.\n"
        f'prefix_rule(pattern = [{pattern}, "report"], decision = "allow")\n'
    )


def rules(context: RuleContext) -> AgentRules:
    """The rules codex needs to edit and report under `context.policy.posture`."""
    args = CURATED_TMP if context.policy.posture == "curated-allowlist" else ()
    if context.rules_dir is None:
        return AgentRules(args=args)
    files = carried(context.env.get("CODEX_HOME"))
    files[RULES_FILE] = report_rule(context.pairbot)
    env = {"CODEX_HOME": str(Path(context.rules_dir) / HOME)}
    return AgentRules(args=args, env=env, files=files)


def carried(codex_home: str | None) -> dict[str, str]:
    """The operator's own codex configuration, to go into the step's CODEX_HOME: their
    `config.toml` and `rules/*.rules` (relative to rules_dir). Nothing when they set none."""
    if not codex_home:
        return {}
    home = Path(codex_home)
    files: dict[str, str] = {}
    sources = [home / "config.toml", *sorted((home / "rules").glob("*.rules"))]
    for source in sources:
        try:
            text = source.read_text()
        except (OSError, UnicodeDecodeError):
            continue  # codex would not read it either
        files[f"{HOME}/{source.relative_to(home).as_posix()}"] = text
    return files
