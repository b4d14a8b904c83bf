"""Lending a step's files to the agent user and taking them back (app/runtime/lending.py).

The real part needs root or passwordless sudo (elsewhere it skips with one line). A plain
batch's step runs in the checkout itself: the agent edits the tree and appends to its journal,
while the checkout's top directory, `.pair`, the local forge and every other card's run-state
stay pairbot's (so a concurrent pairbot on the checkout still works) and cannot be renamed away.
A pairbot SIGKILLed mid-step leaves a record; the next one takes the files back.
"""

from __future__ import annotations

import asyncio
import dataclasses
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from app.engine.agent import AgentLaunch, AgentSpawnResult
from app.errors import UserError
from app.runtime import isolation, lending, lending_ledger, lending_shared
from app.runtime.launcher import Launcher
from app.settings import AgentSpecModel, BatchSettings, resolve_settings
from tests.support.isolation import needs_isolation

REPO = Path(__file__).resolve().parents[2]
needs_setfacl = pytest.mark.skipif(
    shutil.which("setfacl") is None, reason="needs setfacl (package acl)"
)


def test_a_gitfile_replaced_by_a_directory_or_a_link_is_put_back(tmp_path: Path) -> None:
    git = tmp_path / ".git"
    git.write_text("gitdir: /somewhere/.git/worktrees/card-1\n")
    entry = lending._git_entry(git)
    git.unlink()
    git.mkdir()
    (git / "config").write_text("[core]\n\tfsmonitor = evil\n")
    assert lending._restore_git_entry(entry) is None
    assert git.read_text() == "gitdir: /somewhere/.git/worktrees/card-1\n"
    git.unlink()
    git.symlink_to(tmp_path / "elsewhere")
    assert lending._restore_git_entry(entry) is None
    assert not git.is_symlink() and git.read_text().startswith("gitdir: /somewhere")


def test_a_removed_git_directory_or_an_odd_git_entry(tmp_path: Path) -> None:
    git = tmp_path / ".git"
    git.mkdir()
    entry = lending._git_entry(git)
    git.rmdir()
    assert "the agent replaced" in str(lending._restore_git_entry(entry))
    git.symlink_to(tmp_path)
    assert lending._git_entry(git) == lending.GitEntry(git, None, None)
    absent = lending._git_entry(tmp_path / "none" / ".git")
    assert lending._restore_git_entry(absent) is None


def test_a_ledger_record_reads_back_as_it_was_written(tmp_path: Path) -> None:
    record = lending.Lending(
        user="pairbot-agent",
        admin=("sudo", "-n"),
        root=tmp_path,
        writable=(tmp_path / "journal.jsonl",),
        git=lending.GitEntry(tmp_path / ".git", None, (1, 2)),
        held=((tmp_path, 0o755),),
        home=None,
        pid=7,
        started="123",
        key="k",
    )
    assert lending.Lending.from_json(record.to_json()) == record


def test_a_record_without_a_lock_is_alive_while_the_process_that_lent_runs() -> None:
    # An older pairbot's record has no liveness lock: its pid and start time decide.
    gone = subprocess.Popen(["true"])
    gone.wait()
    base = lending.Lending(
        user="pairbot-agent",
        admin=(),
        root=Path("/nonexistent"),
        writable=(),
        git=lending.GitEntry(Path("/nonexistent/.git"), None, None),
        held=(),
        home=None,
        pid=os.getpid(),
        started=lending_ledger.process_start(os.getpid()) or "",
        key="k",
    )
    ledger = lending_ledger.Ledger(None)
    assert ledger.alive(base)
    assert not ledger.alive(dataclasses.replace(base, started="1"))  # a reused pid
    assert ledger.alive(dataclasses.replace(base, started=""))  # no start time: the pid
    assert not ledger.alive(dataclasses.replace(base, pid=gone.pid, started=""))


