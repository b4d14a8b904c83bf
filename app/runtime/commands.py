"""pairbot's lifecycle commands: the text an agent's prompt carries, and each agent's own
command file for people who work with the agent interactively.

One shared definition per command (`propose`, `apply`, `verify`, `red`, `verify-red`, `fix`,
`decompose-phase`, `open-pr`) has one author. `delegate` writes the prompt's command block: the
definition inline, followed by its arguments, for every agent. An invocation such as
`/pair:apply alpha` is not used in the prompt because no supported CLI expands it there:
claude does not expand a command in the middle of a prompt, `codex exec` never reads custom
prompts, gemini expands only a leading `/pair-x` in a trusted folder, and opencode only through
`run --command`. Inline text is the one form every CLI reads.
Inside the prompt the definition does not name `pairbot` itself: it points at the prompt's
"How to report" block (app/engine/instructions.py), which names pairbot exactly as the agent
reaches it (an absolute path for a local agent), so that a login shell resetting PATH cannot
leave the agent with `pairbot: command not found`.

The same definition is still rendered into each agent's own command format and path
(`/pair:apply` for claude, `/pair-apply` for the others; a codex skill), so a person can invoke
it interactively. Before a spawn the launcher calls `ensure_command_in_spawn_locus`:

    absent                    render it from the shared definition, then spawn
    present                   verify it and leave it untouched (a maintainer may have edited it)
    remote locus              "inline": nothing is written there (see below)
    write failure             SkillLocusError naming the path and the cause

On the remote locus the file is not rendered and the agent is started all the same: the prompt
carries the definition inline, so the agent needs no file, and the file only serves a person
driving the agent interactively, on a disk (the `swerex-remote` server's) that pairbot does not
control.

The `command` adapter (an in-house agent) has no command files. The engine reaches `delegate`,
like `ensure_command_in_spawn_locus`, only through the launcher (app/runtime/launcher.py).
The command ids themselves (`CommandId`) are the engine's vocabulary, from its agent seam.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from app.engine.agent import CommandId
from app.errors import UserError

Ensured = Literal["rendered", "verified", "inline"]


@dataclass(frozen=True)
class CommandDefinition:
    """One lifecycle command: a one-line description and a body; `$ARGUMENTS` is the target
    (a change or a phase) followed by the caller's guidance, answers and feedback."""

    id: CommandId
    description: str
    body: str


_REPORT = (
    'Report exactly once when you stop, with `pairbot batch report --complete "<summary>"` '
    '(or `--blocker "<why>"`, or `--needs-input "<question>"`); PAIR_BATCH, PAIR_CHANGE and '
    "PAIR_TRANSITION are already set in your environment."
)
# The same sentence in a prompt, whose "How to report" block names pairbot as the agent reaches
# it: a bare `pairbot` here would invite the command a login shell cannot find.
_REPORT_IN_PROMPT = (
    "Report exactly once when you stop, with one of the `batch report` commands under "
    '"How to report" below, pairbot named exactly as written there (`--complete`, or '
    "`--blocker`, or `--needs-input`); PAIR_BATCH, PAIR_CHANGE and PAIR_TRANSITION are already "
    "set in your environment."
)

DEFINITIONS: Mapping[CommandId, CommandDefinition] = {
    "propose": CommandDefinition(
        "propose",
        "Refine a change into acceptance criteria and a plan of test-first tasks",
        "Refine the change named first in $ARGUMENTS into acceptance criteria and a plan. Write "
        "`.pair/changes/<change>/plan.md` with a section `## Acceptance criteria` (one line per "
        "criterion: `AC-1: …`) and a section `## Tasks` of `- [ ]` checkbox lines, tests first. "
        "Do not implement anything yet. Done when plan.md exists with at least one unchecked "
        "task.\n\n" + _REPORT,
    ),
    "apply": CommandDefinition(
        "apply",
        "Implement a change's unchecked tasks, test-first",
        "Implement the unchecked tasks of `.pair/changes/<change>/plan.md` for the change named "
        "first in $ARGUMENTS, test-first: write the failing test, make it pass, then check the "
        "task off (`- [x]`). Work only on this change. Done when every task is checked and the "
        "tests pass.\n\n" + _REPORT,
    ),
    "verify": CommandDefinition(
        "verify",
        "Review a change independently and report a typed verdict",
        "Review the change named first in $ARGUMENTS independently, as someone who did not "
        "write it. For every acceptance criterion in its plan.md name the test that proves it. "
        "Record each problem as a finding with an id `r<round>-<n>` for the review round you are "
        "told, and carry every earlier finding forward with a transition (open, resolved, "
        "superseded, human). Something the card never asked for is a scope proposal "
        "(`sc-<n>`), never a defect. Finish with the verdict 'Ready for archive' or "
        "'N critical issue(s) found' and pass the findings with `--findings FILE` "
        "(JSON: acTests, findings, scopeChanges; FILE may be in the tree: it is read when you "
        "report and never committed).\n\n" + _REPORT,
    ),
    "red": CommandDefinition(
        "red",
        "Write failing tests for a review's blocking findings",
        "Write failing tests that reproduce each blocking finding listed in $ARGUMENTS. Change "
        "no production code. Done when every finding has a test that fails for the reason it "
        "names.\n\n" + _REPORT,
    ),
    "verify-red": CommandDefinition(
        "verify-red",
        "Accept or refuse red's acceptance contract, row by row, without changing anything",
        "Check the acceptance contract that `red` wrote for the change named first in "
        "$ARGUMENTS, independently, as someone who wrote neither the findings nor the tests. "
        "Change no file (the findings file you report with may be in the tree: it is read, never "
        "committed). For every contract row decide whether its tests fail for the reason "
        "the finding names and would pass only once the finding is fixed; accept or refuse it "
        "with a one-sentence reason. Pass the verdict with `--findings FILE` (JSON: "
        '{"verdict": "accept"|"refuse", "rows": [{"id", "verdict": "accept"|"refuse", '
        '"reason"}]}: accept only when every row is accepted).\n\n' + _REPORT,
    ),
    "fix": CommandDefinition(
        "fix",
        "Make the findings' failing tests pass",
        "Make the failing tests for the findings listed in $ARGUMENTS pass without editing those "
        "tests or the test runner's configuration. Done when the whole test suite passes.\n\n"
        + _REPORT,
    ),
    "decompose-phase": CommandDefinition(
        "decompose-phase",
        "Author an empty phase's changes into the batch manifest",
        "Add the concrete changes of the phase named first in $ARGUMENTS, in order, to that "
        "phase's `changes:` in the batch manifest named in $ARGUMENTS (names: lowercase letters, "
        "digits, '.', '_' or '-'), building on what earlier phases shipped. Change nothing else "
        "in the file. Report with `--change <phase>`.\n\n" + _REPORT,
    ),
    "open-pr": CommandDefinition(
        "open-pr",
        "Describe a group of changes for its pull request",
        "Summarise the changes named in $ARGUMENTS for their pull request: what changed and why, "
        "per change, in the repository's own style. Do not push or open anything: pairbot does "
        "every write to the forge.\n\n" + _REPORT,
    ),
}


