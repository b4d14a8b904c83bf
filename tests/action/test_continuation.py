"""A run that took a step asks for the next one: the decision under the lock (gates, the daily
bound), the settings, GitHub's workflow and ref, and Azure Pipelines' queued run against the
loopback fake Azure DevOps (the SDK's own `run_pipeline`)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from action.azure.continuation import PipelineTarget, queue_next
from action.azure.settings import PipelineSettings
from action.continuation import WorkflowTarget, workflow_target
from action.run.continuation import Continuation, ContinuationSettings, read_continuation
from action.run.next_run import plan_continuation
from action.run.outcome import Outcome, summary_markdown
from action.statefiles import CONTINUATION_FILE, is_state_path
from app.errors import UserError
from tests.action.test_azure_settings import pipeline_env
from tests.support import fake_azure
from tests.support.fake_azure import PROJECT, FakeAzureDevOps

TODAY = "2026-03-10"
ADVANCED = Outcome(status="awaiting-verify", card=7, transition="apply")


def card_batch(root: Path, card: int, label: str) -> None:
    """A card batch whose journal's last cycle label is `label` (what a tick reads)."""
    batch = root / ".pair" / "batches" / f"card-{card}"
    (batch / "run").mkdir(parents=True)
    (batch / "batch.yaml").write_text("name: x\n")
    record: dict[str, Any] = {"kind": "cycle", "key": f"card-{card}"}
    record |= {
        "at": f"{TODAY}T10:00:00+00:00",
        "data": {"event": "label", "state": f"pr-state:{label}"},
    }
    (batch / "run" / "journal.jsonl").write_text(json.dumps(record) + "\n")


def plan(root: Path, outcome: Outcome = ADVANCED, limit: int = 50, **kw: Any) -> Any:
    settings = ContinuationSettings(daily_limit=limit)
    return plan_continuation(root, outcome, settings, kw.get("today", TODAY), stepped=True)


def test_a_step_that_leaves_a_card_runnable_asks_for_the_next_run_and_counts_it(
    tmp_path: Path,
) -> None:
    card_batch(tmp_path, 7, "awaiting-verify")
    first = plan(tmp_path)
    assert first.next_run == Continuation(after="card-7", count=1)
    assert plan(tmp_path).next_run == Continuation(after="card-7", count=2)
    stored = json.loads((tmp_path / CONTINUATION_FILE).read_text())
    assert stored == {"day": TODAY, "runs": {"card-7": 2}}
    assert is_state_path(CONTINUATION_FILE)  # it travels on pair-state
    # A new day counts from nothing.
    assert plan(tmp_path, today="2026-03-11").next_run == Continuation("card-7", 1)


@pytest.mark.parametrize(
    "label",
    ["awaiting-approval", "needs-input", "awaiting-scope-decision", "ready-for-merge", "merged"],
)
def test_no_next_run_when_every_card_is_at_a_gate(tmp_path: Path, label: str) -> None:
    card_batch(tmp_path, 7, label)
    at_gate = Outcome(status=label, card=7, transition="publish")
    assert plan(tmp_path, at_gate).next_run is None
    assert not (tmp_path / CONTINUATION_FILE).exists()


def test_another_active_card_keeps_the_chain_going_after_one_reaches_a_gate(
    tmp_path: Path,
) -> None:
    card_batch(tmp_path, 7, "ready-for-merge")
    card_batch(tmp_path, 8, "awaiting-verify")
    done = plan(tmp_path, Outcome(status="ready-for-merge", card=7, transition="publish"))
    assert done.next_run == Continuation(after="card-7", count=1)


def test_a_run_that_took_no_step_asks_for_nothing(tmp_path: Path) -> None:
    card_batch(tmp_path, 7, "awaiting-verify")
    for outcome in (
        Outcome(status="nothing-ready"),
        Outcome(status="ignored"),
        Outcome(status="error", code=1),
        Outcome(status="awaiting-verify", card=7, transition="verify", code=1),  # blocked
    ):
        assert plan(tmp_path, outcome).next_run is None, outcome
    quiet_tick = plan_continuation(tmp_path, ADVANCED, ContinuationSettings(), TODAY, stepped=False)
    assert quiet_tick.next_run is None
    off = ContinuationSettings(enabled=False)
    assert plan_continuation(tmp_path, ADVANCED, off, TODAY, stepped=True).next_run is None


def test_the_daily_bound_ends_a_runaway_loop_and_says_so(tmp_path: Path) -> None:
    card_batch(tmp_path, 7, "awaiting-verify")
    assert plan(tmp_path, limit=2).next_run is not None
    assert plan(tmp_path, limit=2).next_run is not None
    stopped = plan(tmp_path, limit=2)
    assert stopped.next_run is None
    assert "card-7 took 2 chained runs today (the limit is 2)" in stopped.note
    summary = summary_markdown(Outcome(status="awaiting-verify", continuation=stopped.note), "#")
    assert "Next run: card-7 took 2 chained runs today" in summary


def test_an_unreadable_counter_counts_nothing(tmp_path: Path) -> None:
    card_batch(tmp_path, 7, "awaiting-verify")
    (tmp_path / CONTINUATION_FILE).write_text("{not json")
    assert plan(tmp_path).next_run == Continuation("card-7", 1)


