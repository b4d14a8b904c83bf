"""gemini in every posture, isolated, does a real plain-batch step and a real card step.

The scripted Gemini API (tests/agents/gemini_server.py) asks gemini, as a model would, to write
the change's plan.md with its `write_file` tool and then to run the prompt's report line with
its `run_shell_command` tool; gemini's own Policy Engine decides, under the approval mode
pairbot passes for each posture (app/runtime/permissions.py) and the policy file it writes for
a bounded one (app/runtime/rules/gemini.py). Each case asserts the file written, the report
journaled and the usage journaled equal to what the server reported. In each bounded posture a
second case asks for more than the step needs and proves gemini refuses it, while an operator's
own policy file (`permissions.raw.gemini: [--policy, <file>]`) still loads beside pairbot's.

Authentication, as an operator of an isolated agent does it: the agent's HOME is fresh, so
gemini's user settings (`~/.gemini/settings.json`) are not where pairbot's user keeps them.
The test points gemini at the loopback with GOOGLE_GEMINI_BASE_URL, which alone would select
gemini's "gateway" auth that 0.61 refuses headless; the API-key auth is selected in a system
settings file named by GEMINI_CLI_SYSTEM_SETTINGS_PATH, which gemini reads only when the file
and every directory above it are owned by root and not writable by group or others (else it
skips it with a "Security Warning"). The key itself is GEMINI_API_KEY.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.settings import Posture
from tests.agents.gemini_server import CACHED, CANDIDATES, PROMPT, ScriptedGemini, settings
from tests.agents.matrix import KINDS, PLAN, POSTURES, Kind, Step, run_step
from tests.agents.real_cli import installed
from tests.agents.script import FINAL_TEXT, SUMMARY, report_command
from tests.support.loopback import serve

pytestmark = [
    pytest.mark.skipif(installed("gemini") is None, reason="gemini CLI not installed"),
    pytest.mark.xdist_group("gemini-matrix"),
]

# Root's own directories where a test may make a system settings file gemini trusts.
_SECURE_BASES = ("/run", "/var/lib")


def _secure(path: Path) -> bool:
    """gemini's check of a system settings path (isFileAndDirectorySecureSync): root-owned and
    not writable by group or others, the path and every directory above it."""
    for each in (path, *path.parents):
        info = each.stat()
        if info.st_uid != 0 or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return False
    return True


@contextmanager
def _system_settings() -> Iterator[Path]:
    """A system settings file selecting API-key auth, readable by the agent's user."""
    base = next((Path(b) for b in _SECURE_BASES if os.geteuid() == 0 and _secure(Path(b))), None)
    if base is None:
        pytest.skip("gemini trusts a system settings file only in root-owned directories")
    where = Path(tempfile.mkdtemp(prefix="pairbot-gemini-system-", dir=base))
    try:
        where.chmod(0o755)
        path = where / "settings.json"
        path.write_text(settings())
        path.chmod(0o644)
        yield path
    finally:
        shutil.rmtree(where, ignore_errors=True)


Call = tuple[str, Callable[[Mapping[str, Any]], Mapping[str, Any]]]


def _write(step: Step) -> Call:
    return ("write_file", lambda _body: {"file_path": str(step.target), "content": step.content})


def _report() -> Call:
    return ("run_shell_command", lambda body: {"command": report_command(body)})


class _Model:
    """The scripted server for one step, and what it reported: by default the step's two calls,
    edit then report; `before(step)` adds calls ahead of them, `setup(step)` runs first."""

    def __init__(
        self,
        before: Callable[[Step], list[Call]] | None = None,
        setup: Callable[[Step], None] | None = None,
    ) -> None:
        self.model: ScriptedGemini | None = None
        self._before = before
        self._setup = setup

    @contextmanager
    def __call__(self, step: Step) -> Iterator[Mapping[str, str]]:
        if self._setup is not None:
            self._setup(step)
        calls = [*(self._before(step) if self._before else []), _write(step), _report()]
        name, make_args = calls[0]  # the first call's args need no request
        self.model = ScriptedGemini(
            {"name": name, "args": dict(make_args({}))}, then=calls[1:], final_text=FINAL_TEXT
        )
        with _system_settings() as system, serve(self.model.answer, name="gemini") as origin:
            yield {
                "GOOGLE_GEMINI_BASE_URL": origin,
                "GEMINI_API_KEY": "loopback-key",
                "GEMINI_CLI_SYSTEM_SETTINGS_PATH": str(system),
            }


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("posture", POSTURES)
def test_gemini_edits_and_reports(shared_dir: Path, posture: Posture, kind: Kind) -> None:
    model = _Model()
    outcome = run_step(shared_dir, "gemini", posture, kind, model)
    assert outcome.written == PLAN, outcome.explain()
    assert [r["message"] for r in outcome.reports] == [SUMMARY], outcome.explain()
    assert model.model is not None
    # Every answer (the edit, the report, the closing text) reported PROMPT in with CACHED of it
    # cached and CANDIDATES out; pairbot counts gemini's uncached input. gemini reports no cost.
    answers = model.model.reported
    usage = outcome.usage
    assert usage is not None, outcome.explain()
    assert (usage["inputTokens"], usage["outputTokens"]) == (
        answers * (PROMPT - CACHED),
        answers * CANDIDATES,
    ), outcome.explain()
    assert usage.get("costUsd") is None


