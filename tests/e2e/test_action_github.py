"""End to end on GitHub: the Action entry as a subprocess, one fresh runner per invocation.

A card goes from a `/pair implement` comment to `ready-for-merge` through scheduled ticks; the
run-state lives only on the `pair-state` branch of the bare repository the fake GitHub serves;
every pairbot comment exists once, the `pair-review` status sits on the reviewed head and the
card and its PR carry exactly one, the same, `pr-state:*` label after every invocation.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest

from hosts.markers import make_marker
from tests.e2e.action_harness import Invocation, action_repo
from tests.support.git import git
from tests.support.project import AGENT_COMMAND

pytestmark = pytest.mark.slow


@pytest.mark.slow_first(18)
def test_a_card_goes_from_a_comment_to_ready_for_merge(tmp_path: Path) -> None:
    # `.pair/config.yaml` declares no `hosts:` (docs/action.md): inside Actions that is GitHub.
    with action_repo(tmp_path, declare_hosts=False) as repo:
        first = repo.run(repo.comment_event("/pair implement"))
        assert first.code == 0, first.stderr + first.stdout
        line = "pairbot: hosts pm=github code=github (inferred from GitHub Actions)"
        assert first.stdout.count(line) == 1
        assert first.outputs["card"] == str(repo.card)
        assert first.outputs["transition"] == "propose"
        assert [r for r in repo.fake.reactions if r[2] == "eyes"]  # acknowledged
        runs = repo.until_quiet()
        transitions = [r.outputs["transition"] for r in runs if r.outputs.get("transition")]
        assert transitions == ["apply", "verify", "publish"]
        published, idle = runs[-2], runs[-1]
        assert published.outputs["status"] == "ready-for-merge"
        assert idle.outputs["status"] == "nothing-ready"  # a waiting card costs the tick nothing
        pull = repo.pull()
        assert pull is not None and published.outputs["pr"] == str(pull)
        reviewed = [
            r["data"]["head"]
            for r in repo.state_journal()
            if r.get("kind") == "cycle" and r["data"].get("event") == "reviewed"
        ]
        assert reviewed and repo.fake.pulls[pull].head_sha == reviewed[-1]
        stored = [  # stored once with the card's run-state, on the pair-state branch
            r["data"]["binding"]
            for r in repo.state_journal()
            if r.get("kind") == "cycle" and r["data"].get("event") == "hosts"
        ]
        assert stored == [{"version": 1, "pm": "github", "code": "github"}]
        statuses = repo.fake.statuses.get(reviewed[-1], [])
        assert statuses and statuses[-1]["state"] == "success"
        assert repo.state_labels(repo.card) == ["pr-state:ready-for-merge"]
        assert "ready-for-merge" in published.summary
        # The token was masked first and never reached the log otherwise, nor the summary.
        token = repo.fake.pat
        for run in [first, *runs]:
            assert run.stdout.startswith(f"::add-mask::{token}\n")
            shown = run.stdout.removeprefix(f"::add-mask::{token}\n")
            assert token not in shown + run.stderr + run.summary


@pytest.mark.slow_first(18)
def test_until_merged_merge_never_merges_the_reviewed_head(tmp_path: Path) -> None:
    with action_repo(tmp_path) as repo:
        repo.run(repo.comment_event("/pair implement until: merged merge: never"))
        runs = repo.until_quiet()
        assert runs[-2].outputs["status"] == "merged"
        pull = repo.pull()
        assert pull is not None and repo.fake.pulls[pull].merged
        main = subprocess.run(
            ["git", "rev-parse", "main"], cwd=repo.bare, capture_output=True, text=True, check=True
        ).stdout.strip()
        assert repo.fake.pulls[pull].merge_commit_sha == main


def test_a_read_only_commenter_is_refused_once_and_nothing_runs(tmp_path: Path) -> None:
    with action_repo(tmp_path) as repo:
        repo.fake.user("mallory")
        repo.fake.collaborators["mallory"] = "read"
        event = repo.comment_event("/pair implement", login="mallory")
        for _ in range(2):  # the same comment twice (a re-run): one reply, edited in place
            done = repo.run(event)
            assert done.code == 0
            assert done.outputs["transition"] == ""
        comment = event[1]["comment"]["id"]
        assert repo.markers() == {make_marker("reply", repo.card, run=str(comment)): 1}
        # A second comment is a second request: it gets its own one reply (the App's scheme).
        repo.run(repo.comment_event("/pair implement", login="mallory"))
        refusals = [m for m in repo.markers() if "pair:reply" in m]
        assert len(refusals) == 2 and set(repo.markers().values()) == {1}
        assert not repo.fake.pulls
        assert repo.state_journal() == []


def _script(repo, steps: dict[str, list[str]]) -> None:  # type: ignore[no-untyped-def]
    (repo.scratch / "script.json").write_text(json.dumps({"default": "ok", "steps": steps}))


def _said(runs: list[Invocation]) -> list[tuple[dict[str, str], str]]:
    """What each run put out and said last (its summary names why it did nothing): for a
    failure's message."""
    return [(r.outputs, (r.summary + r.stdout + r.stderr)[-1500:]) for r in runs]


