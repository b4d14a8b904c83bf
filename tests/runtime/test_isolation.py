"""Who the agent runs as: the pure decision, and a real local agent as its own OS user.

The decision is a table. The real part (root or passwordless sudo only; elsewhere it skips
with one line) runs the probe agent (tests/support/probe_agent.py) through the production
launcher and swerex's local runtime while a process of the test's own user holds a fake token in
its environment: isolated, the probe runs under another uid, in a HOME of its own, and cannot
read the token; with PAIR_ISOLATION=off the same probe finds it, so the probe can fail.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine.agent import AgentLaunch, AgentNotStarted, AgentSpawnResult
from app.errors import UserError
from app.runtime import isolation, lending
from app.runtime.isolation import (
    Contained,
    HostFacts,
    NoIsolation,
    Refused,
    Switch,
    decide,
    parse_setting,
)
from app.runtime.launcher import Launcher
from app.runtime.process import ProcessRuntime
from app.settings import AgentSpecModel, BatchSettings, ResolvedSettings, resolve_settings

PROBE = Path(__file__).resolve().parents[1] / "support" / "probe_agent.py"
SYSTEM_PYTHON = "/usr/bin/python3"

ROOT = HostFacts(euid=0, sudo=False, setpriv=True, runuser=True)
SUDOER = HostFacts(euid=1001, sudo=True, setpriv=True, runuser=True)
LAPTOP = HostFacts(euid=1000, sudo=False, setpriv=True, runuser=False)
BARE_ROOT = HostFacts(euid=0, sudo=False, setpriv=False, runuser=False)


@pytest.mark.parametrize(
    ("setting", "locus", "facts", "plan"),
    [
        pytest.param("auto", "local", ROOT, Switch("u", "setpriv"), id="root-setpriv"),
        pytest.param(
            "auto",
            "local",
            HostFacts(0, sudo=False, setpriv=False, runuser=True),
            Switch("u", "runuser", inner="runuser"),
            id="root-runuser",
        ),
        pytest.param(
            "auto",
            "local",
            HostFacts(0, sudo=False, setpriv=True, runuser=True, pidns=True),
            Switch("u", "setpriv", namespace=True),
            id="root-pid-namespace",
        ),
        pytest.param(
            "auto",
            "local",
            HostFacts(1001, sudo=True, setpriv=False, runuser=True, pidns=True),
            Switch("u", "sudo", namespace=True, inner="runuser"),
            id="hosted-runner-pid-namespace",
        ),
        pytest.param(
            "auto",
            "local",
            HostFacts(1000, sudo=False, setpriv=True, runuser=False, userns=True),
            NoIsolation(isolation.warning_line("not root and no passwordless sudo", True), True),
            id="laptop-user-namespace",
        ),
        pytest.param(
            "off",
            "local",
            HostFacts(0, sudo=False, setpriv=True, runuser=True, userns=True),
            NoIsolation(None, namespace=True),
            id="off-keeps-the-namespace",
        ),
        pytest.param(
            "auto",
            "local",
            HostFacts(0, sudo=True, setpriv=False, runuser=False),
            Switch("u", "sudo"),
            id="root-sudo-only",
        ),
        pytest.param("auto", "local", SUDOER, Switch("u", "sudo"), id="hosted-runner"),
        pytest.param("required", "local", SUDOER, Switch("u", "sudo"), id="required-sudo"),
        pytest.param("auto", "docker", LAPTOP, Contained("docker"), id="docker"),
        pytest.param("off", "remote", ROOT, Contained("remote"), id="remote"),
        pytest.param("off", "local", ROOT, NoIsolation(None), id="off-is-silent"),
    ],
)
def test_the_decision_table(
    setting: isolation.Setting, locus: str, facts: HostFacts, plan: isolation.Plan
) -> None:
    assert decide(setting, locus, facts, "u") == plan


def test_without_root_or_sudo_the_run_is_warned_in_one_line() -> None:
    plan = decide("auto", "local", LAPTOP, "u")
    assert isinstance(plan, NoIsolation) and plan.warning is not None
    assert "\n" not in plan.warning
    assert "not root and no passwordless sudo" in plan.warning
    assert "locus: docker" in plan.warning
    bare = decide("auto", "local", BARE_ROOT, "u")
    assert isinstance(bare, NoIsolation) and "neither setpriv" in str(bare.warning)


def test_required_refuses_where_isolation_is_impossible() -> None:
    plan = decide("required", "local", LAPTOP, "u")
    assert isinstance(plan, Refused)
    assert "PAIR_ISOLATION=required" in plan.reason


def test_switch_argv_carries_names_only() -> None:
    assert Switch("u", "setpriv").argv()[-1] == "--"
    assert "--no-new-privs" in Switch("u", "setpriv").argv()
    assert Switch("u", "runuser").argv() == ("runuser", "-u", "u", "--")
    assert Switch("u", "sudo").argv() == ("sudo", "-n", "-u", "u", "--")
    assert Switch("u", "sudo").admin() == ("sudo", "-n")
    assert Switch("u", "setpriv").admin() == ()


@pytest.mark.parametrize(
    ("env", "wanted"),
    [
        ({}, ("auto", "pairbot-agent")),
        ({"PAIR_ISOLATION": " OFF "}, ("off", "pairbot-agent")),
        ({"PAIR_ISOLATION": "required", "PAIR_AGENT_USER": "bots"}, ("required", "bots")),
    ],
)
def test_the_settings_come_from_the_environment(env: dict[str, str], wanted: object) -> None:
    assert parse_setting(env) == wanted


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"PAIR_ISOLATION": "maybe"}, "PAIR_ISOLATION='maybe'"),
        ({"PAIR_AGENT_USER": "root"}, "PAIR_AGENT_USER='root'"),
        ({"PAIR_AGENT_USER": "Bad User"}, "PAIR_AGENT_USER='Bad User'"),
    ],
)
def test_bad_settings_are_refused_in_one_line(env: dict[str, str], named: str) -> None:
    with pytest.raises(UserError, match="^" + named.replace("(", r"\(")):
        parse_setting(env)


# --- the launcher -------------------------------------------------------------------------------


def _settings(command: list[str], locus: str = "local") -> ResolvedSettings:
    return resolve_settings(
        env={},
        manifest=None,
        project=BatchSettings.model_validate(
            {"agent": AgentSpecModel(name="command"), "agentCommand": command, "locus": locus}
        ),
    )


def _launch(
    root: Path, env: dict[str, str], command: list[str], writable: tuple[Path, ...] = ()
) -> AgentLaunch:
    return AgentLaunch(
        stage="apply",
        command="apply",
        settings=_settings(command),
        root=root,
        instructions="do it\n",
        env=env,
        pair_env={"PAIR_CHANGE": "alpha"},
        writable=writable,
    )


def test_the_warning_is_said_once_per_launcher_and_the_agent_still_runs(tmp_path: Path) -> None:
    launcher = Launcher(lambda _s: ProcessRuntime(), host=lambda: LAPTOP)
    lines: list[str] = []
    command = [sys.executable, "-c", "print('ran')"]
    env = {"PATH": "/usr/bin:/bin"}
    for _ in range(2):
        result = asyncio.run(launcher.launch(_launch(tmp_path, env, command), lines.append))
        assert isinstance(result, AgentSpawnResult) and result.exit_code == 0
    warnings = [line for line in lines if "warning" in line]
    assert len(warnings) == 1, lines
    assert lines.count("ran") == 2


def test_required_or_a_bad_setting_starts_no_agent(tmp_path: Path) -> None:
    launcher = Launcher(lambda _s: ProcessRuntime(), host=lambda: LAPTOP)
    command = [sys.executable, "-c", "pass"]
    for env, said in [
        ({"PAIR_ISOLATION": "required"}, "PAIR_ISOLATION=required"),
        ({"PAIR_ISOLATION": "sometimes"}, "PAIR_ISOLATION='sometimes'"),
    ]:
        result = asyncio.run(launcher.launch(_launch(tmp_path, env, command), lambda _l: None))
        assert isinstance(result, AgentNotStarted) and said in result.reason


# --- a real agent as another OS user --------------------------------------------------------------


def _can_isolate() -> bool:
    facts = isolation.probe_host()
    return (facts.euid == 0 and (facts.setpriv or facts.runuser)) or facts.sudo


needs_isolation = pytest.mark.skipif(
    not _can_isolate() or not Path(SYSTEM_PYTHON).exists(),
    reason="agent isolation needs root or passwordless sudo (and /usr/bin/python3)",
)


@pytest.fixture
def ancestor_secret() -> Iterator[str]:
    """A process of the test's own user holding a fake token in its environment, as the
    runner's step shell holds INPUT_GITHUB_TOKEN."""
    token = "ghs_" + secrets.token_hex(16)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"],
        stdin=subprocess.PIPE,
        env={"PATH": "/usr/bin:/bin", "INPUT_GITHUB_TOKEN": token},
    )
    try:
        yield token
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)