def test_a_sweep_drops_the_locks_of_gone_lenders_and_keeps_the_held_ones() -> None:
    # An older pairbot's sweep removes a dead lending's record, never the lock beside it.
    with lending_ledger.locked() as ledger:
        assert ledger.path is not None
        gone, held = ledger.path / "999999999-0.lock", ledger.path / "999999999-1.lock"
    gone.touch(0o600)
    held.touch(0o600)
    descriptor = os.open(held, os.O_RDWR)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        lending.sweep()
        assert not gone.exists() and held.exists()
    finally:
        os.close(descriptor)
        held.unlink()


def _lent(root: str, *, writable: tuple[str, ...] = (), closed: bool = False) -> lending.Lending:
    where = Path(root)
    mode = 0o750 if closed else 0o755
    return lending.Lending(
        user="pairbot-agent",
        admin=(),
        root=where,
        writable=tuple(Path(p) for p in writable),
        git=lending.GitEntry(where / ".git", None, None),
        held=((where, mode), (where / ".pair", mode)),
        home=None,
        pid=1,
        started="1",
        key=uuid.uuid4().hex,
    )


_R = "/w/r"
_CARD = "/w/r/.pair/worktrees/card-1"
_JOURNAL = "/w/r/.pair/batches/card-1/journal.jsonl"


@pytest.mark.parametrize(
    ("mine", "others", "expected"),
    [
        pytest.param(
            _lent(_R),
            [],
            lending_shared.Sharing(False, (), frozenset(), frozenset(), frozenset()),
            id="alone",
        ),
        pytest.param(
            _lent(_R),
            [_lent(_R)],
            lending_shared.Sharing(
                True, (), frozenset(), frozenset({Path(_R), Path(_R, ".pair")}), frozenset()
            ),
            id="one-tree-twice",
        ),
        pytest.param(
            _lent(_R, closed=True),
            [_lent(_CARD, writable=(_JOURNAL,))],
            lending_shared.Sharing(
                False,
                (Path(_CARD), Path(_JOURNAL)),
                frozenset(),
                frozenset(),
                frozenset({Path(_R), Path(_R, ".pair")}),
            ),
            id="checkout-closed-around-a-card",
        ),
        pytest.param(
            _lent(_R),
            [_lent(_CARD)],
            lending_shared.Sharing(False, (Path(_CARD),), frozenset(), frozenset(), frozenset()),
            id="checkout-open-around-a-card",
        ),
        pytest.param(
            _lent(_CARD, writable=(_JOURNAL,)),
            [_lent(_R, closed=True)],
            lending_shared.Sharing(False, (), frozenset(), frozenset(), frozenset()),
            id="card-inside-a-checkout-that-kept-it",
        ),
        pytest.param(
            _lent("/w/a", writable=("/w/j",)),
            [_lent("/w/b", writable=("/w/j",))],
            lending_shared.Sharing(False, (), frozenset({Path("/w/j")}), frozenset(), frozenset()),
            id="a-writable-lent-twice",
        ),
    ],
)
def test_what_a_take_back_leaves_to_the_other_live_lendings(
    mine: lending.Lending, others: list[lending.Lending], expected: lending_shared.Sharing
) -> None:
    assert (
        lending_shared.sharing(mine, [o for o in others if o.key != mine.key] or others) == expected
    )


def _checkout(shared: Path) -> Path:
    """A checkout holding pairbot's state beside the project's files, as `pairbot init` and
    a few cards leave it."""
    root = shared / "repo"
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for name, text in {
        "src/app.py": "print('hi')\n",
        ".pair/config.yaml": "agent: command\n",
        ".pair/forge/forge.lock": "",
        ".pair/batches/hello/journal.jsonl": "",
        ".pair/batches/card-3/batch.yaml": "kind: card\n",
        ".pair/app/webhook-secret": "dev-secret\n",
    }.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / ".pair/app").chmod(0o700)  # as pairbot makes it
    return root


