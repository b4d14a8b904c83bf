"""One queued job, start to end: authorize, acknowledge, then dispatch or execute. The shell.

A `command` job, in order:

    read           a GitHub comment comes unread (app.web.jobs.UnreadComment: the edge only
                   screened it): its command lines are read now (`read_commands`, the intake's
                   grammar), and its command is kept for the record with the "dispatching"
                   stage (`Store.advance`), or alone when it is answered instead of run; one
                   that holds none is done, "ignored", without a word on the host
    authorize      the author (app.domain.intake.authors.decide; the permission comes from the
                   collaborator-permission API, cached briefly) — a refused human gets ONE
                   polite reply; a malformed command gets its usage, `help` the help; done
                   (app.domain.intake.answers.answer_comment: the Action answers the same)
    acknowledge    👀 on the comment and, for a comment on a card, the card's tracking
                   comment (marker `tracking #<card>`), "queued `/pair <verb>`…" (a command on
                   a pull request acts on the card behind it, which the cycle finds)
    "dispatching"  recorded before the one effect that is not idempotent — the
                   `repository_dispatch` (execution: actions) or the executor (execution:
                   worker, and always for Azure DevOps) — then the job is done.

Authorizing is a read and acknowledging is idempotent (a second 👀 is GitHub's 200, an upsert
by marker writes nothing new), so a job interrupted before "dispatching" simply starts over;
one interrupted after it skips straight to the dispatch, which it sends again (at least once:
a repeat costs at most one more step of the card, and the payload carries the delivery id for
a receiver to recognise it). Recording only that one stage keeps a job to three store writes
(claim, dispatching, done) — the store is the App's bottleneck.

Replies are upserted under a marker of their own comment (`reply #<card> run:<comment id>`),
so a retried job edits its reply instead of posting a second one. A `scope-decision` job is
authorized the same way, then dispatched; a `head-moved` job is dispatched directly.

What a failure does is decided by `on_failure` (pure): rate limits, an unavailable host and a
busy batch lock are retried later with backoff; anything else fails the job, logged for the
operator (no traceback ever reaches a comment or an HTTP answer). A command or scope decision
whose author was authorized and that fails for good is answered on its comment, under that
same reply marker (`app.domain.intake.answers`): a `UserError` with its own text (it names the
remedy), anything else with a short sentence of `failure_reason` — never the error's text,
which may name internals. A reply that cannot be posted is logged and changes nothing else.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol

from app.domain.intake.answers import (
    Reply,
    answer_comment,
    comment_reply_marker,
    could_not_run,
    failed_tracking_body,
    inline_code,
)
from app.domain.intake.authors import decide, needs_permission
from app.domain.intake.comment_commands import CommandError, Decision
from app.domain.intake.intent import Ignore
from app.domain.intake.pair_request import PairRequest
from app.errors import BatchLockedError, CommandNotRun, PairbotError, UserError
from app.failures import explain
from app.store.base import CommandRecord, JobRecord, Store
from app.web.events import GITHUB, Policy
from app.web.forge import Forge, Forges
from app.web.jobs import (
    CommandJob,
    CommandProblem,
    Commenter,
    Job,
    ScopeDecisionJob,
    UnreadComment,
    dispatch_payload,
    job_from_payload,
    read_comment,
)
from app.web.recent import Line
from app.web.settings import Execution
from hosts.errors import HostUnavailable, RateLimited, Unsupported
from hosts.markers import make_marker
from hosts.models import Author, Permission, Target

log = logging.getLogger(__name__)

MAX_ATTEMPTS: Final = 6


class Executor(Protocol):
    """Runs one job in this process (`execution: worker`); see `app.web.worker.cycle_executor`."""

    async def __call__(self, job: Job, repo: str, installation_id: int | None) -> None: ...


# -- pure decisions -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Failure:
    """What to do after a job raised: retry after `delay_s`, or fail with `message`."""

    action: Literal["retry", "fail"]
    message: str
    delay_s: float = 0.0
    expected: bool = True  # False: a bug or an unknown error, logged with its traceback


def on_failure(error: BaseException, attempts: int, max_attempts: int = MAX_ATTEMPTS) -> Failure:
    """Retry what time can fix (rate limits, an unavailable host, a busy lock), fail the rest."""
    message = str(error) or type(error).__name__
    transient = isinstance(error, RateLimited | HostUnavailable | BatchLockedError)
    if transient and attempts < max_attempts:
        backoff = min(300.0, 5.0 * 2 ** max(0, attempts - 1))
        if isinstance(error, RateLimited) and error.retry_after is not None:
            backoff = max(1.0, error.retry_after)
        return Failure("retry", message, backoff)
    explained = explain(error)
    if explained is not None:  # pairbot's, a host's or git's: one line, no traceback
        return Failure("fail", explained.line)
    return Failure("fail", f"{type(error).__name__}: {message}", expected=False)


def command_answer(
    command: CommandJob, decision: Decision, *, number: int, fallback: str, trigger: str
) -> Reply | None:
    """The reply a command job on #`number` gets instead of a run (refusal, usage, help), or
    None; `fallback` names the comment when it has no id (see `comment_reply_marker`)."""
    problem = command.problem
    return answer_comment(
        decision,
        number=number,
        comment_id=command.comment.id,
        fallback=fallback,
        error=_as_error(problem) if problem is not None else None,
        verb=command.request.verb if command.request is not None else None,
        trigger=trigger,
    )


def _as_error(problem: CommandProblem) -> CommandError:
    return CommandError(0, problem.raw, problem.message, problem.usage)


def _fallback(job: JobRecord) -> str:
    """What identifies a comment without an id (an Azure Boards notification names none)."""
    return f"job{job.id}"


def tracking_body(request: PairRequest, trigger: str, where: str) -> str:
    """The card's tracking comment right after a command was accepted (the cycle rewrites it)."""
    line = f"/{trigger} {request.verb}"
    author = request.comment.author_login if request.comment is not None else ""
    by = f" (requested by **{author}**)" if author else ""
    return f"queued {inline_code(line)}{by}; it runs next in {where}."