def _probe(shared: Path, setting: str) -> tuple[dict[str, object], Path, AgentSpawnResult]:
    from app.runtime.rex import LocalLocus, RexRuntime  # swerex

    root = shared / "repo"
    (root / ".pair").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    journal = shared / "journal.jsonl"
    journal.write_text("")
    out = shared / "out"
    out.mkdir(mode=0o777)
    out.chmod(0o1777)
    env = {"PATH": "/usr/bin:/bin", "PAIR_ISOLATION": setting, "PAIR_PROBE_OUT": str(out)}
    launcher = Launcher(lambda _s: RexRuntime(LocalLocus()), host=isolation.probe_host)
    command = [SYSTEM_PYTHON, str(PROBE)]
    result = asyncio.run(
        launcher.launch(_launch(root, env, command, (journal,)), lambda _line: None)
    )
    assert isinstance(result, AgentSpawnResult), result
    assert result.exit_code == 0, result.stderr
    (report,) = out.glob("probe-*.json")
    return json.loads(report.read_text()), root, result


@needs_isolation
def test_an_isolated_agent_reads_no_secret_of_pairbots_user(
    shared_dir: Path, ancestor_secret: str
) -> None:
    report, root, _ = _probe(shared_dir, "auto")
    assert report["uid"] != os.geteuid()
    found = report["found"]
    assert isinstance(found, dict) and found  # it did read things: its own /proc entries
    assert not [where for where, text in found.items() if ancestor_secret in text]
    home = Path(str(report["home"]))
    assert home.name.startswith("pairbot-agent-home-") and not home.exists()  # removed after
    # Everything lent is pairbot's again, so its git works on the checkout as before.
    assert root.stat().st_uid == os.geteuid()
    assert all(p.lstat().st_uid == os.geteuid() for p in root.rglob("*"))
    assert (shared_dir / "journal.jsonl").stat().st_uid == os.geteuid()


