"""The whole card cycle with no setting changed, in the three postures pairbot ships into.

As root (a container job, a self-hosted runner), as a runner-like user with passwordless sudo
(a GitHub-hosted runner: HOME 0750, the workspace under it) and as a plain user without sudo
(a laptop), each flow runs pairbot as that OS user (tests/support/postures.py), with an
environment built from nothing — no PAIR_ISOLATION, so isolation is the product's default:

- the CLI: `pairbot card N implement until: merged merge: always`, then `pairbot tick card-N`
  (one step each) through propose, apply, a review with a blocking finding, red, fix, the
  second review and the synthesis, to the merge gate, and `pairbot card N approve` merges;
- the App's worker: `pairbot serve --dev` over such a project, whose ticks take the card
  from its first step to ready-for-merge;
- the Action: `python -m action` on a fresh actions/checkout workspace of the posture's user
  against the fake GitHub on loopback, from `/pair implement` through scheduled runs to a
  reviewed, ready-for-merge PR (tests/e2e/action_harness.py);
- the Azure pipeline entry: `python -m action.azure` on a `checkout: self` (detached HEAD) of
  the posture's user, a work-item comment's run and a scheduled run
  (tests/e2e/test_azure_pipeline.py's Pipeline);
- the demo: `python -m app.cli.demo DIR`, `pairbot serve --dev` over it, `pairbot card 3
  implement`, the worker taking card #3 to ready-for-merge;
- a card command while the demo's plain batch holds a step in the same checkout, which the
  docs have a user do while the demo serves: the checkout's top directory, its local forge
  and other cards' run-state stay pairbot's while the step's agent works there
  (app/runtime/lending.py).

The scripted agent (tests/support/scripted_agent.py, through the `command` adapter) edits and
reports with `pairbot batch report` from inside whatever user it runs as, and records its uid.
Where pairbot can isolate (root, runner) every agent step ran as `pairbot-agent` and no run
warns; as the plain user every run that starts an agent warns exactly once, and the cycle
still completes. Skips with one line unless the suite runs as root.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from app.cli.demo import BATCH
from app.engine.runner import batch_status
from app.web.serve import DEV_SECRET
from app.web.signature import sign
from hosts.local import LocalForge
from hosts.models import Target
from tests.cycle.azure_harness import TOKEN, AzureCardProject
from tests.e2e.action_harness import action_repo
from tests.e2e.azure_pipeline_harness import Pipeline, workitem_commented
from tests.support.card_project import MAINTAINER, CardProject, project_config
from tests.support.fake_azure import running
from tests.support.git import git, init_repo
from tests.support.postures import (
    AGENT_USER,
    CANNOT_ISOLATE,
    REPOSITORY,
    VENV_BIN,
    Name,
    Posture,
    posture,
    remove_tree,
    users_held,
)

PAIRBOT = VENV_BIN / "pairbot"
PYTHON = VENV_BIN / "python"
STEP_TIMEOUT_S = 120.0  # one CLI run: one step (an agent and the tests), on a loaded machine
SETTLE_S = 240.0  # the worker's ticks from a card's first step to ready-for-merge
WEBHOOK = (
    REPOSITORY
    / "tests"
    / "fixtures"
    / "github-webhooks"
    / "issue_comment"
    / "created.with-installation.json"
)

pytestmark = [
    pytest.mark.skipif(
        os.geteuid() != 0,
        reason="the posture flows need root (to make the runner-like and the plain users)",
    ),
    # One worker: the users and their sudoers rule are this module's, made once.
    pytest.mark.xdist_group("postures"),
    pytest.mark.slow_first(20),
]

POSTURES: list[Any] = [
    pytest.param("root", id="root"),
    pytest.param(
        "runner",
        id="runner",
        marks=pytest.mark.skipif(
            shutil.which("sudo") is None or shutil.which("setfacl") is None,
            reason="the runner posture needs sudo and setfacl (python3 dev.py test installs them)",
        ),
    ),
    pytest.param("plain", id="plain"),
]


@pytest.fixture(scope="module")
def users() -> Iterator[None]:
    """The runner-like and the plain users (reused when present); the sudoers rule is removed
    afterwards, so no user of this machine keeps root through the suite."""
    with users_held():  # shared with other workers' flows as these users
        yield


@pytest.fixture
def shared(users: None) -> Iterator[Path]:
    """A directory every user can reach (pytest's tmp is root's, 0700): root's workspace and
    HOME, and the scripted agent's scratch directory."""
    path = Path(tempfile.mkdtemp(prefix="pbt-postures-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        remove_tree(path)


@pytest.fixture
def posed(shared: Path) -> Iterator[Callable[[Name], Posture]]:
    """The posture of a name; the workspaces it made are removed afterwards, pass or fail."""
    made: list[Posture] = []

    def pose(name: Name) -> Posture:
        made.append(posture(name, shared))
        return made[-1]

    try:
        yield pose
    finally:
        for where in made:
            where.clean()


def _agent_dir(shared: Path) -> Path:
    """Where the scripted agent keeps its script, counters, call log and findings: writable by
    whichever user it runs as (pairbot-agent, or the plain user)."""
    scratch = shared / "agent"
    scratch.mkdir()
    scratch.chmod(0o777)
    return scratch


def card_project(where: Posture, shared: Path, *, own: bool = True) -> tuple[CardProject, Path]:
    """A card project in a fresh workspace of `where`'s user (`<work>/<repo>/<repo>`, as GitHub's
    runners lay it out) with its local forge beside it; the workspace's top (`own`: handed to
    the user already, else the caller hands it over once it has written what it needs)."""
    top = where.workspace("widget")
    root = top / top.name
    (root / ".pair").mkdir(parents=True)
    (root / ".pair" / "config.yaml").write_text(
        yaml.safe_dump(project_config("local", agent_timeout_ms=90_000))
    )
    init_repo(root, {"README.md": "# widget\n"})
    forge = LocalForge(top / "forge")
    git(root, "push", "-q", str(forge.repo), "main")
    card = forge.seed_card("Add the widget", "AC-1: it works\n", author=MAINTAINER)
    if own:
        where.own(top)
    project = CardProject(root=root, forge=forge, scratch=_agent_dir(shared), card=card)
    # One review finds a blocking defect: the cycle goes through red and fix to a second review.
    project.script({"verify": ["findings-blocking", "ok"]})
    return project, top


def _warnings(done: subprocess.CompletedProcess[str]) -> int:
    return (done.stdout + done.stderr).count(CANNOT_ISOLATE)


def _agent_calls(project: CardProject) -> list[dict[str, Any]]:
    log = project.scratch / "agent-log.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _assert_agent_ran_as(where: Posture, project: CardProject) -> list[str]:
    """Every agent call ran as pairbot-agent where pairbot isolates, else as pairbot's user;
    the transitions, in order."""
    calls = _agent_calls(project)
    assert calls, "the agent never ran"
    expected = pwd.getpwnam(AGENT_USER).pw_uid if where.isolates else where.uid
    assert {c["uid"] for c in calls} == {expected}, [(c["transition"], c["uid"]) for c in calls]
    return [str(c["transition"]) for c in calls]


def _label(project: CardProject) -> str:
    labels = project.labels(project.card)
    return labels[0] if labels else ""


@pytest.mark.parametrize("name", POSTURES)
def test_the_card_cycle_through_the_cli(
    name: Name, shared: Path, posed: Callable[[Name], Posture]
) -> None:
    where = posed(name)
    project, _ = card_project(where, shared)
    env = {"PAIR_LOCAL_FORGE": str(project.forge.root), "PAIR_TEST_AGENT_DIR": str(project.scratch)}

    def pairbot(*args: str) -> subprocess.CompletedProcess[str]:
        done = where.run(
            [str(PAIRBOT), "--root", str(project.root), *args],
            cwd=project.root,
            env=env,
            timeout=STEP_TIMEOUT_S,
        )
        assert "Traceback" not in done.stderr, done.stderr
        return done

    runs: list[subprocess.CompletedProcess[str]] = []
    spawned: list[bool] = []  # whether each run started an agent

    def step(*args: str) -> None:
        before = len(_agent_calls(project))
        runs.append(pairbot(*args))
        spawned.append(len(_agent_calls(project)) > before)
        assert runs[-1].returncode == 0, runs[-1].stdout + runs[-1].stderr
        project.assert_invariants()

    step("card", str(project.card), "implement", "until:", "merged", "merge:", "always")
    for _ in range(20):
        if _label(project) == "pr-state:awaiting-human":
            break
        step("tick", f"card-{project.card}")
    assert _label(project) == "pr-state:awaiting-human", [r.stdout for r in runs]
    step("card", str(project.card), "approve")
    assert _label(project) == "pr-state:merged"
    transitions = _assert_agent_ran_as(where, project)
    assert transitions == [
        "propose",
        "apply",
        "verify",
        "red",
        "verify-red",
        "fix",
        "verify",
    ], transitions
    # The merge landed the reviewed, fixed work on the forge's main.
    assert (
        git(project.forge.repo, "-c", "safe.directory=*", "show", "main:card-1.txt")
        == "implemented\nfixed"
    )
    warned = [_warnings(r) for r in runs]
    if where.isolates:
        assert warned == [0] * len(runs), [r.stderr for r in runs]
    else:
        # Once in each run that started an agent; a run that only publishes or merges says
        # nothing about an agent it did not start.
        assert warned == [int(s) for s in spawned], [r.stdout + r.stderr for r in runs]


# ---------------------------------------------------------------- the App's worker


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serving(where: Posture, root: Path, log: Path, env: dict[str, str]) -> Iterator[str]:
    """`pairbot serve --dev` over `root` as `where`'s user, ticking every second; its URL."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    argv = [str(PAIRBOT), "--root", str(root), "serve", "--dev", "--port", str(port)]
    process = where.popen(argv, cwd=root, log=log, env={**env, "PAIR_TICK_S": "1"})
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, log.read_text(errors="replace")
            assert time.monotonic() < deadline, log.read_text(errors="replace")
            try:
                if httpx.get(f"{url}/healthz", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        yield url
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(60)
            raise AssertionError(f"the App did not stop\n{log.read_text()}") from None


def _until(what: str, done: Callable[[], bool], log: Path, within_s: float = SETTLE_S) -> None:
    """Poll `done` (bounded); on time out, fail with the App's log."""
    deadline = time.monotonic() + within_s
    while not done():
        assert time.monotonic() < deadline, f"{what}: not within {within_s} s\n{log.read_text()}"
        time.sleep(0.2)


def _comment_delivery(project: CardProject, comment: str, body: str) -> dict[str, Any]:
    """The `issue_comment.created` delivery GitHub would send for the maintainer's comment."""
    payload: dict[str, Any] = json.loads(WEBHOOK.read_text())
    payload["issue"]["number"] = project.card
    payload["issue"].pop("pull_request", None)
    payload["comment"].update(id=int(comment), body=body)
    payload["comment"].pop("performed_via_github_app", None)
    for who in (payload["comment"]["user"], payload["sender"]):
        who.update(login=MAINTAINER.login, id=int(MAINTAINER.id), type="User")
    return payload


def _deliver(url: str, secret: str, payload: dict[str, Any]) -> httpx.Response:
    body = json.dumps(payload).encode()
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "GitHub-Hookshot/044aadd",
        "X-GitHub-Event": "issue_comment",
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-Hub-Signature-256": sign(secret.encode(), body),
    }
    return httpx.post(f"{url}/webhooks/github", content=body, headers=headers, timeout=30)


@pytest.mark.parametrize("name", POSTURES)
def test_the_card_cycle_through_the_apps_worker(
    name: Name, shared: Path, posed: Callable[[Name], Posture]
) -> None:
    where = posed(name)
    project, top = card_project(where, shared, own=False)
    # The maintainer may act, and comments `/pair implement` on the card, as on GitHub.
    project.forge.grant(MAINTAINER.login, "admin")
    body = "/pair implement"
    comment = project.comment_as_maintainer(Target("card", project.card), body)
    where.own(top)
    env = {"PAIR_LOCAL_FORGE": str(project.forge.root), "PAIR_TEST_AGENT_DIR": str(project.scratch)}
    log = shared / "app.log"
    with serving(where, project.root, log, env) as url:
        secret = (project.root / DEV_SECRET).read_text().strip()
        answer = _deliver(url, secret, _comment_delivery(project, comment, body))
        assert answer.status_code == 202, answer.text
        _until(
            "ready-for-merge",
            lambda: _label(project) == "pr-state:ready-for-merge",
            log,
        )
    said = log.read_text(errors="replace")
    assert "Traceback" not in said, said
    project.assert_invariants()
    transitions = _assert_agent_ran_as(where, project)
    assert transitions == [
        "propose",
        "apply",
        "verify",
        "red",
        "verify-red",
        "fix",
        "verify",
    ], transitions
    # In worker mode each job and each tick is a run of its own, whose log says it once
    # (docs/security.md: "each job says so in its log"); isolating, none does.
    assert said.count(CANNOT_ISOLATE) == (0 if where.isolates else len(transitions)), said


# ---------------------------------------------------------------- the demo


def _demo_label(root: Path, card: int) -> str:
    path = root / ".pair" / "forge" / "cards" / f"{card}.json"
    labels = json.loads(path.read_text())["labels"] if path.exists() else []
    return next((label for label in labels if label.startswith("pr-state:")), "")


def _demo_agent_uids(root: Path, cwd: Path | None = None) -> set[int]:
    """The uids (real and effective) of the demo agent's processes working under `root` (or in
    exactly `cwd`): its interpreter, not the switch and namespace wrappers naming it in their
    arguments."""
    uids: set[int] = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            here = str((proc / "cwd").readlink())
            status = (proc / "status").read_text()
        except OSError:  # ended meanwhile, or a kernel thread
            continue
        if len(argv) < 2 or not Path(argv[0].decode()).name.startswith("python"):
            continue
        if not argv[1].endswith(b"demo_agent.py"):
            continue
        inside = here == str(cwd) if cwd is not None else here.startswith(f"{root}/")
        if not inside:
            continue
        line = next(line for line in status.splitlines() if line.startswith("Uid:"))
        uids.update(int(uid) for uid in line.split()[1:3])
    return uids


def _held(root: Path, log: Path, cwd: Path | None = None) -> set[int]:
    """Wait (bounded) until a demo agent holds its step under `root`; its uids."""
    uids: set[int] = set()

    def seen() -> bool:
        uids.update(_demo_agent_uids(root, cwd))
        return bool(uids)

    _until("the demo agent holding its step", seen, log)
    return uids


def _set_up_demo(where: Posture, shared: Path, hold: str) -> tuple[Path, Path, Path, str]:
    """`python -m app.cli.demo DIR` as `where`'s user, as `python3 dev.py start` runs it, with the
    demo agent holding the step `hold` (`<change>:<transition>`) until the release file
    exists; the workspace's top, the demo's root, the release file and what the set-up said."""
    top = where.workspace("pairbot-demo")
    root = top / "pairbot-demo"
    release = shared / "release"  # open to whichever user the agent is
    release.mkdir()
    release.chmod(0o777)
    env = {"PAIR_DEMO_HOLD": f"{hold}:{release / 'go'}"}
    made = where.run([str(PYTHON), "-m", "app.cli.demo", str(root)], cwd=top, env=env)
    said = made.stdout + made.stderr
    assert made.returncode == 0, said
    assert "card #1: /pair implement → propose advanced" in made.stdout, said
    return top, root, release / "go", said


@pytest.mark.parametrize("name", POSTURES)
def test_the_demo_then_card_3_through_the_cli_and_the_worker(
    name: Name, shared: Path, posed: Callable[[Name], Posture]
) -> None:
    where = posed(name)
    top, root, release, set_up = _set_up_demo(where, shared, "card-3:apply")
    said = [set_up]
    log = shared / "app.log"
    env = {"PAIR_DEMO_HOLD": f"card-3:apply:{release}"}
    with serving(where, root, log, env):
        _until("card #1 ready", lambda: _demo_label(root, 1) == "pr-state:ready-for-merge", log)
        # The worker also runs the example batch `hello` in the checkout itself; a command run
        # meanwhile trips over the lent checkout (test_a_card_command_while_a_batch_step_...).
        _until("the batch hello done", lambda: batch_status(root, BATCH).done, log)
        started = where.run([str(PAIRBOT), "--root", str(root), "card", "3", "implement"], cwd=top)
        said.append(started.stdout + started.stderr)
        assert started.returncode == 0, said[-1]
        assert started.stdout.startswith("advanced: propose card-3"), said[-1]
        uids = _held(root, log)  # the worker took card #3's apply
        release.touch()
        _until("card #3 ready", lambda: _demo_label(root, 3) == "pr-state:ready-for-merge", log)
    said.append(log.read_text(errors="replace"))
    assert not [text for text in said if "Traceback" in text], said
    assert uids == {pwd.getpwnam(AGENT_USER).pw_uid if where.isolates else where.uid}, uids
    warned = [text.count(CANNOT_ISOLATE) for text in said]
    if where.isolates:
        assert warned == [0, 0, 0], said
    else:
        # The set-up (two cards' first steps) and the CLI run once each; the worker once a job
        # or tick that started an agent (docs/security.md), so at least once.
        assert warned[:2] == [1, 1] and warned[2] >= 1, said


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("root", id="root"),
        pytest.param("runner", id="runner", marks=POSTURES[1].marks[0]),
        pytest.param("plain", id="plain"),
    ],
)
def test_a_card_command_while_a_batch_step_runs_in_the_checkout(
    name: Name, shared: Path, posed: Callable[[Name], Posture]
) -> None:
    # What docs/app.md has a user do while `python3 dev.py start` serves the demo, made
    # deterministic: the example batch's first step holds in the checkout while
    # `pairbot card 3 implement` runs on it.
    where = posed(name)
    top, root, release, _ = _set_up_demo(where, shared, "add-greeting:propose")
    log = shared / "batch.log"
    env = {"PAIR_DEMO_HOLD": f"add-greeting:propose:{release}"}
    batch = where.popen(
        [str(PAIRBOT), "--root", str(root), "batch", "apply", BATCH], cwd=root, log=log, env=env
    )
    try:
        _held(root, log, cwd=root)
        started = where.run([str(PAIRBOT), "--root", str(root), "card", "3", "implement"], cwd=top)
    finally:
        release.touch()
        assert batch.wait(STEP_TIMEOUT_S) == 0, log.read_text()
    assert started.returncode == 0, started.stdout + started.stderr
    assert started.stdout.startswith("advanced: propose card-3"), started.stdout


