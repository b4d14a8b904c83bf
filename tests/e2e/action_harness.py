"""Run the Action entry (`python -m action`) as a subprocess against a fake GitHub on loopback.

Every invocation is a fresh runner: a new checkout of the served repository made the way
actions/checkout makes it (tests/support/checkouts.py: init, the token persisted, a depth-1
fetch of GITHUB_SHA into `origin/<default branch>`, `checkout -B`; v4 by default, v6 and
`persist-credentials: false` on request), a real event file built from
`tests/fixtures/github-webhooks/`, GITHUB_REF and GITHUB_SHA as the runner sets them for
`issue_comment` and `schedule`, its own RUNNER_TEMP, GITHUB_OUTPUT and GITHUB_STEP_SUMMARY.
Run-state survives only on the `pair-state` branch of the bare repository, and card branches
only as pushed — exactly what a real runner keeps.
The scripted agent runs through the real runtime with the `command` adapter.
"""

from __future__ import annotations

import copy
import itertools
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.support.card_project import project_config
from tests.support.checkouts import Checkout, actions_checkout
from tests.support.fake_github import FakeGitHub
from tests.support.git import git, git_env, init_bare, init_repo, run_git
from tests.support.github_server import (
    WallClock,
    accept_actions_token,
    github_env,
    serve_fake_github,
)
from tests.support.postures import Posture
from tests.support.project import PAIRBOT, agent_dir

WEBHOOKS = Path(__file__).resolve().parents[1] / "fixtures" / "github-webhooks"
REPO_ROOT = Path(__file__).resolve().parents[2]
MAINTAINER = "octocat"


def webhook(name: str) -> dict[str, Any]:
    return json.loads((WEBHOOKS / name).read_text())


@dataclass
class Invocation:
    """One finished run of the Action."""

    code: int
    stdout: str
    stderr: str
    outputs: dict[str, str]
    summary: str