@needs_isolation
def test_the_probe_finds_the_secret_when_isolation_is_off(
    shared_dir: Path, ancestor_secret: str
) -> None:
    report, _, _ = _probe(shared_dir, "off")
    assert report["uid"] == os.geteuid()
    found = report["found"]
    assert isinstance(found, dict)
    assert [where for where, text in found.items() if ancestor_secret in text]


def _hostile(shared: Path, script: str, root: Path) -> AgentSpawnResult:
    from app.runtime.rex import LocalLocus, RexRuntime

    env = {"PATH": "/usr/bin:/bin", "PAIR_ISOLATION": "auto"}
    launcher = Launcher(lambda _s: RexRuntime(LocalLocus()), host=isolation.probe_host)
    result = asyncio.run(
        launcher.launch(_launch(root, env, ["/bin/sh", "-c", script]), lambda _line: None)
    )
    assert isinstance(result, AgentSpawnResult), result
    return result


def _worktree(shared: Path) -> Path:
    main = shared / "main"
    subprocess.run(["git", "init", "-q", str(main)], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(main),
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "first",
        ],
        check=True,
    )
    tree = shared / "tree"
    subprocess.run(["git", "-C", str(main), "worktree", "add", "-q", str(tree)], check=True)
    return tree


@needs_isolation
def test_a_rewritten_gitfile_is_put_back(shared_dir: Path) -> None:
    tree = _worktree(shared_dir)
    before = (tree / ".git").read_text()
    script = "id -u >whoami; mkdir evil; rm .git; echo 'gitdir: evil' >.git; echo 'x' >new.txt"
    result = _hostile(shared_dir, script, tree)
    assert result.exit_code == 0, result.stderr
    assert (tree / "whoami").read_text().strip() != str(os.geteuid())
    assert (tree / ".git").read_text() == before
    assert (tree / "new.txt").stat().st_uid == os.geteuid()  # the agent's files are pairbot's
    status = subprocess.run(
        ["git", "-C", str(tree), "status", "--short"], capture_output=True, check=False
    )
    assert status.returncode == 0 and b"new.txt" in status.stdout


