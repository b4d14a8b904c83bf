"""codex in every posture, isolated, does a real plain-batch step and a real card step.

The scripted Responses server (tests/agents/openai_server.py `ScriptedSteps`) asks codex, as
a model would, through codex 0.171's own freeform `exec` tool: first `tools.apply_patch` adding
the change's plan.md, then `tools.exec_command` running the prompt's report line. codex's own
sandbox decides, under the flags and rules pairbot ships for each posture
(app/runtime/permissions.py, app/runtime/rules/codex.py): a card's journal lies outside its
worktree, and under curated /tmp (where these tests' checkouts live) is not writable, so only
the added journal directory lets the report land. Each case asserts the file written, the
report journaled and the usage journaled equal to what the server reported (codex's input
without the cached part; no cost).

codex reads its model endpoint from its config (it ignores OPENAI_BASE_URL): the test points
CODEX_HOME at a config.toml naming a loopback provider, as an operator would; the bounded
postures carry that config.toml into the step's own CODEX_HOME beside pairbot's rule
(app/runtime/rules/codex.py). Under full-autonomy codex uses the test's CODEX_HOME itself and
writes its state there (installation id, sqlite, sessions), so it is open to the agent's user.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from app.settings import Posture
from tests.agents.matrix import KINDS, POSTURES, Kind, Step, run_step
from tests.agents.openai_server import ScriptedSteps
from tests.agents.real_cli import installed
from tests.agents.script import SUMMARY
from tests.support.loopback import serve

pytestmark = [
    pytest.mark.skipif(installed("codex") is None, reason="codex CLI not installed"),
    pytest.mark.xdist_group("codex-matrix"),
]


def _config(origin: str) -> str:
    # A Responses provider of the test's own at the loopback origin, HTTPS only: with the
    # built-in one (`openai_base_url`) codex tries a WebSocket first and falls back only after
    # five refused attempts, seconds per step.
    return (
        'model_provider = "loopback"\n'
        "[model_providers.loopback]\n"
        'name = "loopback"\n'
        f'base_url = "{origin}/v1"\n'
        'env_key = "OPENAI_API_KEY"\n'
        'wire_api = "responses"\n'
        "supports_websockets = false\n"
    )


class _Model:
    """The scripted server for one step, its CODEX_HOME, and what it reported."""

    def __init__(self, base: Path) -> None:
        self.home = base / "codex-home"
        self.model: ScriptedSteps | None = None

    @contextmanager
    def __call__(self, step: Step) -> Iterator[Mapping[str, str]]:
        self.model = ScriptedSteps(str(step.target), step.content)
        with serve(self.model.answer, name="openai") as origin:
            self.home.mkdir()
            self.home.chmod(0o777)  # codex writes its state here, as the agent's user
            (self.home / "config.toml").write_text(_config(origin))
            yield {"CODEX_HOME": str(self.home), "OPENAI_API_KEY": "sk-loopback"}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("posture", POSTURES)
def test_codex_edits_and_reports(shared_dir: Path, posture: Posture, kind: Kind) -> None:
    model = _Model(shared_dir)
    outcome = run_step(shared_dir, "codex", posture, kind, model)
    assert model.model is not None
    tool_results = model.model.tool_outputs
    assert outcome.written is not None, f"{outcome.explain()}\n--- tools\n{tool_results}"
    assert [r["message"] for r in outcome.reports] == [SUMMARY], (
        f"{outcome.explain()}\n--- tools\n{tool_results}"
    )
    # codex's turn.completed sums the turn's responses; pairbot takes input without the cache.
    reported = model.model.reported
    sent_in = sum(i - cached for i, cached, _ in reported)
    sent_out = sum(o for _, _, o in reported)
    usage = outcome.usage
    assert usage is not None, outcome.explain()
    assert (usage["inputTokens"], usage["outputTokens"], usage["costUsd"]) == (
        sent_in,
        sent_out,
        None,
    )