def test_the_settings_read_the_switch_and_the_bound_and_name_a_bad_one() -> None:
    names = {"enabled": ("C",), "limit": ("L",), "labels": ("input continue", "input limit")}
    assert read_continuation({}, **names) == ContinuationSettings(True, 50)  # type: ignore[arg-type]
    read = read_continuation({"C": "false", "L": "3"}, **names)  # type: ignore[arg-type]
    assert read == ContinuationSettings(False, 3)
    with pytest.raises(UserError, match=r"input continue='maybe' is not a switch; allowed"):
        read_continuation({"C": "maybe"}, **names)  # type: ignore[arg-type]
    for bad in ("0", "-1", "ten", "10001"):
        with pytest.raises(UserError, match=r"input limit=.* allowed: a whole number from 1"):
            read_continuation({"L": bad}, **names)  # type: ignore[arg-type]


def test_the_workflow_is_the_runs_own_file_on_a_branch_it_can_name() -> None:
    env = {
        "GITHUB_WORKFLOW_REF": "octo/hello/.github/workflows/pairbot.yml@refs/heads/main",
        "GITHUB_REF": "refs/heads/main",
    }
    assert workflow_target(env, {}) == WorkflowTarget("pairbot.yml", "refs/heads/main")
    # A pull_request run's ref is the merge ref: the default branch instead.
    pull = {**env, "GITHUB_REF": "refs/pull/5/merge"}
    event = {"repository": {"default_branch": "trunk"}}
    assert workflow_target(pull, event) == WorkflowTarget("pairbot.yml", "refs/heads/trunk")
    assert "names no default branch" in str(workflow_target(pull, {}))
    assert "not set" in str(workflow_target({}, {}))
    odd = {**env, "GITHUB_WORKFLOW_REF": "octo/hello/x.sh@refs/heads/main"}
    assert "names no workflow file" in str(workflow_target(odd, {}))


# -- Azure Pipelines: the queued run, against the fake's SDK surface -----------------------------

PIPELINES_LOCATION = (
    "7859261e-d2e9-4a68-b820-a5d84cc5bb3d",
    "pipelines",
    "runs",
    "{project}/_apis/{area}/{pipelineId}/{resource}/{runId}",
    1,
)


class PipelinesFake(FakeAzureDevOps):
    """The fake Azure DevOps with the Runs API (Runs - Run Pipeline, 7.1): the run a pipeline
    queues is recorded, its answer the documented `Run` shape."""

    def __init__(self, token: str, root: Path) -> None:
        super().__init__(token, root)
        self.queued: list[tuple[str, Any]] = []

    def _route(self, req: Any) -> tuple[int, Any]:
        rest = req.path.removeprefix(f"/{fake_azure.ORG}")
        if req.method == "POST" and rest.endswith("/runs") and "/_apis/pipelines/" in rest:
            self.queued.append((rest, req.json()))
            return 200, {"id": 1234, "name": "20260310.2", "state": "inProgress"}
        status, body = super()._route(req)
        if req.method == "OPTIONS":  # the SDK finds the Runs API's route here
            lid, area, resource, template, version = PIPELINES_LOCATION
            body["value"].append(
                {
                    "id": lid,
                    "area": area,
                    "resourceName": resource,
                    "routeTemplate": template,
                    "resourceVersion": version,
                    "minVersion": "1.0",
                    "maxVersion": "7.1",
                    "releasedVersion": "7.0",
                }
            )
            body["count"] = len(body["value"])
        return status, body


def test_a_pipeline_queues_its_next_run_through_the_sdk(tmp_path: Path) -> None:
    token = "azure-pat-0123456789"  # noqa: S105 - the fake's
    fake = PipelinesFake(token, tmp_path / "fake")
    with fake:
        env = pipeline_env(
            SYSTEM_COLLECTIONURI=fake.base_url + "/",
            SYSTEM_TEAMPROJECT=PROJECT,
            SYSTEM_ACCESSTOKEN=token,
            AGENT_TEMPDIRECTORY=str(tmp_path / "temp"),
        )
        settings = PipelineSettings.from_env(env)
        target = PipelineTarget(17, "refs/heads/main")
        after = Continuation("card-7", 3)
        answer = asyncio.run(asyncio.wait_for(queue_next(settings, target, after), 60))
        assert answer.ok, answer
        assert answer.line == (
            "queued the next run of pipeline 17 on refs/heads/main (run 1234) after card-7 "
            "(3 today)"
        )
        assert fake.queued == [
            (
                f"/{PROJECT}/_apis/pipelines/17/runs",
                {"resources": {"repositories": {"self": {"refName": "refs/heads/main"}}}},
            )
        ]
        # Refused: the build service may not queue builds. Said, never raised.
        fake.fail_next("POST", r"/_apis/pipelines/17/runs", 403)
        refused = asyncio.run(asyncio.wait_for(queue_next(settings, target, after), 60))
        assert not refused.ok
        assert "Azure DevOps refused the next run of pipeline 17" in refused.line
        assert '"Queue builds"' in refused.remedy
        assert fake.unexpected == []
