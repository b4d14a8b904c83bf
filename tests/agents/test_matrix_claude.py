"""claude in every posture, isolated, does a real plain-batch step and a real card step.

The scripted Anthropic Messages server (tests/agents/anthropic_server.py) asks claude, as a
model would, to write the change's plan.md with its `Write` tool and then to run the prompt's
report line with its `Bash` tool; claude's own permission checks decide, under the flags
pairbot ships for each posture (app/runtime/permissions.py). Each case asserts the file
written, the report journaled and the usage journaled equal to what the server reported.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from app.settings import Posture
from tests.agents.anthropic_server import ScriptedModel
from tests.agents.matrix import KINDS, POSTURES, Kind, Step, run_step
from tests.agents.real_cli import installed
from tests.agents.script import FINAL_TEXT, SUMMARY, report_command
from tests.support.loopback import serve

pytestmark = [
    pytest.mark.skipif(installed("claude") is None, reason="claude CLI not installed"),
    pytest.mark.xdist_group("claude-matrix"),
]


class _Model:
    """The scripted server for one step, and what it reported."""

    def __init__(self) -> None:
        self.model: ScriptedModel | None = None

    @contextmanager
    def __call__(self, step: Step) -> Iterator[Mapping[str, str]]:
        self.model = ScriptedModel(
            "Write",
            {"file_path": str(step.target), "content": step.content},
            final_text=FINAL_TEXT,
            then=[("Bash", lambda body: {"command": report_command(body)})],
        )
        with serve(self.model.answer, name="anthropic") as origin:
            yield {
                "ANTHROPIC_BASE_URL": origin,
                "ANTHROPIC_API_KEY": "sk-ant-loopback",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "DISABLE_AUTOUPDATER": "1",
            }


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("posture", POSTURES)
def test_claude_edits_and_reports(shared_dir: Path, posture: Posture, kind: Kind) -> None:
    model = _Model()
    outcome = run_step(shared_dir, "claude", posture, kind, model)
    assert outcome.written is not None, outcome.explain()
    assert [r["message"] for r in outcome.reports] == [SUMMARY], outcome.explain()
    assert model.model is not None
    # Every message the server answered counts, the side requests (a title) included.
    sent_in = sum(i for _, i, _ in model.model.reported)
    sent_out = sum(o for _, _, o in model.model.reported)
    usage = outcome.usage
    assert usage is not None, outcome.explain()
    assert (usage["inputTokens"], usage["outputTokens"]) == (sent_in, sent_out)
