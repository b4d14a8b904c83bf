"""Verifiers' findings files are taken out of the tree (app/engine/findings_files.py).

Real git repositories in temp dirs; the journal is the one `batch report` writes.
"""

from __future__ import annotations

import json
from pathlib import Path

from app.engine import jsonl
from app.engine.findings_files import remove_reported_findings
from tests.support.git import git, init_repo


def completion(key: str, findings_file: str | None) -> dict[str, object]:
    record: dict[str, object] = {"kind": "completion", "key": key, "at": "2026-12-04T00:00:00"}
    if findings_file is not None:
        record["findingsFile"] = findings_file
    return record


def tree(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "tree"
    init_repo(root, {"README.md": "# project\n", "findings.json": "{}\n"})
    return root, tmp_path / "journal.jsonl"


def test_an_untracked_findings_file_in_the_tree_is_removed(tmp_path: Path) -> None:
    root, journal = tree(tmp_path)
    (root / "out").mkdir()
    (root / "out" / "verdict.json").write_text(json.dumps({"verdict": "accept"}))
    jsonl.append_record(journal, completion("c1", "out/verdict.json"))
    assert remove_reported_findings(root, journal, "c1", 0) == ["out/verdict.json"]
    assert not (root / "out" / "verdict.json").exists()
    assert git(root, "status", "--porcelain") == ""


def test_what_is_not_the_steps_own_untracked_file_stays(tmp_path: Path) -> None:
    root, journal = tree(tmp_path)
    (tmp_path / "outside.json").write_text("{}")
    (root / "a-dir").mkdir()
    (root / "mine.json").write_text("{}")
    (root / "early.json").write_text("{}")
    jsonl.append_record(journal, completion("c1", "early.json"))  # before the step began
    since = jsonl.count_records(journal)
    for record in (
        completion("c1", "findings.json"),  # tracked: the project's own file
        completion("c1", "../outside.json"),  # not in the tree
        completion("c1", "a-dir"),  # not a file
        completion("c1", "missing.json"),  # gone already
        completion("c2", "mine.json"),  # another change's report
        completion("c1", None),  # a report whose file lay elsewhere
        {"kind": "progress", "key": "c1", "findingsFile": "mine.json"},
    ):
        jsonl.append_record(journal, record)
    assert remove_reported_findings(root, journal, "c1", since) == []
    for kept in ("findings.json", "a-dir", "mine.json", "early.json"):
        assert (root / kept).exists(), kept
    assert (tmp_path / "outside.json").exists()


def test_a_symlink_out_of_the_tree_is_not_followed(tmp_path: Path) -> None:
    root, journal = tree(tmp_path)
    target = tmp_path / "precious.json"
    target.write_text("{}")
    (root / "link.json").symlink_to(target)
    jsonl.append_record(journal, completion("c1", "link.json"))
    assert remove_reported_findings(root, journal, "c1", 0) == []
    assert target.exists() and (root / "link.json").is_symlink()


def test_batch_report_records_where_the_file_lay_only_inside_the_tree(tmp_path: Path) -> None:
    from app.cli.batch import _in_tree

    root = tmp_path / "tree"
    (root / "sub").mkdir(parents=True)
    assert _in_tree(root / "sub" / "v.json", root) == "sub/v.json"
    assert _in_tree(root / "sub" / ".." / "v.json", root) == "v.json"
    assert _in_tree(tmp_path / "v.json", root) is None
    assert _in_tree(root / ".." / "tree2" / "v.json", root) is None