def _reviewed(repo) -> list[str]:  # type: ignore[no-untyped-def]
    return [
        r["data"]["head"]
        for r in repo.state_journal()
        if r.get("kind") == "cycle" and r["data"].get("event") == "reviewed"
    ]


@pytest.mark.slow_first(25)
def test_a_blocking_finding_is_resolved_by_red_and_fix(tmp_path: Path) -> None:
    with action_repo(tmp_path) as repo:
        _script(repo, {"verify": ["findings-blocking", "ok"]})
        repo.run(repo.comment_event("/pair implement"))
        runs = repo.until_quiet()
        transitions = [r.outputs["transition"] for r in runs if r.outputs.get("transition")]
        assert transitions == ["apply", "verify", "red", "verify-red", "fix", "verify", "publish"]
        heads = _reviewed(repo)
        assert repo.fake.statuses[heads[0]][-1]["state"] == "failure"
        assert repo.fake.statuses[heads[-1]][-1]["state"] == "success"
        assert repo.state_labels(repo.card) == ["pr-state:ready-for-merge"]


@pytest.mark.slow_first(25)
def test_a_head_moved_before_merge_is_re_reviewed_instead(tmp_path: Path) -> None:
    with action_repo(tmp_path) as repo:
        repo.run(repo.comment_event("/pair implement until: merged merge: always"))
        runs = repo.until_quiet()
        assert runs[-1].outputs["status"] == "awaiting-human", _said(runs)
        pull = repo.pull()
        assert pull is not None
        # A maintainer pushes to the PR branch; GitHub sends pull_request.synchronize.
        work = tmp_path / "human"
        subprocess.run(
            ["git", "clone", "-q", "-b", f"pair/card-{repo.card}", str(repo.bare), str(work)],
            check=True,
        )
        (work / "extra.txt").write_text("a human change\n")
        for argv in (
            ["git", "add", "-A"],
            ["git", "-c", "user.name=h", "-c", "user.email=h@x.invalid", "commit", "-qm", "x"],
            ["git", "push", "-q", "origin", f"pair/card-{repo.card}"],
        ):
            subprocess.run(argv, cwd=work, check=True)
        moved = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=work, capture_output=True, text=True, check=True
        ).stdout.strip()
        done = repo.run(repo.synchronize_event(pull, moved))
        assert done.outputs["transition"] == "verify", done.stdout
        assert _reviewed(repo)[-1] == moved
        assert not repo.fake.pulls[pull].merged
        # pairbot's own push is not news: a synchronize for it runs nothing.
        again = repo.run(repo.synchronize_event(pull, moved))
        assert again.outputs["transition"] == ""
        runs = repo.until_quiet()  # the synthesis is republished for the new reviewed head
        assert runs[-1].outputs["status"] == "awaiting-human", _said(runs)
        approved = repo.run(repo.comment_event("/pair approve"))
        assert approved.outputs["transition"] == "merge"
        assert repo.fake.pulls[pull].merged
        repo.assert_invariants()


@pytest.mark.slow_first(22)
def test_a_scope_decision_comment_is_applied_once(tmp_path: Path) -> None:
    with action_repo(tmp_path) as repo:
        _script(repo, {"verify": ["scope-proposal", "ok"]})
        repo.run(repo.comment_event("/pair implement"))
        runs = repo.until_quiet()
        assert runs[-1].outputs["status"] == "awaiting-scope-decision"
        pull = repo.pull()
        assert pull is not None
        packet = next(c for c in repo.fake.comments.values() if "pair:scope-packet" in c.body)
        baseline = packet.body.split('"scopeBaselineHash": "')[1].split('"')[0]
        decision = {
            "schemaVersion": 1,
            "scopeBaselineHash": baseline,
            "decisions": [{"id": "sc-1", "action": "new-card"}],
        }
        body = f"```json\n{json.dumps(decision)}\n```"
        issues_before = len(repo.fake.issues)
        for _ in range(2):  # the second delivery is a replay
            done = repo.run(repo.comment_event(body, number=pull))
            assert done.code == 0, done.stderr
        assert len(repo.fake.issues) == issues_before + 1
        runs = repo.until_quiet()
        assert repo.state_labels(repo.card) == ["pr-state:ready-for-merge"]


