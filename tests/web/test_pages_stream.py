"""The live part of a card's page as server-sent events: the fragment when it changes, a stream
that ends by itself (the browser reconnects), a cap on open streams past which the page polls,
and the same guard as every page. The real app under uvicorn on loopback; every read is
bounded by a timeout, and the stream's own pace is shortened for the test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from app.engine.jsonl import append_record
from app.web.app import create_app
from app.web.pages.read import LocalReader
from app.web.pages.routes import Pages, sse
from tests.web.conftest import OPERATOR, AppGitHub, app_settings, github_forges, served
from tests.web.test_pages import journal
from tests.web.test_pages_cache import card_batch, project

AUTH = {"Authorization": f"Bearer {OPERATOR}"}
STREAM = "/cards/octo/widget/7/stream"


def pages_of(app: Any) -> Pages:
    (pages,) = {r.endpoint.__self__ for r in app.routes if r.path.endswith("/stream")}
    assert isinstance(pages, Pages)
    return pages


def events(lines: Iterator[str]) -> Iterator[tuple[str, str]]:
    """(event, data) of each event read from a stream's lines."""
    name, data = "", []
    for line in lines:
        if line == "":
            if name:
                yield name, "\n".join(data)
            name, data = "", []
        elif line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: "):
            data.append(line.removeprefix("data: "))


def test_a_stream_sends_the_fragment_then_each_change_and_ends_by_itself(tmp_path: Path) -> None:
    root = project(tmp_path)
    locus = card_batch(root, 7, journal())
    app = create_app(
        app_settings(tmp_path),
        github=github_forges(AppGitHub()),
        poll_s=0.05,
        local=LocalReader(root, None),
        root_repo="octo/widget",
    )
    pages = pages_of(app)
    pages.live_s, pages.stream_s = 0.05, 60.0
    with served(app) as running, httpx.Client(base_url=running.url, timeout=30.0) as client:
        with client.stream("GET", STREAM, headers=AUTH) as answer:
            assert answer.headers["content-type"].startswith("text/event-stream")
            assert "default-src 'self'" in answer.headers["content-security-policy"]
            assert answer.headers["cache-control"] == "no-store"
            got = events(answer.iter_lines())
            first, html = next(got)
            assert first == "fragment" and 'data-transition="verify"' in html
            assert 'data-transition="publish"' not in html
            append_record(
                locus.journal,
                {"kind": "step-started", "key": "card-7", "at": "2026-12-01T10:30:00+00:00",
                 "transition": "publish", "session": "s9"},
            )  # fmt: skip
            second, html = next(got)
            assert second == "fragment" and 'data-transition="publish"' in html
            pages.stream_s = 0.0  # its time is up: it ends, with nothing more to send
            assert list(got) == []
        assert pages.streams == 0
        refused = client.get("/cards/octo/widget/8/stream", headers=AUTH)
        nobody = client.get(STREAM)
        pages.max_streams = 0
        full = client.get(STREAM, headers=AUTH)
    assert refused.status_code == 404
    assert nobody.status_code == 303 and "widget" not in nobody.text
    assert full.status_code == 503 and full.headers["retry-after"] == "1"
    assert "poll the fragment" in full.text


def test_an_event_carries_every_line_of_its_data() -> None:
    assert sse("fragment", "<p>a</p>\n<p>b</p>") == (
        "event: fragment\ndata: <p>a</p>\ndata: <p>b</p>\n\n"
    )
    assert sse("gone", "") == "event: gone\ndata: \n\n"


def test_the_card_page_names_its_stream_and_its_fallback() -> None:
    from app.web.pages import html
    from app.web.pages.model import card_view
    from app.web.viewer import Viewer

    page = html.card_page(card_view("octo/widget", "card-7", journal(), {}), Viewer.everyone())
    assert 'data-live="/cards/octo/widget/7/fragment"' in page
    assert 'data-live-stream="/cards/octo/widget/7/stream"' in page
    script = (Path(html.__file__).parents[1] / "static" / "pairbot.js").read_text()
    assert "EventSource" in script and "setTimeout(refresh, every)" in script


def test_a_stop_waits_for_open_streams_only_briefly() -> None:
    from app.web.serve import STOP_GRACE_S, server_config
    from app.web.settings import EdgeLimits

    config = server_config(object(), EdgeLimits())
    assert config.timeout_graceful_shutdown == STOP_GRACE_S <= 5
