"""The edge's cheap paths: no durable write for a delivery that queues nothing, duplicates
refused from memory before the store is asked, one log line per delivery, no access log.

The store is the real SQLite store behind a counting wrapper (every call is passed through and
counted by name), so "no store read" is observed, not patched in.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from app.errors import ConfigError
from app.store.base import Store
from app.store.sqlite import SqliteStore
from app.web.app import create_app
from app.web.recent import Line, RecentDeliveries
from app.web.serve import server_config
from app.web.settings import AppSettings, EdgeLimits
from app.web.signature import well_formed
from tests.web.conftest import (
    AppGitHub,
    app_settings,
    comment_event,
    github_forges,
    github_headers,
    served,
)


class CountingStore:
    """A real store; every call to it is counted by name (`calls`)."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.calls: Counter[str] = Counter()
        self.failing = False  # enqueue_delivery raises while set: the store is down

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.inner, name)
        if not callable(attribute):
            return attribute

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            if self.failing and name == "enqueue_delivery":
                raise OSError("the store is down")
            return attribute(*args, **kwargs)

        return counted


def serve_counted(
    fake: AppGitHub, tmp_path: Path, *, recent: int = 10_000
) -> tuple[Any, CountingStore]:
    settings = app_settings(tmp_path, limits=EdgeLimits(recent_deliveries=recent))
    store = CountingStore(SqliteStore(settings.store))
    app = create_app(settings, store=store, github=github_forges(fake), poll_s=0.05)  # type: ignore[arg-type]
    return served(app), store


def chatter(fake: AppGitHub) -> dict[str, Any]:
    """A comment that addresses no one: nothing to queue."""
    card = fake.seed_issue("Card", "")
    user = fake.user("octocat")
    comment = fake.add_comment(card, "Thanks, that reads well.", "octocat")
    return comment_event(fake, card, comment, "Thanks, that reads well.", user)


def command(fake: AppGitHub) -> dict[str, Any]:
    card = fake.seed_issue("Card", "")
    fake.collaborators["octocat"] = "admin"
    user = fake.user("octocat")
    comment = fake.add_comment(card, "/pair status", "octocat")
    return comment_event(fake, card, comment, "/pair status", user)


def edge_calls(store: CountingStore) -> int:
    """Calls the edge makes about deliveries (the worker's claim/poll calls are not)."""
    return store.calls["enqueue_delivery"]


def test_a_delivery_that_queues_nothing_is_answered_without_a_durable_write(
    fake: AppGitHub, tmp_path: Path
) -> None:
    running, store = serve_counted(fake, tmp_path)
    with running as app:
        response = app.deliver("issue_comment", chatter(fake))
        assert (response.status_code, response.json()["status"]) == (200, "ignored")
        assert "holds no command" in response.json()["reason"]
        assert edge_calls(store) == 0
        assert app.run(store.inner.deliveries()) == []
        assert app.run(store.inner.jobs()) == []


def test_a_redelivery_is_refused_from_memory_without_asking_the_store(
    fake: AppGitHub, tmp_path: Path
) -> None:
    running, store = serve_counted(fake, tmp_path)
    queued_id, ignored_id = str(uuid.uuid4()), str(uuid.uuid4())
    with running as app:
        assert app.deliver("issue_comment", command(fake), delivery=queued_id).status_code == 202
        assert app.deliver("issue_comment", chatter(fake), delivery=ignored_id).status_code == 200
        app.wait_idle()
        assert edge_calls(store) == 1  # only the command was written
        for delivery in (queued_id, ignored_id):
            again = app.deliver("issue_comment", command(fake), delivery=delivery)
            assert (again.status_code, again.json()) == (200, {"status": "duplicate"})
        assert edge_calls(store) == 1  # neither redelivery reached the store
        app.wait_idle()
        assert len(app.run(store.inner.jobs())) == 1
    assert len(fake.dispatches) == 1


