"""`pairbot report cohort`: every card's outcome over the project's card journals.

The only report so far (argparse refuses any other name): `app.cycle.cohort_journals` reads the
journals, `app.domain.reports.cohort` renders them.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from pathlib import Path

from app.cycle.cohort_journals import cohort_of
from app.domain.reports.cohort import render_cohort


def run(args: argparse.Namespace, root: Path, env: Mapping[str, str]) -> int:
    """The cohort of the checkout at `root`, as text or `--json`."""
    cohort = cohort_of([root])
    if args.json:
        print(json.dumps(cohort.to_json()))
    else:
        print(render_cohort(cohort), end="")
    return 0
