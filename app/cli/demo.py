"""The bundled demo: an example repository with a batch and cards, on embedded defaults.

    prepare(directory)          the repository (`.pair/` from app/examples/demo/pair), its local
                                forge in `.pair/forge` and the demo's cards on it; no agent runs
    start_cards(directory, deps)   the maintainer's commands on those cards, each accepted once
                                through the card cycle (which runs the card's first step)
    set_up(directory, env)      both, saying what each did: what `python3 dev.py start` and the
                                browser tests run before `pairbot serve --dev`
    run_demo(directory, deps)   `pairbot demo`: the plain batch `hello`, step by step (`run`,
                                the verb, passes the CLI's own deps, app.cli.deps)
    main([directory])           `python -m app.cli.demo DIRECTORY`: `set_up`, said line by line

Everything runs on the `local` host, the plain local locus and a scripted stand-in agent
(`.pair/demo_agent.py`), so the demo needs no account, no server and no network. The forge is
the one `.pair/config.yaml` binds by default (`.pair/forge` under the project), so `pairbot
serve --dev` over the directory answers on it with nothing to set. Every part is idempotent: on
a directory set up before, nothing is created twice and no command is accepted twice.

The cards: #1 "Add a shout() helper", which the maintainer asked to implement — the worker takes
it through apply, a review that finds a defect, a red/fix round and a second review to a
review-approved pull request (ready-for-merge); #2 "Add a title_case() helper", asked with
`/pair refine prepare: always`, whose plan waits for the maintainer's approval; #3 "Add a
whisper() helper", which nobody asked pairbot about yet (`pairbot card 3 implement` starts it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from app.cli.deps import engine_deps
from app.cli.init import IGNORED
from app.cycle.card_cycle import CardCycle
from app.cycle.state import CardStep
from app.domain.intake.comment_commands import Command, parse_commands
from app.domain.intake.pair_request import PairRequest
from app.engine.render import status_text
from app.engine.runner import apply_batch, batch_status
from app.engine.step import EngineDeps
from app.hosting import LOCAL_FORGE_DIR, HostSettings
from app.runtime.launcher import project_launcher
from hosts.git import run_git
from hosts.local import DEFAULT_HUMAN, LocalForge
from hosts.models import Target

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "demo"
BATCH = "hello"
MAINTAINER = DEFAULT_HUMAN  # `maintainer:` in the example's config.yaml names this login
BRANCH = "main"


@dataclass(frozen=True)
class DemoCard:
    """A card of the demo, and the command its maintainer commented on it (None: nobody asked)."""

    title: str
    body: str
    command: str | None = None


CARDS = (
    DemoCard(
        "Add a shout() helper",
        "The banner needs louder text.\n\n"
        'AC-1: shout("hello") returns "HELLO!"\n'
        'AC-2: shout("") returns ""\n',
        "implement",
    ),
    DemoCard(
        "Add a title_case() helper",
        "Names in the greeting should be capitalised.\n\n"
        'AC-1: title_case("ada lovelace") returns "Ada Lovelace"\n'
        'AC-2: title_case("  grace   hopper ") returns "Grace Hopper"\n',
        "refine prepare: always",
    ),
    DemoCard(
        "Add a whisper() helper",
        'The footer needs quieter text.\n\nAC-1: whisper("HELLO") returns "hello..."\n',
    ),
)


def _git(directory: Path, *args: str) -> str:
    # hosts.git: no inherited GIT_DIR, no prompt, GitError on failure
    return run_git(args, cwd=directory).stdout.strip()


def _repository(directory: Path) -> bool:
    """The example repository; False when `directory` already holds one."""
    if (directory / ".pair").is_dir():
        return False
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copytree(EXAMPLE / "pair", directory / ".pair", dirs_exist_ok=True)
    (directory / ".pair" / ".gitignore").write_text(IGNORED)
    (directory / "README.md").write_text("# pairbot demo\n\nA repository pairbot works on.\n")
    (directory / ".gitignore").write_text("__pycache__/\n")
    _git(directory, "init", "-q", "-b", BRANCH)
    _git(directory, "add", "-A")
    _git(
        directory,
        "-c",
        "user.name=pairbot demo",
        "-c",
        "user.email=demo@pairbot.invalid",
        "commit",
        "-qm",
        "pairbot demo: initial commit",
    )
    return True


def forge_of(directory: Path) -> LocalForge:
    """The demo's local forge: the one its config binds (`.pair/forge` under the project)."""
    return LocalForge(directory / LOCAL_FORGE_DIR)


