"""The production executor hands each kind of job to the cycle's own entry for it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from app.domain.dispatch import PairRequest
from app.engine import cycle
from app.web.jobs import HeadMovedJob, ScopeDecisionJob
from app.web.worker import cycle_executor


def test_the_cycle_executor_hands_each_kind_of_job_to_its_own_cycle_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[Any, ...]] = []
    env = object()

    def from_environment(root: Path, environ: Any, deps: Any) -> object:
        assert (root, deps) == (tmp_path, "deps")
        return env

    async def handle_request(env_: object, request: PairRequest) -> None:
        calls.append(("request", env_, request.card, request.verb))

    async def handle_scope_decision(env_: object, pull: int, comment: str | None = None) -> None:
        calls.append(("scope-decision", env_, pull, comment))

    async def handle_head_moved(env_: object, pull: int, head: str) -> None:
        calls.append(("head-moved", env_, pull, head))

    async def tick(env_: object, batch: str | None = None) -> None:
        calls.append(("tick", env_))

    monkeypatch.setattr(cycle.CycleEnv, "from_environment", staticmethod(from_environment))
    monkeypatch.setattr(cycle, "handle_request", handle_request)
    monkeypatch.setattr(cycle, "handle_scope_decision", handle_scope_decision)
    monkeypatch.setattr(cycle, "handle_head_moved", handle_head_moved)
    monkeypatch.setattr(cycle, "tick", tick)
    execute = cycle_executor(tmp_path, {}, lambda: "deps")
    head = "a" * 40

    async def go() -> None:
        await execute(PairRequest(card=3, verb="status"), "octocat/Hello-World", 42)
        await execute(ScopeDecisionJob(pull=7, comment_id="123"), "octocat/Hello-World", 42)
        await execute(HeadMovedJob(pull=7, head_sha=head), "octocat/Hello-World", 42)

    asyncio.run(go())
    assert calls == [
        ("request", env, 3, "status"),
        ("scope-decision", env, 7, "123"),
        ("head-moved", env, 7, head),
    ]