@needs_isolation
def test_the_git_directory_cannot_be_replaced(shared_dir: Path) -> None:
    root = shared_dir / "repo"
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    inode = (root / ".git").stat().st_ino
    result = _hostile(shared_dir, "mv .git old-git && mkdir .git", root)
    assert result.exit_code == 1
    if shutil.which("setfacl") is not None:
        # The top directory stays pairbot's and sticky: the rename itself is refused.
        assert "Operation not permitted" in result.stderr or "denied" in result.stderr
        assert (root / ".git").stat().st_ino == inode and not (root / "old-git").exists()
    else:  # handed over whole: the step fails after the fact
        assert "the agent replaced" in result.stderr and ".git" in result.stderr


@needs_isolation
def test_a_link_out_of_the_worktree_fails_the_step(shared_dir: Path) -> None:
    tree = _worktree(shared_dir)
    result = _hostile(shared_dir, "mkdir -p .pair && ln -s /proc/self/environ .pair/plan.md", tree)
    assert result.exit_code == 1
    assert "symbolic link" in result.stderr and "plan.md" in result.stderr
    inside = _hostile(shared_dir, "rm .pair/plan.md; ln -s ../README .pair/plan.md", tree)
    assert inside.exit_code == 0, inside.stderr  # a link inside the worktree is fine


def test_succeeds_says_whether_a_command_exits_zero() -> None:
    assert isolation.succeeds(["true"])
    assert not isolation.succeeds(["false"])
    assert not isolation.succeeds(["/nonexistent/sudo", "-n", "true"])


@needs_isolation
def test_the_agent_user_is_created_on_demand() -> None:
    import pwd

    name = "pbt-" + secrets.token_hex(6)
    account = isolation.AgentAccount(Switch(name, "setpriv"))
    try:
        uid, gid = account.ensure()
        entry = pwd.getpwnam(name)
        assert (entry.pw_uid, entry.pw_gid) == (uid, gid) and uid != 0
        assert entry.pw_shell == "/usr/sbin/nologin"
        assert account.ensure() == (uid, gid)  # looked up once
        again = isolation.AgentAccount(Switch(name, "setpriv"))
        assert again.ensure() == (uid, gid)  # an existing user is reused
    finally:
        subprocess.run(["userdel", name], check=False, capture_output=True)


@needs_isolation
def test_a_failing_isolation_command_is_one_line() -> None:
    account = isolation.AgentAccount(Switch(isolation.DEFAULT_AGENT_USER, "setpriv"))
    uid, gid = account.ensure()
    with pytest.raises(UserError, match=r"^agent isolation: could not hand .* \(`chown` exit 1\)"):
        account.chown([Path("/nonexistent/pairbot")], uid, gid)
    with pytest.raises(UserError, match="could not"):
        isolation.run_tool(["/nonexistent/tool"], "run a tool")


@needs_isolation
def test_a_root_that_cannot_be_lent_starts_no_agent(shared_dir: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "PAIR_ISOLATION": "auto"}
    launcher = Launcher(lambda _s: ProcessRuntime(), host=isolation.probe_host)
    gone = shared_dir / "gone"
    result = asyncio.run(launcher.launch(_launch(gone, env, ["/bin/true"]), lambda _line: None))
    assert isinstance(result, AgentNotStarted)
    assert result.reason.startswith("agent isolation: cannot lend")


@needs_isolation
def test_the_process_runtime_runs_the_agent_as_the_agent_user(shared_dir: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "PAIR_ISOLATION": "auto"}
    launcher = Launcher(lambda _s: ProcessRuntime(), host=isolation.probe_host)
    root = shared_dir / "work"
    root.mkdir()
    lines: list[str] = []
    result = asyncio.run(
        launcher.launch(_launch(root, env, ["/bin/sh", "-c", "id -u; echo $HOME"]), lines.append)
    )
    assert isinstance(result, AgentSpawnResult) and result.exit_code == 0, result
    assert lines[0] != str(os.geteuid())
    assert "pairbot-agent-home-" in lines[1]