@pytest.mark.parametrize("name", POSTURES)
def test_the_action_takes_a_comment_to_a_reviewed_pull_request(
    name: Name, posed: Callable[[Name], Posture]
) -> None:
    # Each run is a fresh runner job of the posture's user: its own actions/checkout workspace
    # (under the runner's 0750 HOME), the event, the job's environment and nothing else.
    where = posed(name)
    with action_repo(where.workspace("action"), as_user=where) as repo:
        first = repo.run(repo.comment_event("/pair implement"))
        assert first.code == 0, first.stderr + first.stdout
        assert first.outputs["transition"] == "propose"
        runs = [first, *repo.until_quiet()]
        steps = [r.outputs["transition"] for r in runs if r.outputs.get("transition")]
        assert steps == ["propose", "apply", "verify", "publish"], [
            (r.outputs, r.stdout[-3000:], r.stderr[-3000:]) for r in runs
        ]
        assert repo.state_labels(repo.card) == ["pr-state:ready-for-merge"]
        log = repo.scratch / "agent-log.jsonl"
        uids = {json.loads(line)["uid"] for line in log.read_text().splitlines()}
        assert uids == {pwd.getpwnam(AGENT_USER).pw_uid if where.isolates else where.uid}
        warned = [(r.stdout + r.stderr).count(CANNOT_ISOLATE) for r in runs]
        # Where it cannot isolate, each run that started an agent says so once (publish does not).
        wanted = [0] * len(runs) if where.isolates else [1, 1, 1, 0, 0]
        assert warned == wanted, [r.stdout + r.stderr for r in runs]