@dataclass
class ActionRepo:
    """A bare repository served by a fake GitHub, and how to run the Action on it."""

    tmp: Path
    fake: FakeGitHub
    bare: Path
    base_url: str
    card: int
    scratch: Path
    runs: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    checkouts: list[Checkout] = field(default_factory=list)  # each run's, in order
    # Who the runner runs the job as (tests/support/postures.py); None: this test's own user.
    as_user: Posture | None = None

    # ------------------------------------------------------------ events

    def comment_event(self, body: str, *, login: str = MAINTAINER, number: int | None = None):
        number = number or self.card
        comment_id = self.fake.add_comment(number, body, login)
        user = self.fake.user(login)
        event = copy.deepcopy(webhook("issue_comment/created.json"))
        event["issue"]["number"] = number
        event["issue"].pop("pull_request", None)
        if number in self.fake.pulls:  # GitHub marks a PR's issue this way
            api = f"{self.base_url}/repos/{self.fake.owner}/{self.fake.repo}"
            event["issue"]["pull_request"] = {"url": f"{api}/pulls/{number}"}
        event["comment"].update(id=comment_id, body=body)
        event["comment"]["user"].update(login=login, id=user.id, type=user.type)
        event["sender"].update(login=login, id=user.id, type=user.type)
        event["repository"]["full_name"] = f"{self.fake.owner}/{self.fake.repo}"
        event["repository"]["default_branch"] = self.default_branch()
        return "issue_comment", event

    def default_branch(self) -> str:
        """The bare repository's default branch, as GitHub names it in every event."""
        head = subprocess.run(
            ["git", "-C", str(self.bare), "symbolic-ref", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        )
        return head.stdout.strip()

    @staticmethod
    def schedule_event() -> tuple[str, dict[str, Any]]:
        return "schedule", {"schedule": "*/5 * * * *"}

    def synchronize_event(self, pull: int, head: str) -> tuple[str, dict[str, Any]]:
        event = copy.deepcopy(webhook("pull_request/synchronize.json"))
        event["number"] = pull
        event["pull_request"]["number"] = pull
        event["pull_request"]["head"]["sha"] = head
        event["pull_request"]["head"]["ref"] = f"pair/card-{self.card}"
        event["repository"]["default_branch"] = self.default_branch()
        return "pull_request", event

    # ------------------------------------------------------------ running

    def popen(
        self,
        event: tuple[str, dict[str, Any]],
        *,
        persist_credentials: bool = True,
        checkout_version: int = 4,
        extra_env: Mapping[str, str] | None = None,
    ) -> tuple[subprocess.Popen[str], Path]:
        run = next(self.runs)
        home = self.tmp / f"run-{run}"
        home.mkdir()
        runner_temp = Path((extra_env or {}).get("RUNNER_TEMP") or home / "runner-temp")
        branch = self.default_branch()
        # The job's `actions/checkout` step (no `ref:`): GITHUB_SHA, the default branch's tip
        # when the event was queued, fetched alone into origin/<branch> and checked out.
        made = actions_checkout(
            self.server,
            f"{self.server}/{self.fake.owner}/{self.fake.repo}",  # the URL form it uses
            home / "ws",
            branch=branch,
            token=self.fake.pat,
            runner_temp=runner_temp,
            version=checkout_version,
            persist_credentials=persist_credentials,
            sha=run_git(self.bare, "rev-parse", branch).stdout.strip(),
        )
        self.checkouts.append(made)
        name, payload = event
        (home / "event.json").write_text(json.dumps(payload))
        env = {
            # A runner's git: no GIT_* or config of this machine, and no identity but the one
            # pairbot gives its own commits.
            **git_env(identity=None),
            **github_env(self.fake, self.base_url),
            **made.env,  # GITHUB_REF, GITHUB_SHA, GITHUB_WORKSPACE, RUNNER_TEMP
            "PATH": f"{PAIRBOT.parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "HOME": str(home),
            "GITHUB_ACTIONS": "true",  # every runner job has it; the binding follows it
            "GITHUB_EVENT_NAME": name,
            "GITHUB_EVENT_PATH": str(home / "event.json"),
            "GITHUB_RUN_ID": str(1000 + run),
            "GITHUB_OUTPUT": str(home / "output"),
            "GITHUB_STEP_SUMMARY": str(home / "summary.md"),
            "PAIR_TEST_AGENT_DIR": str(self.scratch),
            "PAIR_GITHUB_WRITE_SPACING_S": "0",
            # What action.yml computes for the default `github-token: ${{ github.token }}`.
            "PAIR_GITHUB_TOKEN_IS_ACTIONS": "true",
            **{k: v for k, v in os.environ.items() if k.startswith("COVERAGE_")},
            **(extra_env or {}),
        }
        argv = [sys.executable, "-m", "action"]
        if self.as_user is not None:
            # The runner's user owns its workspace and HOME, as a runner's checkout leaves them;
            # the run's environment is built from nothing but the job's
            # (tests/support/postures.py: no coverage hook).
            self.as_user.own(home)
            argv, env = self.as_user.job(argv, env)
        process = subprocess.Popen(
            argv,
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        return process, home

    @property
    def server(self) -> str:
        return self.base_url.removesuffix("/api/v3")

    def run(
        self,
        event: tuple[str, dict[str, Any]],
        timeout: float = 240,
        *,
        persist_credentials: bool = True,
        checkout_version: int = 4,
        extra_env: Mapping[str, str] | None = None,
    ) -> Invocation:
        process, home = self.popen(
            event,
            persist_credentials=persist_credentials,
            checkout_version=checkout_version,
            extra_env=extra_env,
        )
        stdout, stderr = process.communicate(timeout=timeout)
        return Invocation(
            code=process.returncode,
            stdout=stdout,
            stderr=stderr,
            outputs=read_outputs(home / "output"),
            summary=(home / "summary.md").read_text() if (home / "summary.md").exists() else "",
        )

    def until_quiet(
        self, limit: int = 15, *, extra_env: Mapping[str, str] | None = None
    ) -> list[Invocation]:
        runs: list[Invocation] = []
        for _ in range(limit):
            done = self.run(self.schedule_event(), extra_env=extra_env)
            assert done.code in (0, 1), done.stderr + done.stdout
            runs.append(done)
            self.assert_invariants()
            if done.outputs.get("status") in ("nothing-ready", "ignored") or not done.outputs.get(
                "transition"
            ):
                return runs
        raise AssertionError([r.outputs for r in runs])

    # ------------------------------------------------------------ observing

    def pull(self) -> int | None:
        return min(self.fake.pulls) if self.fake.pulls else None

    def markers(self) -> dict[str, int]:
        return pair_markers(self.fake)

    def state_labels(self, number: int) -> list[str]:
        return [lb for lb in self.fake.issues[number].labels if lb.startswith("pr-state:")]

    def assert_invariants(self) -> None:
        duplicated = {m: n for m, n in self.markers().items() if n > 1}
        assert not duplicated, duplicated
        assert len(self.state_labels(self.card)) <= 1, self.state_labels(self.card)
        pull = self.pull()
        if pull is not None and self.state_labels(self.card):
            assert self.state_labels(pull) == self.state_labels(self.card)
        assert self.fake.unexpected == [], self.fake.unexpected
        # The run's own GITHUB_TOKEN is known to act as github-actions[bot]: never asked.
        assert ("GET", "/user") not in [(m, p) for _, m, p in self.fake.arrivals]

    def state_journal(self) -> list[dict[str, Any]]:
        show = run_git(
            self.bare, "show", f"pair-state:.pair/batches/card-{self.card}/run/journal.jsonl"
        )
        return [json.loads(line) for line in show.stdout.splitlines() if line]


def read_outputs(path: Path) -> dict[str, str]:
    """GITHUB_OUTPUT's heredoc blocks as a mapping."""
    if not path.exists():
        return {}
    outputs: dict[str, str] = {}
    lines = iter(path.read_text().splitlines())
    for line in lines:
        name, _, delimiter = line.partition("<<")
        value: list[str] = []
        for inner in lines:
            if inner == delimiter:
                break
            value.append(inner)
        outputs[name] = "\n".join(value)
    return outputs


def project_files(
    cycle: Mapping[str, Any] | None = None, *, declare_hosts: bool = True, config: bool = True
) -> dict[str, str]:
    if not config:  # only the workflow of docs/action.md: no `.pair/` at all
        return {"README.md": "# Hello-World\n"}
    settings = project_config("github", dict(cycle or {}), agent_timeout_ms=120_000)
    if not declare_hosts:  # as docs/action.md's setup writes it: the runner binds GitHub
        del settings["hosts"]
    return {".pair/config.yaml": yaml.safe_dump(settings), "README.md": "# Hello-World\n"}


def pair_markers(fake: FakeGitHub) -> dict[str, int]:
    """How many comments carry each pairbot marker (a count over 1 is a duplicate post)."""
    counts: dict[str, int] = {}
    for comment in fake.comments.values():
        first = comment.body.splitlines()[0] if comment.body else ""
        if first.startswith("<!-- pair:"):
            counts[first] = counts.get(first, 0) + 1
    return counts


def seed_bare(tmp: Path, files: Mapping[str, str]) -> Path:
    """`tmp/origin.git`: a bare repository whose `main` holds `files` in one commit."""
    bare = init_bare(tmp / "origin.git")
    seed = tmp / "seed"
    init_repo(seed, files)
    git(seed, "push", "-q", str(bare), "main")
    return bare


@contextmanager
def action_repo(
    tmp: Path,
    *,
    cycle: Mapping[str, Any] | None = None,
    declare_hosts: bool = True,
    config: bool = True,
    as_user: Posture | None = None,
) -> Iterator[ActionRepo]:
    """A served fake GitHub with one card, a bare repository holding the project on `main`;
    `as_user`: every run is that posture's user's (`tmp` must be reachable by it)."""
    files = project_files(cycle, declare_hosts=declare_hosts, config=config)
    bare = seed_bare(tmp, files)
    fake = FakeGitHub(clock=WallClock())
    accept_actions_token(fake)
    fake.user(MAINTAINER)
    card = fake.seed_issue("Add the widget", "AC-1: it works\n", author=MAINTAINER)
    scratch = agent_dir(tmp / "agent")
    with serve_fake_github(fake, bare_repo=bare) as base_url:
        yield ActionRepo(
            tmp=tmp,
            fake=fake,
            bare=bare,
            base_url=base_url,
            card=card,
            scratch=scratch,
            as_user=as_user,
        )
