"""The status pages in a real browser: Debian's Chromium driven by Playwright's Python package
against `pairbot serve --dev` while its worker advances a card.

Skipped, with one line, when Playwright or a Chromium binary is missing (`python3 dev.py test`
installs Chromium with apt-get where it can). Screenshots of the overview and the card's page
are written to `tests/artifacts/` (gitignored); the test prints their paths.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.card_project import CardProject
from tests.support.project import PAIRBOT, agent_env

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium() -> str:
    for candidate in (
        "/usr/bin/chromium",
        shutil.which("chromium"),
        shutil.which("chromium-browser"),
    ):
        if candidate and Path(candidate).is_file():
            return candidate
    pytest.skip("no Chromium found (/usr/bin/chromium): browser tests skipped")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serving(project: CardProject) -> Iterator[str]:
    """`pairbot serve --dev` over the project (the console script, in its own process)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = agent_env(
        {
            "PAIR_LOCAL_FORGE": str(project.forge.root),
            "PAIR_TEST_AGENT_DIR": str(project.scratch),
            # apply runs until the test has the card's page open (the scripted agent's `held`)
            "PAIR_TEST_RELEASE": str(project.scratch / "release-apply"),
            "PAIR_TICK_S": "1",
        }
    )
    process = subprocess.Popen(
        [str(PAIRBOT), "--root", str(project.root), "serve", "--dev", "--port", str(port)],
        cwd=project.root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and process.poll() is None:
            try:
                if httpx.get(url + "/healthz", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        else:
            raise AssertionError(process.communicate(timeout=10)[0].decode())
        yield url
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()


def test_the_pages_follow_a_card_in_chromium_without_a_reload(tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    executable = chromium()
    project = CardProject.create(tmp_path)
    project.script({"apply": ["held"]})
    project.command("implement")  # the first step (propose); the worker's ticks do the rest
    ARTIFACTS.mkdir(exist_ok=True)
    problems: list[str] = []
    with serving(project) as url, sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 390, "height": 844})  # a phone
            page.set_default_timeout(30_000)
            page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda err: problems.append(str(err)))

            page.goto(url + "/")
            row = page.locator("tbody tr", has_text="Add the widget")
            assert row.count() == 1
            assert "local/repo" in row.inner_text()
            overview_shot = ARTIFACTS / "overview.png"
            page.screenshot(path=str(overview_shot), full_page=True)

            row.get_by_role("link", name="#1 Add the widget").click()
            page.wait_for_url("**/cards/local/repo/1")
            page.evaluate("window.pairbotMarker = 'same document'")
            titles = page.locator("li.step h3")
            assert "verify" not in " ".join(titles.all_inner_texts())  # apply is held
            (project.scratch / "release-apply").touch()
            # The worker finishes apply and reviews: the steps appear in this same document.
            page.locator("li.step[data-transition=verify] h3", has_text="advanced").wait_for(
                timeout=90_000
            )
            page.locator(".facts .badge", has_text="ready-for-merge").wait_for(timeout=90_000)
            assert page.evaluate("window.pairbotMarker") == "same document"
            card_shot = ARTIFACTS / "card.png"
            page.screenshot(path=str(card_shot), full_page=True)

            shown = [t.split(" ")[0] for t in titles.all_inner_texts()]
            status = page.locator(".facts .badge").inner_text()
            page.get_by_role("link", name="Batches").click()
            page.wait_for_url("**/batches")
            assert "card #1" in page.locator("main").inner_text()
            api: Any = httpx.get(url + "/api/v1/cards/local/repo/1", timeout=10).json()
            listed = httpx.get(url + "/api/v1/cards", timeout=10).json()["cards"]
        finally:
            browser.close()
    assert [s["transition"] for s in api["card"]["steps"]] == shown
    assert api["card"]["status"] == status == "ready-for-merge"
    assert [(c["repo"], c["number"], c["status"]) for c in listed] == [
        ("local/repo", 1, "ready-for-merge")
    ]
    assert problems == []
    print(f"screenshots: {overview_shot} {card_shot}")