@pytest.mark.parametrize("name", POSTURES)
def test_the_azure_pipeline_entry_takes_a_work_item_comment_and_a_schedule(
    name: Name, posed: Callable[[Name], Posture], tmp_path: Path
) -> None:
    # A hosted agent's job runs as a user with passwordless sudo, a self-hosted one as root or
    # a plain user: each run's `checkout: self` (a detached HEAD) is that user's.
    where = posed(name)
    top = where.workspace("azure")
    with running(TOKEN, tmp_path / "fake") as fake:
        (top / "setup").mkdir()
        project = AzureCardProject.create(top / "setup", fake)
        where.own(top / "setup")
        pipeline = Pipeline(top, fake, project, as_user=where)
        body = "<div>/pair implement</div>"
        fake.comment_as(fake.human.author, Target("card", project.card), body)
        notified = workitem_commented(fake, project.card, body, "n-1")
        code, out = pipeline.run("ResourceTrigger", notified)
        assert (code, pipeline.status(out)) == (0, "in-progress"), pipeline.logs[-1]
        code, out = pipeline.run("Schedule")
        assert code == 0, pipeline.logs[-1]
    log = project.scratch / "agent-log.jsonl"
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [c["transition"] for c in calls] == ["propose", "apply"]
    assert {c["uid"] for c in calls} == {
        pwd.getpwnam(AGENT_USER).pw_uid if where.isolates else where.uid
    }
    warned = [text.count(CANNOT_ISOLATE) for text in pipeline.logs]
    assert warned == ([0, 0] if where.isolates else [1, 1]), pipeline.logs
