"""The batch verbs that write its journal: `pairbot batch report` (what every agent step runs to
say how it went), the human verbs `approve` / `answer` / `feedback` / `retry` on a parked step,
and `rerun-proof`.

No step machinery loads here (`app.cycle.humans` writes the journal): an agent's report costs
the journal writer's imports only. `batch status` is `app.cli.status`, `batch apply`
`app.cli.steps`.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from app.cycle import humans
from app.cycle.humans import ReportKind
from app.engine import known_keys
from app.errors import UserError

# The report's flag (as argparse names it) and the kind it records.
REPORT_KINDS: Final[Mapping[str, ReportKind]] = {
    "progress": "progress",
    "blocker": "blocker",
    "needs_input": "needs-input",
    "complete": "completion",
}


def _report(args: argparse.Namespace, root: Path, env: Mapping[str, str], now: datetime) -> str:
    """`batch report`: what the agent said, recorded in the batch's journal."""
    kind_arg = next(k for k in REPORT_KINDS if getattr(args, k) is not None)
    key = args.change or env.get("PAIR_CHANGE")
    if not key:
        raise UserError("batch report needs --change (or PAIR_CHANGE in the environment)")
    transition = args.transition or env.get("PAIR_TRANSITION") or None
    findings = humans.load_findings(args.findings, transition) if args.findings else None
    findings_file = _in_tree(args.findings, root) if args.findings else None
    # A card's agent works in its worktree; the engine says where the run-state is.
    state_root = Path(env["PAIR_STATE_ROOT"]) if env.get("PAIR_STATE_ROOT") else root
    index = humans.record_report(
        state_root,
        batch=args.name or env.get("PAIR_BATCH") or None,
        key=key,
        kind=REPORT_KINDS[kind_arg],
        message=getattr(args, kind_arg),
        transition=transition,
        session=env.get("PAIR_SESSION") or None,
        findings=findings,
        findings_file=findings_file,
        now=now,
        manifest_memo=env.get(known_keys.ENV) or None,
    )
    return f"recorded {REPORT_KINDS[kind_arg]} for {key} (journal entry {index})"


def _in_tree(path: Path, root: Path) -> str | None:
    """The findings file's path in the agent's tree (`root`, its PAIR_ROOT), relative and in
    POSIX form, when it lies there; None elsewhere. A verifier told to change nothing may
    still write its findings file where it works: the engine then takes that file out of
    the tree, the report it is, not a change (app/engine/findings_files.py)."""
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return None


def run(args: argparse.Namespace, root: Path, env: Mapping[str, str]) -> int:
    """`batch report`, `rerun-proof`, or a human verb: one journal entry, one line said."""
    verb = args.batch_verb
    now = datetime.now(UTC)  # the real clock, read once here and passed down
    if verb == "report":
        print(_report(args, root, env, now))
    elif verb == "rerun-proof":
        print(humans.rerun_proof(root, args.name, args.phase, now=now))
    else:
        print(humans.record_human(root, args.name, args.change, verb, args.message, now=now))
    return 0
