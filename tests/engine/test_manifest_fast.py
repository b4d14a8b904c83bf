"""The light path of `batch status` (app.engine.manifest_fast) against the models.

The contract: whatever the light path vouches for, the models accept with equal values; what it
does not vouch for goes to the models, so every error line is theirs. Hypothesis draws nearly
valid files (each field from valid and invalid values); the tables check that ordinary files
do take the light path, and that `batch status` refuses every wrong file exactly as the loader.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import event, given, settings
from hypothesis import strategies as st

from app import settings as app_settings
from app.cycle.batch import manifest_for
from app.engine import manifest_fast
from app.engine.manifest import load_manifest, validate_manifest, validate_project_config
from app.engine.manifest_fast import fast_manifest, fast_project
from app.engine.status import batch_status, read_manifest, read_max_fix_rounds
from app.errors import ConfigError
from tests.engine.test_manifest import (
    CONFIG_ERRORS,
    MANIFEST_ERRORS,
    write_config,
    write_manifest,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "app" / "examples" / "demo" / "pair"


def _view(manifest: Any) -> tuple[Any, ...]:
    """Every value a manifest carries that the light path reads, in comparable form."""

    def proof(phase: Any) -> tuple[Any, ...] | None:
        p = phase.proof_of_work
        return None if p is None else (p.kind, p.run, p.pass_, p.policy)

    return (
        manifest.gate,
        manifest.pr_grouping,
        manifest.base_branch,
        list(manifest.change_names),
        [
            (
                phase.name,
                phase.goal,
                phase.success,
                proof(phase),
                phase.change_names,
                [(c.name, c.card, tuple(c.depends_on)) for c in phase.changes],
            )
            for phase in manifest.phases
        ],
    )


def _models_manifest(data: Any) -> Any:
    try:
        return validate_manifest(Path("batch.yaml"), data)
    except ConfigError:
        return None


def _models_project(data: Any) -> Any:
    try:
        return validate_project_config(Path("config.yaml"), data)
    except ConfigError:
        return None


# ---------------------------------------------------------------- the contract, drawn

CHANGE_NAMES = ["a", "b", "c0", "x.y", "d", "e", "f", "g"]
BAD_NAMES = ["Bad", "", "a b", 7, None]
GOOD_SETTINGS = [
    {},
    {"agent": "claude"},
    {"locus": "docker"},
    {"image": "python:3.12"},
    {"agentTimeoutMs": 5},
    {"agentCommand": ["python3", "x.py"]},
    {"agent": ["claude", "codex"]},
    {"agent": {"name": "claude"}},
    {"remote": {"host": "h", "port": 1}},
]
BAD_SETTINGS = [
    None,
    {"agent": "a b"},
    {"agent": ""},
    {"locus": "moon"},
    {"image": ""},
    {"agentTimeoutMs": 0},
    {"agentTimeoutMs": True},
    {"agentCommand": []},
    {"agentCommand": [""]},
    {"agent_timeout_ms": 5},
]
GOOD_PROOFS = [
    {"run": "echo ok"},
    {"kind": "blackbox", "run": "x", "pass": "exit 0", "policy": "warn"},
    {"run": "x", "pass_": "exit 0"},
    None,
]
BAD_PROOFS = [
    {"run": ""},
    {"run": "  "},
    {"run": 1},
    {"kind": "llm-judge", "run": "x"},
    {"run": "x", "policy": "soft"},
    {"run": "x", "pass": None},
    {"run": "x", "extra": 1},
    "pytest",
]


def _field(
    draw: st.DrawFn, good: list[Any], bad: list[Any], into: dict[Any, Any], key: Any
) -> None:
    """Leave `key` out, or set it: mostly to a value from `good`, sometimes from `bad`."""
    choice = draw(st.integers(0, 19))
    values = bad if choice == 19 else good
    if choice >= 6 and values:
        into[key] = draw(st.sampled_from(values))


@st.composite
def change_entries(draw: st.DrawFn) -> Any:
    holder: dict[str, Any] = {}
    _field(draw, CHANGE_NAMES, BAD_NAMES, holder, "name")
    name = holder.get("name", "a")
    if draw(st.integers(0, 2)) == 0:
        return name
    entry: dict[str, Any] = {"name": name}
    _field(draw, [None, 1, "12"], [True, 1.5, []], entry, "card")
    _field(draw, [[], ["a"], ["b", "c0"]], [["zz"], None, "a", [1]], entry, "dependsOn")
    _field(draw, [], [1], entry, draw(st.sampled_from(["after", "depends_on"])))
    return entry


@st.composite
def phases(draw: st.DrawFn) -> Any:
    phase: dict[str, Any] = {"name": draw(st.sampled_from(["p1", "p2", "p3"]))}
    _field(draw, [], ["Bad", None, 3, "a"], phase, "name")
    _field(draw, ["", "the goal"], [None, 1], phase, "goal")
    _field(draw, ["", "done when"], [None], phase, "success")
    _field(draw, GOOD_PROOFS, BAD_PROOFS, phase, "proofOfWork")
    _field(draw, [], ["pytest"], phase, "proof_of_work")
    if draw(st.booleans()):
        entries = st.lists(change_entries(), max_size=4, unique_by=str)
        phase["changes"] = None if draw(st.integers(0, 19)) == 0 else draw(entries)
    _field(draw, [], [1], phase, "foo")
    return phase


@st.composite
def manifests(draw: st.DrawFn) -> Any:
    if draw(st.integers(0, 20)) == 0:
        return draw(st.sampled_from([None, [], "text", 3]))
    data: dict[Any, Any] = {
        "phases": draw(st.lists(phases(), min_size=1, max_size=3, unique_by=lambda p: p["name"]))
    }
    _field(draw, [], [None, "p", {}], data, "phases")
    _field(draw, ["voluntary", "autonomous"], ["bogus", None, 1], data, "gate")
    _field(draw, ["off", "per-phase", "whole-batch"], [False, "x"], data, "prGrouping")
    _field(draw, ["main", None], [5], data, "baseBranch")
    _field(draw, GOOD_SETTINGS, BAD_SETTINGS, data, "settings")
    _field(draw, [{"steps": 3}], [{"steps": 0}], data, "budget")
    _field(draw, [], ["off", []], data, draw(st.sampled_from(["pr_grouping", "phasez", 1])))
    if draw(st.integers(0, 3)) > 0 and isinstance(data["phases"], list):
        _distinct_changes(draw, data["phases"])
    return data


def _distinct_changes(draw: st.DrawFn, phase_list: list[Any]) -> None:
    """Mostly, give the changes distinct names and depend only on earlier ones, so that the
    cross-key rules pass often enough for the light path to be tested on what it accepts."""
    earlier: list[str] = []
    for phase in phase_list:
        changes = phase.get("changes") if isinstance(phase, dict) else None
        for i, entry in enumerate(changes or []):
            name = f"c{len(earlier)}"
            if isinstance(entry, dict) and entry.get("name") in CHANGE_NAMES:
                entry["name"] = name
                if isinstance(entry.get("dependsOn"), list) and earlier:
                    entry["dependsOn"] = draw(st.lists(st.sampled_from(earlier), unique=True))
            elif entry in CHANGE_NAMES:
                changes[i] = name
            earlier.append(name)


@settings(max_examples=600, deadline=None)
@given(manifests())
def test_what_the_light_path_accepts_the_models_accept_alike(data: Any) -> None:
    light = fast_manifest(data)
    models = _models_manifest(data)
    event(f"light {'accepts' if light else 'defers'}, models {'accept' if models else 'refuse'}")
    if light is not None:
        assert models is not None, data
        assert _view(light) == _view(models)


@st.composite
def configs(draw: st.DrawFn) -> Any:
    if draw(st.integers(0, 20)) == 0:
        return draw(st.sampled_from([None, [], "text"]))
    data: dict[Any, Any] = {}
    cycle: dict[str, Any] = {}
    _field(draw, [0, 3, 20], [21, -1, True, "3", 2.0], cycle, "maxFixRounds")
    _field(draw, ["ready-for-merge", "merged"], ["never", None], cycle, "until")
    _field(draw, ["always", "never", "when has:risky"], ["sometimes", None], cycle, "merge")
    _field(draw, ["always", "never", "when lacks:x"], ["when"], cycle, "prepare")
    _field(draw, [], [1], cycle, draw(st.sampled_from(["max_fix_rounds", "other"])))
    _field(draw, [cycle], [None, []], data, "cycle")
    hosts = [{"pm": "local"}, {"code": "github"}, {"pm": "GitHub"}]
    _field(draw, hosts, [{"pm": "x"}, {"pm": ""}], data, "hosts")
    _field(draw, ["pair", "Bot_1"], ["1bad", "a\n", "", 3], data, "trigger")
    _field(draw, ["me", None], [1], data, "maintainer")
    tests = [{"command": "make"}, {"mayModifyTests": ["a"]}]
    _field(draw, tests, [{"junit": 1}, {"x": 1}, None], data, "tests")
    _field(draw, GOOD_SETTINGS, BAD_SETTINGS, data, "batch")
    lessons = [{"where": "off"}, {"budgetBytes": 256}]
    _field(draw, lessons, [{"budgetBytes": 100}, {"where": "x"}], data, "lessons")
    _field(draw, [{"panel": ["claude"]}], [{"steps": 1}], data, "review")
    _field(draw, [{"steps": 1}], [{"steps": 0}], data, "budget")
    return data


@settings(max_examples=600, deadline=None)
@given(configs())
def test_what_the_light_path_accepts_of_a_config_the_models_accept_alike(data: Any) -> None:
    light = fast_project(data)
    models = _models_project(data)
    event(f"light {'accepts' if light else 'defers'}, models {'accept' if models else 'refuse'}")
    if light is not None:
        assert models is not None, data
        assert (light.max_fix_rounds, light.trigger) == (
            models.cycle.max_fix_rounds,
            models.trigger,
        )


# ---------------------------------------------------------------- ordinary files go light

ORDINARY_MANIFESTS = [
    pytest.param((EXAMPLES / "batches" / "hello" / "batch.yaml").read_text(), id="the-demo"),
    pytest.param(yaml.safe_dump(manifest_for(12, "codex"), sort_keys=False), id="a-card-batch"),
    pytest.param("phases: [{name: a}]\n", id="one-empty-phase"),
    pytest.param(
        "gate: every-phase\nprGrouping: per-phase\nbaseBranch: main\n"
        "settings: {agent: codex, locus: docker, image: 'python:3.12', agentTimeoutMs: 60000}\n"
        "phases:\n"
        "  - name: one\n    proofOfWork: {run: pytest, pass: exit 0, policy: warn}\n"
        "    changes: [a, {name: b, card: 12, dependsOn: [a]}]\n"
        "  - name: two\n    changes: [{name: c, card: 'ABC-1', dependsOn: [a, b]}]\n",
        id="every-light-key",
    ),
]


@pytest.mark.parametrize("text", ORDINARY_MANIFESTS)
def test_ordinary_manifests_take_the_light_path(tmp_path: Path, text: str) -> None:
    write_manifest(tmp_path, text)
    light = read_manifest(tmp_path, "demo")
    assert type(light).__name__ == "LightManifest"
    assert _view(light) == _view(load_manifest(tmp_path, "demo"))


ORDINARY_CONFIGS = [
    pytest.param((EXAMPLES / "config.yaml").read_text(), 2, id="the-demo"),
    pytest.param("# only comments, as `pairbot init` writes it\n", 3, id="comments-only"),
    pytest.param(
        "hosts: {pm: github, code: github}\ntrigger: bot\nmaintainer: ada\n"
        "cycle: {until: merged, merge: never, prepare: always, maxFixRounds: 0}\n"
        "tests: {command: make test, junit: out.xml, mayModifyTests: ['tests/**']}\n"
        "batch: {agent: claude, agentCommand: [run]}\nlessons: {where: off, budgetBytes: 256}\n",
        0,
        id="every-light-key",
    ),
]


@pytest.mark.parametrize(("text", "rounds"), ORDINARY_CONFIGS)
def test_ordinary_configs_take_the_light_path(tmp_path: Path, text: str, rounds: int) -> None:
    path = write_config(tmp_path, text)
    from app.engine.project_files import read_yaml

    assert fast_project(read_yaml(path)) is not None
    assert read_max_fix_rounds(tmp_path) == rounds


def test_a_config_the_light_path_defers_still_counts(tmp_path: Path) -> None:
    write_config(tmp_path, "cycle: {maxFixRounds: 5, prepare: 'when has:risky'}\n")
    assert read_max_fix_rounds(tmp_path) == 5


def test_the_light_path_knows_the_same_loci() -> None:
    assert manifest_fast.LOCI == app_settings.LOCI


# ---------------------------------------------------------------- wrong files: the models' lines


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