@needs_isolation
def test_pairbots_private_directory_is_never_lent(shared_dir: Path) -> None:
    root = shared_dir / "repo"
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    private = root / ".pair" / "app"
    private.mkdir(parents=True, mode=0o700)
    (private / "webhook-secret").write_text("dev-secret-value\n")
    (private / "webhook-secret").chmod(0o600)
    (root / "src").mkdir()
    script = "cat .pair/app/webhook-secret >leaked 2>&1; echo changed >src/file"
    result = _hostile(shared_dir, script, root)
    assert result.exit_code == 0, result.stderr
    assert "dev-secret-value" not in (root / "leaked").read_text()
    assert (root / "src" / "file").read_text() == "changed\n"  # the rest was lent


@needs_isolation
def test_a_user_that_cannot_be_made_or_is_root_is_refused() -> None:
    with pytest.raises(UserError, match="has uid 0"):
        isolation.AgentAccount(Switch("root", "setpriv")).ensure()
    with pytest.raises(UserError, match="could not create the agent user"):
        isolation.AgentAccount(Switch("no such user!", "setpriv")).ensure()


def _closed_root(shared: Path) -> Path:
    closed = shared / "home"  # like a runner's 0750 HOME holding the workspace
    closed.mkdir(mode=0o750)
    closed.chmod(0o750)
    root = closed / "work" / "repo"
    root.mkdir(parents=True)
    return root


@needs_isolation
def test_without_setfacl_a_closed_parent_is_one_clear_line(shared_dir: Path) -> None:
    root = _closed_root(shared_dir)
    switch = Switch(isolation.DEFAULT_AGENT_USER, "setpriv")
    account = isolation.AgentAccount(switch, setfacl=lambda: None)
    with pytest.raises(UserError, match=r"cannot reach .*home is closed to other users"):
        lending.lend(account, root, ())
    assert root.stat().st_uid == os.geteuid()  # nothing was lent


@needs_isolation
@pytest.mark.skipif(shutil.which("setfacl") is None, reason="needs setfacl (package acl)")
def test_a_closed_parent_is_opened_to_the_agent_user_only(shared_dir: Path) -> None:
    root = _closed_root(shared_dir)
    result = _hostile(shared_dir, "id -u >whoami", root)
    assert result.exit_code == 0, result.stderr
    assert (root / "whoami").read_text().strip() != str(os.geteuid())
    assert (shared_dir / "home").stat().st_mode & 0o777 == 0o750  # the mode itself is unchanged
    acl = subprocess.run(
        ["getfacl", "-c", str(shared_dir / "home")], capture_output=True, text=True, check=True
    )
    assert f"user:{isolation.DEFAULT_AGENT_USER}:--x" in acl.stdout


def test_every_command_pairbot_runs_as_the_agent_starts_from_an_empty_environment() -> None:
    # The swerex session's shell holds pairbot's credentials; the agent reads the environ of
    # every process of its user, so pairbot's polls and signals must not carry them.
    from app.engine.agent import RunAs
    from app.runtime.rex.protocol import as_agent, launch_command

    switch = Switch(isolation.DEFAULT_AGENT_USER, "setpriv")
    run_as = RunAs(switch=switch.argv(), admin=switch.admin(), owner="999:999")
    secret = "ghs_" + secrets.token_hex(8)
    script = as_agent(run_as, "cat out.log")
    env = {"PATH": os.environ["PATH"], "PAIR_PROBE_SECRET": secret}
    shown = subprocess.run(
        ["/bin/sh", "-c", script.replace("cat out.log", "env")],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert script.startswith("env -i PATH=")
    assert secret not in shown.stdout + shown.stderr
    launch = launch_command("/tmp/run", isolated_env=True, run_as=run_as)
    started = [line for line in launch.splitlines() if line.endswith(" &")]
    assert started and all(line.startswith("env -i PATH=") for line in started), launch
