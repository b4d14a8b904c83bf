"""`pairbot validate [BATCH]`: the files parse, and pairbot can start every agent they configure.

    agent_problems(root, env, project, manifests) -> [line, …]   one line per problem
    run(args, root, env)      the verb: load the files (the loader's one line, exit 2), then
                              one `pairbot: …` line per agent problem on stderr, exit 2

The settings checked are the ones a step resolves (env > batch manifest > project config >
defaults, `app.settings.resolve_settings`): the project's own, and each named batch's. For
every stage, the agent must be one an adapter serves (`app.runtime.adapters.ADAPTERS`); the
`command` adapter needs `agentCommand`, and, when it runs here (locus `local`), a program that
exists: a path to a file, or a name on PATH. A script the command names by a relative path must
be committed: a card's agent runs in a worktree of the card's branch, which holds only what git
tracks. What only `pairbot doctor` can say (an agent CLI installed, a Docker engine, a remote
server alive) is left to it: validate reads files and PATH, and starts nothing.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from app.engine.manifest import (
    BatchManifest,
    ProjectConfig,
    list_batches,
    load_manifest,
    load_project_config,
)
from app.runtime.adapters import ADAPTERS
from app.settings import AGENT_STAGES, BatchSettings, ResolvedSettings, resolve_settings
from hosts.git import GitError, run_git

# Words of an agentCommand that name a file the agent runs (a script), not an option or a value.
_SCRIPT_SUFFIXES = (".py", ".sh", ".js", ".mjs", ".ts", ".rb", ".pl")


def _where(batch: str | None) -> str:
    return f"batch {batch}" if batch is not None else ".pair/config.yaml"


def _scripts(words: tuple[str, ...]) -> list[str]:
    return [
        w for w in words if not w.startswith("-") and ("/" in w or w.endswith(_SCRIPT_SUFFIXES))
    ]


def _tracked(root: Path, path: str) -> bool | None:
    """Whether git tracks `path` in `root` (None: `root` is no git checkout)."""
    try:
        done = run_git(
            ["-C", str(root), "ls-files", "--error-unmatch", "--", path],
            timeout_s=30,
            check=False,
        )
    except GitError:
        return None
    if done.ok:
        return True
    inside = run_git(["-C", str(root), "rev-parse", "--is-inside-work-tree"], check=False)
    return False if inside.ok else None


def _command_problems(
    root: Path, env: Mapping[str, str], settings: ResolvedSettings, where: str
) -> list[str]:
    command = settings.agent_command
    if not command:
        return [
            f"{where}: agent 'command' needs `agentCommand` (a list, e.g. [python3, "
            ".pair/agent.py]) in `batch:` of .pair/config.yaml or a batch's `settings:`"
        ]
    if settings.locus != "local":
        return []  # it runs in a container or on a server this machine cannot see into
    problems: list[str] = []
    program = command[0]
    scripts = _scripts(command[1:])
    if "/" in program:
        path = Path(program) if Path(program).is_absolute() else root / program
        if not path.is_file():
            problems.append(f"{where}: agentCommand program {program!r} is not a file")
        else:
            scripts.insert(0, program)  # a file in the project: it must be committed too
    elif shutil.which(program, path=env.get("PATH")) is None:
        problems.append(
            f"{where}: agentCommand program {program!r} is not on PATH; use a program on PATH "
            "or a path to the file"
        )
    for script in scripts:
        if PurePosixPath(script).is_absolute():
            if not Path(script).is_file():
                problems.append(f"{where}: agentCommand names {script!r}, which is not a file")
            continue
        if not (root / script).is_file():
            problems.append(
                f"{where}: agentCommand names {script!r}, which is not a file in {root}"
            )
        elif _tracked(root, script) is False:
            problems.append(
                f"{where}: agentCommand names {script!r}, which is not committed: a card's "
                f"agent runs in a worktree of the card's branch and will not find it; "
                f"`git add {script}` and commit it"
            )
    return problems


def _problems(
    root: Path, env: Mapping[str, str], settings: ResolvedSettings, where: str
) -> list[str]:
    problems: list[str] = []
    stages: dict[str, list[str]] = {}
    for stage in AGENT_STAGES:
        stages.setdefault(settings.agent_for(stage).name, []).append(stage)
    for agent, used in stages.items():
        if agent not in ADAPTERS:
            scope = "every stage" if len(used) == len(AGENT_STAGES) else ", ".join(used)
            problems.append(
                f"{where}: unknown agent {agent!r} ({scope}); the agents that exist: "
                f"{', '.join(sorted(ADAPTERS))}"
            )
        elif agent == "command":
            problems.extend(_command_problems(root, env, settings, where))
    return problems


def agent_problems(
    root: Path,
    env: Mapping[str, str],
    project: ProjectConfig,
    manifests: Mapping[str, BatchManifest],
) -> list[str]:
    """One line per agent pairbot could not start, for the project and each batch; a problem
    the project's settings already have is not repeated for a batch that inherits it."""
    found = _problems(root, env, _resolve(env, None, project.batch), _where(None))
    seen = {line.split(": ", 1)[1] for line in found}
    for name, manifest in manifests.items():
        if manifest.settings is None:
            continue
        settings = _resolve(env, manifest.settings, project.batch)
        for line in _problems(root, env, settings, _where(name)):
            if line.split(": ", 1)[1] not in seen:
                found.append(line)
    return found


def _resolve(
    env: Mapping[str, str], manifest: BatchSettings | None, project: BatchSettings
) -> ResolvedSettings:
    return resolve_settings(env=env, manifest=manifest, project=project)


def run(args: argparse.Namespace, root: Path, env: Mapping[str, str]) -> int:
    """The files parse (the loader's one line, exit 2), then every agent they configure is
    one pairbot can start: one line per problem, exit 2."""
    project = load_project_config(root)
    names = [args.batch] if args.batch is not None else list_batches(root)
    manifests = {name: load_manifest(root, name) for name in names}
    problems = agent_problems(root, env, project, manifests)
    for problem in problems:
        print(f"pairbot: {problem}", file=sys.stderr)
    if problems:
        return 2
    print(f"ok: .pair/config.yaml and {len(names)} batch(es): {', '.join(names) or '-'}")
    return 0