# What the agent of a plain batch's step tries: the work it was lent, then everything else.
_AGENT = """
stat -c '%U' . .pair .pair/forge .pair/batches/card-3 >owners
echo "print('changed')" >src/app.py
echo '{"report": 1}' >>.pair/batches/hello/journal.jsonl
echo x >.pair/junit.xml
for try in 'mv .pair pair-gone' 'mv .git git-gone' 'rm -rf .pair/batches' \
    'echo x >.pair/forge/forge.lock' 'echo x >.pair/batches/card-3/batch.yaml' \
    'mv .pair/batches .pair/b' 'cat .pair/app/webhook-secret'; do
  if sh -c "$try" 2>/dev/null; then echo "allowed: $try" >>allowed; fi
done
exit 0
"""


@needs_isolation
@needs_setfacl
def test_a_plain_batch_step_keeps_pairbots_state_and_the_checkout_pairbots(
    shared_dir: Path,
) -> None:
    from app.runtime.rex import LocalLocus, RexRuntime

    root = _checkout(shared_dir)
    mode = root.stat().st_mode
    journal = root / ".pair/batches/hello/journal.jsonl"
    settings = resolve_settings(
        env={},
        manifest=None,
        project=BatchSettings.model_validate(
            {"agent": AgentSpecModel(name="command"), "agentCommand": ["/bin/sh", "-c", _AGENT]}
        ),
    )
    launch = AgentLaunch(
        stage="apply",
        command="apply",
        settings=settings,
        root=root,
        instructions="go\n",
        env={"PATH": "/usr/bin:/bin"},  # no PAIR_ISOLATION: the default
        pair_env={"PAIR_CHANGE": "hello"},
        writable=(journal,),
    )
    launcher = Launcher(lambda _s: RexRuntime(LocalLocus()), host=isolation.probe_host)
    result = asyncio.run(launcher.launch(launch, lambda _line: None))
    assert isinstance(result, AgentSpawnResult) and result.exit_code == 0, result
    me = subprocess.run(["id", "-un"], capture_output=True, text=True, check=True).stdout.strip()
    # While the agent ran, what git and pairbot's locks look at was pairbot's.
    assert (root / "owners").read_text().split() == [me] * 4
    assert not (root / "allowed").exists(), (root / "allowed").read_text()
    assert (root / "src/app.py").read_text() == "print('changed')\n"
    assert journal.read_text() == '{"report": 1}\n'
    assert (root / ".pair/junit.xml").exists()
    # All pairbot's again, the modes and ACLs as they were.
    assert all(p.lstat().st_uid == os.geteuid() for p in [root, *root.rglob("*")])
    assert root.stat().st_mode == mode and not (root.stat().st_mode & 0o1000)
    held = [str(root), str(root / ".pair")]
    acl = subprocess.run(["getfacl", "-c", *held], capture_output=True, check=True)
    assert isolation.DEFAULT_AGENT_USER.encode() not in acl.stdout
    status = subprocess.run(["git", "-C", str(root), "status"], capture_output=True, check=False)
    assert status.returncode == 0, status.stderr


@needs_isolation
def test_without_setfacl_the_whole_tree_is_handed_over_and_back(shared_dir: Path) -> None:
    root = _checkout(shared_dir)
    switch = isolation.decide("auto", "local", isolation.probe_host(), "pairbot-agent")
    assert isinstance(switch, isolation.Switch)
    account = isolation.AgentAccount(switch, setfacl=lambda: None)
    uid, _ = account.ensure()
    lent = lending.lend(account, root, ())
    try:
        assert root.stat().st_uid == uid and (root / "src/app.py").stat().st_uid == uid
        assert (root / ".pair/forge").stat().st_uid == os.geteuid()  # still kept
    finally:
        assert lending.take_back(lent) is None
    assert all(p.lstat().st_uid == os.geteuid() for p in [root, *root.rglob("*")])


