"""What `pairbot batch report` loads: the report every agent step runs, in a process of its own.

A real agent pays its start-up once per report (the scripted agent in tests/ too, for every
step), so what it imports is held here: the journal writer, and the manifest's models only when
the engine's memo of the manifest (`PAIR_MANIFEST_KEYS`, app/engine/known_keys.py) is missing
or not for the manifest as it is; never the hosts' SDKs, the runtime, the web stack, the step
lock, or the budget's spend reduction (`app.cycle.humans` imports those inside the human verbs
that use them). The report runs as the engine starts it: the console script's entry in a fresh
interpreter, its batch, change, transition and session in the environment.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from app.engine.known_keys import ENV, memo_for
from app.engine.manifest import manifest_path
from benchmarks.engine_scale import BATCH, Shape, build_project
from tests.support.imports import pairbot_modules, under

ROOT = Path(__file__).resolve().parents[2]

HOST_SDKS = ("githubkit", "httpx", "httpcore", "jwt", "hishel", "azure", "msrest", "requests")
RUNTIME = ("swerex", "aiohttp", "app.runtime")
WEB = ("starlette", "uvicorn", "app.web")
# Only the human verbs need these: the step lock, and the budget's key (whose module reduces
# the spend: the metrics' models and the regression ledger).
HUMAN_ONLY = (
    "app.engine.lock",
    "app.domain.card.budget",
    "app.domain.reports",
    "app.domain.review.regression",
)


# The manifest's models and what they pull in: what the engine's memo spares a report.
MODELS = ("pydantic", "pydantic_core", "yaml", "app.engine.manifest", "app.settings")


def report_modules(
    project: Path, tmp: Path, argv: list[str], *, memo: str | None = None
) -> tuple[str, set[str]]:
    """Run `pairbot batch report …` in `project` as an agent step does (with the engine's
    `memo` of the manifest, when given); its output and every module loaded by its exit."""
    env = {
        **os.environ,
        "PAIR_BATCH": BATCH,
        "PAIR_CHANGE": "c0000",
        "PAIR_TRANSITION": "apply",
        "PAIR_SESSION": "s1",
        **({ENV: memo} if memo is not None else {}),
    }
    code, out, modules = pairbot_modules(["batch", "report", *argv], project, tmp, env)
    assert code == 0, out
    return out, modules


def test_with_the_engines_memo_a_report_loads_no_models(tmp_path: Path) -> None:
    project = tmp_path / "project"
    journal = build_project(project, Shape(10, 100))
    path = manifest_path(project, BATCH)
    memo = memo_for(path, path.read_bytes())
    out, modules = report_modules(project, tmp_path, ["--complete", "done"], memo=memo)
    assert out == "recorded completion for c0000 (journal entry 100)\n"
    assert json.loads(journal.read_text(encoding="utf-8").splitlines()[-1])["key"] == "c0000"
    assert {"app.cycle.humans", "app.engine.known_keys", "app.engine.journal"} <= modules
    assert under(modules, *MODELS, *HOST_SDKS, *RUNTIME, *WEB, *HUMAN_ONLY) == []
    assert under(modules, "app.domain", "hosts", "asyncio") == []


def test_an_agents_report_loads_the_journal_writer_and_the_manifest_only(tmp_path: Path) -> None:
    # No memo (a report run by hand, or a manifest edited since the step started): the report
    # validates the manifest itself.
    project = tmp_path / "project"
    journal = build_project(project, Shape(10, 100))
    out, modules = report_modules(project, tmp_path, ["--complete", "done: c0000"])
    assert out == "recorded completion for c0000 (journal entry 100)\n"
    last = json.loads(journal.read_text(encoding="utf-8").splitlines()[-1])
    assert (last["kind"], last["key"], last["transition"]) == ("completion", "c0000", "apply")
    # It checked the change against the manifest and wrote the journal.
    assert {"app.cycle.humans", "app.engine.manifest", "app.engine.journal"} <= modules
    assert under(modules, *HOST_SDKS, *RUNTIME, *WEB) == []
    assert under(modules, *HUMAN_ONLY) == []
    # A red verifier's verdict is read only when its report carries one.
    assert under(modules, "app.domain.review.red_verdict") == []
    # Nothing of the card cycle or the step machinery; of hosts/, the config's error tree.
    assert under(modules, "app.cycle") == ["app.cycle", "app.cycle.humans"]
    assert under(modules, "app.engine.runner", "app.engine.step", "asyncio") == []
    assert under(modules, "hosts") == ["hosts", "hosts.errors"]
