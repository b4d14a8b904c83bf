"""The run's books: `metrics.json` and `metrics.md` in its run directory, derived from its journal.

    books_of(batch, records)   the two files' bytes, from the journal's records alone
    write_books(locus, books)  write the ones that changed, each atomically
    rebuild(root, batch)       the books a batch's journal gives now (the replay verb)

The books are derived, never an authority: the journal is. Everything in them comes from the
records — `asOf` is the `at` of the last record reduced, not the moment they were written — so
a replay from the journal alone gives byte-for-byte the books the run wrote as it went
(`app.cycle.metrics_observer` writes them during a step).

A card batch (`card-<n>`) is reduced over its card's records, as its synthesis is, with the
maintainer's scope decisions; a plain batch over every record of its journal. `metrics.json` is
the schema-1 metrics object (`CycleMetrics.to_json`) with three keys added:

    batch       the batch's name
    status      what the run last showed (a card: the status, next step and reason its tracking
                comment was journaled with), null when nothing was shown yet
    workflow    the workflow version and effective-inputs digest the latest step ran under
                (the last `inputs` entry: `app.cycle.run_inputs`), null before the first one
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.cycle.records import fold_cycle
from app.cycle.schedule import card_of
from app.domain.reports.metrics import reduce_metrics
from app.domain.reports.metrics_md import render_metrics_md
from app.engine import jsonl
from app.engine.atomic import write_bytes_atomic
from app.engine.manifest import batches_dir
from app.engine.runstate import RunLocus
from app.errors import UnknownBatchError

METRICS_JSON = "metrics.json"
METRICS_MD = "metrics.md"
BOOKS = (METRICS_JSON, METRICS_MD)


@dataclass(frozen=True)
class Books:
    """The books' bytes, by file name."""

    files: Mapping[str, bytes]

    def data(self) -> dict[str, Any]:
        """`metrics.json`, parsed."""
        loaded: dict[str, Any] = json.loads(self.files[METRICS_JSON])
        return loaded


def last_inputs(records: Sequence[Mapping[str, Any]], key: str | None) -> dict[str, Any] | None:
    """`{version, inputsDigest}` of the last `inputs` entry (of `key`, when given)."""
    found: dict[str, Any] | None = None
    for record in records:
        data = record.get("data")
        if record.get("kind") != "cycle" or not isinstance(data, Mapping):
            continue
        if data.get("event") != "inputs" or (key is not None and record.get("key") != key):
            continue
        found = {"version": data.get("workflowVersion"), "inputsDigest": data.get("inputsDigest")}
    return found


def books_of(batch: str, records: Sequence[Mapping[str, Any]]) -> Books:
    """The books of `batch` from its journal's records (file order). Deterministic."""
    card = card_of(batch)
    status: dict[str, Any] | None = None
    if card is not None:
        mine = [r for r in records if r.get("key") == batch]
        rec = fold_cycle(mine, batch)
        decisions = {str(d.get("id")): str(d.get("action")) for d in rec.dispositions}
        if rec.shown_status is not None:
            status = {"status": rec.shown_status, "next": rec.shown_next, "why": rec.shown_why}
        key: str | None = batch
    else:
        mine, decisions, key = list(records), {}, None
    as_of = str(mine[-1].get("at", "")) if mine else ""
    metrics = reduce_metrics(mine, as_of=as_of, decisions=decisions)
    workflow = last_inputs(mine, key)
    data = {**metrics.to_json(), "batch": batch, "status": status, "workflow": workflow}
    text = json.dumps(data, ensure_ascii=False, indent=2, sort_keys=False, allow_nan=False)
    markdown = render_metrics_md(batch, metrics, status=status, workflow=workflow)
    return Books({METRICS_JSON: (text + "\n").encode(), METRICS_MD: markdown.encode()})


def read_books(locus: RunLocus) -> dict[str, bytes]:
    """The books as they are on disk (a missing one is absent)."""
    found: dict[str, bytes] = {}
    for name in BOOKS:
        path = locus.directory / name
        if path.is_file():
            found[name] = path.read_bytes()
    return found


def write_books(locus: RunLocus, books: Books) -> list[str]:
    """Write each book that differs from what is on disk, atomically; the names written."""
    on_disk = read_books(locus)
    written: list[str] = []
    for name, payload in books.files.items():
        if on_disk.get(name) != payload:
            write_bytes_atomic(locus.directory / name, payload)
            written.append(name)
    return written


def batch_locus(root: Path, batch: str) -> RunLocus:
    """The run directory of an existing batch; an unknown one is a clear error."""
    directory = batches_dir(root) / batch
    if "/" in batch or batch in ("", ".", "..") or not (directory / "batch.yaml").is_file():
        known = sorted(p.parent.name for p in batches_dir(root).glob("*/batch.yaml"))
        listed = ", ".join(known) if known else "none"
        raise UnknownBatchError(
            f"no batch {batch!r} under {batches_dir(root)} (batches with a manifest: {listed})"
        )
    return RunLocus.for_batch(root, batch)


def rebuild(root: Path, batch: str) -> tuple[RunLocus, Books]:
    """The books `batch`'s journal gives now, from the journal alone (a corrupt line in the
    middle of it raises `JournalCorruptError`, naming the file and the line)."""
    locus = batch_locus(root, batch)
    return locus, books_of(batch, jsonl.read_records(locus.journal))