def test_without_the_memory_the_store_still_refuses_a_command_delivered_twice(
    fake: AppGitHub, tmp_path: Path
) -> None:
    """What another replica (or this one restarted) sees: the durable check is the authority."""
    payload, delivery = command(fake), str(uuid.uuid4())
    running, store = serve_counted(fake, tmp_path)
    with running as app:
        assert app.deliver("issue_comment", payload, delivery=delivery).status_code == 202
        app.wait_idle()
    restarted, store = serve_counted(fake, tmp_path)  # same SQLite file, empty memory
    with restarted as app:
        again = app.deliver("issue_comment", payload, delivery=delivery)
        assert (again.status_code, again.json()) == (200, {"status": "duplicate"})
        assert edge_calls(store) == 1
        app.wait_idle()
        assert len(app.run(store.inner.jobs())) == 1
    remembers_none, store = serve_counted(fake, tmp_path, recent=0)
    with remembers_none as app:
        for _ in range(2):
            again = app.deliver("issue_comment", payload, delivery=delivery)
            assert again.json() == {"status": "duplicate"}
        assert edge_calls(store) == 2
    assert len(fake.dispatches) == 1


def test_a_second_delivery_of_a_queued_comment_is_answered_duplicate_not_queued(
    fake: AppGitHub, tmp_path: Path
) -> None:
    """Another delivery id for the same comment (a second webhook on the repository, say): its
    job's key exists, nothing new is queued, so the answer says "duplicate", not 202 "queued"."""
    payload = command(fake)
    running, store = serve_counted(fake, tmp_path)
    with running as app:
        first = app.deliver("issue_comment", payload, delivery=str(uuid.uuid4()))
        assert (first.status_code, first.json()) == (202, {"status": "queued", "jobs": 1})
        second = app.deliver("issue_comment", payload, delivery=str(uuid.uuid4()))
        assert (second.status_code, second.json()) == (200, {"status": "duplicate"})
        assert edge_calls(store) == 2  # the store was asked: the key is its to know
        app.wait_idle()
        statuses = sorted(d.status.split(":")[0] for d in app.run(store.inner.deliveries()))
        assert statuses == ["already-queued", "queued"]
        assert len(app.run(store.inner.jobs())) == 1
    assert len(fake.dispatches) == 1


def test_a_delivery_the_store_could_not_record_is_not_remembered(
    fake: AppGitHub, tmp_path: Path
) -> None:
    running, store = serve_counted(fake, tmp_path)
    payload, delivery = command(fake), str(uuid.uuid4())
    with running as app:
        store.failing = True
        refused = app.deliver("issue_comment", payload, delivery=delivery)
        assert (refused.status_code, refused.json()["status"]) == (503, "unavailable")
        store.failing = False
        # GitHub's redelivery is processed: the failed attempt left no trace, in memory either.
        assert app.deliver("issue_comment", payload, delivery=delivery).status_code == 202
        assert edge_calls(store) == 2
        app.wait_idle()
    assert len(fake.dispatches) == 1


def test_the_memory_of_deliveries_is_bounded_and_drops_the_least_recent(
    fake: AppGitHub, tmp_path: Path
) -> None:
    recent = RecentDeliveries(3)
    for n in range(3):
        recent.remember("github", f"d{n}")
    assert recent.seen("github", "d0")  # now the most recent; d1 is the oldest
    recent.remember("github", "d3")
    recent.remember("github", "d3")  # remembering again adds nothing
    assert len(recent) == 3
    assert not recent.seen("github", "d1")
    assert all(recent.seen("github", d) for d in ("d0", "d2", "d3"))
    assert not recent.seen("azure-devops", "d0")  # ids are per source
    none = RecentDeliveries(0)
    none.remember("github", "d0")
    assert (len(none), none.seen("github", "d0")) == (0, False)
    with pytest.raises(ValueError, match="capacity must be 0 or more"):
        RecentDeliveries(-1)
    # In the app, at its configured size, however many deliveries pass.
    running, _store = serve_counted(fake, tmp_path, recent=2)
    with running as app:
        for _ in range(5):
            assert app.deliver("issue_comment", chatter(fake)).status_code == 200
        assert len(app.service.recent) == 2


def lines_about(caplog: pytest.LogCaptureFixture, delivery: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if delivery in r.getMessage()]


