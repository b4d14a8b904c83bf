"""The acknowledgements a command is owed (`action.acks`): recorded, retried, bounded.

The reaction host is a small fake that answers each `react` from a queue (an error or None);
the file is real, under a temp dir. The whole Action path (a 502 then a 401 on the 👀) is
tests/e2e/test_action_failures.py.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, cast

from action.acks import (
    ACK_REPLY,
    ACKS_FILE,
    MAX_ATTEMPTS,
    PendingAck,
    flush,
    read_pending,
    record,
)
from hosts.azure_devops import AzureDevOpsHost
from hosts.base import Host
from hosts.errors import Forbidden, HostError, HostUnavailable, NotFound
from hosts.models import Target
from tests.support.fake_azure import PROJECT, REPO, running

AZURE_TOKEN = "ack-test-token-0123456789"  # noqa: S105 - the fake's own test token


class ReactionHost:
    """Answers each reaction with the next queued outcome (None: it landed)."""

    def __init__(self, *outcomes: HostError | None) -> None:
        self.outcomes = list(outcomes)
        self.posted: list[tuple[Target, str | None, str]] = []

    async def react(self, target: Target, comment_id: str | None, reaction: str) -> None:
        outcome = self.outcomes.pop(0) if self.outcomes else None
        if outcome is not None:
            raise outcome
        self.posted.append((target, comment_id, reaction))


def _flush(root: Path, host: ReactionHost, run: str) -> tuple[int, list[str]]:
    said: list[str] = []
    left = asyncio.run(flush(root, cast(Host, host), said.append, run))
    return left, said


def test_a_recorded_ack_is_posted_once_and_forgotten(tmp_path: Path) -> None:
    ack = PendingAck("card", 7, "1001")
    record(tmp_path, ack)
    record(tmp_path, ack)  # a re-run owes the same reaction, not a second one
    assert read_pending(tmp_path) == [ack]
    host = ReactionHost()
    assert _flush(tmp_path, host, "r1") == (0, [])
    assert host.posted == [(Target("card", 7), "1001", "eyes")]
    assert read_pending(tmp_path) == []
    assert _flush(tmp_path, host, "r2") == (0, [])  # nothing owed: no call
    assert len(host.posted) == 1


def test_a_refused_ack_counts_once_per_run_and_is_retried(tmp_path: Path) -> None:
    record(tmp_path, PendingAck("pull", 3, "55"))
    host = ReactionHost(HostUnavailable("react: 502"), HostUnavailable("react: 502"))
    left, said = _flush(tmp_path, host, "r1")
    assert left == 1 and said == [
        "pairbot: could not acknowledge comment 55 (react: 502); the command is recorded, "
        "the next run retries the 👀"
    ]
    assert _flush(tmp_path, host, "r1") == (1, [])  # a checkpoint of the same run: quiet
    assert [(a.attempts, a.last_run) for a in read_pending(tmp_path)] == [(1, "r1")]
    assert _flush(tmp_path, host, "r2") == (0, [])
    assert host.posted == [(Target("pull", 3), "55", "eyes")]


def test_an_ack_refused_too_often_or_for_a_gone_comment_is_dropped(tmp_path: Path) -> None:
    record(tmp_path, PendingAck("card", 1, "9", attempts=MAX_ATTEMPTS - 1))
    record(tmp_path, PendingAck("card", 1, "10"))
    host = ReactionHost(Forbidden("react: 401 Bad credentials"), NotFound("react: 404"))
    left, said = _flush(tmp_path, host, "r9")
    assert left == 0 and read_pending(tmp_path) == []
    assert said == [
        f"pairbot: gave up acknowledging comment 9 after {MAX_ATTEMPTS} runs (react: 401 Bad "
        "credentials); the command itself was recorded",
        "pairbot: comment 10 is gone; its 👀 is dropped",
    ]


def test_a_file_pairbot_did_not_write_means_nothing_owed(tmp_path: Path) -> None:
    path = tmp_path / ACKS_FILE
    path.parent.mkdir(parents=True)
    bad: list[Any] = [
        "{not json",
        '{"kind": "card"}',
        "[1]",
        json.dumps([{"kind": "card", "number": -5, "comment_id": "1"}]),
        json.dumps([{"kind": "card", "number": 1, "comment_id": "x"}]),
        json.dumps([{"kind": "card", "number": 1, "comment_id": "1", "attempts": "2"}]),
        json.dumps([{"kind": "card", "number": 1, "comment_id": "1", "last_run": 3}]),
        b"\xff\xfe",
    ]
    for content in bad:
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        said: list[str] = []
        assert read_pending(tmp_path, said.append) == [], content
        assert said == [f"pairbot: {ACKS_FILE} is not a list of pending reactions; ignoring it"]
    assert _flush(tmp_path, ReactionHost(), "r1")[0] == 0


def test_azure_devops_comments_are_liked_or_answered_where_no_reaction_exists(
    tmp_path: Path,
) -> None:
    """A work-item comment (on the pm host) and a PR comment (`<thread>/<id>`) get a like; a
    reaction Azure DevOps does not have gets one reply under the comment's `ack` marker."""
    with running(AZURE_TOKEN, tmp_path / "fake") as fake:
        host = AzureDevOpsHost(
            fake.base_url, PROJECT, REPO, AZURE_TOKEN, cache_dir=tmp_path / "cache", timeout_s=10
        )
        card = fake.seed_card("Ack", "body")
        on_card = fake.comment_as(fake.human.author, Target("card", card), "/pair implement")
        pull = fake.seed_pull("pair/card-1")
        on_pull = fake.comment_as(fake.human.author, Target("pull", pull), "/pair status")
        root = tmp_path / "ws"
        for ack in (
            PendingAck("card", card, on_card, "+1"),
            PendingAck("pull", pull, on_pull, "+1"),
            PendingAck("pull", pull, on_pull, "eyes"),  # no 👀 on Azure DevOps: a reply
        ):
            record(root, ack)
        assert [a.comment_id for a in read_pending(root)] == [on_card, on_pull, on_pull]
        said: list[str] = []
        assert asyncio.run(flush(root, host, said.append, "r1", pm=host)) == 0
        assert said == []
        assert [r[:3] for r in fake.reactions] == [(card, int(on_card), "like")]
        assert len(fake.likes) == 1
        replies = [t for t in fake.threads(pull) if ACK_REPLY in t["comments"][0]["content"]]
        assert len(replies) == 1
        assert fake.unexpected == []


def test_an_ack_file_with_another_reaction_or_id_is_not_read(tmp_path: Path) -> None:
    path = tmp_path / ACKS_FILE
    path.parent.mkdir(parents=True)
    for bad in (
        {"kind": "pull", "number": 3, "comment_id": "31/x", "reaction": "+1"},
        {"kind": "pull", "number": 3, "comment_id": "31/2", "reaction": "rocket"},
    ):
        path.write_text(json.dumps([bad]))
        assert read_pending(tmp_path) == []
    path.write_text(
        json.dumps([{"kind": "pull", "number": 3, "comment_id": "31/2", "reaction": "+1"}])
    )
    assert read_pending(tmp_path) == [PendingAck("pull", 3, "31/2", "+1")]