@needs_isolation
def test_a_plain_batch_step_ending_leaves_a_concurrent_card_step_its_files(
    shared_dir: Path,
) -> None:
    # The App's worker runs the demo's plain batch in the checkout and a card's step in its
    # worktree (under .git) at the same time: the first to end takes back only its own.
    root = _checkout(shared_dir)
    worktree = root / ".pair/worktrees/card-3"
    (worktree / "src").mkdir(parents=True)
    card_journal = root / ".pair/batches/card-3/journal.jsonl"
    card_journal.write_text("")
    switch = isolation.decide("auto", "local", isolation.probe_host(), "pairbot-agent")
    assert isinstance(switch, isolation.Switch)
    account = isolation.AgentAccount(switch)
    agent = account.ensure()[0]
    card = lending.lend(account, worktree, (card_journal,))
    try:
        plain = lending.lend(account, root, (root / ".pair/batches/hello/journal.jsonl",))
        assert lending.take_back(plain) is None
        assert (worktree / "src").stat().st_uid == agent and card_journal.stat().st_uid == agent
    finally:
        assert lending.take_back(card) is None
    assert all(p.lstat().st_uid == os.geteuid() for p in [root, *root.rglob("*")])


@needs_isolation
@needs_setfacl
def test_a_checkout_pairbot_may_not_change_is_one_clear_line_and_nothing_is_lent(
    shared_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A checkout another user owns: pairbot's chmod is refused (as root it never is, so the
    # refusal is the kernel's answer, EPERM, given here).
    root = _checkout(shared_dir)
    switch = isolation.decide("auto", "local", isolation.probe_host(), "pairbot-agent")
    assert isinstance(switch, isolation.Switch)

    def refused(self: Path, mode: int) -> None:
        raise PermissionError(1, "Operation not permitted", str(self))

    monkeypatch.setattr(Path, "chmod", refused)
    with pytest.raises(UserError, match=r"cannot lend .*Operation not permitted.*must own"):
        lending.lend(isolation.AgentAccount(switch), root, ())
    monkeypatch.undo()
    assert all(p.lstat().st_uid == os.geteuid() for p in [root, *root.rglob("*")])
    assert lending.sweep() == []  # and no record is left behind


# A pairbot that lends a tree and is killed before it can take it back.
_KILLED = """
import os, signal, sys
from pathlib import Path
from app.errors import UserError
from app.runtime import isolation, lending, lending_ledger, lending_shared
root = Path(sys.argv[1])
switch = isolation.decide("auto", "local", isolation.probe_host(), "pairbot-agent")
account = isolation.AgentAccount(switch)
lent = lending.lend(account, root, (root / ".pair/batches/hello/journal.jsonl",),
                    account.make_home())
print(lent.home, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


@needs_isolation
def test_what_a_killed_pairbot_lent_is_taken_back_by_the_next(shared_dir: Path) -> None:
    root = _checkout(shared_dir)
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED, str(root)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    home = Path(killed.stdout.strip())
    agent = isolation.AgentAccount(isolation.Switch("pairbot-agent", "setpriv")).ensure()[0]
    assert (root / "src/app.py").stat().st_uid == agent and home.exists()
    ledger = Path(f"/tmp/pairbot-lendings-{os.geteuid()}")
    mine = [p for p in ledger.glob("*.json") if json.loads(p.read_text())["root"] == str(root)]
    assert len(mine) == 1
    # The next lending, of any tree, sweeps first; a live pairbot's lending is left alone.
    switch = isolation.decide("auto", "local", isolation.probe_host(), "pairbot-agent")
    assert isinstance(switch, isolation.Switch)
    other = shared_dir / "other"
    (other / "src").mkdir(parents=True)
    live = lending.lend(isolation.AgentAccount(switch), other, ())
    try:
        assert all(p.lstat().st_uid == os.geteuid() for p in [root, *root.rglob("*")])
        assert not home.exists() and not mine[0].exists()
        assert not root.stat().st_mode & 0o1000  # the sticky bit is gone too
        assert lending.sweep() == []
        assert (other / "src").stat().st_uid == agent  # still lent
    finally:
        assert lending.take_back(live) is None
    assert (other / "src").stat().st_uid == os.geteuid()
