"""`pairbot init`: a commented starter `.pair/config.yaml` for the checkout it runs in.

    render_config(binding, detected) -> str    pure: the file's text
    next_steps(written, binding, detected)     pure: what to commit and run next, line by line
    init_project(root, env, force) -> Init     the shell: infer, write, say
    run(args, root, env)                       the verb: print what init_project says

What it infers is what a run would: the host binding comes from `app.domain.card.binding` fed the
checkout's `origin` remote (the same `bind_checkout` every CLI run uses), and the test command
from the files git tracks (`app.domain.review.testgate`). The binding is written as a comment, not a
value: with no `hosts:` a run keeps inferring from where it runs (GitHub inside GitHub
Actions, the origin remote on a plain checkout), and an explicit `hosts:` would pin it even
after the repository moves. A detected pytest is written as the test command with its JUnit
report (pytest writes one with `--junitxml`); any other runner is only suggested in a comment,
because only the project knows how its runner writes JUnit (a guessed command that writes none
would send back every step).

An existing config is refused (exit 2) unless `force`; nothing else under `.pair/` is touched
except a `.pair/.gitignore` for pairbot's own state, written only when there is none.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from app.domain.card.binding import KNOWN_HOSTS, Resolution, runner_of
from app.domain.review.testgate import Detected, detect_test_commands
from app.engine.atomic import write_bytes_atomic
from app.engine.manifest import PAIR_DIR, ProjectConfig
from app.errors import ConfigError, UserError
from app.hosting import HostSettings, bind_checkout
from hosts.git import GitError, run_git

CONFIG = f"{PAIR_DIR}/config.yaml"
GITIGNORE = f"{PAIR_DIR}/.gitignore"
JUNIT = f"{PAIR_DIR}/junit.xml"
PYTEST = f"pytest -q --junitxml={JUNIT}"

# pairbot's own state under .pair/: the run-state of every batch, card batches (kept with the
# run-state, never on the default branch), finished cards' lessons (kept with the run-state
# too; `lessons.where: default-branch` force-adds each one on its own reviewed PR, and a
# tracked file is read whatever this says), the local forge, the App's store, the cards'
# worktrees, test reports.
IGNORED = """\
# pairbot's own state: written by runs, never committed
batches/card-*/
batches/*/run/
changes/*/.run/
lessons/
forge/
app/
worktrees/
junit.xml
"""


class ConfigExistsError(UserError):
    """`pairbot init` found a `.pair/config.yaml` and was not told to replace it."""


@dataclass(frozen=True)
class Inferred:
    """The binding a run here would choose (None: none could be inferred, and why)."""

    resolution: Resolution | None
    problem: str | None = None


def _hosts_block(inferred: Inferred) -> str:
    if inferred.resolution is None:
        return (
            f"# hosts: no binding could be inferred here: {inferred.problem}\n"
            f"# Declare them before the first run (adapters: {', '.join(KNOWN_HOSTS)}):\n"
            "# hosts: {pm: github, code: github}\n"
        )
    binding = inferred.resolution.binding
    return (
        "# hosts: which adapter holds the cards (pm) and which the pull requests (code).\n"
        "# Left out, each run infers them: github inside GitHub Actions, azure-devops inside\n"
        "# Azure Pipelines, else the origin remote, else local (a forge in .pair/forge).\n"
        f"# Here a run binds pm={binding.pm} code={binding.code} "
        f"({inferred.resolution.because}).\n"
        f"# Uncomment to pin it (adapters: {', '.join(KNOWN_HOSTS)}):\n"
        f"# hosts: {{pm: {binding.pm}, code: {binding.code}}}\n"
    )


def _tests_block(detected: tuple[Detected, ...]) -> str:
    head = (
        "# tests: the command the engine runs before and after every apply / red / fix; it\n"
        "# must write JUnit XML to `junit`. A step that breaks a passing test, or deletes or\n"
        "# skips one, is sent back. Without a command no test gate applies (and every step\n"
        "# says so).\n"
    )
    pytest = next((d for d in detected if d.runner == "pytest"), None)
    others = [d for d in detected if d.runner != "pytest"]
    lines = [head]
    if pytest is not None:
        lines.append(f"# Detected pytest ({pytest.evidence}).\n")
        lines.append(f'tests: {{command: "{PYTEST}", junit: {JUNIT}}}\n')
    for other in others:
        lines.append(
            f"# Detected `{other.command}` ({other.evidence}): make it write JUnit XML, e.g.\n"
            f'# tests: {{command: "{other.command} …", junit: {JUNIT}}}\n'
        )
    if pytest is None and not others:
        lines.append(
            "# No test runner detected. For example:\n"
            f'# tests: {{command: "{PYTEST}", junit: {JUNIT}}}\n'
        )
    return "".join(lines)


def render_config(inferred: Inferred, detected: tuple[Detected, ...]) -> str:
    """The text of a starter `.pair/config.yaml`; every key but the detected ones commented."""
    return (
        '# pairbot project config (docs/cli.md, "The files a user writes"). Every key is\n'
        "# optional; commit this file: the agent works in a worktree of the card's branch,\n"
        "# so it sees only what is committed.\n"
        "\n"
        f"{_hosts_block(inferred)}"
        "\n"
        "# The comment trigger: `/pair implement` and `@pair implement`.\n"
        "# trigger: pair\n"
        "\n"
        "# How far a card goes on its own, and which human gates hold it.\n"
        "# cycle: {until: ready-for-merge, merge: always, prepare: always, maxFixRounds: 3}\n"
        "\n"
        "# Which findings block a review: those at or above the floor (critical, major,\n"
        "# minor, info).\n"
        "# review: {severityFloor: major}\n"
        "\n"
        f"{_tests_block(detected)}"
        "\n"
        "# The agent: claude, codex, gemini, cursor, opencode, or `command` to run your own\n"
        "# program with the instructions on stdin (commit it, e.g. as .pair/agent.py):\n"
        "# batch:\n"
        "#   agent: claude\n"
        "#   # agent: command\n"
        "#   # agentCommand: [python3, .pair/agent.py]\n"
        "#   locus: local\n"
    )


def next_steps(inferred: Inferred, detected: tuple[Detected, ...], *, ignore: bool) -> list[str]:
    """What `pairbot init` prints after writing: the files to commit, then the first card."""
    files = f"{CONFIG} {GITIGNORE}" if ignore else CONFIG
    lines = [f"wrote {CONFIG}" + (f" and {GITIGNORE}" if ignore else "")]
    if inferred.resolution is not None:
        binding = inferred.resolution.binding
        lines.append(f"hosts: pm={binding.pm} code={binding.code} ({inferred.resolution.because})")
    else:
        lines.append(f"hosts: none inferred; {inferred.problem}")
    pytest = any(d.runner == "pytest" for d in detected)
    lines.append(
        f"tests: `{PYTEST}` (detected)"
        if pytest
        else "tests: no command set, so no test gate applies until you set `tests:`"
    )
    lines += [
        "next, commit it (the agent works in a worktree of the card's branch and sees only "
        "committed files):",
        f"  git add {files}",
        '  git commit -m "pairbot: project config"',
    ]
    lines.append('then open a card:  pairbot card new "What to build" [--body TEXT]')
    lines.append("then run it:  pairbot card N implement   (and `pairbot tick` for each next step)")
    return lines


def _tracked(root: Path) -> tuple[list[str], str | None]:
    try:
        listed = run_git(["-C", str(root), "ls-files", "-z"], timeout_s=30, check=False)
    except GitError:
        return [], None
    names = [n for n in listed.stdout.split("\0") if n] if listed.ok else []
    package = root / "package.json"
    text = package.read_text(errors="replace") if "package.json" in names else None
    return names, text


@dataclass(frozen=True)
class Init:
    """What `init_project` wrote and the lines it has to say."""

    path: Path
    lines: list[str]


def init_project(root: Path, env: Mapping[str, str], *, force: bool) -> Init:
    """Write the starter config (and `.pair/.gitignore` when absent); refuse to overwrite."""
    path = root / CONFIG
    if path.exists() and not force:
        raise ConfigExistsError(
            f"{path} already exists; edit it, or run `pairbot init --force` to replace it"
        )
    try:
        resolution, _ = bind_checkout(None, HostSettings.from_env(env), root, runner_of(env))
        inferred = Inferred(resolution)
    except ConfigError as err:
        inferred = Inferred(None, str(err))
    detected = detect_test_commands(*_tracked(root))
    text = render_config(inferred, detected)
    # What is written must be what a run accepts: checked against the model before writing.
    ProjectConfig.model_validate(yaml.safe_load(text) or {})
    write_bytes_atomic(path, text.encode("utf-8"))
    ignore = root / GITIGNORE
    wrote_ignore = not ignore.exists()
    if wrote_ignore:
        write_bytes_atomic(ignore, IGNORED.encode("utf-8"))
    return Init(path, next_steps(inferred, detected, ignore=wrote_ignore))


def run(args: argparse.Namespace, root: Path, env: Mapping[str, str]) -> int:
    """`pairbot init [--force]`."""
    for line in init_project(root, env, force=args.force).lines:
        print(line)
    return 0
