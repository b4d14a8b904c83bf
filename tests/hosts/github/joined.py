"""A `GitHubHost` over FakeGitHub that joins a shared `GitHubSessions`, as the App's jobs do."""

from __future__ import annotations

from hosts.github import GitHubCredentials, GitHubHost
from hosts.github.session import GitHubSessions
from tests.support.fake_github import FakeGitHub, rsa_key


def joined_host(fake: FakeGitHub, sessions: GitHubSessions) -> GitHubHost:
    """A new host of the fake's repository and App installation, on its clock, in `sessions`."""
    return GitHubHost(
        f"{fake.owner}/{fake.repo}",
        GitHubCredentials.app(fake.app_id, rsa_key()[0], fake.installation_id),
        base_url=fake.base_url,
        transport=fake.transport,
        clock=fake.clock,
        sleep=fake.clock.sleep,
        sessions=sessions,
    )
