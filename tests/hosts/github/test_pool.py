"""One GitHub session per installation: the App's hosts share its pool and its token.

Against the benchmark's answering forge (FakeGitHub's shapes) served by uvicorn on loopback,
which counts the TCP connections it accepted (distinct client ports), and against FakeGitHub's
MockTransport with its fake clock for the token's refresh.
"""

from __future__ import annotations

import asyncio

from app.web.forge import GitHubForges
from benchmarks.answering_forge import COMMENTER, INSTALLATION, NAME, OWNER, ForgeApp, new_forge
from benchmarks.command_servers import APP_ID, new_key
from hosts.github import GitHubCredentials, GitHubHost, GitHubOptions
from hosts.github.session import GitHubSessions
from hosts.models import Target
from tests.hosts.github.joined import joined_host
from tests.support.fake_github import FakeGitHub
from tests.web.conftest import served

REPO = f"{OWNER}/{NAME}"


def test_two_jobs_on_one_installation_reuse_one_connection_and_one_token() -> None:
    pem = new_key()
    forge = ForgeApp(new_forge("http://127.0.0.1", pem), latency_s=0.0)
    first = forge.fake.add_comment(1, "/pair status", COMMENTER)
    second = forge.fake.add_comment(2, "/pair status", COMMENTER)
    with served(forge) as github:  # type: ignore[arg-type]  # a raw ASGI app, not Starlette
        forge.fake.base_url = github.url
        forges = GitHubForges(
            app_id=APP_ID,
            private_key=pem,
            base_url=github.url,
            host_options={"write_spacing_s": 0.0},
        )

        async def two_jobs() -> None:
            # The first job acknowledges through the App's forge and dispatches.
            job = forges(REPO, INSTALLATION)
            await job.react(Target("card", 1), str(first), "eyes")
            await job.dispatch({"comment": first})
            # The second is a host the card cycle builds for itself, as the worker's are.
            with forges.shared():
                host = GitHubHost(
                    REPO,
                    GitHubCredentials.app(APP_ID, pem, INSTALLATION),
                    base_url=github.url,
                    options=GitHubOptions(write_spacing_s=0.0),
                )
            await host.react(Target("card", 2), str(second), "eyes")
            await host.aclose()  # a joined host leaves the pool open for the next job
            await job.react(Target("card", 2), str(second), "+1")
            await forges.aclose()

        asyncio.run(asyncio.wait_for(two_jobs(), 60))
    assert forge.fake.kinds[f"POST /repos/{REPO}/issues/comments/N/reactions"] == 3
    assert forge.fake.dispatches == 1
    assert forge.fake.mints == 1  # one installation token for both jobs and the dispatch
    assert len(forge.clients) == 1  # one TCP connection, kept warm across both jobs


def test_a_shared_session_refreshes_its_token_before_it_expires() -> None:
    fake = FakeGitHub()
    sessions = GitHubSessions()

    def host() -> GitHubHost:
        return joined_host(fake, sessions)

    async def jobs() -> None:
        assert await host().permission("octocat") == "admin"
        assert await host().permission("octocat") == "admin"
        assert (fake.mints, len(sessions)) == (1, 1)
        # Within the refresh margin (5 minutes) of the hour's expiry: minted again, once.
        fake.clock.now += fake.token_lifetime_s - 60
        assert await host().permission("octocat") == "admin"
        assert await host().permission("octocat") == "admin"
        await sessions.aclose()

    asyncio.run(asyncio.wait_for(jobs(), 60))
    assert fake.mints == 2
    assert fake.unexpected == []
