"""The `pairbot` console script's entry: the parser, the one dispatch to a verb's module, the exit.

Every failure pairbot expects (its own errors, a code host's, git's: `app.failures`) is
printed as one line and exits with its code: 2 for something the user wrote or typed, 3 when
the batch is locked by another live step, 1 otherwise (a host or git failure, an operator
error, an OS error). `--debug` adds the traceback. `batch apply` exits 0 for advanced /
awaiting-approval / nothing-ready and 1 for blocked.

What a command costs to start is what its own module imports: this module loads only argparse
and the error tree, and `VERBS` names the module each command runs in (each with its imports at
the top). `_load` is the one place the CLI imports late: the verb's module, and
`app.cli.failure` once something failed.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Final

from app import __version__

HUMAN_VERBS = ("approve", "answer", "feedback", "retry")

# Each command, as `command_of` names it, and the module whose `run(args, root, env)` runs it.
VERBS: Final[Mapping[str, str]] = {
    "init": "app.cli.init",
    "validate": "app.cli.validate",
    "doctor": "app.cli.doctor.diagnose",
    "serve": "app.cli.serve",
    "demo": "app.cli.demo",
    "propose": "app.cli.steps",
    "apply": "app.cli.steps",
    "verify": "app.cli.steps",
    "card": "app.cli.card",
    "tick": "app.cli.card",
    "report cohort": "app.cli.report",
    "report replay": "app.cli.replay",
    "clean": "app.cli.clean",
    # What every agent step runs, and a status anyone reads: each loads only what it needs.
    "batch status": "app.cli.status",
    "batch status card-<n>": "app.cli.status_card",
    "batch apply": "app.cli.steps",
    "batch report": "app.cli.batch",
    **{f"batch {verb}": "app.cli.batch" for verb in (*HUMAN_VERBS, "rerun-proof")},
}
FAILURE: Final = "app.cli.failure"


class Parser(argparse.ArgumentParser):
    """argparse that exits 2 with one line naming the problem and the usage."""

    def error(self, message: str) -> Any:
        self.exit(2, f"pairbot: {message}\nusage: {self.format_usage().removeprefix('usage: ')}")


def _port(text: str) -> int:
    """A TCP port, 1-65535: anything else is a usage error (exit 2), never a bind elsewhere."""
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port: use a number from 1 to 65535")
    return int(text)


def _project_verbs(verbs: Any) -> None:
    """`init`, `validate`, `doctor`, `serve` and `demo`: the project and this machine."""
    init = verbs.add_parser(
        "init", help="write a commented .pair/config.yaml for this checkout and say what to commit"
    )
    init.add_argument("--force", action="store_true", help="replace an existing config")

    validate = verbs.add_parser(
        "validate", help="check .pair/ files and the agents they name, without running anything"
    )
    validate.add_argument("batch", nargs="?")

    doctor = verbs.add_parser("doctor", help="check this machine against the project's settings")
    doctor.add_argument("--json", action="store_true")

    serve = verbs.add_parser(
        "serve",
        help="serve the GitHub App: webhooks, the worker and the status pages",
        description="Serve pairbot's webhook service (docs/app.md), configured by the PAIR_* "
        "variables. The store is PAIR_STORE (default: .pair/app/pairbot.sqlite3 under --root).",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    serve.add_argument("--port", type=_port, default=8080, help="port to bind (default: 8080)")
    serve.add_argument(
        "--dev",
        action="store_true",
        help="embedded defaults on loopback: the local forge, steps in this process, and a "
        "generated webhook secret in .pair/app/webhook-secret",
    )

    demo = verbs.add_parser("demo", help="run the bundled example batch to completion")
    demo.add_argument("--dir", type=Path, default=Path("pairbot-demo"))
    demo.add_argument("--max-steps", type=int, default=20)


def _card_verbs(verbs: Any) -> None:
    """The headless steps, `card`, `tick` and `report`."""
    for name in ("propose", "apply", "verify"):
        headless = verbs.add_parser(name, help=f"force one {name} on a change (no batch, no lock)")
        headless.add_argument("change")
        headless.add_argument("-m", "--message", help="guidance for the agent")
        headless.add_argument("--json", action="store_true")

    card = verbs.add_parser(
        "card",
        help="run a /pair command on a card, e.g. `pairbot card 42 implement until: merged`; "
        '`pairbot card new "title" [--body TEXT]` opens a card',
    )
    card.add_argument("number", help="the card (issue / work item) number, or `new`")
    card.add_argument("command", nargs=argparse.REMAINDER, help="the verb and its arguments")
    card.add_argument("--json", action="store_true")
    tick = verbs.add_parser("tick", help="one scheduled step: the oldest-waiting runnable batch")
    tick.add_argument("batch", nargs="?", help="only this batch (card batches are card-<n>)")
    tick.add_argument("--json", action="store_true")

    reports = verbs.add_parser(
        "report", help="reports over the project's run-state"
    ).add_subparsers(dest="report_verb", required=True, parser_class=Parser)
    cohort = reports.add_parser(
        "cohort",
        help="every card's outcome: completion rate, cycles to done, fix rounds, tokens, cost",
    )
    cohort.add_argument("--json", action="store_true")
    cohort.add_argument(
        "--pair-state",
        nargs="?",
        const="origin",
        metavar="REMOTE",
        help="also the cards CI runs keep on REMOTE's pair-state branch (default: origin)",
    )
    replay = reports.add_parser(
        "replay",
        help="rebuild a batch's books (metrics.json, metrics.md) from its journal alone",
    )
    replay.add_argument("batch", help="the batch (card batches are card-<n>)")
    replay.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 when a book differs"
    )

    clean = verbs.add_parser(
        "clean",
        help="remove a batch's worktree and its pushed card branch (every batch's when none "
        "is named); a dirty worktree is kept",
    )
    clean.add_argument("batch", nargs="?", help="only this batch (card batches are card-<n>)")
    clean.add_argument("--dry-run", action="store_true", help="say what would go; change nothing")
    clean.add_argument(
        "--archive-run",
        action="store_true",
        help="also move the batch's run directory to archive/run-<k>/ (a fresh run starts)",
    )


def _batch_verbs(verbs: Any) -> None:
    """`batch status`, `apply`, `report`, the human verbs and `rerun-proof`."""
    batch = verbs.add_parser("batch", help="batch commands").add_subparsers(
        dest="batch_verb", required=True, parser_class=Parser
    )
    status = batch.add_parser("status", help="derived status and the next step")
    status.add_argument("name")
    status.add_argument("--json", action="store_true")
    apply = batch.add_parser("apply", help="run exactly one step")
    apply.add_argument("name")
    apply.add_argument("-m", "--message", help="guidance for the agent")
    apply.add_argument("--json", action="store_true")

    report = batch.add_parser("report", help="what agents call to report")
    report.add_argument("name", nargs="?", help="batch (default: $PAIR_BATCH)")
    report.add_argument(
        "--change", help="change, or phase for a decomposition (default: $PAIR_CHANGE)"
    )
    kind = report.add_mutually_exclusive_group(required=True)
    for flag in ("progress", "blocker", "needs-input", "complete"):
        kind.add_argument(f"--{flag}", metavar="MESSAGE")
    report.add_argument("--transition", help="default: $PAIR_TRANSITION")
    report.add_argument("--findings", type=Path, help="verifier's findings JSON (with --complete)")

    for name in HUMAN_VERBS:
        human = batch.add_parser(name, help=f"{name} a parked step")
        human.add_argument("name")
        human.add_argument("--change", required=True)
        human.add_argument("message", nargs="?", default="")
    rerun = batch.add_parser("rerun-proof", help="invalidate a phase's recorded proof-of-work")
    rerun.add_argument("name")
    rerun.add_argument("--phase", required=True)


def parser() -> argparse.ArgumentParser:
    """Every command and option of `pairbot` (no verb's module is loaded to build it)."""
    top = Parser(prog="pairbot", description="Drive a coding agent one reviewed step at a time.")
    top.add_argument("--version", action="version", version=f"pairbot {__version__}")
    top.add_argument("--root", type=Path, help="project root (default: $PAIR_ROOT or the cwd)")
    top.add_argument(
        "--debug", action="store_true", help="print a failure's traceback before its one line"
    )
    verbs = top.add_subparsers(dest="verb", required=True, parser_class=Parser)
    _project_verbs(verbs)
    _card_verbs(verbs)
    _batch_verbs(verbs)
    return top


def command_of(args: argparse.Namespace) -> str:
    """The key of `VERBS` that runs the parsed command."""
    if args.verb == "report":
        return f"report {args.report_verb}"
    if args.verb != "batch":
        return str(args.verb)
    # Every card batch is named card-<n>: the card cycle's status loads only for one of those.
    if args.batch_verb == "status" and args.name.startswith("card-"):
        return "batch status card-<n>"
    return f"batch {args.batch_verb}"


def _load(module: str) -> ModuleType:
    """The one late import of the CLI: a verb's module (`VERBS`), or `FAILURE`."""
    return importlib.import_module(module)


def run(argv: Sequence[str], env: Mapping[str, str]) -> int:
    """Run one pairbot command; returns the exit code."""
    top = parser()
    args, extras = top.parse_known_args(argv)
    if extras:
        # argparse cannot take an optional positional after `--change X`; the human verbs'
        # MESSAGE is the only place free text may land there. A mistyped flag (`--mesage`)
        # is refused, never recorded as the human's answer.
        flags = [extra for extra in extras if extra.startswith("-")]
        if getattr(args, "batch_verb", None) in HUMAN_VERBS and not args.message and not flags:
            args.message = " ".join(extras)
        else:
            top.error(f"unrecognized arguments: {' '.join(extras)}")
    root: Path = (args.root or Path(env.get("PAIR_ROOT") or ".")).resolve()
    return int(_load(VERBS[command_of(args)]).run(args, root, env))


def wants_debug(argv: Sequence[str]) -> bool:
    """Whether `--debug` is among pairbot's own options (before the command), so a message
    argument that happens to read `--debug` never turns it on."""
    words = iter(argv)
    for word in words:
        if word == "--debug":
            return True
        if word == "--root":
            next(words, None)
        elif not word.startswith("-"):
            return False
    return False


def main() -> None:
    """Console entry point."""
    argv = sys.argv[1:]
    try:
        code = run(argv, os.environ)
    except KeyboardInterrupt:
        code = 130
    except Exception as err:
        # Only a failure pays for rendering one (app.failures knows every host's errors).
        ended: int | None = _load(FAILURE).end(err, debug=wants_debug(argv))
        if ended is None:
            raise  # a bug: its traceback is what a report needs
        code = ended
    sys.exit(code)
