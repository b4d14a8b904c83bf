"""What one idempotent publication costs on GitHub, in API requests.

    python benchmarks/host_requests.py

A publication is what the engine does at the end of a review: upsert the synthesis comment, set
the `pair-review` status on the reviewed head, set the `pr-state:*` label. Re-publishing the
same thing (a restart, a re-run tick) must be close to free: GitHub's primary limit is 5,000
requests an hour per installation, and a write also feeds the secondary limits.

Against the fake GitHub (`tests/support/fake_github.py`, real response shapes, ETags), for a
GitHub App installation and for a plain token, side by side:

    first        a cold host publishes on a fresh pull (identity, token mint, writes, read-backs)
    republish    the same host publishes the same thing again (warm cache)
    changed      the same host publishes a new comment body (one edit and its read-back)
    restarted    a new host (cold cache, e.g. the next Action run) publishes the same thing

Columns: every request, the mutations among them, the requests that count against the rate
limit (a 304 does not), and the 304s. Target: `republish` makes 0 mutations and 0 counted
requests — nothing beyond conditional reads.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

if __package__ in (None, ""):
    # `python benchmarks/host_requests.py` puts benchmarks/ first on sys.path, not the project.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hosts.github import GitHubCredentials, GitHubHost
from hosts.labels import PrState
from hosts.markers import make_marker
from hosts.models import Target
from tests.support.fake_github import FakeGitHub, rsa_key

Mode = Literal["app", "token"]


@dataclass(frozen=True)
class Row:
    """The requests one publication made."""

    mode: Mode
    phase: str
    requests: int
    mutations: int
    counted: int
    not_modified: int


def host_for(fake: FakeGitHub, mode: Mode) -> GitHubHost:
    """An adapter over the fake, on the fake's clock (write spacing costs no wall time)."""
    repo = f"{fake.owner}/{fake.repo}"
    if mode == "token":
        return GitHubHost(
            repo,
            GitHubCredentials.token(fake.pat),
            base_url=fake.base_url,
            transport=fake.transport,
            clock=fake.clock,
            sleep=fake.clock.sleep,
        )
    return GitHubHost(
        repo,
        GitHubCredentials.app(fake.app_id, rsa_key()[0], fake.installation_id),
        base_url=fake.base_url,
        transport=fake.transport,
        clock=fake.clock,
        sleep=fake.clock.sleep,
    )


async def publish(host: GitHubHost, pull: int, head: str, text: str) -> None:
    """The end-of-review publication: comment, status, label."""
    target = Target("pull", pull)
    await host.upsert_comment(target, make_marker("synthesis", 1, pr=pull, run="r1"), text)
    await host.set_review_status(pull, head, "success", "reviewed at this head")
    await host.set_state_label(target, PrState.READY_FOR_MERGE)


async def measure(mode: Mode) -> list[Row]:
    fake = FakeGitHub()
    pull = fake.seed_pull("pair/card-1")
    head = fake.pulls[pull].head_sha
    rows: list[Row] = []

    async def phase(name: str, host: GitHubHost, text: str) -> None:
        before = (fake.requests, fake.mutations, fake.counted, fake.not_modified)
        await publish(host, pull, head, text)
        after = (fake.requests, fake.mutations, fake.counted, fake.not_modified)
        rows.append(Row(mode, name, *(a - b for a, b in zip(after, before, strict=True))))

    host = host_for(fake, mode)
    await phase("first", host, "the synthesis")
    await phase("republish", host, "the synthesis")
    await phase("changed", host, "the synthesis, revised")
    await phase("restarted", host_for(fake, mode), "the synthesis, revised")
    if fake.unexpected:
        raise RuntimeError(f"the fake saw unexpected requests: {fake.unexpected}")
    return rows


def main(out: Callable[[str], object] = print) -> list[Row]:
    rows = [row for mode in ("app", "token") for row in asyncio.run(measure(mode))]
    out(f"{'auth':<6} {'phase':<10} {'requests':>8} {'mutations':>9} {'counted':>7} {'304s':>5}")
    for r in rows:
        out(
            f"{r.mode:<6} {r.phase:<10} {r.requests:>8} {r.mutations:>9} {r.counted:>7} "
            f"{r.not_modified:>5}"
        )
    warm = [r for r in rows if r.phase == "republish"]
    met = all(r.mutations == 0 and r.counted == 0 for r in warm)
    out(
        "target: a warm republish makes 0 mutations and 0 counted requests "
        f"(only conditional reads): {'met' if met else 'NOT MET'}"
    )
    return rows


if __name__ == "__main__":
    main()
