"""The verbs that run one step and print its result: `pairbot batch apply NAME` (the batch's
next step, under its lock) and the headless `pairbot propose|apply|verify CHANGE` (one forced
step on a change, no batch, no lock).

Both exit 0 for advanced / awaiting-approval / nothing-ready and 1 for blocked.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Mapping
from pathlib import Path

from app.cli.deps import engine_deps
from app.engine.names import NAME_PATTERN, NAME_RULE
from app.engine.runner import apply_batch, run_headless
from app.engine.step import StepResult
from app.errors import UserError


def print_result(result: StepResult, as_json: bool) -> int:
    """The step's result on stdout (one line, or its JSON); 1 when it blocked, else 0."""
    if as_json:
        print(json.dumps(result.to_json()))
    else:
        what = f" {result.transition} {result.change}" if result.change else ""
        print(f"{result.state}:{what} — {result.message or ''}".rstrip(" —"))
    return 1 if result.state == "blocked" else 0


def run(args: argparse.Namespace, root: Path, env: Mapping[str, str]) -> int:
    """`batch apply`, or the headless `propose` / `apply` / `verify`."""
    if args.verb == "batch":
        deps = engine_deps(env, root)
        result = asyncio.run(apply_batch(root, args.name, deps, guidance=args.message))
        return print_result(result, args.json)
    if not NAME_PATTERN.match(args.change):
        # The change name becomes a directory (.pair/changes/<change>/): never a path.
        raise UserError(f"{args.change!r} is not a valid change name: use {NAME_RULE}")
    deps = engine_deps(env, root)
    result = asyncio.run(run_headless(root, args.change, args.verb, deps, guidance=args.message))
    return print_result(result, args.json)
