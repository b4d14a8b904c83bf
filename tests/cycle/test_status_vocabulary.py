"""Every `pr-state:*` a card shows is true: each failure is set where it happens, a run that
died mid-step is `interrupted`, the merge re-reads `pair-review` on the exact head, `abandon`
closes the PR, a new cycle has its own run id and comments, and the tracking comment names
the step that really runs next.

The real cycle on the local host, with the scripted agent through the real process runtime.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from app.cycle.driver import advance_card
from app.hosting import BoundHosts
from hosts.errors import HostUnavailable
from tests.support.card_project import CardProject

REPO = Path(__file__).resolve().parents[2]


def tracking_body(project: CardProject) -> str:
    bodies = [c["body"] for c in project.comments(project.card) if "pair:tracking" in c["body"]]
    assert len(bodies) == 1, bodies
    return str(bodies[0])


def pulls(project: CardProject) -> dict[int, dict[str, Any]]:
    return {
        int(p.stem): json.loads(p.read_text())
        for p in sorted((project.forge.root / "pulls").glob("*.json"))
    }


# ---------------------------------------------------------------- failures


@pytest.mark.parametrize(
    ("script", "status"),
    [
        pytest.param({"propose": ["crash", "ok"]}, "failed-preparation", id="propose-crashed"),
        pytest.param({"apply": ["crash", "ok"]}, "failed-implement", id="apply-crashed"),
        pytest.param({"verify": ["crash", "ok"]}, "failed-verify", id="verify-crashed"),
        pytest.param({"verify": ["lie", "ok"]}, "failed-verify", id="verify-without-verdict"),
    ],
)
def test_each_failure_status_is_set_where_its_step_fails(
    tmp_path: Path, script: dict[str, list[str]], status: str
) -> None:
    project = CardProject.create(tmp_path)
    project.script(script)
    steps = [project.command("implement"), *project.until_quiet()]
    failed = steps[-1]
    assert (failed.result.state, failed.status) == ("blocked", status)
    assert project.labels(project.card) == [f"pr-state:{status}"]
    assert failed.explanation is not None
    assert "/pair retry" in failed.explanation.what_you_can_do
    body = tracking_body(project)
    assert f"`pr-state:{status}`" in body
    # It stays failed (nothing runs on its own) until a person retries; then it goes on.
    again = project.step()
    assert (again.result.state, again.status) == ("blocked", status)
    retried = project.command("retry")
    assert retried.result.state == "advanced"
    assert project.until_quiet()[-1].status == "ready-for-merge"


def test_a_red_that_crashes_is_blocked_not_a_spent_fix_loop(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path)
    project.script({"verify": ["findings-blocking", "ok"], "red": ["crash", "ok"]})
    project.command("implement")
    last = project.until_quiet()[-1]
    assert (last.result.transition, last.status) == ("red", "blocked")


# ---------------------------------------------------------------- interrupted


_STEP = """
import asyncio, sys
from pathlib import Path
from hosts.local import LocalForge
from app.cycle.driver import advance_card
from app.hosting import BoundHosts
from hosts.errors import HostUnavailable
from tests.support.card_project import CardProject
root, forge, scratch, card = sys.argv[1:]
project = CardProject(Path(root), LocalForge(Path(forge)), Path(scratch), int(card))
project.step()
"""


def _agents_of(scratch: Path) -> list[int]:
    """Live processes started with this test's agent scratch directory in their environment."""
    marker = f"PAIR_TEST_AGENT_DIR={scratch}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with contextlib.suppress(OSError):
                if marker in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
    return found


