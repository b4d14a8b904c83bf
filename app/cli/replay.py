"""`pairbot report replay <batch> [--check]`: the run's books rebuilt from its journal alone.

Seed 003's bookkeeper replay against a stored run, with no re-run: `app.cycle.books` derives
`metrics.json` and `metrics.md` from the batch's journal, and this verb writes the ones that
differ (each atomically) and names them. `--check` writes nothing and exits 1 when a book on
disk differs from what the journal gives (0 when they agree). A corrupt journal line stops it
(exit 1, naming the file and the line) and nothing is written.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path

from app.cycle.books import read_books, rebuild, write_books


def run(args: argparse.Namespace, root: Path, env: Mapping[str, str]) -> int:
    """Rebuild (or, with `--check`, compare) one batch's books."""
    locus, books = rebuild(root, args.batch)
    if args.check:
        on_disk = read_books(locus)
        differ = [name for name, data in books.files.items() if on_disk.get(name) != data]
        for name in differ:
            state = "differs from" if name in on_disk else "is missing; expected from"
            print(f"{locus.directory / name} {state} the journal")
        if not differ:
            print(f"{args.batch}: the books agree with the journal")
        return 1 if differ else 0
    written = write_books(locus, books)
    for name in written:
        print(f"rebuilt {locus.directory / name}")
    if not written:
        print(f"{args.batch}: the books already agree with the journal")
    return 0