class SkillLocusError(UserError):
    """A command could not be made present where the agent runs; nothing was spawned."""


def _md(definition: CommandDefinition) -> str:
    return f"---\ndescription: {definition.description}\n---\n\n{definition.body}\n"


def _toml(definition: CommandDefinition) -> str:
    # Gemini CLI reads custom commands as TOML; `{{args}}` is its argument placeholder.
    body = definition.body.replace("$ARGUMENTS", "{{args}}").replace('"""', '\\"\\"\\"')
    return f'description = "{definition.description}"\nprompt = """\n{body}\n"""\n'


@dataclass(frozen=True)
class CommandStyle:
    """Where one agent reads its custom commands, how they are invoked, and their format."""

    path: Callable[[Path, str, Mapping[str, str]], Path]
    invocation: Callable[[str], str]
    render: Callable[[CommandDefinition], str]


def _skill(definition: CommandDefinition) -> str:
    # Codex skills: SKILL.md with `name` and `description` front matter.
    return (
        f"---\nname: pair-{definition.id}\ndescription: {definition.description}\n---\n\n"
        f"{definition.body}\n"
    )


STYLES: Mapping[str, CommandStyle] = {
    "claude": CommandStyle(
        path=lambda root, cid, _env: root / ".claude" / "commands" / "pair" / f"{cid}.md",
        invocation=lambda cid: f"/pair:{cid}",
        render=_md,
    ),
    "cursor": CommandStyle(
        path=lambda root, cid, _env: root / ".cursor" / "commands" / f"pair-{cid}.md",
        invocation=lambda cid: f"/pair-{cid}",
        render=_md,
    ),
    "gemini": CommandStyle(
        path=lambda root, cid, _env: root / ".gemini" / "commands" / f"pair-{cid}.toml",
        invocation=lambda cid: f"/pair-{cid}",
        render=_toml,
    ),
    # `codex exec` reads no custom prompts; it offers the repository's skills.
    "codex": CommandStyle(
        path=lambda root, cid, _env: root / ".agents" / "skills" / f"pair-{cid}" / "SKILL.md",
        invocation=lambda cid: f"$pair-{cid}",
        render=_skill,
    ),
    "opencode": CommandStyle(
        path=lambda root, cid, _env: root / ".opencode" / "commands" / f"pair-{cid}.md",
        invocation=lambda cid: f"/pair-{cid}",
        render=_md,
    ),
}


def invocation(agent: str, command_id: CommandId) -> str | None:
    """How a person invokes the command interactively (`/pair:apply`, `/pair-apply`,
    `$pair-apply`); None for an agent without command files."""
    style = STYLES.get(agent)
    return style.invocation(command_id) if style else None


def delegate(agent: str, command_id: CommandId, target: str, arguments: Sequence[str]) -> str:
    """The prompt's command block: the command's definition inline, then its arguments.

    The same for every agent (see the module docstring for why no invocation token is used);
    `agent` stays in the signature because the engine's seam passes it. The report sentence
    points at the prompt's "How to report" block, which names pairbot by the path the agent
    can run.
    """
    del agent
    body = DEFINITIONS[command_id].body.replace("$ARGUMENTS", "the arguments below")
    body = body.replace(_REPORT, _REPORT_IN_PROMPT)
    return "\n".join([f"Your task ({command_id}):", body, "", "Arguments:", target, *arguments])


def ensure_command_in_spawn_locus(
    command_id: CommandId,
    agent: str,
    locus: str,
    root: Path,
    env: Mapping[str, str],
) -> Ensured:
    """Render-or-verify `command_id` for `agent` before it spawns ("inline" when no file is
    placed: an agent without command files, or the remote locus); raise SkillLocusError."""
    style = STYLES.get(agent)
    if style is None:
        return "inline"
    if locus == "remote":
        # The prompt carries the definition inline; the file serves only interactive use, on a
        # disk pairbot does not control (the server's), so nothing is written there.
        return "inline"
    path = style.path(root, command_id, env)
    if path.is_file():
        return "verified"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(style.render(DEFINITIONS[command_id]), encoding="utf-8")
        tmp.replace(path)
    except OSError as err:
        raise SkillLocusError(
            f"cannot render the /{command_id} command for agent {agent!r} at {path}: "
            f"{err.strerror or err}. Remedy: make that directory writable"
        ) from err
    return "rendered"
