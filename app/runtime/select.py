"""Pick the agent runtime for a step from the resolved locus (docs/runtime.md).

    local   → RexRuntime over swerex's LocalRuntime (in-process)
    docker  → RexRuntime over a DockerDeployment, the project root mounted at /workspace
    remote  → RexRuntime over a RemoteRuntime (swerex-remote, X-API-Key)

swerex and aiohttp are imported only when a runtime is actually built, so commands that never
spawn an agent (`pairbot batch status`, `--help`) do not pay for them. `ProcessRuntime`
(app/runtime/process.py) is not chosen here: it stays as the minimal runtime some tests put
behind the launcher. The per-agent timeout is not a runtime option: the launcher
(app/runtime/launcher.py) puts the resolved `settings.agent_timeout_ms` into each
`AgentSpawnRequest.timeout_ms`.
"""

from __future__ import annotations

from pathlib import Path

from app.engine.agent import AgentRuntime
from app.settings import ResolvedSettings

__all__ = ["select_runtime"]


def select_runtime(settings: ResolvedSettings, project_root: Path) -> AgentRuntime:
    """The runtime for `settings.locus`. `project_root` is the directory agents work in.

    Building it sends nothing anywhere: a bad remote setting or an unreachable Docker engine
    surfaces from `spawn` as a failed, resumable step.
    """
    from app.runtime import rex  # noqa: PLC0415  # imports swerex and aiohttp

    locus: rex.RexLocus
    if settings.locus == "docker":
        locus = rex.DockerLocus(project_root, settings.image)
    elif settings.locus == "remote":
        locus = rex.RemoteLocus(settings.remote, project_root)
    else:
        locus = rex.LocalLocus()
    return rex.RexRuntime(locus)