@pytest.mark.slow_first(10)
@pytest.mark.parametrize("persist", [True, False], ids=["persist", "no-persist"])
@pytest.mark.parametrize("version", [4, 6], ids=["checkout-v4", "checkout-v6"])
def test_each_actions_checkout_takes_a_comment_and_a_tick_and_the_agent_sees_no_token(
    tmp_path: Path, version: int, persist: bool
) -> None:
    """actions/checkout v4 (the token as an extraheader in .git/config) and v6 (a credentials
    file under RUNNER_TEMP, included by `includeIf.gitdir`), with `persist-credentials` true
    and false: a comment's first step, then a scheduled tick's (GITHUB_REF names the default
    branch; the schedule payload names nothing), each on a fresh shallow checkout."""
    with action_repo(tmp_path) as repo:
        options = {"persist_credentials": persist, "checkout_version": version}
        first = repo.run(repo.comment_event("/pair implement"), **options)
        assert first.outputs["transition"] == "propose", first.stderr + first.stdout
        second = repo.run(repo.schedule_event(), **options)
        assert second.outputs["transition"] == "apply", second.stdout + second.stderr
        card = f"pair/card-{repo.card}"
        assert git(repo.bare, "merge-base", "--is-ancestor", "main", card) == ""  # from main
        for made in repo.checkouts:
            # The branch actions/checkout left, shallow, stays checked out: pairbot never
            # moves it. No credential is left for an agent, included files counted.
            assert git(made.path, "symbolic-ref", "HEAD") == "refs/heads/main"
            assert (made.path / ".git" / "shallow").exists()
            shown = git(made.path, "config", "--list", "--show-origin")
            assert "extraheader" not in shown.lower(), shown
            if made.credentials_file is not None:  # v6, persisted: only the runner reads it
                assert made.credentials_file.stat().st_mode & 0o077 == 0
        calls = (repo.scratch / "agent-log.jsonl").read_text().splitlines()
        for call in map(json.loads, calls):
            leaked = [
                n
                for n in call["env"]
                if n.startswith(("GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"))
                or "TOKEN" in n
            ]
            assert not leaked


@pytest.mark.slow_first(25)
def test_a_repository_with_only_the_workflow_gets_a_merged_reviewed_pull(tmp_path: Path) -> None:
    # No `.pair/` at all: the agent comes from the workflow's inputs, the hosts from the runner.
    agent = shlex.join(AGENT_COMMAND)
    inputs = {"INPUT_AGENT": "command", "INPUT_AGENT_COMMAND": agent}
    with action_repo(tmp_path, config=False) as repo:
        first = repo.run(
            repo.comment_event("/pair implement until: merged merge: never"), extra_env=inputs
        )
        assert first.code == 0, first.stderr + first.stdout
        assert "pairbot: hosts pm=github code=github (inferred from GitHub Actions)" in first.stdout
        assert first.outputs["status"] == "awaiting-approval"  # the default: plans are approved
        approved = repo.run(repo.comment_event("/pair approve"), extra_env=inputs)
        assert approved.code == 0, approved.stderr + approved.stdout
        runs = [first, approved, *repo.until_quiet(extra_env=inputs)]
        for run in runs:
            assert "Traceback" not in run.stdout + run.stderr
        assert runs[-2].outputs["status"] == "merged", [r.outputs for r in runs]
        pull = repo.pull()
        assert pull is not None and repo.fake.pulls[pull].merged
        reviewed = [
            r["data"]["head"]
            for r in repo.state_journal()
            if r.get("kind") == "cycle" and r["data"].get("event") == "reviewed"
        ]
        assert reviewed and repo.fake.statuses[reviewed[-1]][-1]["state"] == "success"
        assert repo.state_labels(repo.card) == ["pr-state:merged"]
        synthesis = [m for m in repo.markers() if "synthesis" in m]
        assert len(synthesis) == 1, repo.markers()
