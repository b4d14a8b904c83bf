"""The card cycle from the command line: `pairbot card N VERB …` (a `/pair` command on card N),
`pairbot card new "title" [--body TEXT]` (open a card on the PM host) and `pairbot tick` (one
scheduled step: the oldest-waiting runnable batch).

Each `pairbot card` run is its own command: it carries a fresh delivery id (`cli-<uuid4>`),
so the card's cycle never takes a second command for a redelivery of the first.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from app.cli.deps import engine_deps
from app.cli.entry import Parser
from app.cli.steps import print_result
from app.cycle.card_cycle import CardCycle, project_binding
from app.domain.card.binding import describe, runner_of
from app.domain.intake.comment_commands import CommandError, parse_commands
from app.domain.intake.pair_request import PairRequest
from app.engine.manifest import load_project_config
from app.errors import UserError
from app.hosting import HostSettings, build_host


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)  # stdout may be --json


def card_new(root: Path, env: Mapping[str, str], words: list[str]) -> int:
    """`pairbot card new "title" [--body TEXT]`: open a card on the project's PM host."""
    parser = Parser(prog="pairbot card new", description="open a card on the PM host")
    parser.add_argument("title", help="the card's title")
    parser.add_argument("--body", default="", help="the card's text (its acceptance criteria)")
    parser.add_argument("--json", action="store_true")
    opened = parser.parse_args(words)
    title = " ".join(opened.title.split())
    if not title:
        raise UserError('a card needs a title: pairbot card new "What to build"')
    resolution, settings = project_binding(root, HostSettings.from_env(env), runner_of(env))
    _say(describe(resolution))
    pm = resolution.binding.pm
    card = asyncio.run(build_host(pm, settings, root).create_card(title, opened.body))
    if opened.json:
        print(json.dumps({"card": card.number, "title": card.title, "host": pm}))
    else:
        print(f"opened card #{card.number} on the {pm} host: {card.title}")
        print(f"next: pairbot card {card.number} implement")
    return 0


def card_request(number: str, words: list[str], trigger: str) -> PairRequest:
    """`pairbot card 42 implement until: merged` → the request a `/pair` comment would make."""
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
    delivery = f"cli-{uuid.uuid4().hex}"
    return PairRequest.from_command(int(number), first, comment=None, delivery=delivery)


def run(args: argparse.Namespace, root: Path, env: Mapping[str, str]) -> int:
    """`card N …`, `card new …` or `tick [BATCH]`: one step of the card cycle, said."""
    if args.verb == "card" and args.number == "new":
        return card_new(root, env, list(args.command))
    project = load_project_config(root)
    # `env` is the process's own environment (`main`): read into typed settings here, once.
    cycle = CardCycle.for_checkout(
        root,
        HostSettings.from_env(env),
        engine_deps(env, root),
        runner=runner_of(env),
        say=_say,
    )
    if args.verb == "card":
        as_json = args.json or "--json" in args.command
        request = card_request(args.number, list(args.command), project.trigger)
        step: Any = asyncio.run(cycle.handle_request(request))
    else:
        as_json = args.json
        step = asyncio.run(cycle.tick(args.batch))
    result = getattr(step, "result", step)
    if as_json:
        print(json.dumps(step.to_json()))
        return 1 if result.state == "blocked" else 0
    code = print_result(result, False)
    explanation = getattr(step, "explanation", None)
    if explanation is not None:
        print(explanation.to_text())
    return code
