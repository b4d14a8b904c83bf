"""The engine's deps for a command that runs steps: this checkout's launcher, work tree, vet and
pull-request opener, and every step's lines on stderr (stdout may be `--json`).

`pairbot batch apply`, the headless steps, `card`, `tick`, `demo` and the App that `serve`
runs all take their deps from `engine_deps`, so a step runs the same whichever started it.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

from app.cycle.batch_vet import batch_vetter
from app.cycle.card_cycle import project_binding
from app.cycle.pr_opener import HostPrOpener
from app.cycle.work_line_git import GitWorkTree
from app.domain.card.binding import runner_of
from app.engine.step import EngineDeps
from app.errors import PairbotError
from app.hosting import HostSettings, build_host
from app.runtime.launcher import project_launcher


def engine_deps(env: Mapping[str, str], root: Path) -> EngineDeps:
    """The deps of a step in the checkout at `root`, with `env` for its agent."""
    work = GitWorkTree(root)
    return EngineDeps(
        launcher=project_launcher(root),
        env=dict(env),
        on_line=lambda line: print(line, file=sys.stderr, flush=True),
        pr_opener=pr_opener(env, root),
        work=work,
        work_vet=batch_vetter(work),
    )


def pr_opener(env: Mapping[str, str], root: Path) -> HostPrOpener | None:
    """PR groups open on the project's code host when its credentials are there.

    Without them (or outside a project) the PR step blocks and names the remedy instead.
    """
    try:
        # The same binding a card run would choose (app.domain.card.binding), said by that run.
        resolution, settings = project_binding(root, HostSettings.from_env(env), runner_of(env))
    except (PairbotError, ValueError):
        return None
    code = resolution.binding.code
    return HostPrOpener(lambda: build_host(code, settings, root), root)