def test_each_delivery_logs_one_structured_line_at_most(
    fake: AppGitHub, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """At INFO: a queued delivery's line when its job ends, a refusal's; the deliveries that
    queue nothing and the duplicates (most of what arrives) only at DEBUG."""
    caplog.set_level(logging.INFO)
    running, _store = serve_counted(fake, tmp_path)
    ignored_id, queued_id = str(uuid.uuid4()), str(uuid.uuid4())
    with running as app:
        app.deliver("issue_comment", chatter(fake), delivery=ignored_id)
        assert lines_about(caplog, ignored_id) == []
        app.deliver("issue_comment", command(fake), delivery=queued_id)
        app.wait_idle()
        [done] = lines_about(caplog, queued_id)  # the worker's, when the job ended
        assert done.startswith(f"delivery source=github id={queued_id} outcome=done job=")
        caplog.clear()
        for delivery in (ignored_id, queued_id):
            app.deliver("issue_comment", chatter(fake), delivery=delivery)
            assert lines_about(caplog, delivery) == []
        caplog.set_level(logging.DEBUG, logger="app.web.app")
        another = str(uuid.uuid4())
        app.deliver("issue_comment", chatter(fake), delivery=another)
        assert lines_about(caplog, another) == [
            f"delivery source=github event=issue_comment.created id={another} "
            'outcome=ignored reason="the comment on issue #5 holds no command for pairbot"'
        ]
        for delivery in (ignored_id, queued_id):
            app.deliver("issue_comment", chatter(fake), delivery=delivery)
            assert lines_about(caplog, delivery) == [
                f"delivery source=github event=issue_comment id={delivery} outcome=duplicate "
                "seen=memory"
            ]
        caplog.set_level(logging.INFO, logger="app.web.app")
        caplog.clear()
        body = b'{"action": "created"}'
        headers = github_headers("issue_comment", body, secret="not the secret")  # noqa: S106 - a wrong one
        assert app.post("/webhooks/github", body, headers).status_code == 401
        assert [r.getMessage() for r in caplog.records if r.name.startswith("app.")] == [
            'delivery source=github outcome=refused status=401 reason="wrong signature"'
        ]


def test_log_values_with_spaces_or_quotes_are_json_strings() -> None:
    line = Line(source="github", id="a-1", reason='say "hi"\nthere', jobs=2, none=None)
    assert str(line) == 'source=github id=a-1 reason="say \\"hi\\"\\nthere" jobs=2'
    assert str(Line(empty="")) == 'empty=""'


def test_uvicorns_access_log_is_off_unless_asked_for(tmp_path: Path) -> None:
    app = create_app(app_settings(tmp_path))
    assert server_config(app, EdgeLimits()).access_log is False
    assert server_config(app, EdgeLimits(), access_log=True).access_log is True
    settings = AppSettings.from_env({"PAIR_WEBHOOK_SECRET": "s"}, root=tmp_path)
    assert settings.access_log is False
    for value, expected in (("1", True), ("on", True), ("false", False), ("NO", False)):
        env = {"PAIR_ACCESS_LOG": value}
        assert AppSettings.from_env(env, root=tmp_path).access_log is expected
    with pytest.raises(ConfigError, match="PAIR_ACCESS_LOG='maybe' is not allowed; allowed: 1"):
        AppSettings.from_env({"PAIR_ACCESS_LOG": "maybe"}, root=tmp_path)
    limits = AppSettings.from_env({"PAIR_RECENT_DELIVERIES": "0"}, root=tmp_path).limits
    assert limits.recent_deliveries == 0
    with pytest.raises(ConfigError, match="PAIR_RECENT_DELIVERIES='-1' is not allowed"):
        AppSettings.from_env({"PAIR_RECENT_DELIVERIES": "-1"}, root=tmp_path)


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        pytest.param("sha256=" + "ab" * 32, True, id="lower-hex"),
        pytest.param(" SHA256=" + "AB" * 32 + " ", True, id="upper-prefix-padded"),
        pytest.param("sha256=" + "ab" * 31, False, id="short"),
        pytest.param("sha256=" + "ab" * 33, False, id="long"),
        pytest.param("sha256=" + "g" * 64, False, id="not-hex"),
        pytest.param("sha256=" + "\u0661" * 64, False, id="non-ascii-digits"),
        pytest.param("sha1=" + "ab" * 32, False, id="sha1"),
        pytest.param("", False, id="empty"),
        pytest.param(None, False, id="missing"),
    ],
)
def test_a_signature_header_is_well_formed_only_as_sha256_and_64_hex_digits(
    header: str | None, expected: bool
) -> None:
    assert well_formed(header) is expected
