"""The `pairbot` console script: argument parsing and rendering only; the engine decides.

Every failure pairbot expects (its own errors, a code host's, git's: `app.failures`) is
printed as one line and exits with its code: 2 for something the user wrote or typed, 3 when
the batch is locked by another live step, 1 otherwise (a host or git failure, an operator
error, an OS error). `--debug` adds the traceback. `batch apply` exits 0 for advanced /
awaiting-approval / nothing-ready and 1 for blocked.

Each `pairbot card` run is its own command: it carries a fresh delivery id (`cli-<uuid4>`),
so the card's cycle never takes a second command for a redelivery of the first.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app import __version__
from app.errors import PairbotError, UserError

if TYPE_CHECKING:
    from app.cycle.humans import ReportKind

REPORT_KINDS: dict[str, ReportKind] = {
    "progress": "progress",
    "blocker": "blocker",
    "needs_input": "needs-input",
    "complete": "completion",
}


HUMAN_VERBS = ("approve", "answer", "feedback", "retry")


class _Parser(argparse.ArgumentParser):
    """argparse that exits 2 with one line naming the problem and the usage."""

    def error(self, message: str) -> Any:
        self.exit(2, f"pairbot: {message}\nusage: {self.format_usage().removeprefix('usage: ')}")


def _port(text: str) -> int:
    """A TCP port, 1-65535: anything else is a usage error (exit 2), never a bind elsewhere."""
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port: use a number from 1 to 65535")
    return int(text)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="pairbot", description="Drive a coding agent one reviewed step at a time."
    )
    parser.add_argument("--version", action="version", version=f"pairbot {__version__}")
    parser.add_argument("--root", type=Path, help="project root (default: $PAIR_ROOT or the cwd)")
    parser.add_argument(
        "--debug", action="store_true", help="print a failure's traceback before its one line"
    )
    verbs = parser.add_subparsers(dest="verb", required=True, parser_class=_Parser)

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
    ).add_subparsers(dest="report_verb", required=True, parser_class=_Parser)
    cohort = reports.add_parser(
        "cohort",
        help="every card's outcome: completion rate, cycles to done, fix rounds, tokens, cost",
    )
    cohort.add_argument("--json", action="store_true")

    batch = verbs.add_parser("batch", help="batch commands").add_subparsers(
        dest="batch_verb", required=True, parser_class=_Parser
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
    return parser


def _deps(env: Mapping[str, str], root: Path) -> Any:
    # Imported here: `--help`, `status` and `report` never load the runtime (swerex, aiohttp).
    from app.cycle.batch_vet import batch_vetter  # noqa: PLC0415
    from app.cycle.batch_work import GitWorkTree  # noqa: PLC0415
    from app.engine.step import EngineDeps  # noqa: PLC0415
    from app.runtime.launcher import project_launcher  # noqa: PLC0415

    work = GitWorkTree(root)
    return EngineDeps(
        launcher=project_launcher(root),
        env=dict(env),
        on_line=lambda line: print(line, file=sys.stderr, flush=True),
        pr_opener=_pr_opener(env, root),
        work=work,
        work_vet=batch_vetter(work),
    )


def _pr_opener(env: Mapping[str, str], root: Path) -> Any:
    """PR groups open on the project's code host when its credentials are there.

    Without them (or outside a project) the PR step blocks and names the remedy instead.
    """
    from app.cycle.card_cycle import project_binding  # noqa: PLC0415
    from app.cycle.pr_opener import HostPrOpener  # noqa: PLC0415
    from app.domain.binding import runner_of  # noqa: PLC0415
    from app.hosting import HostSettings, build_host  # noqa: PLC0415

    try:
        # The same binding a card run would choose (app.domain.binding), said by that run.
        resolution, settings = project_binding(root, HostSettings.from_env(env), runner_of(env))
    except (PairbotError, ValueError):
        return None
    code = resolution.binding.code
    return HostPrOpener(lambda: build_host(code, settings, root), root)


def _print_result(result: Any, as_json: bool) -> int:
    if as_json:
        print(json.dumps(result.to_json()))
    else:
        what = f" {result.transition} {result.change}" if result.change else ""
        print(f"{result.state}:{what} — {result.message or ''}".rstrip(" —"))
    return 1 if result.state == "blocked" else 0


def _now() -> Any:
    from app.engine.step import utc_now  # noqa: PLC0415

    return utc_now()


def run(argv: Sequence[str], env: Mapping[str, str]) -> int:
    """Run one pairbot command; returns the exit code."""
    parser = _parser()
    args, extras = parser.parse_known_args(argv)
    if extras:
        # argparse cannot take an optional positional after `--change X`; the human verbs'
        # MESSAGE is the only place free text may land there. A mistyped flag (`--mesage`)
        # is refused, never recorded as the human's answer.
        flags = [extra for extra in extras if extra.startswith("-")]
        if getattr(args, "batch_verb", None) in HUMAN_VERBS and not args.message and not flags:
            args.message = " ".join(extras)
        else:
            parser.error(f"unrecognized arguments: {' '.join(extras)}")
    root: Path = (args.root or Path(env.get("PAIR_ROOT") or ".")).resolve()
    if args.verb == "init":
        from app.project_init import init_project  # noqa: PLC0415

        for line in init_project(root, env, force=args.force).lines:
            print(line)
        return 0
    if args.verb == "validate":
        return _validate(root, env, args.batch)
    if args.verb == "doctor":
        from app.runtime.doctor import diagnose, render_text  # noqa: PLC0415

        report = diagnose(root, env)
        print(json.dumps(report.to_json()) if args.json else render_text(report))
        return report.exit_code
    if args.verb == "serve":
        from app.web.serve import serve  # noqa: PLC0415  # uvicorn and Starlette load only here

        return serve(
            root,
            env,
            host=args.host,
            port=args.port,
            dev=args.dev,
            deps=lambda checkout: _deps(env, checkout),
        )
    if args.verb == "demo":
        from app.demo import run_demo  # noqa: PLC0415

        directory = args.dir.resolve()
        return run_demo(directory, _deps(env, directory), max_steps=args.max_steps)
    if args.verb in ("propose", "apply", "verify"):
        from app.engine.names import NAME_PATTERN, NAME_RULE  # noqa: PLC0415
        from app.engine.runner import run_headless  # noqa: PLC0415

        if not NAME_PATTERN.match(args.change):
            # The change name becomes a directory (.pair/changes/<change>/): never a path.
            raise UserError(f"{args.change!r} is not a valid change name: use {NAME_RULE}")
        import asyncio  # noqa: PLC0415  # `status` and `report` need no event loop

        result = asyncio.run(
            run_headless(root, args.change, args.verb, _deps(env, root), guidance=args.message)
        )
        return _print_result(result, args.json)
    if args.verb == "report":
        return _report(root, as_json=args.json)
    if args.verb == "card" and args.number == "new":
        return _card_new(root, env, list(args.command))
    if args.verb in ("card", "tick"):
        return _cycle(args, root, env)
    return _batch(args, root, env)


def _report(root: Path, *, as_json: bool) -> int:
    """`report cohort`: the only report so far (argparse refuses any other name)."""
    from app.cycle.cohort import cohort_of  # noqa: PLC0415
    from app.domain.cohort import render_cohort  # noqa: PLC0415

    cohort = cohort_of([root])
    if as_json:
        print(json.dumps(cohort.to_json()))
    else:
        print(render_cohort(cohort), end="")
    return 0


def _validate(root: Path, env: Mapping[str, str], batch: str | None) -> int:
    """The files parse (the loader's one line, exit 2), then every agent they configure is
    one pairbot can start: one line per problem, exit 2."""
    from app.engine.manifest import list_batches, load_manifest, load_project_config  # noqa: PLC0415
    from app.validation import agent_problems  # noqa: PLC0415

    project = load_project_config(root)
    names = [batch] if batch is not None else list_batches(root)
    manifests = {name: load_manifest(root, name) for name in names}
    problems = agent_problems(root, env, project, manifests)
    for problem in problems:
        print(f"pairbot: {problem}", file=sys.stderr)
    if problems:
        return 2
    print(f"ok: .pair/config.yaml and {len(names)} batch(es): {', '.join(names) or '-'}")
    return 0


def _card_new(root: Path, env: Mapping[str, str], words: list[str]) -> int:
    """`pairbot card new "title" [--body TEXT]`: open a card on the project's PM host."""
    from app.cycle.card_cycle import project_binding  # noqa: PLC0415
    from app.domain.binding import describe, runner_of  # noqa: PLC0415
    from app.hosting import HostSettings, build_host  # noqa: PLC0415

    parser = _Parser(prog="pairbot card new", description="open a card on the PM host")
    parser.add_argument("title", help="the card's title")
    parser.add_argument("--body", default="", help="the card's text (its acceptance criteria)")
    parser.add_argument("--json", action="store_true")
    opened = parser.parse_args(words)
    title = " ".join(opened.title.split())
    if not title:
        raise UserError('a card needs a title: pairbot card new "What to build"')
    resolution, settings = project_binding(root, HostSettings.from_env(env), runner_of(env))
    print(describe(resolution), file=sys.stderr, flush=True)
    pm = resolution.binding.pm
    import asyncio  # noqa: PLC0415

    card = asyncio.run(build_host(pm, settings, root).create_card(title, opened.body))
    if opened.json:
        print(json.dumps({"card": card.number, "title": card.title, "host": pm}))
    else:
        print(f"opened card #{card.number} on the {pm} host: {card.title}")
        print(f"next: pairbot card {card.number} implement")
    return 0


def _card_request(number: str, words: list[str], trigger: str) -> Any:
    """`pairbot card 42 implement until: merged` → the request a `/pair` comment would make."""
    from app.domain.commands import CommandError, parse_commands  # noqa: PLC0415
    from app.domain.dispatch import PairRequest  # noqa: PLC0415

    if not number.isdigit() or int(number) < 1:
        raise UserError(f"card number {number!r} is not a positive integer")
    if "--json" in words:  # REMAINDER swallows a trailing --json
        words = [w for w in words if w != "--json"]
    parsed = parse_commands(f"/{trigger} {' '.join(words)}", trigger=trigger)
    first = parsed[0] if parsed else None
    if isinstance(first, CommandError) or first is None:
        message = first.message if first is not None else "no command given"
        usage = first.usage if first is not None else ""
        raise UserError(f"{message}\n{usage}".strip())
    # A fresh id per run: the cycle records each command's delivery and runs a repeated one
    # as a redelivery (status only), so a constant id would drop every command after the first.
    import uuid  # noqa: PLC0415

    delivery = f"cli-{uuid.uuid4().hex}"
    return PairRequest.from_command(int(number), first, comment=None, delivery=delivery)


def _cycle(args: argparse.Namespace, root: Path, env: Mapping[str, str]) -> int:
    import asyncio  # noqa: PLC0415

    from app.cycle.card_cycle import CardCycle  # noqa: PLC0415
    from app.domain.binding import runner_of  # noqa: PLC0415
    from app.engine.manifest import load_project_config  # noqa: PLC0415
    from app.hosting import HostSettings  # noqa: PLC0415

    project = load_project_config(root)
    # `env` is the process's own environment (`main`): read into typed settings here, once.
    cycle = CardCycle.for_checkout(
        root,
        HostSettings.from_env(env),
        _deps(env, root),
        runner=runner_of(env),
        say=lambda line: print(line, file=sys.stderr, flush=True),  # stdout may be --json
    )
    if args.verb == "card":
        as_json = args.json or "--json" in args.command
        request = _card_request(args.number, list(args.command), project.trigger)
        step: Any = asyncio.run(cycle.handle_request(request))
    else:
        as_json = args.json
        step = asyncio.run(cycle.tick(args.batch))
    result = getattr(step, "result", step)
    if as_json:
        print(json.dumps(step.to_json()))
        return 1 if result.state == "blocked" else 0
    code = _print_result(result, False)
    explanation = getattr(step, "explanation", None)
    if explanation is not None:
        print(explanation.to_text())
    return code


def _status(root: Path, name: str, *, as_json: bool) -> int:
    """`batch status`: only what reading a status needs. No step machinery, and no pydantic
    unless a file needs the models to vouch for it (app.engine.status)."""
    # A read-only command whose garbage (parsed journal lines, frozen dataclasses) is freed by
    # reference counting: the cyclic collector only costs time here, about 5% of the command
    # on a 100k-entry journal (its passes over every parsed line as the heap grows).
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _print_status(root, name, as_json=as_json)
    finally:
        if collecting:  # `run` is also called in-process (tests, the demo): leave GC as it was
            gc.enable()


def _print_status(root: Path, name: str, *, as_json: bool) -> int:
    from app.engine import render  # noqa: PLC0415
    from app.engine.status import batch_status, read_manifest  # noqa: PLC0415

    manifest = read_manifest(root, name)  # validates; an unknown batch is a clear error
    # Every card batch is named card-<n>: the card cycle's modules load only for one of those.
    if name.startswith("card-"):
        from app.cycle.card_status import read_card_status  # noqa: PLC0415

        card = read_card_status(root, name)  # a card batch: the card's own status
        if card is not None:
            print(json.dumps(card.to_json()) if as_json else card.to_text())
            return 0
    status = batch_status(root, name, manifest)
    print(json.dumps(render.status_json(status)) if as_json else render.status_text(status))
    return 0


def _batch(args: argparse.Namespace, root: Path, env: Mapping[str, str]) -> int:
    verb = args.batch_verb
    if verb == "status":
        return _status(root, args.name, as_json=args.json)
    from app.engine.runner import apply_batch  # noqa: PLC0415

    if verb == "apply":
        import asyncio  # noqa: PLC0415

        result = asyncio.run(apply_batch(root, args.name, _deps(env, root), guidance=args.message))
        return _print_result(result, args.json)
    # The human-action journal writers load only for the verbs that write (not status).
    from app.cycle import humans  # noqa: PLC0415

    if verb == "report":
        kind_arg = next(k for k in REPORT_KINDS if getattr(args, k) is not None)
        key = args.change or env.get("PAIR_CHANGE")
        if not key:
            raise UserError("batch report needs --change (or PAIR_CHANGE in the environment)")
        findings = humans.load_findings(args.findings) if args.findings else None
        # A card's agent works in its worktree; the engine says where the run-state is.
        state_root = Path(env["PAIR_STATE_ROOT"]) if env.get("PAIR_STATE_ROOT") else root
        index = humans.record_report(
            state_root,
            batch=args.name or env.get("PAIR_BATCH") or None,
            key=key,
            kind=REPORT_KINDS[kind_arg],
            message=getattr(args, kind_arg),
            transition=args.transition or env.get("PAIR_TRANSITION") or None,
            session=env.get("PAIR_SESSION") or None,
            findings=findings,
            now=_now(),
        )
        print(f"recorded {REPORT_KINDS[kind_arg]} for {key} (journal entry {index})")
        return 0
    if verb == "rerun-proof":
        print(humans.rerun_proof(root, args.name, args.phase, now=_now()))
        return 0
    print(humans.record_human(root, args.name, args.change, verb, args.message, now=_now()))
    return 0


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
        from app.failures import explain  # noqa: PLC0415  # only a failure pays for its import

        explained = explain(err)
        if explained is None and not isinstance(err, OSError):
            raise  # a bug: its traceback is what a report needs
        # An OS error (a directory where a file belongs, no permission, disk full) names its
        # path; everything else expected names what failed and what to do next.
        line, code = (explained.line, explained.code) if explained else (str(err), 1)
        if wants_debug(argv):
            import traceback  # noqa: PLC0415

            traceback.print_exc()
        print(f"pairbot: {line}", file=sys.stderr)
    sys.exit(code)


if __name__ == "__main__":
    main()
