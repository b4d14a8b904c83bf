"""The two servers benchmarks/command_path.py measures, each run in its own process.

    python -m benchmarks.command_servers --serve floor --fd N --forge PORT --key app.pem
    python -m benchmarks.command_servers --serve app --fd N --forge PORT --key app.pem
                                         --store app.sqlite3 [--spacing 1] [--profile out.prof]
                                         [--worker own|inline]
                                         [--store-url postgresql://…]  (a replica on PostgreSQL)

floor  webhook_load.py's edge floor (read, verify, parse, 202), then for a `/pair` command the
       API calls the App's job makes for it, sent by one bare `httpx.AsyncClient` (keep-alive,
       the installation token minted once at start); `GET /_pending` says how many commands'
       calls are still under way
app    `create_app` with the production `GitHubForges` against the forge, as `pairbot serve`
       configures uvicorn; `--spacing` is the write spacing (0 unless given); `--worker` where
       the worker runs: a process of its own (`own`, as `pairbot serve` by default) or this one
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import functools
import gc
import json
import logging
import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from pydantic import SecretStr
from starlette.types import Receive, Scope, Send

from app.domain.intake.answers import inline_code
from app.web.answers import parse_json
from app.web.asgi import Answer, headers_of
from app.web.limits import BodyBudget, read_body
from app.web.settings import EdgeLimits
from app.web.signature import SIGNATURE_HEADER, verify_github

SECRET = "command-path-benchmark-secret"  # noqa: S105 - a throwaway secret for loopback
APP_ID = 123_456  # the forge's (FakeGitHub's) App
PERMISSION_TTL_S = 60.0  # as the App's PermissionCache (PAIR_PERMISSION_TTL_S)
CONCURRENCY = 4  # as the App's worker


def new_key() -> str:
    """A fresh App private key (PEM) for one benchmark."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


