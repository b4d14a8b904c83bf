"""The App's store interface: deliveries, the durable job queue, commands and installations.

The webhook edge and the worker talk to a `Store`; `SqliteStore` (WAL, one file) is the
embedded default, and a server database can implement the same Protocol for several replicas.

The one operation the edge's correctness rests on is `enqueue_delivery`: the delivery id and the
jobs it asks for are written in ONE transaction. A delivery id is therefore "seen" exactly when
its work is durably queued — a crash before the commit leaves no trace (GitHub's redelivery is
processed), and a redelivery after it is recognised, days later too.

Jobs move queued → running → done | failed. `stage` records how far a running job got (the
worker records "doing" before an effect and "done" after it), so a job resumed after a crash
skips the effects it already had. Per `serial_key` (a card or pull of one repository) at most one
job runs at a time, in queue order. Old deliveries and old finished jobs are pruned (the worker,
hourly); open jobs never are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

JobState = Literal["queued", "running", "done", "failed"]
JobKind = Literal["command", "scope-decision", "head-moved"]
TargetKind = Literal["card", "pull"]


@dataclass(frozen=True)
class CommandRecord:
    """The parsed command of a `command` job, kept for the record (no comment text)."""

    verb: str
    args: Mapping[str, str]
    author_id: str
    author_login: str
    comment_id: str
    comment_url: str = ""


@dataclass(frozen=True)
class NewJob:
    """A job to queue. `dedupe_key` is unique over all jobs (a comment acts at most once even
    if two deliveries carry it); `serial_key` serialises the jobs of one card or pull."""

    kind: JobKind
    source: str  # "github" | "azure-devops"
    repo: str
    installation: int | None
    target: TargetKind
    number: int
    dedupe_key: str
    serial_key: str
    request: Mapping[str, Any]  # JSON: what app.web.jobs rebuilds the job from
    command: CommandRecord | None = None


@dataclass(frozen=True)
class JobRecord:
    """A queued, running or finished job as stored."""

    id: int
    delivery_id: str
    kind: JobKind
    source: str
    repo: str
    installation: int | None
    target: TargetKind
    number: int
    request: Mapping[str, Any]
    state: JobState
    stage: str
    attempts: int
    not_before: float
    result: str
    created_at: float
    updated_at: float
    verb: str | None = None  # from the commands table, for command jobs


@dataclass(frozen=True)
class DeliveryRecord:
    """One recorded delivery (GitHub) or notification (Azure DevOps)."""

    source: str
    id: str
    event: str
    action: str | None
    status: str
    received_at: float
    jobs: int


@dataclass(frozen=True)
class InstallationChange:
    """What an `installation` / `installation_repositories` event says about an installation.

    `repos` replaces the repository list when given; `added` / `removed` edit it.
    `suspended` is left alone when None. `deleted` removes the installation.
    """

    id: int
    account: str = ""
    repos: tuple[str, ...] | None = None
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    suspended: bool | None = None
    deleted: bool = False


@dataclass(frozen=True)
class InstallationRecord:
    """An installation of the App as kept from its events."""

    id: int
    account: str
    repos: tuple[str, ...] = field(default_factory=tuple)
    suspended: bool = False
    updated_at: float = 0.0


@dataclass(frozen=True)
class PrunedJobs:
    """What `Store.prune_jobs` forgot: finished jobs, and the command records among them."""

    jobs: int = 0
    commands: int = 0


class Store(Protocol):
    """The App's persistence. Every method is safe to call from the event loop."""

    async def open(self) -> None:
        """Create or migrate the schema; call once before anything else."""
        ...

    async def close(self) -> None:
        """Release the connection."""
        ...

    async def enqueue_delivery(
        self,
        delivery_id: str,
        event: str,
        action: str | None,
        jobs: Sequence[NewJob],
        *,
        source: str = "github",
        status: str | None = None,
        installation: InstallationChange | None = None,
    ) -> int | None:
        """Record the delivery and queue its jobs in one transaction: how many of its jobs were
        queued (fewer than asked when a job's `dedupe_key` exists: another delivery of the same
        comment queued it first), None when the delivery id was seen before."""
        ...

    async def claim(self, limit: int, now: float) -> list[JobRecord]:
        """Mark up to `limit` runnable jobs running (one per serial key, oldest first)."""
        ...

    async def advance(self, job_id: int, stage: str, command: CommandRecord | None = None) -> None:
        """Record how far a running job got; with `command`, keep it as `record_command`
        would, in the same write."""
        ...

    async def finish(self, job_id: int, state: Literal["done", "failed"], result: str) -> None:
        """End a job with its outcome."""
        ...

    async def retry_later(self, job_id: int, not_before: float, result: str) -> None:
        """Put a running job back in the queue, runnable from `not_before`."""
        ...

    async def record_command(self, job_id: int, record: CommandRecord) -> None:
        """Keep the parsed command of `command` job `job_id` for the record (the status pages'
        verb), when the worker has read it (a GitHub comment is queued unread); a second call
        for the same job changes nothing (a retried job reads its comment again), and a job
        that does not exist gets none."""
        ...

    async def recover(self) -> int:
        """At start-up: jobs left running by a dead process are queued again; how many."""
        ...

    async def job(self, job_id: int) -> JobRecord | None:
        """One job by id."""
        ...

    async def jobs(self, limit: int = 100) -> list[JobRecord]:
        """The newest jobs first."""
        ...

    async def counts(self) -> dict[str, int]:
        """How many jobs are in each state."""
        ...

    async def deliveries(self, limit: int = 50) -> list[DeliveryRecord]:
        """The newest deliveries first."""
        ...

    async def last_installation(self, repo: str) -> int | None:
        """The installation the newest GitHub job of `repo` came from (case-insensitive),
        None when none is on record: what the worker's scheduled ticks act as."""
        ...

    async def installations(self) -> list[InstallationRecord]:
        """Every known installation."""
        ...

    async def prune_deliveries(self, before: float) -> int:
        """Forget deliveries received before `before` (their jobs stay); how many.

        In short transactions of a bounded size: the edge waits on the write lock."""
        ...

    async def prune_jobs(self, before: float) -> PrunedJobs:
        """Forget finished (`done` / `failed`) jobs created and last updated before `before`,
        with their commands rows; `queued` and `running` jobs stay whatever their age.

        A forgotten job's `dedupe_key` no longer holds back a delivery of its comment: the
        caller keeps jobs at least as long as deliveries. Bounded transactions, as above."""
        ...
