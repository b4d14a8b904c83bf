"""`python -m action.azure.try_local`: the documented way to feed the sample `workitem.commented`
notification to the pipeline entry without an organization (docs/azure-pipelines.md, "Try it
locally"), run as a reader of the docs would run it: a subprocess, in a fresh directory."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from action.azure.try_local import SAMPLE

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "azure-pipelines.md"


def try_local(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "action.azure.try_local", str(directory), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def comments(directory: Path) -> list[dict[str, object]]:
    path = directory / ".pair" / "forge" / "comments" / "1.json"
    return list(json.loads(path.read_text()))


def test_the_sample_notification_runs_the_entry_once(tmp_path: Path) -> None:
    where = tmp_path / "try"
    first = try_local(where)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "Traceback" not in first.stdout + first.stderr
    # The pipeline entry's own output: the mask first, then one status line.
    lines = first.stdout.splitlines()
    assert (
        lines[0] == "##vso[task.setvariable variable=pairbot.secret;issecret=true]local-try-token"
    )
    assert lines[-1] == "pairbot: nothing-ready answered with help"
    # The sample's commenter wrote the comment; pairbot answered under it, as itself.
    written = comments(where)
    author = written[0]["author"]
    assert isinstance(author, dict) and author["login"] == "fabrikamfiber4@hotmail.com"
    assert str(written[1]["body"]).startswith("<!-- pair:reply #1 ")
    # The run-state went to `origin`'s pair-state, with the notification remembered.
    branches = subprocess.run(
        ["git", "branch", "--list"],
        cwd=tmp_path / "try.origin.git",
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "pair-state" in branches

    again = try_local(where)
    assert again.returncode == 0
    assert again.stdout.splitlines()[-1].startswith("pairbot: duplicate notification")
    assert len(comments(where)) == 2  # nothing answered twice

    status = try_local(where, "--comment", "<div>/pair status</div>")
    assert status.returncode == 2, status.stdout  # a command that cannot run: answered, exit 2
    assert "has no pairbot cycle yet" in status.stdout
    assert len(comments(where)) == 4


def test_the_docs_show_the_sample_and_the_command() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert "python -m action.azure.try_local" in text
    shown = re.search(r"```json\n(\{\n  \"subscriptionId\".*?)\n```", text, re.DOTALL)
    assert shown is not None, "docs/azure-pipelines.md lost its sample notification"
    assert json.loads(shown.group(1)) == SAMPLE