def reply_marker(number: int, job: JobRecord, comment_id: str) -> str:
    """The marker of the one reply a comment can get."""
    return comment_reply_marker(number, comment_id, fallback=_fallback(job))


def failure_reason(error: BaseException, job_id: int) -> str:
    """What the person who commented may read about a job that failed for good.

    A `UserError` is written for them and names the remedy; anything else gets a sentence
    chosen here, never the error's own text (an operator-facing message may name paths,
    hosts or internals).
    """
    if isinstance(error, UserError):
        return str(error) or type(error).__name__
    if isinstance(error, RateLimited):
        return "the host kept rate-limiting pairbot on every attempt; comment again later"
    if isinstance(error, HostUnavailable):
        return "the host was unavailable on every attempt; comment again later"
    if isinstance(error, BatchLockedError):
        return "another pairbot step kept this card busy on every attempt; comment again later"
    return (
        f"it failed on pairbot's side (job {job_id}); the operator finds the details in "
        "pairbot's log"
    )


# -- the shell ------------------------------------------------------------------------------------


@dataclass
class PermissionCache:
    """Permission levels by (source, repo, login), kept `ttl_s` (a revoked collaborator stops
    being able to act within that time). Concurrent lookups of one key share one request."""

    ttl_s: float = 60.0
    clock: Callable[[], float] = time.monotonic
    lookups: int = 0
    _entries: dict[tuple[str, str, str], tuple[float, Permission]] = field(default_factory=dict)
    _locks: dict[tuple[str, str, str], asyncio.Lock] = field(default_factory=dict)

    def _fresh(self, key: tuple[str, str, str]) -> Permission | None:
        cached = self._entries.get(key)
        return cached[1] if cached is not None and self.clock() < cached[0] else None

    async def get(
        self, key: tuple[str, str, str], fetch: Callable[[], Awaitable[Permission]]
    ) -> Permission:
        if (level := self._fresh(key)) is not None:
            return level
        async with self._locks.setdefault(key, asyncio.Lock()):
            if (level := self._fresh(key)) is not None:
                return level  # another job looked it up while this one waited
            self.lookups += 1
            level = await fetch()
            self._entries[key] = (self.clock() + self.ttl_s, level)
            return level


