"""Each real CLI, isolated as shipped, does a real verify step of a plain batch.

The scripted agent proposes and applies the change (the project's stage map gives it those
stages); the real CLI, driven by its scripted vendor server, then verifies it the way a
reviewer told to change nothing usually does: its own file-writing tool writes the findings
file `review.json` in its tree, and its shell tool runs the prompt's report line with
`--complete "Ready for archive" --findings review.json` (tests/agents/matrix.py `run_verify`).

Each case asserts what app/engine/findings_files.py promises: the report is accepted and the
review converges (the change is done), the journal's completion carries the findings and where
the file lay (`findingsFile`), and the file is gone from the tree and from every commit of the
batch's work line, the line its pull requests are built from. Each case spawns its CLI once
(the scripted agent takes a second per step before it) and runs in that CLI's matrix xdist
group, under the default posture and isolation (as root the CLI runs as `pairbot-agent`).

codex's scripted server (tests/agents/openai_server.py `ScriptedSteps`) reports with the line
`script.report_command` builds; its case points that name at the verifier's report for the
test's duration.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from app.domain.review.seal import is_agent_command_file
from tests.agents import openai_server
from tests.agents.anthropic_server import ScriptedModel
from tests.agents.chat_server import ScriptedChat
from tests.agents.gemini_server import ScriptedGemini
from tests.agents.matrix import FINDINGS, REVIEW, VERDICT, Step, VerifyOutcome, run_verify
from tests.agents.openai_server import ScriptedSteps
from tests.agents.real_cli import installed
from tests.agents.script import FINAL_TEXT, report_command
from tests.agents.test_matrix_codex import _config as codex_config
from tests.agents.test_matrix_gemini import _system_settings as gemini_system_settings
from tests.agents.test_matrix_opencode import provider_config as opencode_config
from tests.support.loopback import serve

verify_report = functools.partial(report_command, summary=VERDICT, findings=REVIEW)


def _assert_reported_and_taken_out(outcome: VerifyOutcome) -> None:
    why = outcome.explain()
    assert outcome.earlier == ["propose advanced", "apply advanced"], why
    assert (outcome.transition, outcome.state) == ("verify", "advanced"), why
    assert (outcome.status, outcome.done) == ("done", True), why
    (completion,) = [r for r in outcome.reports if r.get("transition") == "verify"]
    assert completion["message"] == VERDICT, why
    # The report's defaults filled in (scopeChanges, requiredProofs), the file's keys as written.
    assert {k: completion["findings"][k] for k in FINDINGS} == dict(FINDINGS), why
    assert completion["findingsFile"] == REVIEW, why
    (verified,) = [
        r for r in outcome.journal if r.get("kind") == "outcome" and r["transition"] == "verify"
    ]
    assert verified["verdict"]["source"] == "findings", why  # the file decided, not the text
    assert verified["verdict"]["converged"] is True, why
    assert outcome.written is None, why  # taken out of the tree
    assert "alpha.txt" in outcome.work_files, why  # the line holds the apply's work
    assert REVIEW not in outcome.work_files, why
    # Nor the command file pairbot rendered for the CLI: pairbot's own, never the work's.
    assert not [path for path in outcome.work_files if is_agent_command_file(path)], why


@pytest.mark.skipif(installed("claude") is None, reason="claude CLI not installed")
@pytest.mark.xdist_group("claude-matrix")
def test_claude_verifies_with_a_findings_file_in_its_tree(shared_dir: Path) -> None:
    @contextmanager
    def model(step: Step) -> Iterator[Mapping[str, str]]:
        scripted = ScriptedModel(
            "Write",
            {"file_path": str(step.target), "content": step.content},
            final_text=FINAL_TEXT,
            then=[("Bash", lambda body: {"command": verify_report(body)})],
        )
        with serve(scripted.answer, name="anthropic") as origin:
            yield {
                "ANTHROPIC_BASE_URL": origin,
                "ANTHROPIC_API_KEY": "sk-ant-loopback",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "DISABLE_AUTOUPDATER": "1",
            }

    _assert_reported_and_taken_out(run_verify(shared_dir, "claude", model))


@pytest.mark.skipif(installed("codex") is None, reason="codex CLI not installed")
@pytest.mark.xdist_group("codex-matrix")
def test_codex_verifies_with_a_findings_file_in_its_tree(
    shared_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ScriptedSteps builds its report with the name openai_server imported; the verifier's
    # report carries its verdict and findings file.
    monkeypatch.setattr(openai_server, "report_command", verify_report)
    home = shared_dir / "codex-home"

    @contextmanager
    def model(step: Step) -> Iterator[Mapping[str, str]]:
        # A path relative to codex's working directory, the tree's root, as a model writes it.
        scripted = ScriptedSteps(REVIEW, step.content)
        with serve(scripted.answer, name="openai") as origin:
            home.mkdir()
            home.chmod(0o777)  # codex writes its state here, as the agent's user
            (home / "config.toml").write_text(codex_config(origin))
            yield {"CODEX_HOME": str(home), "OPENAI_API_KEY": "sk-loopback"}

    _assert_reported_and_taken_out(run_verify(shared_dir, "codex", model))


@pytest.mark.skipif(installed("gemini") is None, reason="gemini CLI not installed")
@pytest.mark.xdist_group("gemini-matrix")
def test_gemini_verifies_with_a_findings_file_in_its_tree(shared_dir: Path) -> None:
    @contextmanager
    def model(step: Step) -> Iterator[Mapping[str, str]]:
        scripted = ScriptedGemini(
            {
                "name": "write_file",
                "args": {"file_path": str(step.target), "content": step.content},
            },
            then=[("run_shell_command", lambda body: {"command": verify_report(body)})],
            final_text=FINAL_TEXT,
        )
        with gemini_system_settings() as system, serve(scripted.answer, name="gemini") as origin:
            yield {
                "GOOGLE_GEMINI_BASE_URL": origin,
                "GEMINI_API_KEY": "loopback-key",
                "GEMINI_CLI_SYSTEM_SETTINGS_PATH": str(system),
            }

    _assert_reported_and_taken_out(run_verify(shared_dir, "gemini", model))


@pytest.mark.skipif(installed("opencode") is None, reason="opencode CLI not installed")
@pytest.mark.xdist_group("opencode-matrix")
def test_opencode_verifies_with_a_findings_file_in_its_tree(shared_dir: Path) -> None:
    @contextmanager
    def model(step: Step) -> Iterator[Mapping[str, str]]:
        scripted = ScriptedChat(
            [
                ("write", lambda _body: {"filePath": str(step.target), "content": step.content}),
                ("bash", lambda body: {"command": verify_report(body), "description": "Report"}),
            ],
            final_text=FINAL_TEXT,
        )
        with serve(scripted.answer, name="chat") as origin:
            yield {
                "OPENCODE_CONFIG_CONTENT": opencode_config(origin),
                "LOOPBACK_API_KEY": "sk-loopback",
                "OPENCODE_DISABLE_MODELS_FETCH": "1",
                "OPENCODE_DISABLE_AUTOUPDATE": "1",
                "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
            }

    _assert_reported_and_taken_out(run_verify(shared_dir, "opencode", model))
