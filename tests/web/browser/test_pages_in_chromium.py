"""The status pages in a real browser: Debian's Chromium driven by Playwright's Python package
against `pairbot serve --dev` running the bundled demo while its worker advances a card.

The demo is set up by what `python3 dev.py start` runs (`python -m app.cli.demo DIR`) in a temporary
directory, then served by the installed console script. The demo agent holds card #1's `apply`
(PAIR_DEMO_HOLD) until the card's page is open, so the page is seen to follow the worker's
steps — apply, a review with a finding, red, fix, the second review — without a reload.

Skipped, with one line, when Playwright or a Chromium binary is missing (`python3 dev.py test`
installs Chromium with apt-get where it can). Screenshots of the overview and the card's page
are written to `tests/artifacts/` (gitignored); the test prints their paths.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.project import PAIRBOT, agent_env

REPOSITORY = Path(__file__).resolve().parents[3]
ARTIFACTS = REPOSITORY / "tests" / "artifacts"
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
REPO = "local/pairbot-demo"  # the served project's name on its local forge
CYCLE_S = 120  # the worker's steps after the release: ~20 s alone, more on a loaded machine


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
def serving(root: Path, env: dict[str, str]) -> Iterator[str]:
    """`pairbot serve --dev` over `root` (the console script, in its own process)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(
        [str(PAIRBOT), "--root", str(root), "serve", "--dev", "--port", str(port)],
        cwd=root,
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


def overview_rows(page: Any) -> list[tuple[str, str, str]]:
    """(repository, card link text, pr-state) of each row of the overview, in order."""
    rows = []
    for row in page.locator("tbody tr").all():
        cells = row.locator("td")
        link = cells.nth(1).get_by_role("link").first.inner_text()
        rows.append((cells.nth(0).inner_text(), link, cells.nth(3).inner_text()))
    return rows


def test_the_pages_follow_the_demo_in_chromium_without_a_reload(tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    executable = chromium()
    root = tmp_path / "pairbot-demo"
    release = tmp_path / "release-apply"
    # What `python3 dev.py start` runs before serving, as it runs it.
    made = subprocess.run(
        [sys.executable, "-m", "app.cli.demo", str(root)],
        cwd=REPOSITORY,
        env=agent_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert made.returncode == 0, made.stdout + made.stderr
    assert "card #1: /pair implement → propose advanced" in made.stdout, made.stdout
    env = agent_env({"PAIR_DEMO_HOLD": f"card-1:apply:{release}", "PAIR_TICK_S": "1"})
    ARTIFACTS.mkdir(exist_ok=True)
    problems: list[str] = []
    with serving(root, env) as url, sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 390, "height": 844})  # a phone
            page.set_default_timeout(30_000)
            page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda err: problems.append(str(err)))

            page.goto(url + "/")
            rows = overview_rows(page)
            assert (REPO, "#1 Add a shout() helper", "in-progress") in rows, rows
            assert (REPO, "#2 Add a title_case() helper", "awaiting-approval") in rows, rows
            assert not any("whisper" in link for _, link, _ in rows)  # nobody asked for #3

            page.get_by_role("link", name="#1 Add a shout() helper").click()
            page.wait_for_url(f"**/cards/{REPO}/1")
            page.evaluate("window.pairbotMarker = 'same document'")
            titles = page.locator("li.step h3")
            assert "verify" not in " ".join(titles.all_inner_texts())  # apply is held
            release.touch()
            # The worker finishes apply, reviews, fixes, reviews again: in this same document.
            page.locator("li.step[data-transition=fix] h3", has_text="advanced").wait_for(
                timeout=CYCLE_S * 1000
            )
            page.locator(".facts .badge", has_text="ready-for-merge").wait_for(
                timeout=CYCLE_S * 1000
            )
            assert page.evaluate("window.pairbotMarker") == "same document"
            assert "r1-1" in page.locator("li.step[data-transition=verify]").first.inner_text()
            card_shot = ARTIFACTS / "card.png"
            page.screenshot(path=str(card_shot), full_page=True)
            shown = [t.split(" ")[0] for t in titles.all_inner_texts()]
            status = page.locator(".facts .badge").inner_text()
            api: Any = httpx.get(f"{url}/api/v1/cards/{REPO}/1", timeout=10).json()

            page.get_by_role("link", name="Cards").first.click()
            page.wait_for_url(url + "/")
            rows = overview_rows(page)
            overview_shot = ARTIFACTS / "overview.png"
            page.screenshot(path=str(overview_shot), full_page=True)
            listed = httpx.get(url + "/api/v1/cards", timeout=10).json()["cards"]

            page.get_by_role("link", name="Batches").click()
            page.wait_for_url("**/batches")
            batches = page.locator("main").inner_text()
        finally:
            browser.close()
    assert shown == ["propose", "apply", "verify", "red", "verify-red", "fix", "verify"]
    assert [s["transition"] for s in api["card"]["steps"]] == shown
    assert api["card"]["status"] == status == "ready-for-merge"
    assert rows == [(c["repo"], f"#{c['number']} {c['title']}", c["status"]) for c in listed]
    assert [(c["number"], c["status"]) for c in listed] == [
        (2, "awaiting-approval"),  # what needs a person comes first
        (1, "ready-for-merge"),
    ]
    assert "card #1" in batches and "hello" in batches
    assert problems == []
    print(f"screenshots: {overview_shot} {card_shot}")
