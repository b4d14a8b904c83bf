"""A real pairbot App process for tests/web/test_crash.py.

    python -m tests.web.crash_server --fd N --store FILE --record FILE [--pause FILE]

Serves `create_app` with uvicorn on the inherited listening socket `N`. GitHub is the in-process
fake (issue #1 with comment 1000001 `/pair implement` by octocat, the same ids every start), the
store is the real SQLite file, and the worker's executor appends every job it runs to `--record`
(one JSON line, fsynced). With `--pause FILE`, the GitHub handler writes FILE right after it has
read a delivery's body and then waits forever: the test kills the process there, between
reading and queueing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
from pathlib import Path

import uvicorn

from app.web.app import create_app
from app.web.jobs import Job
from tests.web.conftest import AppGitHub, app_settings, github_forges


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--record", type=Path, required=True)
    parser.add_argument("--pause", type=Path)
    args = parser.parse_args(argv)

    fake = AppGitHub()
    card = fake.seed_issue("Crash-safe card", "")
    fake.add_comment(card, "/pair implement", "octocat")

    async def record(job: Job, repo: str, installation_id: int | None) -> None:
        line = json.dumps({"job": job.to_payload(), "repo": repo, "pid": os.getpid()})
        with args.record.open("a") as handle:
            handle.write(line + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    async def pause() -> None:
        args.pause.write_text("read a body; now waiting to be killed\n")
        await asyncio.Event().wait()

    settings = app_settings(args.store.parent, store=args.store, execution="worker")
    app = create_app(
        settings,
        github=github_forges(fake),
        executor=record,
        poll_s=0.05,
        after_body=pause if args.pause is not None else None,
    )
    sock = socket.socket(fileno=args.fd)
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False))
    server.run(sockets=[sock])


if __name__ == "__main__":
    main(sys.argv[1:])