def _wait(condition: object, what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds the agent via /proc")
def test_a_run_killed_mid_step_leaves_the_card_interrupted_until_retried(
    tmp_path: Path,
) -> None:
    project = CardProject.create(tmp_path)
    project.script({"apply": ["hang", "ok"]})
    project.command("implement")  # propose
    log = project.scratch / "agent-log.jsonl"
    calls = log.read_text().count("\n")
    where = (project.root, project.forge.root, project.scratch, project.card)
    run = subprocess.Popen(
        [sys.executable, "-c", _STEP, *map(str, where)],
        cwd=REPO,
        start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        # The agent of `apply` is running: the step's "doing" is journaled, its "done" is not.
        _wait(lambda: log.read_text().count("\n") > calls, "the apply agent to start")
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait(timeout=30)
        for pid in _agents_of(project.scratch):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(os.getpgid(pid), signal.SIGKILL)
        _wait(lambda: not _agents_of(project.scratch), "the orphaned agent to die", 30)
    started = [r for r in project.journal() if r["kind"] == "step-started"]
    assert started[-1]["transition"] == "apply"
    assert project.journal()[-1]["kind"] != "outcome"

    seen = project.step()
    assert (seen.result.state, seen.status) == ("nothing-ready", "interrupted")
    assert "the run stopped during `apply`" in (seen.result.message or "")
    assert project.labels(project.card) == ["pr-state:interrupted"]
    assert "/pair retry" in tracking_body(project)
    assert project.cycle_events("interrupted") == [
        {
            "event": "interrupted",
            "transition": "apply",
            "session": started[-1]["session"],
            "at": started[-1]["at"],
        }
    ]
    # Seen once: a later step runs nothing and records nothing.
    size = len(project.journal())
    assert project.step().status == "interrupted"
    assert len(project.journal()) == size

    resumed = project.command("retry")
    assert (resumed.result.transition, resumed.result.state) == ("apply", "advanced")
    assert project.until_quiet()[-1].status == "ready-for-merge"


class PushFailsOnce:
    """The local host, whose first push answers like a code host that is down."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.failed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def push_branch(self, *args: Any, **kwargs: Any) -> str:
        if not self.failed:
            self.failed = True
            raise HostUnavailable("the code host answered 502 Bad Gateway")
        return str(await self.inner.push_branch(*args, **kwargs))


def test_a_step_that_fails_with_a_reported_error_is_run_again_not_interrupted(
    tmp_path: Path,
) -> None:
    project = CardProject.create(tmp_path)
    project.command("implement")  # propose
    env = project.env()
    failing = dataclasses.replace(
        env, hosts=BoundHosts(pm=env.hosts.pm, code=PushFailsOnce(env.hosts.code))
    )
    with pytest.raises(HostUnavailable):
        asyncio.run(advance_card(failing, project.card))
    assert project.cycle_events("step-raised") == [
        {"event": "step-raised", "transition": "apply", "error": "HostUnavailable"}
    ]
    again = project.step()
    assert (again.result.transition, again.result.state) == ("apply", "advanced")
    assert not project.cycle_events("interrupted")


# ---------------------------------------------------------------- the merge


@pytest.mark.parametrize("what", ["failure", "stale"])
def test_the_merge_re_reads_pair_review_on_the_exact_head(tmp_path: Path, what: str) -> None:
    project = CardProject.create(tmp_path)
    project.command("implement until: merged merge: always")
    assert project.until_quiet()[-1].status == "awaiting-human"
    pull = project.pull()
    assert pull is not None
    head = project.cycle_events("reviewed")[-1]["head"]
    statuses = project.forge.root / "statuses" / f"{pull}.json"
    if what == "failure":  # another writer turned the review status red after the review
        asyncio.run(project.host.set_review_status(pull, head, "failure", "someone else's check"))
    else:  # the only pair-review is on another commit than the head to merge
        data = json.loads(statuses.read_text())
        data = {"0" * 40: data[head]}
        statuses.write_text(json.dumps(data))

    refused = project.command("approve")
    assert (refused.result.state, refused.status) == ("blocked", "blocked")
    assert "merge refused" in (refused.result.message or "")
    assert pulls(project)[pull]["state"] == "open"
    assert not project.cycle_events("merged")
    body = tracking_body(project)
    assert "merge refused" in body
    assert project.labels(project.card) == ["pr-state:blocked"]

    if what == "failure":  # the status is success again: a retry reads it and merges
        asyncio.run(project.host.set_review_status(pull, head, "success", "pairbot: converged"))
        merged = project.command("retry")
        assert merged.status == "merged"
        assert project.cycle_events("merged")[-1]["head"] == head


# ---------------------------------------------------------------- abandon, a new cycle


def test_abandon_closes_the_pr_and_a_new_cycle_has_its_own_run_and_comments(
    tmp_path: Path,
) -> None:
    project = CardProject.create(tmp_path)
    project.command("implement")
    assert project.until_quiet()[-1].status == "ready-for-merge"
    first = project.pull()
    assert first is not None
    first_run = project.cycle_events("bound")[-1]["run"]
    first_comments = project.comments(first)

    abandoned = project.command("abandon")
    assert abandoned.status == "abandoned"
    assert f"PR #{first} closed" in (abandoned.result.message or "")
    assert pulls(project)[first]["state"] == "closed"
    assert project.cycle_events("pr-closed") == [{"event": "pr-closed", "number": first}]
    assert abandoned.explanation is not None
    assert f"PR #{first} was closed" in abandoned.explanation.why
    assert f"PR \\#{first} was closed" in tracking_body(project)  # Markdown-escaped
    project.command("status")  # asking again closes nothing twice
    assert len(project.cycle_events("pr-closed")) == 1

    project.command("implement")  # the next cycle: its own run id, PR and comments
    runs = [event["run"] for event in project.cycle_events("bound")]
    assert runs[-1] != first_run
    for _ in range(20):
        step = project.step()
        if step.result.state in ("nothing-ready", "blocked", "awaiting-approval"):
            break
    assert step.status == "ready-for-merge"
    second = step.pr
    assert second is not None and second != first
    assert project.comments(first) == first_comments  # the first cycle's comments are kept
    markers = [c["body"].splitlines()[0] for c in project.comments(second)]
    assert any(f"run:{runs[-1]}" in m and "pair:review" in m for m in markers), markers
    assert any(f"run:{runs[-1]}" in m and "pair:synthesis" in m for m in markers), markers
    assert not any(first_run in m for m in markers)
    assert project.labels(project.card) == ["pr-state:ready-for-merge"]
    labels = pulls(project)[second]["labels"]
    assert [lb for lb in labels if lb.startswith("pr-state:")] == ["pr-state:ready-for-merge"]


@pytest.mark.parametrize("merged_by", ["pairbot", "someone"])
def test_abandon_leaves_a_merged_pr_as_it_is(tmp_path: Path, merged_by: str) -> None:
    project = CardProject.create(tmp_path)
    until = "until: merged merge: never" if merged_by == "pairbot" else ""
    project.command(f"implement {until}".strip())
    last = project.until_quiet()[-1]
    pull = project.pull()
    assert pull is not None
    if merged_by == "someone":  # the maintainer merged it by hand
        assert last.status == "ready-for-merge"
        head = project.cycle_events("reviewed")[-1]["head"]
        assert asyncio.run(project.host.merge(pull, head, "squash")).merged
    abandoned = project.command("abandon")
    assert abandoned.status == "abandoned"
    said = "is merged" if merged_by == "pairbot" else "was not closed"
    assert f"PR #{pull} {said}" in (abandoned.result.message or "")
    assert pulls(project)[pull]["state"] == "merged"
    assert not project.cycle_events("pr-closed")


# ---------------------------------------------------------------- the next step


def test_after_a_converged_verify_the_tracking_comment_names_publish(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path)
    project.command("implement")
    step = project.step()
    while step.result.transition != "verify":
        step = project.step()
    assert step.explanation is not None
    assert step.explanation.next == "publish"
    body = tracking_body(project)
    assert "**Next step:** publish: publish the synthesis comment and read it back" in body
    assert "nothing is runnable" not in body
    published = project.step()
    assert published.result.transition == "publish"


def test_until_merged_names_the_merge_after_publishing(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path)
    project.command("implement until: merged merge: never")
    step = project.step()
    while step.result.transition != "publish":
        step = project.step()
    assert step.explanation is not None and step.explanation.next == "merge"
    assert project.step().status == "merged"


def test_spent_fix_rounds_are_failed_fix_with_no_next_step(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path, cycle={"maxFixRounds": 1})
    project.script({"verify": ["findings-blocking", "findings-blocking"]})
    project.command("implement")
    last = project.until_quiet()[-1]
    assert last.status == "failed-fix"
    assert last.explanation is not None and last.explanation.next is None
    assert project.labels(project.card) == ["pr-state:failed-fix"]
    assert "**Next step:** none" in tracking_body(project)
