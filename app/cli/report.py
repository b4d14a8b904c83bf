"""`pairbot report cohort`: every card's outcome over the project's card journals.

The only report so far (argparse refuses any other name): `app.cycle.cohort_journals` reads the
journals, `app.domain.reports.cohort` renders them. With `--pair-state [REMOTE]` (default
`origin`) the cards CI runs keep on the remote's `pair-state` branch count too
(`app.cli.report_state`: fetched into a private ref, their journals copied to a temporary
directory for the report, then removed); a card in both places counts once.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from app.cli.report_state import BRANCH, copy_journals, fetch_state_branch
from app.cycle.cohort_journals import cohort_of
from app.domain.reports.cohort import Cohort, render_cohort
from app.errors import JournalCorruptError


def run(args: argparse.Namespace, root: Path, env: Mapping[str, str]) -> int:
    """The cohort of the checkout at `root` (and of its `pair-state`), as text or `--json`."""
    remote = getattr(args, "pair_state", None)
    cohort = cohort_of([root]) if remote is None else _with_state_branch(root, str(remote))
    if args.json:
        print(json.dumps(cohort.to_json()))
    else:
        print(render_cohort(cohort), end="")
    return 0


def _with_state_branch(root: Path, remote: str) -> Cohort:
    commit = fetch_state_branch(root, remote)
    if commit is None:
        print(f"{remote} has no {BRANCH} branch: no card has run in CI yet", file=sys.stderr)
        return cohort_of([root])
    with tempfile.TemporaryDirectory(prefix="pairbot-report-") as tmp:
        copied = copy_journals(root, commit, Path(tmp))
        print(f"{BRANCH} of {remote} at {commit[:12]}: {copied} card journal(s)", file=sys.stderr)
        try:
            return cohort_of([root, Path(tmp)])
        except JournalCorruptError as error:  # name the branch, not the temporary copy
            said = str(error).replace(tmp + "/", f"{remote}/{BRANCH}:")
            raise JournalCorruptError(said) from None
