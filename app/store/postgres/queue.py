"""The PostgreSQL store's job queue: the claim (which also re-queues expired leases), the
worker's stage and outcome writes, and reading jobs back.

Each statement is ONE statement, each of its lookups a probe of a primary key or a small
partial index, however long the queue or the table's history (the comments say why each has
its shape). Leases use the database's clock, the one clock every replica shares.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import psycopg
from psycopg.rows import DictRow

from app.store.base import CommandRecord, JobRecord
from app.store.rows import job_record, record_values

DB_NOW = "extract(epoch FROM clock_timestamp())"
# Running jobs whose replica stopped renewing their lease go back to the queue.
EXPIRE = (
    "UPDATE jobs SET state = 'queued', not_before = 0, owner = '', updated_at = %s "  # noqa: S608 - constant SQL
    f"WHERE state = 'running' AND lease_until < {DB_NOW}"
)
_JOB_COLUMNS = """
    j.id, j.delivery_id, j.kind, j.source, j.repo, j.installation, j.target, j.number,
    j.request, j.state, j.stage, j.attempts, j.not_before, j.result, j.created_at,
    j.updated_at
"""
# One statement, one round trip, whatever the backlog: `picked` is SqliteStore's claim
# (queued and due, the oldest queued job of its key, nothing of its key running), walked
# oldest first through the jobs_queued index and stopped at the limit, each test one probe
# (the first a correlated subquery with LIMIT 1, which no plan turns into a hash of the
# table; `<=` means `=` there, as the job is itself a queued job of its key, but leaves the
# planner expecting many heads of keys, so it walks in order and stops early);
# SKIP LOCKED leaves a job another replica is claiming right now to it. The claimed rows
# and their commands' verbs are found by primary key (`= ANY(ARRAY(…))`, a scalar subquery):
# a generic plan would otherwise hash-join them with a scan of the whole table.
_CLAIM_PICK = f"""
    picked AS (
        SELECT j.id FROM jobs AS j
        WHERE j.state = 'queued' AND j.not_before <= %(now)s
          AND j.id <= (
              SELECT e.id FROM jobs AS e
              WHERE e.state = 'queued' AND e.serial_key = j.serial_key
              ORDER BY e.id LIMIT 1)
          AND NOT EXISTS (
              SELECT 1 FROM jobs AS r
              WHERE r.state = 'running' AND r.serial_key = j.serial_key
                AND NOT (r.owner = %(owner)s AND r.id = ANY(%(fin_id)s::bigint[])))
        ORDER BY j.id
        LIMIT %(limit)s
        FOR UPDATE OF j SKIP LOCKED
    ), j AS (
        UPDATE jobs SET state = 'running', attempts = attempts + 1, updated_at = %(stamp)s,
               owner = %(owner)s, lease_until = {DB_NOW} + %(lease)s
        WHERE jobs.id = ANY(ARRAY(SELECT id FROM picked))
        RETURNING jobs.*
    )
    SELECT {_JOB_COLUMNS}, (SELECT c.verb FROM commands AS c WHERE c.job_id = j.id) AS verb
    FROM j ORDER BY j.id
"""  # noqa: S608 - constant SQL
# The outcomes (done, failed) of this replica's jobs that ended since its last statement ride
# with its next claim: the job's end and the claim of the job that takes its slot are one
# round trip, not two. One statement sees one snapshot, where those jobs still run: `picked`
# counts them as ended (`fin_id`, only while this replica owns them), so the next job of
# their card is claimable at once. `finished` and `picked` never touch one row (running
# jobs, queued jobs). With no outcome to carry, the arrays are empty and it updates nothing.
_FINISHED = """
    finished AS (
        UPDATE jobs SET state = v.state, result = v.result, updated_at = v.stamp
        FROM unnest(%(fin_id)s::bigint[], %(fin_stamp)s::float8[], %(fin_state)s::text[],
                    %(fin_result)s::text[]) AS v (id, stamp, state, result)
        WHERE jobs.id = v.id AND jobs.state = 'running' AND jobs.owner = %(owner)s
    )
"""
CLAIM = f"WITH {_FINISHED}, {_CLAIM_PICK}"
# A claim that also queues again the jobs of a replica that stopped renewing its lease (they
# are claimable from the next claim on, by any replica). Sent at most once per EXPIRE_EVERY_S
# by each replica: it reads every running job's index entry. `expired` and `picked` never
# touch one row: `picked` reads queued jobs, `expired` running ones, in one snapshot.
CLAIM_EXPIRING = f"""
    WITH expired AS (
        UPDATE jobs SET state = 'queued', not_before = 0, owner = '', updated_at = %(stamp)s
        WHERE state = 'running' AND lease_until < {DB_NOW}
          AND NOT (owner = %(owner)s AND id = ANY(%(fin_id)s::bigint[]))
    ), {_FINISHED}, {_CLAIM_PICK}
