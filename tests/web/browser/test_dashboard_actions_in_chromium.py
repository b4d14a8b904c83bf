"""A maintainer approves a card from its page in a real browser: Debian's Chromium driven by
Playwright's Python package against the App under uvicorn on loopback, signed in through the
GitHub sign-in flow (GitHub's authorize page answered by a Playwright route that sends the
browser straight back with a code, the code exchange and the App's GitHub faked at the HTTP
edge as in tests/web/test_pages_actions.py). The click queues one command job, which the
worker dispatches as the comment's would be.

Skipped, with one line, when Playwright or a Chromium binary is missing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.support.fake_github_oauth import WEB
from tests.web.browser.test_pages_in_chromium import CHROMIUM_ARGS, chromium
from tests.web.test_pages_actions import REPO, World, actions_world

TIMEOUT_MS = 30_000


def github_authorize(world: World, login: str) -> Any:
    """GitHub's authorize page, as a user who already authorized the App sees it: a redirect
    back to the callback with a code for `login` and the state it was given."""

    def answer(route: Any) -> None:
        query = parse_qs(urlsplit(route.request.url).query)
        state = query["state"][0]
        code = world.oauth.code_for(login)
        target = f"{world.server.url}/oauth/callback?code={code}&state={state}"
        route.fulfill(status=302, headers={"Location": target})

    return answer


def test_a_maintainer_signs_in_and_approves_a_card_with_a_click(tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    executable = chromium()
    with actions_world(tmp_path) as world, sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context()
            context.set_default_timeout(TIMEOUT_MS)
            context.route(f"{WEB}/login/oauth/authorize**", github_authorize(world, "octocat"))
            page = context.new_page()
            card = f"/cards/{REPO}/{world.approve}"
            page.goto(f"{world.server.url}/signin?next={card}")
            page.get_by_role("link", name="Sign in with GitHub").click()
            page.wait_for_url(f"{world.server.url}{card}")
            assert "viewing as octocat" in page.inner_text("header")
            page.get_by_role("button", name="Approve").click()
            page.wait_for_url(f"{world.server.url}{card}?queued=approve")
            notice = page.get_by_role("status").inner_text()
            assert "Queued /pair approve" in notice
        finally:
            browser.close()
        [job] = world.finished(1)
    assert (job["command"], job["state"]) == ("approve", "done")
    [dispatch] = world.github.dispatches
    assert dispatch["client_payload"]["comment"]["authorLogin"] == "octocat"
