"""The read-only status page at `GET /`: installations, batches, cards, recent deliveries.

`visible_to(snapshot, viewer)` keeps what the request's viewer may read (app.web.viewer):
a viewer limited to some repositories sees only their jobs, their installations' entries for
them, their checkouts' batches and the job counts among those; the deliveries and the served
project's own batches (which belong to no named repository) are for viewers who see everything.
`render(snapshot)` is pure: every value from the store or a payload is HTML-escaped, and the
snapshot holds no secret (the store keeps none). `local_batches(root)` reads the batches whose
run-state lives under the served project (`pairbot serve --dev`, or a worker's checkout), and
`worker_batches(root, checkouts)` those of every checkout the worker runs steps on; a
GitHub App whose steps run in Actions keeps its run-state on the repositories' `pair-state`
branches, so there its cards come from the job queue instead.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from app.store.base import DeliveryRecord, InstallationRecord, JobRecord
from app.web.viewer import Viewer

REFRESH_S = 10


@dataclass(frozen=True)
class ChangeView:
    """One change of a local batch: its status and what runs next."""

    name: str
    status: str
    next: str


@dataclass(frozen=True)
class BatchView:
    """A batch under the served project, or the error that kept it from loading."""

    name: str
    done: bool = False
    next: str = ""
    why: str = ""
    changes: tuple[ChangeView, ...] = ()
    error: str = ""
    checkout: str = ""  # the repository directory under PAIR_WORKER_CHECKOUTS; "" for the root
    card: int | None = None  # a card batch: its status, next and why are the card's own
    status: str = ""  # a card batch's `pr-state` status (what its tracking comment says)


@dataclass(frozen=True)
class Snapshot:
    """Everything the page shows, read at one moment."""

    now: float
    execution: str
    worker_healthy: bool
    counts: dict[str, int] = field(default_factory=dict)
    installations: Sequence[InstallationRecord] = ()
    batches: Sequence[BatchView] = ()
    jobs: Sequence[JobRecord] = ()
    deliveries: Sequence[DeliveryRecord] = ()


def visible_to(snapshot: Snapshot, viewer: Viewer) -> Snapshot:
    """The part of `snapshot` that `viewer` may read (nothing of another repository)."""
    if viewer.repos is None:
        return snapshot
    jobs = [j for j in snapshot.jobs if viewer.can_read(j.repo)]
    installations = [
        replace(i, repos=tuple(r for r in i.repos if viewer.can_read(r)))
        for i in snapshot.installations
        if any(viewer.can_read(r) for r in i.repos)
    ]
    counts = {state: sum(1 for j in jobs if j.state == state) for state in snapshot.counts}
    return replace(
        snapshot,
        counts=counts,
        installations=installations,
        batches=[b for b in snapshot.batches if b.checkout and viewer.can_read(b.checkout)],
        jobs=jobs,
        deliveries=(),
    )


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _when(stamp: float) -> str:
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def next_step(job: JobRecord, now: float) -> str:
    """What happens next to a card, as far as the App knows."""
    if job.state == "queued":
        if job.not_before > now:
            return f"retry at {_when(job.not_before)}"
        return "waiting for the worker"
    if job.state == "running":
        return f"running ({job.stage or 'starting'})"
    if job.state == "failed":
        return f"failed: {job.result}"
    return job.result or "done"


def cards(jobs: Sequence[JobRecord]) -> list[JobRecord]:
    """The newest job of each card or pull, newest first."""
    seen: set[tuple[str, str, int]] = set()
    latest: list[JobRecord] = []
    for job in sorted(jobs, key=lambda j: j.id, reverse=True):
        key = (job.source, job.repo, job.number)
        if key not in seen:
            seen.add(key)
            latest.append(job)
    return latest


def card_batch(job: JobRecord, batches: Sequence[BatchView]) -> BatchView | None:
    """The card batch a job's card runs in, when its run-state is on this machine: the one in
    the job's repository checkout, else the served project's own."""
    if job.target != "card":
        return None
    mine = [b for b in batches if b.card == job.number and not b.error]
    return next((b for b in mine if b.checkout == job.repo), None) or next(
        (b for b in mine if not b.checkout), None
    )


def _card_state(job: JobRecord, snapshot: Snapshot) -> tuple[str, str]:
    """The state and next step of a card row: the card's own status once its last command is
    done (a finished job says nothing about where the card is), else the job's."""
    batch = card_batch(job, snapshot.batches)
    if batch is None or job.state != "done":
        return job.state, next_step(job, snapshot.now)
    state = f"{batch.status}: {batch.why}" if batch.why else batch.status
    return state, batch.next


