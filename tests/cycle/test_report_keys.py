"""An agent's report checks its change against the engine's memo of the manifest
(`PAIR_MANIFEST_KEYS`, app/engine/known_keys.py) exactly as validating the manifest would.

The memo names the manifest's bytes; a report whose manifest still has them takes the names
from it, and any other report validates the manifest itself. Each case here records the same
report with and without the memo and compares what happened: the journal entry, or the error's
class and text.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from app import __version__
from app.cycle.humans import record_report
from app.engine.known_keys import ENV, keys_from_memo, memo_for
from app.errors import UserError
from tests.support.project import Project, apply_once

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
TWO_PHASES = {
    "phases": [
        {"name": "first", "changes": ["alpha", "beta"]},
        {"name": "second", "changes": ["gamma"]},
    ]
}


def manifest_of(project: Project) -> Path:
    return project.root / ".pair" / "batches" / project.batch / "batch.yaml"


def memo(project: Project) -> str:
    path = manifest_of(project)
    made = memo_for(path, path.read_bytes())
    assert made is not None
    return made


def report(project: Project, key: str, manifest_memo: str | None) -> tuple[str, str]:
    """Record a progress report for `key`: ("ok", the journal's last line) or (the error's
    class, its text)."""
    try:
        record_report(
            project.root,
            batch=project.batch,
            key=key,
            kind="progress",
            message="working",
            transition="apply",
            session="s1",
            findings=None,
            now=NOW,
            manifest_memo=manifest_memo,
        )
    except UserError as error:
        return type(error).__name__, str(error)
    return "ok", (project.run_dir / "journal.jsonl").read_text().splitlines()[-1]


def both(project: Project, key: str, manifest_memo: str) -> tuple[str, str]:
    """The report with the memo, after checking it gives what it gives without."""
    with_memo = report(project, key, manifest_memo)
    assert with_memo == report(project, key, None)
    return with_memo


def test_the_memo_lists_every_change_then_every_phase(
    make_project: Callable[..., Project],
) -> None:
    project = make_project(TWO_PHASES)
    made = memo(project).split(" ")
    assert made[0] == __version__ and len(made[1]) == 64
    assert made[2:] == ["alpha", "beta", "gamma", "first", "second"]
    assert keys_from_memo(manifest_of(project), memo(project)) == made[2:]


def test_a_batch_too_big_for_an_environment_gets_no_memo(
    make_project: Callable[..., Project],
) -> None:
    names = [f"change-{i:04d}-" + "x" * 80 for i in range(200)]  # ~18 KiB of names
    project = make_project({"phases": [{"name": "only", "changes": names}]})
    path = manifest_of(project)
    assert memo_for(path, path.read_bytes()) is None
    assert report(project, names[-1], None)[0] == "ok"  # validated by the report itself


@pytest.mark.parametrize("key", ["beta", "second"])
def test_a_known_change_or_phase_is_recorded_the_same(
    make_project: Callable[..., Project], key: str
) -> None:
    project = make_project(TWO_PHASES)
    said, line = both(project, key, memo(project))
    assert said == "ok" and f'"key":"{key}"' in line


def test_an_unknown_change_is_refused_with_the_same_words(
    make_project: Callable[..., Project],
) -> None:
    project = make_project(TWO_PHASES)
    said, text = both(project, "delta", memo(project))
    assert said == "UnknownChangeError"
    assert text.endswith("known: alpha, beta, gamma, first, second")


def test_a_manifest_edited_since_the_memo_is_validated_again(
    make_project: Callable[..., Project],
) -> None:
    project = make_project(TWO_PHASES)
    before = memo(project)
    path = manifest_of(project)
    # A decomposition step adds a change: the report knows it although the memo does not.
    path.write_text(path.read_text().replace("- gamma", "- gamma\n  - delta"))
    assert keys_from_memo(path, before) is None
    assert both(project, "delta", before)[0] == "ok"
    # An edit that breaks the manifest: the report says so, as it would without the memo.
    path.write_text("phases: []\n")
    said, text = both(project, "alpha", before)
    assert said == "ConfigError" and "phases" in text


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(lambda m: "9.9.9" + m[m.index(" ") :], id="another-version"),
        pytest.param(lambda m: m[:6] + "0" * 64 + m[70:], id="another-digest"),
        pytest.param(lambda m: "garbage", id="malformed"),
        pytest.param(lambda m: " ".join(m.split(" ")[:2]), id="no-names"),
    ],
)
def test_a_memo_not_for_these_bytes_is_not_used(
    make_project: Callable[..., Project], bad: Callable[[str], str]
) -> None:
    project = make_project(TWO_PHASES)
    forged = bad(memo(project)).replace("gamma", "delta")
    assert keys_from_memo(manifest_of(project), forged) is None
    assert both(project, "delta", forged)[0] == "UnknownChangeError"


def test_the_engine_hands_its_agent_the_memo_and_the_agents_report_is_accepted(
    make_project: Callable[..., Project],
) -> None:
    project = make_project(TWO_PHASES)
    result = apply_once(project)
    assert (result.state, result.change, result.transition) == ("advanced", "alpha", "propose")
    assert ENV in project.agent_calls()[0]["env"]
    completions = [r for r in project.journal() if r["kind"] == "completion"]
    assert [(r["key"], r["transition"]) for r in completions] == [("alpha", "propose")]
