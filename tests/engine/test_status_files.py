"""`batch status` reads `.pair/config.yaml` and the manifest through their one model.

There is no second reading of either file: an ordinary file gives a status over exactly the
manifest the loader returns, and a wrong file is refused by `batch status` with the loader's
own line (the file, the key path, the value and what is allowed).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from app.cycle.batch import manifest_for
from app.engine.manifest import load_manifest
from app.engine.status import batch_status
from app.errors import ConfigError
from tests.engine.test_manifest import (
    CONFIG_ERRORS,
    MANIFEST_ERRORS,
    write_config,
    write_manifest,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "app" / "examples" / "demo" / "pair"

ORDINARY_MANIFESTS = [
    pytest.param((EXAMPLES / "batches" / "hello" / "batch.yaml").read_text(), id="the-demo"),
    pytest.param(yaml.safe_dump(manifest_for(12, "codex"), sort_keys=False), id="a-card-batch"),
    pytest.param("phases: [{name: a}]\n", id="one-empty-phase"),
    pytest.param(
        "gate: every-phase\nprGrouping: per-phase\nbaseBranch: main\n"
        "settings: {agent: codex, locus: docker, image: 'python:3.12', agentTimeoutMs: 60000}\n"
        "budget: {steps: 40}\n"
        "phases:\n"
        "  - name: one\n    proofOfWork: {run: pytest, pass: exit 0, policy: warn}\n"
        "    changes: [a, {name: b, card: 12, dependsOn: [a]}]\n"
        "  - name: two\n    changes: [{name: c, card: 'ABC-1', dependsOn: [a, b]}]\n",
        id="every-key",
    ),
]


@pytest.mark.parametrize("text", ORDINARY_MANIFESTS)
def test_status_derives_over_the_manifest_the_loader_reads(tmp_path: Path, text: str) -> None:
    write_manifest(tmp_path, text)
    manifest = load_manifest(tmp_path, "demo")
    status = batch_status(tmp_path, "demo")
    assert [(p.name, p.changes) for p in status.phases] == [
        (p.name, p.change_names) for p in manifest.phases
    ]
    assert list(status.changes) == manifest.change_names


@pytest.mark.parametrize(("text", "line"), MANIFEST_ERRORS)
def test_status_refuses_a_wrong_manifest_with_the_loaders_line(
    tmp_path: Path, text: str, line: str
) -> None:
    path = write_manifest(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        batch_status(tmp_path, "demo")
    assert str(err.value) == f"{path}: {line}"


@pytest.mark.parametrize(("text", "line"), CONFIG_ERRORS)
def test_status_refuses_a_wrong_config_with_the_loaders_line(
    tmp_path: Path, text: str, line: str
) -> None:
    write_manifest(tmp_path, "phases: [{name: a}]\n")
    path = write_config(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        batch_status(tmp_path, "demo")
    assert str(err.value) == f"{path}: {line}"