def _table(headers: Sequence[str], rows: Sequence[Sequence[object]], empty: str) -> str:
    if not rows:
        return f"<p class=empty>{_e(empty)}</p>"
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{_e(cell)}</td>" for cell in row) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render(snapshot: Snapshot) -> str:
    """The whole page."""
    counts = snapshot.counts
    summary = ", ".join(f"{counts.get(s, 0)} {s}" for s in ("queued", "running", "done", "failed"))
    worker = "running" if snapshot.worker_healthy else "STOPPED"
    installations = _table(
        ("installation", "account", "repositories", "state"),
        [
            (
                i.id,
                i.account,
                ", ".join(i.repos) or "(all or none listed)",
                "suspended" if i.suspended else "active",
            )
            for i in snapshot.installations
        ],
        "No installation events received yet.",
    )
    batch_rows: list[tuple[object, ...]] = []
    for batch in snapshot.batches:
        where = batch.checkout or "(root)"
        if batch.error:
            batch_rows.append((where, batch.name, "", "error", batch.error))
            continue
        if batch.card is not None:  # one row: the card's status, as its tracking comment says
            state = f"{batch.status}: {batch.why}" if batch.why else batch.status
            batch_rows.append((where, batch.name, "", state, batch.next))
            continue
        state = "done" if batch.done else batch.why or "in progress"
        batch_rows.append((where, batch.name, "", state, batch.next))
        batch_rows += [("", "", c.name, c.status, c.next) for c in batch.changes]
    batches = _table(
        ("checkout", "batch", "change", "status", "next step"),
        batch_rows,
        "No batches under this project.",
    )
    card_rows = [
        (
            job.repo,
            f"{'PR ' if job.target == 'pull' else ''}#{job.number}",
            job.verb or job.kind,
            *_card_state(job, snapshot),
            _when(job.updated_at),
        )
        for job in cards(snapshot.jobs)
    ]
    card_table = _table(
        ("repository", "card", "last command", "state", "next step", "updated"),
        card_rows,
        "No commands received yet.",
    )
    deliveries = _table(
        ("received", "source", "event", "delivery", "outcome"),
        [
            (
                _when(d.received_at),
                d.source,
                d.event + (f".{d.action}" if d.action else ""),
                d.id,
                d.status,
            )
            for d in snapshot.deliveries
        ],
        "No deliveries received yet.",
    )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="{REFRESH_S}">
<title>pairbot</title>
<style>
body {{ font: 14px/1.4 system-ui, sans-serif; margin: 2rem; color: #1f2328; }}
table {{ border-collapse: collapse; margin-bottom: 1.5rem; }}
th, td {{ text-align: left; padding: .25rem .75rem; border-bottom: 1px solid #d0d7de; }}
th {{ background: #f6f8fa; }} .empty {{ color: #59636e; }}
</style></head>
<body>
<h1>pairbot</h1>
<p>Execution: {_e(snapshot.execution)} · worker {_e(worker)} · jobs: {_e(summary)} ·
as of {_e(_when(snapshot.now))}</p>
<h2>Installations</h2>
{installations}
<h2>Batches</h2>
{batches}
<h2>Cards</h2>
{card_table}
<h2>Recent deliveries</h2>
{deliveries}
</body></html>
"""


def worker_batches(root: Path, checkouts: Path | None) -> list[BatchView]:
    """The batches of the root and of every checkout under `checkouts` (`<owner>/<name>`, the
    layout `PAIR_WORKER_CHECKOUTS` holds; see app.web.checkouts), each labelled with its
    repository directory. Blocking file reads."""
    from app.web.checkouts import checkout_dirs  # noqa: PLC0415  # only the worker's page

    views = local_batches(root)
    for repo in checkout_dirs(checkouts) if checkouts is not None else []:
        label = f"{repo.parent.name}/{repo.name}"
        views += [replace(v, checkout=label) for v in local_batches(repo)]
    return views


def local_batches(root: Path) -> list[BatchView]:
    """Every batch under `root/.pair/batches` with its derived status (blocking file reads)."""
    from app.cycle.card_status import read_card_status  # noqa: PLC0415
    from app.engine.manifest import list_batches  # noqa: PLC0415  # the engine loads only here
    from app.engine.render import describe_target  # noqa: PLC0415
    from app.engine.runner import batch_status  # noqa: PLC0415

    if not (root / ".pair" / "batches").is_dir():
        return []
    views: list[BatchView] = []
    for name in list_batches(root):
        try:
            card = read_card_status(root, name)
            if card is not None:
                views.append(
                    BatchView(
                        name=name,
                        done=card.done,
                        next=card.next_text,
                        why=card.why,
                        card=card.card,
                        status=card.status,
                    )
                )
                continue
            status = batch_status(root, name)
        except Exception as err:  # one broken manifest must not take the page down
            views.append(BatchView(name, error=str(err) or type(err).__name__))
            continue
        views.append(
            BatchView(
                name=name,
                done=status.done,
                next=describe_target(status.next),
                why=status.why or "",
                changes=tuple(
                    ChangeView(c.name, c.status, c.next or "") for c in status.changes.values()
                ),
            )
        )
    return views
