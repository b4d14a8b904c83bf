"""`pairbot serve`: uvicorn on `create_app(AppSettings.from_env(env))`.

    pairbot serve --host 127.0.0.1 --port 8080     the App, configured by PAIR_* variables
    pairbot serve --dev                            embedded defaults for a try-out on loopback

On SQLite the worker runs in a process of its own (app.web.worker_process), started once the
store is migrated and stopped with the server; PAIR_WORKER_PROCESS=own|inline says where.

`--dev` needs no account: the local forge under the project answers instead of GitHub, steps
run in the App's worker (`execution: worker`), the store is SQLite under the project, and — since
the server never runs without a webhook secret — one is generated once into
`.pair/app/webhook-secret` (mode 0600) and its path printed, never its value. `--dev` binds
loopback only.
"""

from __future__ import annotations

import errno
import functools
import gc
import ipaddress
import logging
import os
import resource
import secrets
import socket
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import uvicorn
from pydantic import SecretStr

from app.errors import PortInUseError, UserError
from app.store.base import Store
from app.store.factory import alone_across_replicas, make_store
from app.web.app import create_app
from app.web.limits import connection_ceiling, connections_within
from app.web.pages.read import LocalReader
from app.web.protocol import guarded_protocol
from app.web.settings import AppSettings, EdgeLimits
from app.web.ticker import checkout_tick
from app.web.worker import cycle_executor
from app.web.worker_process import WorkerParts, WorkerProcess, WorkerRecipe

DEV_SECRET = Path(".pair") / "app" / "webhook-secret"


def dev_secret(root: Path) -> tuple[SecretStr, Path]:
    """The --dev webhook secret: read from its 0600 file, created on first use."""
    path = root / DEV_SECRET
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        if path.stat().st_mode & 0o077:
            path.chmod(0o600)  # someone widened it; a secret file is the owner's only
        value = path.read_text().strip()
        if value:
            return SecretStr(value), path
        path.unlink()
        return dev_secret(root)
    with os.fdopen(fd, "w") as handle:
        handle.write(secrets.token_hex(32) + "\n")
    return dev_secret(root)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int) -> socket.socket:
    """A socket bound to (`host`, `port`) for the server to listen on.

    Raises `PortInUseError` when another process holds the address, `UserError` when the
    address is not one of this machine's (or cannot be resolved).
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as err:
        raise UserError(f"--host {host!r} cannot be resolved: {err.strerror}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    # Restarting right after a stop must not wait for the old connections' TIME_WAIT; on
    # Linux this never lets two live servers share the port.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as err:
        sock.close()
        if err.errno == errno.EADDRINUSE:
            raise PortInUseError(
                f"port {port} on {host} is already in use by another process; stop it, or "
                "choose another port with --port"
            ) from None
        if err.errno in (errno.EADDRNOTAVAIL, errno.EACCES):
            raise UserError(
                f"cannot bind {host}:{port}: {err.strerror} (a port below 1024 needs "
                "privileges; --host must be an address of this machine)"
            ) from None
        raise
    return sock


def settings_for(root: Path, env: Mapping[str, str], *, dev: bool) -> AppSettings:
    """The settings `serve` runs with: the environment's, plus the --dev defaults."""
    settings = AppSettings.from_env(env, root=root)
    if not dev:
        return settings
    update: dict[str, Any] = {"forge": "local", "execution": "worker"}
    if settings.webhook_secret is None:
        secret, path = dev_secret(root)
        update["webhook_secret"] = secret
        print(
            f"pairbot: --dev webhook secret (sign test deliveries with it): {path}",
            file=sys.stderr,
            flush=True,
        )
    return settings.model_copy(update=update)


STOP_GRACE_S = 5.0

# Open files kept for everything but connections: the store, logs, the worker's git and agent
# subprocesses' pipes, uvloop's own. A quarter of the limit, and never fewer than this.
FD_RESERVE = 128