# The operator's own rule, beside pairbot's: gemini loads every `--policy` given.
_OPERATOR_POLICY = """[[rule]]
toolName = "run_shell_command"
commandPrefix = "echo operator"
decision = "allow"
priority = 100
"""


@pytest.mark.parametrize("posture", ["repo-sandboxed-permissive", "curated-allowlist"])
def test_gemini_bounded_posture_allows_only_the_step(shared_dir: Path, posture: Posture) -> None:
    own = shared_dir / "own-policy.toml"
    own.write_text(_OPERATOR_POLICY)
    own.chmod(0o644)
    outside = shared_dir / "outside.txt"

    def operator_raw(step: Step) -> None:
        # The project's config, written before the step reads it: the operator's own policy.
        config = step.workdir / ".pair" / "config.yaml"
        data = yaml.safe_load(config.read_text())
        data["batch"]["permissions"]["raw"] = {"gemini": ["--policy", str(own)]}
        config.write_text(yaml.safe_dump(data))

    def more(step: Step) -> list[Call]:
        evil = step.workdir / "evil"
        return [
            ("run_shell_command", lambda _body: {"command": f"touch {evil}"}),
            (
                "run_shell_command",
                lambda body: {"command": f"{report_command(body)} && touch {evil}"},
            ),
            ("run_shell_command", lambda _body: {"command": "echo operator rule"}),
            (
                "write_file",
                lambda _body: {"file_path": f"{step.workdir}/../outside.txt", "content": "x"},
            ),
        ]

    model = _Model(more, operator_raw)
    outcome = run_step(shared_dir, "gemini", posture, "batch", model)
    assert outcome.written == PLAN, outcome.explain()
    assert [r["message"] for r in outcome.reports] == [SUMMARY], outcome.explain()
    assert not (shared_dir / "repo" / "evil").exists(), outcome.explain()
    assert not outside.exists(), outcome.explain()
    assert model.model is not None
    # What gemini answered each call, in order, as the last request carries them.
    answers = [
        part["functionResponse"]["response"]
        for content in model.model.requests[-1]["contents"]
        for part in content.get("parts", [])
        if "functionResponse" in part
    ]
    assert len(answers) == 6, answers
    denied = {"error": "Tool execution denied by policy."}
    assert answers[:2] == [denied, denied], answers
    assert "operator rule" in answers[2].get("output", ""), answers
    assert "error" in answers[3], answers  # outside the tree: refused
    assert "recorded completion" in answers[5].get("output", ""), answers


class _InGitHubActions(_Model):
    """The step's model, with the job's own variables in pairbot's environment."""

    @contextmanager
    def __call__(self, step: Step) -> Iterator[Mapping[str, str]]:
        with super().__call__(step) as env:
            yield {**env, "GITHUB_SHA": "0" * 40, "GITHUB_ACTIONS": "true", "CI": "true"}


def test_gemini_reports_inside_a_github_actions_job(shared_dir: Path) -> None:
    # With GITHUB_SHA in its environment gemini strips every variable but a few from its shell
    # commands (sanitizeEnvironment's strict mode), PAIR_* included: the report would not know
    # its change. pairbot keeps GITHUB_SHA from gemini (app/runtime/adapters.py).
    model = _InGitHubActions()
    outcome = run_step(shared_dir, "gemini", "repo-sandboxed-permissive", "card", model)
    assert outcome.written == PLAN, outcome.explain()
    assert [r["message"] for r in outcome.reports] == [SUMMARY], outcome.explain()