class CommandFloor:
    """The floor: the edge's mandatory work, then a command's API calls, nothing else."""

    def __init__(self, forge_url: str, private_key: str) -> None:
        self.forge_url = forge_url
        self.private_key = private_key
        self.key = SECRET.encode()
        self.wanted = frozenset({b"content-length", SIGNATURE_HEADER.encode()})
        self.limits = EdgeLimits()
        self.budget = BodyBudget(self.limits)
        self.pending = 0
        self.tasks: set[asyncio.Task[None]] = set()
        self.permission_until: dict[str, float] = {}
        self.client: httpx.AsyncClient | None = None
        self.slots = asyncio.Semaphore(CONCURRENCY)

    async def start(self) -> None:
        now = int(time.time())
        claims = {"iat": now - 60, "exp": now + 540, "iss": str(APP_ID)}
        app_jwt = jwt.encode(claims, self.private_key, algorithm="RS256")
        async with httpx.AsyncClient(base_url=self.forge_url, trust_env=False) as minting:
            minted = await minting.post(
                "/app/installations/1/access_tokens",
                headers={"Authorization": f"Bearer {app_jwt}"},
            )
        minted.raise_for_status()
        self.client = httpx.AsyncClient(
            base_url=self.forge_url,
            trust_env=False,
            headers={
                "Authorization": f"Bearer {minted.json()['token']}",
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": "2022-11-28",
            },
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["path"] == "/_pending":
            await Answer(200, json.dumps({"pending": self.pending}).encode()).send(send)
            return
        headers = headers_of(scope, self.wanted)
        with self.budget.hold() as hold:
            body = await read_body(receive, headers.get("content-length"), hold, self.limits)
            if not verify_github(self.key, body, headers.get(SIGNATURE_HEADER)):
                await Answer(401).send(send)
                return
            payload = parse_json(body)
        await Answer(202, b'{"status":"checked"}').send(send)
        text = str(payload.get("comment", {}).get("body", ""))
        if text.startswith("/pair "):
            self.pending += 1
            task = asyncio.create_task(self._command(payload, text))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await self.start()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self.client is not None:
                    await self.client.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _command(self, payload: dict[str, Any], text: str) -> None:
        try:
            async with self.slots:
                await self._calls(payload, text)
        finally:
            self.pending -= 1

    async def _calls(self, payload: dict[str, Any], text: str) -> None:
        """The App's job for a command on a card, as bare requests: the permission (cached),
        the 👀, the tracking comment (read; written only when it differs), the dispatch."""
        client = self.client
        assert client is not None
        repo = payload["repository"]["full_name"]
        login = payload["comment"]["user"]["login"]
        number = payload["issue"]["number"]
        if self.permission_until.get(login, 0.0) < time.monotonic():
            response = await client.get(f"/repos/{repo}/collaborators/{login}/permission")
            response.raise_for_status()
            self.permission_until[login] = time.monotonic() + PERMISSION_TTL_S
        comment = payload["comment"]["id"]
        reaction = {"content": "eyes"}
        response = await client.post(
            f"/repos/{repo}/issues/comments/{comment}/reactions", json=reaction
        )
        response.raise_for_status()
        marker = f"<!-- pairbot:tracking #{number} -->"
        body = f"{marker}\nqueued {inline_code(text)} (requested by **{login}**)."
        listed = await client.get(
            f"/repos/{repo}/issues/{number}/comments", params={"per_page": 100}
        )
        listed.raise_for_status()
        found = next((c for c in listed.json() if marker in str(c.get("body"))), None)
        if found is None:
            created = await client.post(
                f"/repos/{repo}/issues/{number}/comments", json={"body": body}
            )
            created.raise_for_status()
        elif found.get("body") != body:
            edited = await client.patch(
                f"/repos/{repo}/issues/comments/{found['id']}", json={"body": body}
            )
            edited.raise_for_status()
        dispatch = {"event_type": "pair", "client_payload": {"comment": comment, "repo": repo}}
        sent = await client.post(f"/repos/{repo}/dispatches", json=dispatch)
        sent.raise_for_status()


def app_server(  # noqa: PLR0917 - the child's command line, every argument named there
    forge_url: str,
    private_key: str,
    store: Path,
    spacing_s: float,
    store_url: str | None = None,
    worker: str = "own",
) -> Any:
    """`create_app` as `pairbot serve` builds it: with `worker="own"`, the worker in a process
    of its own (app.web.worker_process), its forges built there the same way."""
    from app.web.app import create_app  # noqa: PLC0415  # the App's stack, in its child only
    from app.web.settings import AppSettings  # noqa: PLC0415
    from app.web.worker_process import WorkerProcess, WorkerRecipe  # noqa: PLC0415

    settings = AppSettings(
        root=store.parent,
        store=store,
        store_url=SecretStr(store_url) if store_url else None,
        webhook_secret=SecretStr(SECRET),
        app_slug="pairbot",
        app_id=APP_ID,
        private_key=SecretStr(private_key),
        github_api_url=forge_url,
    )
    process = None
    if worker == "own":
        # By its module's name: this one runs as __main__, which the worker's process is not.
        from benchmarks.command_servers import worker_parts  # noqa: PLC0415

        parts = functools.partial(worker_parts, forge_url, private_key, spacing_s)
        process = WorkerProcess(WorkerRecipe(settings, parts))
    return create_app(
        settings, github=app_forges(forge_url, private_key, spacing_s), worker_process=process
    )


def app_forges(forge_url: str, private_key: str, spacing_s: float) -> Any:
    from app.web.forge import GitHubForges  # noqa: PLC0415  # the App's stack, in its child only

    return GitHubForges(
        app_id=APP_ID,
        private_key=private_key,
        base_url=forge_url,
        host_options={"write_spacing_s": spacing_s},
    )


def worker_parts(forge_url: str, private_key: str, spacing_s: float, *_: Any) -> Any:
    """In the worker's process: its forges, as the edge's (`app_forges`)."""
    from app.web.worker_process import WorkerParts  # noqa: PLC0415

    return WorkerParts(github=app_forges(forge_url, private_key, spacing_s))


def serve(args: argparse.Namespace) -> None:
    """Child process: serve `args.serve` on the inherited socket until terminated."""
    import uvicorn  # noqa: PLC0415

    from app.web.serve import server_config, settle_gc  # noqa: PLC0415
    from benchmarks.webhook_load import server_options  # noqa: PLC0415

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    forge_url = f"http://127.0.0.1:{args.forge}"
    key = args.key.read_text()
    if args.serve == "floor":
        app: Any = CommandFloor(forge_url, key)
    else:
        app = app_server(forge_url, key, args.store, args.spacing, args.store_url, args.worker)
    _, loop = server_options()
    server = uvicorn.Server(server_config(app, EdgeLimits(), loop=loop))
    settle_gc()
    if args.no_gc:
        gc.disable()  # an experiment: is the command's tail the collector's pauses?
    profile = cProfile.Profile() if args.profile else None
    if profile is not None:
        profile.enable()
    server.run(sockets=[socket.socket(fileno=args.fd)])
    if profile is not None:
        profile.disable()
        profile.dump_stats(args.profile)


def _cli(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--serve", choices=("floor", "app"), required=True)
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--forge", type=int, required=True, help="the forge's port")
    parser.add_argument("--key", type=Path, required=True)
    parser.add_argument("--store", type=Path)
    parser.add_argument("--spacing", type=float, default=0.0)
    parser.add_argument("--store-url", help="a PostgreSQL store (replicas share it)")
    parser.add_argument(
        "--worker", choices=("own", "inline"), default="own", help="the worker's process"
    )
    parser.add_argument("--no-gc", action="store_true", help="the cyclic collector off")
    parser.add_argument("--profile", type=Path)
    serve(parser.parse_args(argv))


if __name__ == "__main__":
    _cli(sys.argv[1:])