"""  # noqa: S608 - constant SQL
# A command job's command, once the worker has read it; once per job (a retry writes nothing).
RECORD_COMMAND = (
    "INSERT INTO commands (job_id, repo, number, verb, args, author_id, author_login, "
    "comment_id, comment_url) SELECT id, repo, number, %s, %s, %s, %s, %s, %s FROM jobs "
    "WHERE id = %s ON CONFLICT (job_id) DO NOTHING"
)
SELECT_JOBS = (
    f"SELECT {_JOB_COLUMNS}, c.verb FROM jobs AS j LEFT JOIN commands AS c ON c.job_id = j.id"  # noqa: S608 - constant SQL
)


@dataclass(frozen=True)
class Update:
    """A running job's new stage, or its outcome (None: that column stays)."""

    job_id: int
    stamp: float
    state: str | None = None
    stage: str | None = None
    result: str | None = None
    not_before: float | None = None
    command: CommandRecord | None = None  # kept with the stage (`Store.advance`)

    def row(self, owner: str, *, keeping: bool) -> tuple[object, ...]:
        """The update as one row of the arrays of `UPDATE`, or of `UPDATE_KEEPING`."""
        row = (self.job_id, self.stamp, self.state, self.stage, self.result, self.not_before, owner)
        if not keeping:
            return row
        kept = record_values(self.command) if self.command is not None else (None,) * 6
        return (*row, *kept)


# However many jobs' updates, as arrays: ONE statement text, prepared once per connection and
# planned once (a text per batch size would be prepared and planned per size and connection).
# A job put back in the queue (`state = 'queued'`) leaves this replica (`owner = ''`). Each
# job is found by its primary key: the owner is compared row by row, so the plan cannot walk
# the running-jobs index by owner instead (and every dead entry left there since the last
# vacuum).
_SET = (
    "UPDATE jobs SET state = coalesce(v.state, jobs.state), "
    "stage = coalesce(v.stage, jobs.stage), result = coalesce(v.result, jobs.result), "
    "not_before = coalesce(v.not_before, jobs.not_before), "
    "owner = CASE WHEN v.state = 'queued' THEN '' ELSE jobs.owner END, updated_at = v.stamp "
)
_WHERE = "WHERE jobs.id = v.id AND jobs.state = 'running' AND jobs.owner = v.owner"
UPDATE = (
    f"{_SET}FROM unnest(%s::bigint[], %s::float8[], %s::text[], %s::text[], %s::text[], "
    f"%s::float8[], %s::text[]) AS v (id, stamp, state, stage, result, not_before, owner) "
    f"{_WHERE}"
)
UPDATE_WIDTH = 7
# The same for a batch that keeps a command the worker read (`Store.advance`): the command's
# row is inserted by the statement that records its stage. A batch without one sends `UPDATE`,
# which costs less.
UPDATE_KEEPING = (
    "WITH v AS (SELECT * FROM unnest("  # noqa: S608 - constant SQL
    "%s::bigint[], %s::float8[], %s::text[], %s::text[], "
    "%s::text[], %s::float8[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[], "
    "%s::text[], %s::text[]) AS v (id, stamp, state, stage, result, not_before, owner, verb, "
    "args, author_id, author_login, comment_id, comment_url)), "
    "kept AS (INSERT INTO commands (job_id, repo, number, verb, args, author_id, "
    "author_login, comment_id, comment_url) SELECT jobs.id, jobs.repo, jobs.number, v.verb, "
    "v.args, v.author_id, v.author_login, v.comment_id, v.comment_url FROM v JOIN jobs "
    "ON jobs.id = v.id WHERE v.verb IS NOT NULL ON CONFLICT (job_id) DO NOTHING) "
    f"{_SET}FROM v {_WHERE}"
)
UPDATE_KEEPING_WIDTH = 13


def finishing(updates: Sequence[Update]) -> dict[str, list[object]]:
    """The claim's `fin_*` parameters: the outcomes it carries (see `_FINISHED`)."""
    return {
        "fin_id": [u.job_id for u in updates],
        "fin_stamp": [u.stamp for u in updates],
        "fin_state": [u.state for u in updates],
        "fin_result": [u.result for u in updates],
    }


def same_job(a: Update, b: Update) -> bool:
    return a.job_id == b.job_id


async def select_jobs(
    conn: psycopg.AsyncConnection[DictRow], ids: Sequence[int]
) -> list[JobRecord]:
    """The jobs of these ids, in id order."""
    cursor = await conn.execute(
        f"{SELECT_JOBS} WHERE j.id = ANY(%s) ORDER BY j.id",
        (list(ids),),
    )
    return [job_record(row) for row in await cursor.fetchall()]
