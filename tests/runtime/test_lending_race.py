"""Two steps of one OS user lending at once: one ends, or a sweep runs, while the other's agent
still writes `.pair/...` (app/runtime/lending.py, lending_shared.py, lending_ledger.py).

The App's worker runs several steps in one process (threads), and several pairbots of one user
run side by side (processes; a container's pairbot sharing /tmp records pids of another PID
namespace). Each case lends two trees, A then B, as the posture's user — root, the runner
with passwordless sudo, the plain user who cannot isolate (tests/support/postures.py) — through
tests/runtime/lending_driver.py, whose steps a test orders exactly (no sleep, no luck):

    lend A, lend B, A's agent writes                       both lent, both agents at work
    then A ends:  take-back   A is taken back
                  killed      A's pairbot is SIGKILLed and B's sweeps its record
                  sweep       B's pairbot sweeps while A's lives (another PID namespace too)
    then every live agent writes: a new file in `.pair` (held: ACL), one in `src` (lent: owner),
    its journal (lent: owner); every lending is taken back

and at the end every file is the posture user's, each held directory has its mode back and no
write entry for the agent, and the ledger holds nothing of these trees. The layouts: two
checkouts; two card worktrees of one checkout; a checkout (a plain batch's step) and a card's
worktree inside it; one checkout lent twice (two plain batches). Every directory is closed to
other users (umask 027, a self-hosted runner's), so the agent reaches its tree only through the
ACL entries pairbot gives it.
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.runtime.isolation import DEFAULT_AGENT_USER
from tests.support.git import git, init_repo
from tests.support.postures import VENV_BIN, Name, Posture, posture, remove_tree, users_held

ANSWER_S = 120.0  # one command of a driver: a lending's chown and setfacl, on a loaded machine
LAYOUTS = ("two-checkouts", "two-worktrees", "checkout-and-worktree", "one-tree-twice")
# (how the steps run, how A ends): a killed pairbot needs a process of its own, and the PID
# namespace is a process's.
RUNS = (
    ("threads", "take-back"),
    ("threads", "sweep"),
    ("processes", "take-back"),
    ("processes", "killed"),
    ("processes", "sweep"),
    ("pid-namespace", "sweep"),
)

pytestmark = [
    pytest.mark.skipif(
        os.geteuid() != 0,
        reason="the lending races need root (to make the runner-like and the plain users)",
    ),
    pytest.mark.skipif(
        shutil.which("sudo") is None or shutil.which("setfacl") is None,
        reason="the runner posture needs sudo and setfacl (python3 dev.py test installs them)",
    ),
]


@pytest.fixture(scope="module")
def users() -> Iterator[None]:
    with users_held():  # shared with other workers' flows as these users
        yield


@pytest.fixture
def shared(users: None) -> Iterator[Path]:
    """Root's workspace (pytest's tmp is root's, 0700; the agent must reach this one)."""
    path = Path(tempfile.mkdtemp(prefix="pbt-lending-race-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        remove_tree(path)


class Driver:
    """One pairbot-like process of the posture's user (tests/runtime/lending_driver.py)."""

    def __init__(self, where: Posture, *, namespace: bool = False) -> None:
        argv = where.argv([str(VENV_BIN / "python"), "-m", "tests.runtime.lending_driver"])
        if namespace:  # its pids mean other processes outside: /proc is its namespace's
            argv = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", *argv]
        self.proc = subprocess.Popen(
            argv,
            env=where.env(),
            cwd="/",
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.isolates = bool(self._answer()["isolates"])

    def ask(self, **command: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()
        return self._answer()

    def _answer(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(self.proc.stdout, selectors.EVENT_READ)
            if not selector.select(ANSWER_S):
                raise AssertionError(f"the driver gave no answer in {ANSWER_S} s")
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(ANSWER_S)
            assert self.proc.stderr is not None
            raise AssertionError(f"the driver ended: {self.proc.stderr.read()}")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(ANSWER_S)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.kill()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


def _checkout(root: Path) -> None:
    files = {
        "src/app.py": "print('hi')\n",
        ".pair/config.yaml": "batch: {agent: command}\n",
        ".pair/forge/forge.lock": "",
    }
    init_repo(root, files)


def _layout(kind: str, top: Path) -> tuple[Path, Path]:
    """The two roots A and B (see the module docstring)."""
    if kind == "two-checkouts":
        _checkout(top / "a")
        _checkout(top / "b")
        return top / "a", top / "b"
    _checkout(top / "r")
    if kind == "one-tree-twice":
        return top / "r", top / "r"
    worktrees = top / "r" / ".pair" / "worktrees"
    for card in ("card-1", "card-2"):
        git(top / "r", "worktree", "add", "-q", "-b", card, str(worktrees / card))
    if kind == "two-worktrees":
        return worktrees / "card-1", worktrees / "card-2"
    return top / "r", worktrees / "card-1"


def _checkout_of(root: Path) -> Path:
    """The checkout whose `.pair/batches` holds a step's journal (a card's worktree's is the
    main checkout's, as app/cycle keeps it)."""
    return root.parents[2] if root.parent.name == "worktrees" else root


def _held(root: Path) -> list[Path]:
    return [root, root / ".pair"]


def _writes(name: str, root: Path) -> tuple[Path, list[str]]:
    journal = _checkout_of(root) / ".pair" / "batches" / f"step-{name}" / "journal.jsonl"
    return journal, [f".pair/notes/{name}.txt", f"src/{name}.txt", str(journal)]


def _agent_entries(path: Path) -> list[str]:
    acl = subprocess.run(["getfacl", "-cp", str(path)], capture_output=True, text=True, check=True)
    return [
        line for line in acl.stdout.splitlines() if line.startswith(f"user:{DEFAULT_AGENT_USER}:")
    ]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(("mode", "ender"), [pytest.param(*run, id="-".join(run)) for run in RUNS])
@pytest.mark.parametrize("name", ["root", "runner", "plain"])
def test_one_lending_ends_while_another_agent_writes(
    name: Name, mode: str, ender: str, layout: str, shared: Path
) -> None:
    where = posture(name, shared)
    where.work.mkdir(parents=True, exist_ok=True)
    top = Path(tempfile.mkdtemp(prefix="race-", dir=where.work))
    try:
        _race(where, mode, ender, layout, top)
    finally:
        remove_tree(top)


def _race(where: Posture, mode: str, ender: str, layout: str, top: Path) -> None:
    roots = dict(zip("AB", _layout(layout, top), strict=True))
    writes = {step: _writes(step, root) for step, root in roots.items()}
    for journal, _ in writes.values():
        journal.parent.mkdir(parents=True, exist_ok=True)
        journal.write_text("")
    subprocess.run(["chmod", "-R", "o-rwx", str(top)], check=True)  # umask 027's tree
    if where.user != "root":
        shutil.chown(where.work, where.user, where.user)
        where.own(top)
    before = {p: p.stat().st_mode for root in roots.values() for p in _held(root)}
    first = Driver(where, namespace=mode == "pid-namespace")
    second = first if mode == "threads" else Driver(where)
    drivers = {"A": first, "B": second}
    try:
        for step, root in roots.items():
            lent = drivers[step].ask(
                op="lend", name=step, root=str(root), writable=[str(writes[step][0])]
            )
            assert lent["ok"] and lent["lent"] is first.isolates, lent
        said = first.ask(op="agent", name="A", write=writes["A"][1])
        assert said["ok"], f"A's agent, with B lent beside it: {said['said']}"
        if ender == "take-back":
            assert first.ask(op="back", name="A") == {"ok": True, "problem": None}
        elif ender == "killed":
            first.kill()
        swept = second.ask(op="sweep") if ender != "take-back" else {"problems": []}
        assert swept["problems"] == [], swept
        living = ["A", "B"] if ender == "sweep" else ["B"]
        for step in living:
            said = drivers[step].ask(op="agent", name=step, write=writes[step][1])
            assert said["ok"], f"{step}'s agent, after A's {ender} ({mode}): {said['said']}"
        for step in living:
            assert drivers[step].ask(op="back", name=step) == {"ok": True, "problem": None}
    finally:
        for driver in {id(d): d for d in drivers.values()}.values():
            driver.close()
    _assert_all_back(where, top, before)


def _assert_all_back(where: Posture, top: Path, before: dict[Path, int]) -> None:
    foreign = [p for p in [top, *top.rglob("*")] if p.lstat().st_uid != where.uid]
    assert not foreign, f"not {where.user}'s any more: {foreign[:5]}"
    for path, mode in before.items():
        assert path.stat().st_mode == mode, f"{path}: {oct(path.stat().st_mode)} != {oct(mode)}"
        writes = [entry for entry in _agent_entries(path) if "w" in entry]
        assert not writes, f"{path} still lets the agent write: {writes}"
    ledger = Path(f"/tmp/pairbot-lendings-{where.uid}")  # the product's ledger
    records = [p.read_text() for p in ledger.glob("*.json")] if ledger.is_dir() else []
    assert not [r for r in records if str(top) in r], records


def test_another_worker_taking_the_users_leaves_a_flows_agent_its_way(shared: Path) -> None:
    # `-n` without `--dist loadgroup` spreads the posture modules over workers, each taking the
    # users when it starts and giving them back when it ends: neither may strip the runner's
    # HOME of the ACL entry that is the agent's way to its workspace, nor take its sudo away.
    where = posture("runner", shared)
    where.work.mkdir(parents=True, exist_ok=True)
    top = Path(tempfile.mkdtemp(prefix="race-", dir=where.work))
    try:
        _checkout(top / "r")
        journal, writes = _writes("A", top / "r")
        journal.parent.mkdir(parents=True)
        journal.write_text("")
        shutil.chown(where.work, where.user, where.user)
        where.own(top)
        driver = Driver(where)
        try:
            lent = driver.ask(op="lend", name="A", root=str(top / "r"), writable=[str(journal)])
            assert lent == {"ok": True, "lent": True}, lent
            with users_held():  # another worker's module, from its start to its end
                pass
            said = driver.ask(op="agent", name="A", write=writes)
            assert said["ok"], f"the agent, after another worker took the users: {said['said']}"
            assert driver.ask(op="back", name="A") == {"ok": True, "problem": None}
        finally:
            driver.close()
    finally:
        remove_tree(top)
