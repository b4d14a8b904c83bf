"""A pairbot-like process that lends trees to the agent user on command, for the race tests.

`python -m tests.runtime.lending_driver` reads one JSON command a line on stdin and answers
each with one JSON line on stdout, so a test orders the steps of several lendings — in this
process, or in several — exactly, with no sleep:

    {"op": "lend", "name": N, "root": R, "writable": [W…]}   lend R (and W) as step N
    {"op": "agent", "name": N, "write": [P…]}              step N's agent appends to each P
                                                            (relative to R), as the agent user
    {"op": "back", "name": N}                               take step N's lending back
    {"op": "sweep"}                                         sweep, as a pairbot starting does

Each step's lend, agent and take-back run in a thread of its own, as the App's worker runs
its steps (`asyncio.to_thread`), while the main thread waits for the answer. The plan is the
product's own (`isolation.decide` over `probe_host`, the default setting): where pairbot cannot
switch users, nothing is lent and the agent runs as this process's user.
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from app.errors import UserError
from app.runtime import isolation, lending

AGENT_TIMEOUT_S = 60.0


class Steps:
    """The lendings of this process, one thread per step."""

    def __init__(self) -> None:
        self.plan = isolation.decide("auto", "local", isolation.probe_host(), "pairbot-agent")
        self.account = (
            isolation.AgentAccount(self.plan) if isinstance(self.plan, isolation.Switch) else None
        )
        self.lent: dict[str, lending.Lending | None] = {}
        self.roots: dict[str, Path] = {}
        self.threads: dict[str, ThreadPoolExecutor] = {}

    def run(self, command: dict[str, Any]) -> dict[str, Any]:
        op = command["op"]
        if op == "sweep":
            return {"ok": True, "problems": lending.sweep()}
        name = str(command["name"])
        thread = self.threads.setdefault(name, ThreadPoolExecutor(1, f"step-{name}"))
        handler = {"lend": self.lend, "agent": self.agent, "back": self.back}[op]
        return thread.submit(handler, name, command).result()

    def lend(self, name: str, command: dict[str, Any]) -> dict[str, Any]:
        root = Path(command["root"])
        self.roots[name] = root
        if self.account is None:
            self.lent[name] = None
            return {"ok": True, "lent": False}
        writable = tuple(Path(p) for p in command.get("writable", []))
        self.lent[name] = lending.lend(self.account, root, writable, self.account.make_home())
        return {"ok": True, "lent": True}

    def agent(self, name: str, command: dict[str, Any]) -> dict[str, Any]:
        switch = self.plan.argv() if isinstance(self.plan, isolation.Switch) else ()
        # What an agent's `pairbot batch report` and its edits do: append to files of the
        # tree, making a new one in `.pair` (a held directory) where asked.
        script = 'for p; do mkdir -p "$(dirname "$p")" && echo "$0" >>"$p" || exit 1; done'
        done = subprocess.run(
            [*switch, "/bin/sh", "-c", script, name, *command["write"]],
            cwd=self.roots[name],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=AGENT_TIMEOUT_S,
            check=False,
        )
        return {"ok": done.returncode == 0, "said": done.stderr.strip()}

    def back(self, name: str, _command: dict[str, Any]) -> dict[str, Any]:
        lent = self.lent.pop(name)
        return {"ok": True, "problem": None if lent is None else lending.take_back(lent)}


def main() -> None:
    steps = Steps()
    print(json.dumps({"ok": True, "isolates": steps.account is not None}), flush=True)
    for line in sys.stdin:
        try:
            answer = steps.run(json.loads(line))
        except UserError as err:
            answer = {"ok": False, "said": str(err)}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
