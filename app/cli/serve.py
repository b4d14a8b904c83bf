"""`pairbot serve`: the App (docs/app.md) over the checkout at `--root`.

uvicorn and Starlette load only for this verb; the worker's steps take the same deps as the
CLI's own (`app.cli.deps`), built for the checkout each job runs in.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Mapping
from pathlib import Path

from app.cli.deps import engine_deps
from app.web.serve import serve


def run(args: argparse.Namespace, root: Path, env: Mapping[str, str]) -> int:
    """Serve until stopped; the exit code."""
    return serve(
        root,
        env,
        host=args.host,
        port=args.port,
        dev=args.dev,
        # A partial, not a lambda: it travels to the worker's own process (pickled).
        deps=functools.partial(engine_deps, dict(env)),
    )