def raise_open_file_limit() -> int:
    """Raise this process's soft open-file limit (RLIMIT_NOFILE) to its hard limit; the soft
    limit it now has. Every connection is a file descriptor: with a soft limit of 1024 (a
    common default) the server would run out long before its connection cap."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass  # a hard limit the kernel will not grant: keep the soft one
    return soft


def fit_connections(limits: EdgeLimits, open_files: int) -> EdgeLimits:
    """`limits` with `max_connections` lowered, if need be, so that every connection the server
    may hold (app.web.limits.connection_ceiling) fits well under `open_files` — less a quarter
    of it, at least FD_RESERVE, for everything else; a WARNING says so."""
    room = open_files - max(FD_RESERVE, open_files // 4)
    if connection_ceiling(limits.max_connections) <= room:
        return limits
    fitted = connections_within(room)
    logging.getLogger(__name__).warning(
        "PAIR_MAX_CONNECTIONS=%d does not fit the open-file limit (%d): at most %d open "
        "connections; raise `ulimit -n` (the hard limit) to allow more",
        limits.max_connections,
        open_files,
        fitted,
    )
    return limits.model_copy(update={"max_connections": fitted})


# Young collections this far apart: a delivery's parse allocates a few hundred containers that
# die with the request, so at the default (700) a collection ran every other delivery or so.
GC_YOUNG_THRESHOLD = 20_000


def settle_gc() -> None:
    """Once everything is imported and built, right before serving: move what exists to the
    collector's permanent generation (`gc.freeze`) and space the young collections out.

    A served process holds some sixty thousand long-lived objects (the modules, pydantic's
    schemas, the app); every full collection walked all of them, about 20 ms on the
    event loop at an unforeseeable moment: a stall every request then waiting sat through.
    Frozen, they are never walked again (they are still freed by reference counting; only a
    cycle among them would outlive its use, and start-up leaves none worth reclaiming).
    """
    gc.collect()
    gc.freeze()
    _young, middle, old = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, middle, old)


def server_config(app: Any, limits: EdgeLimits, **options: Any) -> Any:
    """The `uvicorn.Config` pairbot serves `app` with, under `limits` (`options` override).

    uvicorn's own limits: `timeout_keep_alive` (an idle kept-alive connection closes) and,
    should uvicorn ever speak h11 here, `h11_max_incomplete_event_size` (the header cap). The
    protocol is uvicorn's httptools one with per-request deadlines, a header cap and the cap on
    open connections (app.web.protocol): uvicorn alone lets a connection trickle its headers or
    body forever, and its `limit_concurrency` (not set) answers 503 to every request past it,
    a signed delivery as much as a stranger's idle socket. The loop stays
    "auto": uvloop, a pinned dependency (the App's edge is CPU-bound under load, see
    benchmarks/webhook_load.py). uvicorn's access log is off unless `access_log=True` is
    passed (`PAIR_ACCESS_LOG=1` in `serve`): the edge writes one line per delivery itself, and
    a second line for every request cost the edge a tenth of its CPU under load.
    """
    values: dict[str, Any] = {
        "log_config": None,  # the logging `serve` configures; uvicorn's own would replace it
        "server_header": False,
        # The client address decides only --dev's loopback check (app.web.signin): it must be the
        # socket's peer, never a header a client (or a proxy) wrote.
        "proxy_headers": False,
        "http": guarded_protocol(limits),
        "ws": "none",  # no route speaks WebSocket: an upgrade is an ordinary request
        "access_log": False,
        # A stop waits this long for requests still running, then cancels them: a card page's
        # live stream (app.web.pages.routes) would otherwise hold it for up to a minute.
        "timeout_graceful_shutdown": STOP_GRACE_S,
        "timeout_keep_alive": limits.keep_alive_s,
        "h11_max_incomplete_event_size": limits.max_header_bytes,
        **options,
    }
    return uvicorn.Config(app, **values)


def serve(
    root: Path,
    env: Mapping[str, str],
    *,
    host: str,
    port: int,
    dev: bool,
    deps: Callable[[Path], Any],
) -> int:
    """Run the App until interrupted; returns the exit code.

    `deps(checkout)` builds the engine's deps for a checkout the worker runs a step on (the
    root, or one under PAIR_WORKER_CHECKOUTS): an agent's runtime is bound to its tree. With
    PAIR_WORKER_PROCESS=own (the default on SQLite) the worker runs in a process of its own
    (app.web.worker_process), so `deps` must pickle: an importable function or a partial.
    """
    _refuse_dev_off_loopback(host, dev=dev)
    settings = settings_for(root, env, dev=dev)
    listen_socket = bind(host, port)  # before the store: a port in use leaves nothing behind
    url = settings.store_url
    store = make_store(
        settings.store, url.get_secret_value() if url else None, lease_s=settings.store_lease_s
    )
    parts = functools.partial(worker_parts, root, dict(env), deps)
    if settings.own_worker_process:
        # The jobs (and the ticks) run in a process of their own, built from this recipe.
        edge_parts = WorkerParts()
        worker: WorkerProcess | None = WorkerProcess(WorkerRecipe(settings, parts))
    else:
        edge_parts, worker = parts(settings, store), None
    app = create_app(
        settings,
        store=store,
        tick=edge_parts.tick,
        executor=edge_parts.executor,
        local=LocalReader(root, settings.worker_checkouts),
        worker_process=worker,
    )
    _announce(host, port, settings.store_label)
    limits = fit_connections(settings.limits, raise_open_file_limit())
    config = server_config(app, limits, host=host, port=port, access_log=settings.access_log)
    # Bound here, before anything is printed as served: a port in use is one line naming it
    # (uvicorn's own bind failure is a log record and its "startup failure" exit 3, which
    # pairbot's CLI reserves for "lock held").
    server = uvicorn.Server(config)
    settle_gc()
    server.run(sockets=[listen_socket])
    return 0


def worker_parts(
    root: Path,
    env: Mapping[str, str],
    deps: Callable[[Path], Any],
    settings: AppSettings,
    store: Store,
) -> WorkerParts:
    """What the worker runs jobs with, in whichever process runs it: the card cycle's executor
    and, with `execution: worker`, the tick (a repository's scheduled workflow ticks under
    `execution: actions`; a worker ticks itself). Importable, so a `functools.partial` of it
    travels to the worker's own process (app.web.worker_process) with `deps`."""
    tick = (
        alone_across_replicas(
            store,
            checkout_tick(
                root,
                env,
                deps,
                hosts=settings.hosts,
                checkouts=settings.worker_checkouts,
                installation_of=store.last_installation,
            ),
        )
        if settings.execution == "worker"
        else None
    )
    executor = cycle_executor(
        root,
        env,
        functools.partial(deps, root),
        hosts=settings.hosts,
        checkouts=settings.worker_checkouts,
        deps_for=deps,
        # --dev answers every repository on the root's local forge: the root runs them all
        any_repository=settings.forge == "local",
        run_url=settings.public_url,
    )
    return WorkerParts(executor=executor, tick=tick)


def _refuse_dev_off_loopback(host: str, *, dev: bool) -> None:
    """--dev's secret is generated and its forge answers anyone: never off this machine."""
    if dev and not is_loopback(host):
        raise UserError(
            f"--dev serves the local forge with a generated secret: bind a loopback address, "
            f"not {host!r}"
        )


def _announce(host: str, port: int, store_label: str) -> None:
    """Logging configured, and the one line saying where the App serves and on what store."""
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    shown = f"[{host}]" if ":" in host else host
    print(
        f"pairbot: serving on http://{shown}:{port}/ (status page; webhooks at "
        f"/webhooks/github and /webhooks/azure-devops), store {store_label}",
        file=sys.stderr,
        flush=True,
    )