@dataclass
class JobHandler:
    """Runs one claimed job to its end and records the outcome in the store."""

    store: Store
    github: Forges
    azure: Forges | None
    executor: Executor | None
    execution: Execution
    policy: Callable[[], Policy]
    permissions: PermissionCache
    clock: Callable[[], float] = time.time

    async def __call__(self, job: JobRecord) -> None:
        answer = _Answer()
        try:
            result = await self._run(job, answer)
        except Exception as error:
            failure = on_failure(error, job.attempts)
            where = f"job {job.id} ({job.kind} {job.repo}#{job.number}, attempt {job.attempts})"
            if failure.action == "retry":
                log.warning("%s: %s; retrying in %.0fs", where, failure.message, failure.delay_s)
                await self.store.retry_later(
                    job.id, self.clock() + failure.delay_s, failure.message
                )
                return
            if failure.expected:
                log.error("%s failed: %s", where, failure.message)
            else:
                log.exception("%s failed unexpectedly", where)
            # Answered before the job is recorded failed: a crash in between runs the job
            # again, and the reply is upserted by its marker (edited, not posted twice).
            await self._answer_failure(
                job,
                answer,
                failure_reason(error, job.id),
                where,
                restored=isinstance(error, CommandNotRun),
            )
            await self.store.finish(job.id, "failed", failure.message)
            return
        await self.store.finish(job.id, "done", result)
        # The one INFO line of a queued delivery (the edge logs it at DEBUG).
        log.info(
            "delivery %s",
            Line(
                source=job.source,
                id=job.delivery_id,
                outcome="done",
                job=job.id,
                kind=job.kind,
                target=f"{job.repo}#{job.number}",
                result=result,
            ),
        )

    def _forge(self, job: JobRecord) -> Forge:
        forges = self.github if job.source == GITHUB else self.azure
        if forges is None:
            raise PairbotError(f"no forge is configured for {job.source}")
        return forges(job.repo, job.installation)

    async def _answer_failure(
        self, job: JobRecord, answer: _Answer, reason: str, where: str, *, restored: bool
    ) -> None:
        """The one reply to the comment of a job that failed for good (if it has one); and its
        tracking comment says the command could not run, unless the card's cycle already wrote
        the card's own status back there (`restored`: a `CommandNotRun`)."""
        if answer.marker is None:
            return  # no comment, or its author was never authorized: nothing to answer
        try:
            forge = self._forge(job)
            await forge.upsert_comment(
                Target(job.target, job.number), answer.marker, could_not_run(answer.line, reason)
            )
            if answer.tracking is not None and answer.line is not None and not restored:
                # It said "queued … runs next": left so, it would announce a run that never comes.
                await forge.upsert_comment(
                    answer.tracking,
                    make_marker("tracking", job.number),
                    failed_tracking_body(answer.line, answer.author),
                )
        except Exception as error:
            # The job's own failure is what counts (logged above); this one only adds to it.
            explained = explain(error)
            if explained is None:
                log.exception("%s: the reply to its comment could not be posted", where)
            else:
                log.error(
                    "%s: the reply to its comment could not be posted: %s", where, explained.line
                )

    async def _run(self, job: JobRecord, answer: _Answer) -> str:
        if job.kind == "command":
            read = _read_command(job)
            if isinstance(read, str):
                return read
            return await self._command(job, *read, answer)
        work = job_from_payload(_mapping(job.request["job"]))
        if job.kind == "scope-decision":
            author = Commenter.from_json(_mapping(job.request["author"]))
            if job.stage != "dispatching":
                forge = self._forge(job)
                decision = await self._authorize(forge, job, author)
                if not decision.allowed:
                    return await self._refuse(forge, job, decision, _comment_id(work))
            answer.marker = reply_marker(job.number, job, _comment_id(work))
        return await self._deliver(job, work)

    async def _command(
        self, job: JobRecord, command: CommandJob, record: CommandRecord | None, answer: _Answer
    ) -> str:
        """`record`: the command the worker read in an unread comment, kept with the job's
        stage when it is dispatched, or on its own when it is answered instead."""
        forge = self._forge(job)
        target = Target("pull" if command.comment.on_pull else "card", job.number)
        if job.stage != "dispatching":
            decision = await self._authorize(forge, job, command.author)
            reply = command_answer(
                command,
                decision,
                number=job.number,
                fallback=_fallback(job),
                trigger=self.policy().trigger,
            )
            if record is not None and (reply is not None or not decision.allowed):
                await self.store.record_command(job.id, record)  # answered, not run
            if reply is not None:
                await forge.upsert_comment(target, reply.marker, reply.text)
                if reply.kind == "refusal":
                    return f"refused: {decision.reason}"
                return f"answered with {reply.kind}"
            if not decision.allowed:
                return f"ignored: {decision.reason}"
        request = command.request
        if request is None:  # a problem is answered above; nothing else lacks a request
            raise PairbotError(f"job {job.id} has neither a request nor a problem")
        # Authorized (now, or by the attempt that reached "dispatching"): a failure from here
        # on is answered on the comment.
        answer.marker = reply_marker(job.number, job, command.comment.id)
        answer.line = f"/{self.policy().trigger} {request.verb}"
        # A card's tracking comment lives on the card. On a pull request the App cannot know
        # which card's it is (the run-state knows: the cycle maps it), so there 👀 is the whole
        # acknowledgement — a "tracking" comment on the PR would never be rewritten again.
        on_card = target.kind == "card"
        # Written below, or by the attempt that reached "dispatching": a failure rewrites it.
        answer.tracking = target if on_card else None
        answer.author = command.author.login
        if job.stage != "dispatching":
            if command.comment.id:
                await self._react(forge, target, command.comment.id)
            if on_card:
                body = tracking_body(request, self.policy().trigger, self._where(job))
                await forge.upsert_comment(target, make_marker("tracking", job.number), body)
        return await self._deliver(job, request, record)

    async def _authorize(self, forge: Forge, job: JobRecord, commenter: Commenter) -> Decision:
        # pairbot's own events never reach a job: the intake drops them (app.domain.intake.intent).
        allowlist, identities = self.policy().allowlist, self.policy().identity_allowlist
        author = Author(login=commenter.login, id=commenter.id, is_bot=commenter.is_bot)
        permission: Permission | None = None
        if needs_permission(author, allowlist, identities):
            permission = await self.permissions.get(
                (job.source, job.repo, author.login.lower()),
                lambda: forge.permission(author.login),
            )
        return decide(author, permission, allowlist, identities)

    async def _refuse(
        self, forge: Forge, job: JobRecord, decision: Decision, comment_id: str
    ) -> str:
        """A scope decision's author who may not act: the refusal, or nothing for a bot."""
        reply = answer_comment(
            decision,
            number=job.number,
            comment_id=comment_id,
            fallback=_fallback(job),
            error=None,
            verb=None,
            trigger=self.policy().trigger,
        )
        if reply is None:
            return f"ignored: {decision.reason}"
        await forge.upsert_comment(Target(job.target, job.number), reply.marker, reply.text)
        return f"refused: {decision.reason}"

    async def _react(self, forge: Forge, target: Target, comment_id: str) -> None:
        # 👀 where the host has it; Azure DevOps PR comments can only be liked.
        for reaction in ("eyes", "+1"):
            try:
                await forge.react(target, comment_id, reaction)
                return
            except Unsupported:
                continue
        log.info("no acknowledgement reaction on %s: the host supports none", target)

    def _where(self, job: JobRecord) -> str:
        if job.source == GITHUB and self.execution == "actions":
            return "GitHub Actions (repository_dispatch `pair`)"
        return "pairbot's worker"

    async def _deliver(self, job: JobRecord, work: Job, record: CommandRecord | None = None) -> str:
        if job.stage == "dispatching":
            # A retry, or a process that died mid-dispatch: send again (at least once).
            log.info(
                "job %s resumes at its dispatch (attempt %d): sending delivery %s again",
                job.id,
                job.attempts,
                job.delivery_id,
            )
        else:
            await self.store.advance(job.id, "dispatching", record)
        if job.source == GITHUB and self.execution == "actions":
            await self._forge(job).dispatch(dispatch_payload(work))
            return "dispatched to GitHub Actions"
        if self.executor is None:
            raise PairbotError("execution: worker needs an executor, and none is configured")
        await self.executor(work, job.repo, job.installation)
        return "executed by the worker"


def _read_command(job: JobRecord) -> tuple[CommandJob, CommandRecord | None] | str:
    """A command job's command, and the record the worker keeps for it. A comment the edge
    queued unread is read here (`read_comment`, under the trigger and slug the edge screened
    it with); one that holds no command line runs nothing: why, as the job's result. A job
    built read (the card page's buttons, Azure DevOps) had its record kept when queued."""
    unread = UnreadComment.from_json(job.request)
    if unread is None:
        return CommandJob.from_json(job.request), None
    read = read_comment(unread, delivery=job.delivery_id)
    if isinstance(read, Ignore):
        return f"ignored: {read.reason}"
    return read


@dataclass
class _Answer:
    """Where a job that fails for good is answered: set once its author is authorized."""

    marker: str | None = None
    line: str | None = None  # the command as `/pair <verb>`; None for a scope decision
    tracking: Target | None = None  # where the tracking comment announced the command
    author: str = ""


def _mapping(value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise PairbotError(f"a stored job holds {type(value).__name__} where an object belongs")
    return value


def _comment_id(work: Job) -> str:
    if isinstance(work, ScopeDecisionJob):
        return work.comment_id
    if isinstance(work, PairRequest) and work.comment is not None:
        return work.comment.id
    return ""