def _forge(directory: Path) -> list[str]:
    """The forge with the repository's default branch and the demo's cards; what it added."""
    forge = forge_of(directory)
    done: list[str] = []
    if forge.branch_sha(BRANCH) is None:
        _git(directory, "push", "-q", str(forge.repo), BRANCH)
        done.append(f"pushed {BRANCH} to the local forge")
    forge.grant(MAINTAINER.login, "admin")
    for number, card in enumerate(CARDS, start=1):
        if not (forge.root / "cards" / f"{number}.json").exists():
            made = forge.seed_card(card.title, card.body, author=MAINTAINER)
            done.append(f"opened card #{made}: {card.title}")
    return done


def prepare(directory: Path) -> bool:
    """Create the example repository, its forge and cards; False if a repository was already
    there (resume: only what is missing is added)."""
    fresh = _repository(directory)
    _forge(directory)
    return fresh


def _commented(forge: LocalForge, number: int, body: str) -> str:
    """The id of the maintainer's comment `body` on card `number`, commenting it if absent."""
    path = forge.root / "comments" / f"{number}.json"
    for comment in json.loads(path.read_text()) if path.exists() else []:
        if comment.get("body") == body and comment.get("author", {}).get("login") == (
            MAINTAINER.login
        ):
            return str(comment["id"])
    return forge.comment_as(MAINTAINER, Target("card", number), body)


async def _accept(directory: Path, deps: EngineDeps, number: int, words: str) -> CardStep:
    body = f"/pair {words}"
    comment = _commented(forge_of(directory), number, body)
    (command,) = parse_commands(body)
    assert isinstance(command, Command), command  # noqa: S101  # CARDS holds valid commands
    # The delivery names the comment, as a webhook's would: a second accept is a redelivery.
    request = PairRequest.from_command(number, command, comment=None, delivery=f"demo-{comment}")
    cycle = CardCycle.for_checkout(directory, HostSettings(), deps)
    return await cycle.handle_request(request)


def start_cards(directory: Path, deps: EngineDeps) -> list[str]:
    """Accept each card's command once (a card batch already there was accepted before)."""
    done: list[str] = []
    for number, card in enumerate(CARDS, start=1):
        batch = directory / ".pair" / "batches" / f"card-{number}" / "batch.yaml"
        if card.command is None or batch.is_file():
            continue
        step = asyncio.run(_accept(directory, deps, number, card.command))
        result = step.result
        line = f"card #{number}: /pair {card.command} → {result.transition or '-'} "
        line += f"{result.state}, status {step.status}"
        if result.state not in ("advanced", "awaiting-approval"):
            line += f" — {result.message}"  # the remedy is in it (an agent that cannot start…)
        done.append(line)
    return done


def demo_deps(directory: Path, env: Mapping[str, str]) -> EngineDeps:
    """The engine's deps for the demo's own steps: the project's launcher, `env` for agents,
    and the steps' lines on stderr as `pairbot card` prints them — among them the launcher's
    one warning that the agent cannot be isolated, which a laptop's set-up must show."""
    return EngineDeps(
        launcher=project_launcher(directory),
        env=dict(env),
        on_line=lambda line: print(line, file=sys.stderr, flush=True),
    )


def set_up(directory: Path, env: Mapping[str, str]) -> list[str]:
    """The demo ready for `pairbot serve --dev`; one line per thing done."""
    fresh = _repository(directory)
    lines = [f"{'created' if fresh else 'resuming'} the demo repository in {directory}"]
    lines += _forge(directory)
    lines += start_cards(directory, demo_deps(directory, env))
    return lines


def run_demo(directory: Path, deps: EngineDeps, *, max_steps: int) -> int:
    """Advance the example batch until it is done or a step needs a human."""
    fresh = prepare(directory)
    print(f"{'created' if fresh else 'resuming'} example repository in {directory}")
    for number in range(1, max_steps + 1):
        result = asyncio.run(apply_batch(directory, BATCH, deps))
        print(
            f"step {number}: {result.state} {result.transition} {result.change} — {result.message}"
        )
        if result.state != "advanced":
            break
    status = batch_status(directory, BATCH)
    print(status_text(status))
    return 0 if status.done else 1


def run(args: argparse.Namespace, root: Path, env: Mapping[str, str]) -> int:
    """`pairbot demo [--dir DIR] [--max-steps N]`, with the CLI's own deps."""
    directory = args.dir.resolve()
    return run_demo(directory, engine_deps(env, directory), max_steps=args.max_steps)


def main(argv: list[str]) -> int:
    """`python -m app.cli.demo DIRECTORY`: set the demo up (what `python3 dev.py start` runs)."""
    if len(argv) != 1:
        print("usage: python -m app.cli.demo DIRECTORY")
        return 2
    for line in set_up(Path(argv[0]).resolve(), os.environ):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
