"""The SWE-ReX loci (local, docker, remote): run one agent through a swerex runtime.

pairbot drives SWE-ReX in-process: `local` uses swerex's `LocalRuntime`, `docker` the runtime
of a `DockerDeployment` (after a `docker info` pre-flight), `remote` a `RemoteRuntime` talking
to a `swerex-remote` server. `RexRuntime` implements the `AgentRuntime` seam
(app/engine/agent.py) the same way over all three. One job per module:

    runtime.py     RexRuntime.spawn: connect, make the run directory, launch, follow, clean up
    loci.py        the three loci (RexLocus): how each is reached, how paths and env map there
    connection.py  the swerex session: calls with a deadline, errors named, quiet logging
    protocol.py    the shell scripts run where the agent runs (launch, poll, signal, finish)
                   and the answers they give
    follow.py      following a started agent: output as lines, the timeout, how it ended
    rulefiles.py   a step's rule files (codex's, gemini's) written in its run directory
    errors.py      RexError, the one error, and the tree of what it wraps

This package is the one heavy seam of the runtime: importing it imports swerex and aiohttp, so
app/runtime/select.py imports it only when a runtime is built.
"""

from __future__ import annotations

import os

# Read by swerex.utils.log when it is first imported; a value the operator set wins. Every
# module of this package is imported after this line: a package runs its __init__ first.
os.environ.setdefault("SWE_REX_LOG_STREAM_LEVEL", "CRITICAL")

# The imports below must follow the line above: swerex reads the level at import time.
from app.proc import env_script
from app.runtime.rex.connection import RexConnection
from app.runtime.rex.errors import RexError
from app.runtime.rex.follow import (
    DEFAULT_KILL_GRACE_S,
    DEFAULT_POLL_INTERVAL_S,
    LineAssembler,
)
from app.runtime.rex.loci import (
    DOCKER_WORKDIR,
    FOREIGN_MACHINE_ENV,
    DockerLocus,
    LocalLocus,
    RemoteLocus,
    RexLocus,
    docker_preflight,
    map_project_path,
)
from app.runtime.rex.protocol import exit_from_status, launcher_script
from app.runtime.rex.runtime import RexRuntime

__all__ = [
    "DEFAULT_KILL_GRACE_S",
    "DEFAULT_POLL_INTERVAL_S",
    "DOCKER_WORKDIR",
    "FOREIGN_MACHINE_ENV",
    "DockerLocus",
    "LineAssembler",
    "LocalLocus",
    "RemoteLocus",
    "RexConnection",
    "RexError",
    "RexLocus",
    "RexRuntime",
    "docker_preflight",
    "env_script",
    "exit_from_status",
    "launcher_script",
    "map_project_path",
]
