"""Azure Pipelines' next run: a run of this pipeline, queued by the run itself.

    answer = await queue_next(settings, target, after)      after the step, the lock released

`POST {org}/{project}/_apis/pipelines/{pipelineId}/runs` (Runs - Run Pipeline, api-version
7.1) through the azure-devops SDK's pipelines client (`run_pipeline`), on the connection and
call discipline the Azure DevOps adapter uses (`hosts.azure_devops.connection.SdkConnection`:
a worker thread, one transport policy, a write never retried, errors as `hosts.errors`):

- the pipeline is this run's (`SYSTEM_DEFINITIONID`), on this run's branch
  (`BUILD_SOURCEBRANCH`, as `resources.repositories.self.refName`);
- it carries no template parameter or variable: Azure DevOps refuses a run whose parameters
  the YAML does not declare, or whose variables are not settable at queue time, and the next
  run needs neither — it is a tick (BUILD_REASON `Manual`), which takes the batch whose turn
  it is (`action.run.continuation`);
- it is queued with the job's token (`System.AccessToken`), as the project's build service
  identity, which needs "Queue builds" on the pipeline; a refusal (401, 403) says so and
  the schedule takes each next step.

Loaded only when a run asks for the next one (`AzurePipelines.request_continuation`): it loads
the SDK.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Final

from action.azure.settings import PipelineSettings
from action.run.continuation import Continuation, Requested
from hosts.azure_devops.connection import SdkConnection
from hosts.azure_devops.sdk import Clients
from hosts.errors import Forbidden, HostError, NotFound
from hosts.secrets import Secret

__all__ = ["PipelineTarget", "queue_next"]

_GRANT: Final = (
    "to let a run queue the next one, allow the project's build service identity "
    '"Queue builds" on this pipeline (Pipelines → ⋯ → Manage security); until then the '
    "schedule takes each next step"
)
TIMEOUT_S: Final = 30.0


@dataclass(frozen=True)
class PipelineTarget:
    """Which pipeline a queued run is of, and on which branch."""

    pipeline_id: int  # SYSTEM_DEFINITIONID
    ref: str  # BUILD_SOURCEBRANCH, e.g. refs/heads/main


def _run_pipeline(project: str, target: PipelineTarget) -> Any:
    """The SDK call, for a worker thread: one run of the pipeline on the branch."""

    def call(clients: Clients) -> Any:
        from azure.devops.v7_1.pipelines import (  # type: ignore[import-untyped]  # noqa: PLC0415
            models,  # the SDK is loaded already: this is its pipelines area's models
        )

        parameters = models.RunPipelineParameters(
            resources=models.RunResourcesParameters(
                repositories={"self": models.RepositoryResourceParameters(ref_name=target.ref)}
            )
        )
        # `Clients` makes any area's client of the adapter's connection, on first use.
        pipelines = clients._client("pipelines")
        return pipelines.run_pipeline(parameters, project, target.pipeline_id)

    return call


async def queue_next(
    settings: PipelineSettings, target: PipelineTarget, after: Continuation
) -> Requested:
    """Queue the next run of `target`; what Azure DevOps answered, as one line."""
    cache = settings.summary_dir / "pairbot-sdk-cache" if settings.summary_dir else None
    connection = SdkConnection(
        settings.collection_uri,
        Secret(settings.token.get_secret_value()),
        timeout_s=TIMEOUT_S,
        cache_dir=cache,
        sleep=asyncio.sleep,
        clock=time.monotonic,
        max_wait_s=60.0,
        read_attempts=3,
        backoff_s=1.0,
    )
    what = f"pipeline {target.pipeline_id} on {target.ref}"
    try:
        run = await connection.call(
            f"queue a run of {what}", _run_pipeline(settings.project, target), write=True
        )
    except Forbidden as err:
        return Requested(False, f"Azure DevOps refused the next run of {what}: {err}", _GRANT)
    except NotFound as err:
        return Requested(False, f"Azure DevOps knows no {what}: {err}")
    except HostError as err:
        return Requested(
            False, f"the next run was not queued ({err}); the schedule takes the next step"
        )
    queued = getattr(run, "id", None)
    which = f" (run {queued})" if queued is not None else ""
    return Requested(
        True, f"queued the next run of {what}{which} after {after.after} ({after.count} today)"
    )
