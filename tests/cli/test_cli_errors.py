"""What a careless or hostile user sends to the `pairbot` console script.

Every case runs pairbot's entry on a real temp project and checks the same things: a non-zero
exit; one line on stderr that names what was wrong and what is allowed (argparse errors add
their usage block after it); no traceback anywhere; and nothing recorded lost, i.e. the
project's files (journal, state.json, lock, manifests) are byte-for-byte what they were and no
file or directory appeared. A step that cannot start its agent is an outcome, not an error: it
exits 1 as `blocked` and is parked like any other blocked step.

The refusals run the entry in this process (tests/cli/inprocess.py: same argv and environment,
same exit code and output) — hundreds of them, each a console script's start saved. Each kind of
refusal also runs as the installed script, both ways on one project, and the two must end alike
(`test_in_process_ends_as_the_console_script`); what starts an agent or holds the lock, and the
quiet success, run only as the script. The projects with run-state are made by one real step once
per module and copied for each test (`recorded`, `parked`).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest

from app.engine.lock import process_start_time
from tests.cli.inprocess import cli_in_process
from tests.support.project import ONE_PHASE, Project, apply_once, cli

MakeProject = Callable[..., Project]

WITH_PROOF: dict[str, Any] = {
    "prGrouping": "off",
    "phases": [
        {
            "name": "only",
            "proofOfWork": {"run": "echo proven", "pass": "contains:proven"},
            "changes": ["alpha"],
        },
        {"name": "plain", "changes": ["beta"]},
    ],
}
NAME_RULE_FRAGMENT = "lowercase letters, digits"
AVAILABLE_AGENTS = "available agents: claude, codex, command, cursor, gemini, opencode"


# ---------------------------------------------------------------- helpers


def tree(root: Path) -> dict[str, bytes | None]:
    """Every file (its bytes) and directory (None) of the project, outside .git."""
    return {
        str(path.relative_to(root)): None if path.is_dir() else path.read_bytes()
        for path in sorted(root.rglob("*"))
        if ".git" not in path.relative_to(root).parts
    }


def no_traceback(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stdout
    assert "Traceback" not in done.stderr


def error_line(done: subprocess.CompletedProcess[str], code: int = 2) -> str:
    """The single `pairbot: …` line of a refused command (stdout stays empty for --json)."""
    no_traceback(done)
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("pairbot: ")
    return lines[0]


def usage_error(done: subprocess.CompletedProcess[str]) -> str:
    """An argparse refusal: one `pairbot: …` line, then only the usage block; exit 2."""
    no_traceback(done)
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert done.stdout == ""
    first, *rest = done.stderr.strip().splitlines()
    assert first.startswith("pairbot: ")
    assert rest, "argparse errors show the usage"
    assert rest[0].startswith("usage: pairbot")
    assert not any(line.startswith("pairbot: ") for line in rest)
    return first


Recorded = Callable[..., Project]
Parked = Callable[[str], Project]


@pytest.fixture(scope="module")
def templates(
    tmp_path_factory: pytest.TempPathFactory,
) -> Callable[[str, Callable[[Path], Project]], Path]:
    """Projects with run-state, each made by one real step once per module (and xdist worker):
    `template(key, make)` is the root `make(root)` built the first time `key` was asked for."""
    base = tmp_path_factory.mktemp("templates")
    made: dict[str, Path] = {}

    def template(key: str, make: Callable[[Path], Project]) -> Path:
        if key not in made:
            made[key] = make(base / key / "repo").root
        return made[key]

    return template


def _copy(template: Path, root: Path) -> Project:
    """A copy of a template project at `root`: owners, modes and times kept (`cp -a`), so the
    run-state is byte for byte what its step left, and nothing in it names the template's path."""
    subprocess.run(["cp", "-a", str(template), str(root)], check=True)
    return Project(root=root, batch="demo")


@pytest.fixture
def recorded(
    templates: Callable[[str, Callable[[Path], Project]], Path],
    project_builder: Callable[..., Project],
    tmp_path: Path,
) -> Recorded:
    """`recorded(manifest=None)`: a project with run-state on disk, one real step (propose
    alpha) already advanced; this test's own copy at tmp_path / "repo"."""

    def make(root: Path, manifest: Mapping[str, Any] | None) -> Project:
        project = project_builder(root, manifest)
        assert apply_once(project).state == "advanced"
        assert (project.run_dir / "journal.jsonl").is_file()
        assert (project.run_dir / "state.json").is_file()
        return project

    def copy(manifest: Mapping[str, Any] | None = None) -> Project:
        key = "recorded-" + ("proof" if manifest is WITH_PROOF else "plain")
        assert manifest in (None, WITH_PROOF), "a template per manifest: name it above"
        return _copy(templates(key, lambda root: make(root, manifest)), tmp_path / "repo")

    return copy


@pytest.fixture
def parked(
    templates: Callable[[str, Callable[[Path], Project]], Path],
    project_builder: Callable[..., Project],
    tmp_path: Path,
) -> Parked:
    """`parked(behaviour)`: a project whose change alpha is parked by the scripted agent's
    `behaviour` on propose; this test's own copy at tmp_path / "repo"."""

    def make(root: Path, behaviour: str) -> Project:
        project = project_builder(root, script={"propose": [behaviour]})
        assert apply_once(project).state == "blocked"
        return project

    def copy(behaviour: str) -> Project:
        made = templates(f"parked-{behaviour}", lambda root: make(root, behaviour))
        return _copy(made, tmp_path / "repo")

    return copy


# ---------------------------------------------------------------- no project, no batch


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["validate"], id="validate"),
        pytest.param(["batch", "status", "demo"], id="status"),
        pytest.param(["batch", "status", "demo", "--json"], id="status-json"),
        pytest.param(["batch", "apply", "demo"], id="apply"),
        pytest.param(["batch", "report", "demo", "--change", "a", "--progress", "x"], id="report"),
        pytest.param(["batch", "report", "--change", "a", "--progress", "x"], id="report-solo"),
        pytest.param(["batch", "approve", "demo", "--change", "a"], id="approve"),
        pytest.param(["batch", "answer", "demo", "--change", "a", "yes"], id="answer"),
        pytest.param(["batch", "rerun-proof", "demo", "--phase", "only"], id="rerun-proof"),
        pytest.param(["propose", "alpha"], id="headless-propose"),
    ],
)
def test_no_pair_directory_is_named_and_nothing_is_created(tmp_path: Path, argv: list[str]) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    line = error_line(cli_in_process(*argv, cwd=empty))
    assert "is not a pairbot project" in line
    assert "no .pair/ directory" in line
    assert list(empty.iterdir()) == []


def test_pair_root_pointing_nowhere_is_named(tmp_path: Path) -> None:
    line = error_line(
        cli_in_process(
            "batch", "status", "demo", cwd=tmp_path, env={"PAIR_ROOT": str(tmp_path / "gone")}
        )
    )
    assert f"{tmp_path / 'gone'} is not a pairbot project" in line


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["validate", "nope"], id="validate"),
        pytest.param(["batch", "status", "nope"], id="status"),
        pytest.param(["batch", "apply", "nope"], id="apply"),
        pytest.param(["batch", "report", "nope", "--change", "alpha", "--progress", "x"], id="rep"),
        pytest.param(["batch", "approve", "nope", "--change", "alpha"], id="approve"),
        pytest.param(["batch", "retry", "nope", "--change", "alpha"], id="retry"),
        pytest.param(["batch", "rerun-proof", "nope", "--phase", "only"], id="rerun-proof"),
    ],
)
def test_unknown_batch_lists_the_known_ones(recorded: Recorded, argv: list[str]) -> None:
    project = recorded()
    before = tree(project.root)
    line = error_line(cli_in_process(*argv, cwd=project.root))
    assert "no batch named 'nope'" in line
    assert "known batches: demo" in line
    assert tree(project.root) == before


BAD_BATCH_NAMES = ["../x", "a/b", "..", "../../escape", "ABSOLUTE", "Demo", "x y"]


@pytest.mark.parametrize(
    "verb",
    [
        pytest.param(["validate"], id="validate"),
        pytest.param(["batch", "status"], id="status"),
        pytest.param(["batch", "apply"], id="apply"),
        pytest.param(["batch", "approve", "--change", "alpha"], id="approve"),
        pytest.param(["batch", "answer", "--change", "alpha", "yes"], id="answer"),
        pytest.param(["batch", "rerun-proof", "--phase", "only"], id="rerun-proof"),
    ],
)
def test_batch_name_is_never_a_path(recorded: Recorded, tmp_path: Path, verb: list[str]) -> None:
    project = recorded()
    before = tree(tmp_path)  # the project and everything around it
    for bad in BAD_BATCH_NAMES:
        name = str(tmp_path / "elsewhere") if bad == "ABSOLUTE" else bad
        argv = [*verb[:2], name, *verb[2:]] if verb[0] == "batch" else [*verb, name]
        line = error_line(cli_in_process(*argv, cwd=project.root))
        assert f"{name!r} is not a valid batch name" in line, name
        assert NAME_RULE_FRAGMENT in line
    assert tree(tmp_path) == before


def test_report_batch_name_is_never_a_path(recorded: Recorded) -> None:
    project = recorded()
    before = tree(project.root)
    env = {"PAIR_BATCH": "../x"}
    done = cli_in_process(
        "batch", "report", "--change", "alpha", "--progress", "x", cwd=project.root, env=env
    )
    assert "'../x' is not a valid batch name" in error_line(done)
    assert tree(project.root) == before


@pytest.mark.parametrize(
    ("argv", "env"),
    [
        pytest.param(["propose", "../x"], {}, id="headless"),
        pytest.param(["apply", "a/b"], {}, id="headless-slash"),
        pytest.param(["batch", "report", "--change", "../../x", "--progress", "hi"], {}, id="rep"),
        pytest.param(["batch", "report", "--progress", "hi"], {"PAIR_CHANGE": "../x"}, id="env"),
    ],
)
def test_change_name_is_never_a_path(
    recorded: Recorded, argv: list[str], env: dict[str, str]
) -> None:
    project = recorded()
    before = tree(project.root)
    line = error_line(cli_in_process(*argv, cwd=project.root, env=env))
    assert "is not a valid change name" in line
    assert NAME_RULE_FRAGMENT in line
    assert tree(project.root) == before
    assert not (project.root / "x").exists()
    assert len(project.agent_calls()) == 1  # only the setup's propose: no agent ran


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["batch", "approve", "demo", "--change", "ghost"], id="approve"),
        pytest.param(["batch", "answer", "demo", "--change", "ghost", "use x"], id="answer"),
        pytest.param(["batch", "feedback", "demo", "--change", "ghost", "redo"], id="feedback"),
        pytest.param(["batch", "retry", "demo", "--change", "ghost"], id="retry"),
        pytest.param(["batch", "report", "demo", "--change", "ghost", "--progress", "x"], id="rep"),
        pytest.param(["batch", "report", "--progress", "x"], id="report-env"),
    ],
)
def test_unknown_change_lists_the_known_ones(recorded: Recorded, argv: list[str]) -> None:
    project = recorded()
    before = tree(project.root)
    env = {"PAIR_BATCH": "demo", "PAIR_CHANGE": "ghost"}
    line = error_line(cli_in_process(*argv, cwd=project.root, env=env))
    assert "batch 'demo' has no change or phase 'ghost'" in line
    assert "known: alpha, only" in line
    assert tree(project.root) == before


# ---------------------------------------------------------------- files a user writes


CONFIG_CASES = [
    pytest.param(
        "batch: {agent: [unclosed\n",
        ["config.yaml: not valid YAML at line 2, column 1"],
        id="bad-yaml",
    ),
    pytest.param(
        "bogus: 1\n",
        ["config.yaml: bogus: unknown key", "allowed keys here: hosts, trigger, maintainer"],
        id="unknown-key",
    ),
    pytest.param(
        "batch: {agent: claude, agentTimout: 5}\n",
        ["batch.agentTimout: unknown key", "agentTimeoutMs"],
        id="nested-typo",
    ),
    pytest.param(
        "batch: {locus: moon}\n",
        ["batch.locus", "'local', 'docker' or 'remote'", "(got 'moon')"],
        id="wrong-locus",
    ),
    pytest.param(
        "cycle: {until: forever}\n",
        ["cycle.until", "'ready-for-merge' or 'merged'"],
        id="wrong-until",
    ),
    pytest.param(
        "cycle: {merge: sometimes}\n",
        ["cycle.merge", "allowed: always | never | when has:<labels> lacks:<labels>"],
        id="wrong-merge-gate",
    ),
    pytest.param(
        "batch: {permissions: {posture: yolo}}\n",
        ["batch.permissions.posture", "'repo-sandboxed-permissive'"],
        id="wrong-posture",
    ),
    pytest.param(
        "cycle: {maxFixRounds: -1}\n",
        ["cycle.maxFixRounds", "greater than or equal to 0", "(got -1)"],
        id="negative-max-fix-rounds",
    ),
    pytest.param(
        "batch: {agentTimeoutMs: true}\n",
        ["batch.agentTimeoutMs", "valid integer", "(got True)"],
        id="timeout-true",
    ),
    pytest.param(
        "batch: {agentTimeoutMs: 0}\n",
        ["batch.agentTimeoutMs", "greater than 0"],
        id="timeout-zero",
    ),
    pytest.param(
        "batch: {agent: {review: codex}}\n",
        [
            "batch.agent.review",
            "'propose', 'apply', 'verify', 'red', 'verify-red', 'fix', 'pr' or 'decompose'",
        ],
        id="unknown-stage",
    ),
    pytest.param(
        "batch: {remote: {host: h, port: 1, authToken: ''}}\n",
        ["batch.remote.authToken", "must not be empty"],
        id="empty-remote-token",
    ),
    pytest.param(
        "- just\n- a list\n",
        ["config.yaml: (top level): expected a mapping of keys"],
        id="not-a-mapping",
    ),
]


VALIDATING_VERBS = (
    ["validate"],
    ["validate", "demo"],
    ["batch", "status", "demo", "--json"],
    ["batch", "apply", "demo", "--json"],
)


@pytest.mark.parametrize(("text", "fragments"), CONFIG_CASES)
def test_malformed_config_is_refused_before_anything_runs(
    recorded: Recorded, text: str, fragments: list[str]
) -> None:
    project = recorded()
    (project.root / ".pair" / "config.yaml").write_text(text)
    before = tree(project.root)
    for argv in VALIDATING_VERBS:
        line = error_line(cli_in_process(*argv, cwd=project.root))
        assert str(project.root / ".pair" / "config.yaml") in line
        for fragment in fragments:
            assert fragment in line, (argv, line)
    assert tree(project.root) == before
    assert len(project.agent_calls()) == 1


def _phases(*phases: dict[str, Any]) -> dict[str, Any]:
    return {"prGrouping": "off", "phases": list(phases)}


MANIFEST_CASES = [
    pytest.param(
        _phases({"name": "only", "changes": ["alpha", "alpha"]}),
        ["change 'alpha' is declared twice", "change names are unique across the batch"],
        id="duplicate-change",
    ),
    pytest.param(
        _phases({"name": "a", "changes": ["alpha"]}, {"name": "b", "changes": ["alpha"]}),
        ["change 'alpha' is declared twice"],
        id="duplicate-change-across-phases",
    ),
    pytest.param(
        _phases({"name": "only", "changes": ["alpha"]}, {"name": "only", "changes": ["beta"]}),
        ["phase 'only' is declared twice"],
        id="duplicate-phase",
    ),
    pytest.param(
        _phases({"name": "alpha", "changes": ["alpha"]}),
        ["phase 'alpha' has the same name as a change"],
        id="phase-named-like-a-change",
    ),
    pytest.param(
        _phases({"name": "only", "changes": ["alpha", {"name": "beta", "dependsOn": ["ghost"]}]}),
        ["change 'beta' depends on 'ghost', which is not in this batch", "known changes: alpha"],
        id="depends-on-unknown",
    ),
    pytest.param(
        _phases({"name": "only", "changes": [{"name": "alpha", "dependsOn": ["beta"]}, "beta"]}),
        ["change 'alpha' depends on 'beta', which comes at or after it"],
        id="depends-on-later",
    ),
    pytest.param(
        _phases(
            {
                "name": "only",
                "proofOfWork": {"kind": "llm-judge", "run": "judge"},
                "changes": ["alpha"],
            }
        ),
        [
            "phases.0.proofOfWork",
            "llm-judge proof-of-work is not yet supported by batch apply; "
            "use integration or blackbox.",
        ],
        id="llm-judge-proof",
    ),
    pytest.param(
        _phases({"name": "only", "proofOfWork": {"pass": "exit 0"}, "changes": ["alpha"]}),
        ["needs a non-empty `run` command"],
        id="proof-without-run",
    ),
    pytest.param(
        _phases(
            {
                "name": "only",
                "proofOfWork": {"run": "true", "policy": "strict"},
                "changes": ["alpha"],
            }
        ),
        ["phases.0.proofOfWork.policy", "'hard-gate' or 'warn'"],
        id="wrong-policy",
    ),
    pytest.param(
        {"gate": "sometimes", **_phases({"name": "only", "changes": ["alpha"]})},
        ["gate:", "'voluntary', 'after-propose', 'every-phase' or 'autonomous'"],
        id="wrong-gate",
    ),
    pytest.param(
        {"prGrouping": "per-card", "phases": [{"name": "only", "changes": ["alpha"]}]},
        ["prGrouping", "'off', 'whole-batch', 'per-phase' or 'per-change'"],
        id="wrong-pr-grouping",
    ),
    pytest.param(
        _phases({"name": "only", "changes": ["../evil"]}),
        ["phases.0.changes.0.name", "'../evil' is not a valid name", NAME_RULE_FRAGMENT],
        id="change-name-is-a-path",
    ),
    pytest.param(
        {"prGrouping": "off", "phases": []},
        ["phases: List should have at least 1 item"],
        id="no-phases",
    ),
    pytest.param(
        {**ONE_PHASE, "owner": "me"},
        ["owner: unknown key", "allowed keys here: gate, prGrouping, baseBranch, settings, phases"],
        id="unknown-key",
    ),
]


@pytest.mark.parametrize(("manifest", "fragments"), MANIFEST_CASES)
def test_malformed_manifest_is_refused_and_leaves_run_state_alone(
    recorded: Recorded, manifest: dict[str, Any], fragments: list[str]
) -> None:
    project = recorded()
    path = project.root / ".pair" / "batches" / "demo" / "batch.yaml"
    path.write_text(json.dumps(manifest))  # JSON is YAML: exactly these keys and values
    before = tree(project.root)
    for argv in VALIDATING_VERBS:
        line = error_line(cli_in_process(*argv, cwd=project.root))
        assert str(path) in line
        for fragment in fragments:
            assert fragment in line, (argv, line)
    assert tree(project.root) == before
    assert not (project.run_dir / "step.lock").exists()
    assert len(project.agent_calls()) == 1


def test_apply_on_a_malformed_manifest_creates_no_run_state(make_project: MakeProject) -> None:
    project = make_project()
    path = project.root / ".pair" / "batches" / "demo" / "batch.yaml"
    path.write_text("phases: [{name: only, changes: [alpha, alpha]}]\n")
    for argv in (["batch", "apply", "demo"], ["batch", "apply", "demo", "--json"]):
        line = error_line(cli(*argv, cwd=project.root))
        assert "change 'alpha' is declared twice" in line
    assert not project.run_dir.exists()  # no journal, no lock, no state.json
    assert project.agent_calls() == []


def test_bad_env_settings_are_refused_and_release_the_lock(recorded: Recorded) -> None:
    project = recorded()
    before = tree(project.root)
    line = error_line(
        cli_in_process("batch", "apply", "demo", cwd=project.root, env={"PAIR_LOCUS": "moon"})
    )
    assert "PAIR_LOCUS='moon' is not a locus; allowed: local, docker, remote" in line
    line = error_line(
        cli_in_process("batch", "apply", "demo", cwd=project.root, env={"PAIR_AGENT": "my agent"})
    )
    assert "PAIR_AGENT='my agent' is not an agent name" in line
    assert tree(project.root) == before
    assert len(project.agent_calls()) == 1


# ---------------------------------------------------------------- agent reports


def test_report_needs_a_change(recorded: Recorded) -> None:
    project = recorded()
    before = tree(project.root)
    for env in ({}, {"PAIR_CHANGE": ""}):
        done = cli_in_process(
            "batch", "report", "demo", "--progress", "x", cwd=project.root, env=env
        )
        assert error_line(done) == (
            "pairbot: batch report needs --change (or PAIR_CHANGE in the environment)"
        )
    assert tree(project.root) == before


@pytest.mark.parametrize(
    ("kinds", "expected"),
    [
        pytest.param(
            ["--progress", "x", "--blocker", "y"],
            "argument --blocker: not allowed with argument --progress",
            id="two-kinds",
        ),
        pytest.param(
            ["--complete", "x", "--needs-input", "y"],
            "argument --needs-input: not allowed with argument --complete",
            id="complete-and-needs-input",
        ),
        pytest.param(
            [],
            "one of the arguments --progress --blocker --needs-input --complete is required",
            id="no-kind",
        ),
    ],
)
def test_report_takes_exactly_one_kind(recorded: Recorded, kinds: list[str], expected: str) -> None:
    project = recorded()
    before = tree(project.root)
    done = cli_in_process("batch", "report", "demo", "--change", "alpha", *kinds, cwd=project.root)
    assert expected in usage_error(done)
    assert "--progress MESSAGE | --blocker MESSAGE" in done.stderr  # what is allowed
    assert tree(project.root) == before


FINDINGS_CASES = [
    pytest.param(None, "findings file not found", id="missing"),
    pytest.param("{not json", "findings file is not valid JSON", id="not-json"),
    pytest.param("\udcff", "findings file is not valid JSON", id="not-utf8"),
    pytest.param(
        json.dumps(
            {
                "findings": [
                    {"id": "r1-1", "kind": "defect", "blocking": True},
                    {"id": "r1-1", "kind": "defect", "blocking": False},
                ]
            }
        ),
        "duplicate finding id 'r1-1': each id appears once",
        id="duplicate-finding-ids",
    ),
    pytest.param(
        json.dumps({"scopeChanges": [{"id": "sc-1", "type": "x"}, {"id": "sc-1", "type": "y"}]}),
        "duplicate scope proposal id 'sc-1'",
        id="duplicate-scope-ids",
    ),
    pytest.param(
        json.dumps({"findings": [{"id": "F-1", "kind": "defect", "blocking": True}]}),
        "findings.0.id: finding id 'F-1' must look like r<round>-<n>, e.g. r1-1",
        id="bad-finding-id",
    ),
    pytest.param(
        json.dumps({"findings": [{"id": "r1-1", "kind": "nit", "blocking": True}]}),
        "findings.0.kind: Input should be 'defect', 'regression'",
        id="bad-kind",
    ),
    pytest.param(
        json.dumps({"findings": [{"id": "r1-1", "kind": "defect"}]}),
        "findings.0.blocking: Field required",
        id="blocking-missing",
    ),
    pytest.param(
        json.dumps({"scopeChanges": [{"id": "scope-1", "type": "x"}]}),
        "scope proposal id 'scope-1' must look like sc-<n>",
        id="bad-scope-id",
    ),
    pytest.param("[1, 2]", "(top level): Input should be a valid dictionary", id="a-list"),
    pytest.param(
        json.dumps({"finding": []}), "finding: Extra inputs are not permitted", id="unknown-key"
    ),
]


@pytest.mark.parametrize(("content", "expected"), FINDINGS_CASES)
def test_findings_file_is_validated_before_anything_is_recorded(
    recorded: Recorded, content: str | None, expected: str
) -> None:
    project = recorded()
    findings = project.root / "findings.json"
    if content is not None:
        findings.write_bytes(content.encode("utf-8", "surrogateescape"))
    before = tree(project.root)
    done = cli_in_process(
        "batch", "report", "demo", "--change", "alpha", "--complete", "Ready for archive",
        "--findings", str(findings), cwd=project.root,
    )  # fmt: skip
    line = error_line(done)
    assert line.startswith(f"pairbot: {findings}: ")
    assert expected in line
    assert tree(project.root) == before


def test_findings_file_that_is_a_directory_is_one_line(recorded: Recorded) -> None:
    project = recorded()
    before = tree(project.root)
    done = cli_in_process(
        "batch", "report", "demo", "--change", "alpha", "--complete", "Ready for archive",
        "--findings", str(project.root / ".pair"), cwd=project.root,
    )  # fmt: skip
    assert "cannot read the findings file (Is a directory)" in error_line(done)
    assert tree(project.root) == before


def test_findings_go_only_with_complete(recorded: Recorded) -> None:
    project = recorded()
    findings = project.root / "findings.json"
    findings.write_text(json.dumps({"findings": []}))
    before = tree(project.root)
    for kind in ("--progress", "--blocker", "--needs-input"):
        done = cli_in_process(
            "batch", "report", "demo", "--change", "alpha", kind, "x",
            "--findings", str(findings), cwd=project.root,
        )  # fmt: skip
        assert error_line(done) == (
            "pairbot: --findings goes with --complete (a verifier's final verdict)"
        )
    assert tree(project.root) == before


# ---------------------------------------------------------------- human verbs


def test_approve_when_nothing_awaits_approval(recorded: Recorded) -> None:
    project = recorded()
    before = tree(project.root)
    done = cli_in_process("batch", "approve", "demo", "--change", "alpha", cwd=project.root)
    assert error_line(done) == (
        "pairbot: alpha is not awaiting approval (not parked); nothing to approve"
    )
    assert tree(project.root) == before


def test_approve_does_not_clear_a_blocked_step(parked: Parked) -> None:
    project = parked("block")
    before = tree(project.root)
    done = cli_in_process("batch", "approve", "demo", "--change", "alpha", cwd=project.root)
    assert (
        error_line(done) == "pairbot: alpha is not awaiting approval (blocked); nothing to approve"
    )
    assert tree(project.root) == before  # the park is still there


@pytest.mark.parametrize("message", [None, "", "   "])
def test_answer_needs_a_message(parked: Parked, message: str | None) -> None:
    project = parked("needs-input")
    before = tree(project.root)
    argv = ["batch", "answer", "demo", "--change", "alpha"]
    done = cli_in_process(*argv, *([] if message is None else [message]), cwd=project.root)
    line = error_line(done)
    assert "`answer` needs a MESSAGE" in line
    assert "pairbot batch answer demo --change alpha MESSAGE" in line
    assert tree(project.root) == before
    assert json.loads((project.run_dir / "state.json").read_text())["parks"]["alpha"]["state"] == (
        "needs-input"
    )


def test_feedback_needs_a_message(recorded: Recorded) -> None:
    project = recorded()
    before = tree(project.root)
    done = cli_in_process("batch", "feedback", "demo", "--change", "alpha", cwd=project.root)
    assert "`feedback` needs a MESSAGE" in error_line(done)
    assert tree(project.root) == before


@pytest.mark.parametrize("verb", ["answer", "retry"])
def test_answer_and_retry_need_a_blocked_step(recorded: Recorded, verb: str) -> None:
    project = recorded()
    before = tree(project.root)
    done = cli_in_process("batch", verb, "demo", "--change", "alpha", "text", cwd=project.root)
    assert error_line(done) == (
        f"pairbot: alpha is not blocked (not parked); `{verb}` clears a blocked or needs-input step"
    )
    assert tree(project.root) == before


def test_feedback_on_a_change_with_no_completed_step(recorded: Recorded) -> None:
    project = recorded(WITH_PROOF)
    before = tree(project.root)
    done = cli_in_process(
        "batch", "feedback", "demo", "--change", "beta", "do it again", cwd=project.root
    )
    assert error_line(done) == "pairbot: beta has no completed step to give feedback on"
    assert tree(project.root) == before


@pytest.mark.parametrize(
    ("argv", "stray"),
    [
        pytest.param(["approve", "demo", "--change", "alpha", "--force"], "--force", id="approve"),
        pytest.param(
            ["answer", "demo", "--change", "alpha", "--mesage", "use x"],
            "--mesage use x",
            id="typo",
        ),
        pytest.param(["retry", "demo", "--change", "alpha", "-f"], "-f", id="short-flag"),
    ],
)
def test_a_mistyped_flag_is_never_recorded_as_a_message(
    parked: Parked, argv: list[str], stray: str
) -> None:
    project = parked("needs-input")
    before = tree(project.root)
    done = cli_in_process("batch", *argv, cwd=project.root)
    assert f"unrecognized arguments: {stray}" in usage_error(done)
    assert tree(project.root) == before


# ---------------------------------------------------------------- rerun-proof


@pytest.mark.parametrize(
    ("phase", "expected"),
    [
        pytest.param("nope", "batch 'demo' has no phase 'nope'; phases: only, plain", id="unknown"),
        pytest.param("plain", "phase 'plain' has no proofOfWork to re-run", id="no-proof-defined"),
        pytest.param(
            "only", "phase 'only' has no recorded proof-of-work to invalidate", id="not-recorded"
        ),
    ],
)
def test_rerun_proof_refusals(recorded: Recorded, phase: str, expected: str) -> None:
    project = recorded(WITH_PROOF)
    before = tree(project.root)
    done = cli_in_process("batch", "rerun-proof", "demo", "--phase", phase, cwd=project.root)
    assert error_line(done) == f"pairbot: {expected}"
    assert tree(project.root) == before


def test_rerun_proof_needs_a_phase(recorded: Recorded) -> None:
    project = recorded(WITH_PROOF)
    done = cli_in_process("batch", "rerun-proof", "demo", cwd=project.root)
    assert "the following arguments are required: --phase" in usage_error(done)


# ---------------------------------------------------------------- step outcomes, not crashes


def _blocked(done: subprocess.CompletedProcess[str]) -> str:
    """A blocked step: exit 1, the result on stdout (its message ends with the stderr tail)."""
    no_traceback(done)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stdout.startswith("blocked: propose alpha — ")
    return done.stdout


def _assert_parked_without_agent(project: Project) -> None:
    parks = json.loads((project.run_dir / "state.json").read_text())["parks"]
    assert parks["alpha"]["state"] == "blocked"
    assert parks["alpha"]["transition"] == "propose"
    # The change's own entries: the batch's work baseline (key `work:demo`) is not the step's.
    kinds = [entry["kind"] for entry in project.journal() if entry["key"] == "alpha"]
    assert kinds == ["step-started", "outcome"]
    assert project.agent_calls() == []
    assert not (project.run_dir / "step.lock").exists()


@pytest.mark.parametrize(
    "config",
    [
        pytest.param({"batch": {"agent": "robot"}}, id="unknown-agent"),
        pytest.param({"batch": {"agent": {"name": "robot", "model": "m-1"}}}, id="with-model"),
        pytest.param(
            {"batch": {"agent": "command", "agentCommand": None}}, id="command-without-agentCommand"
        ),
    ],
)
def test_an_agent_that_cannot_start_blocks_the_step(
    make_project: MakeProject, config: dict[str, Any]
) -> None:
    project = make_project(config=config)
    _blocked(cli("batch", "apply", "demo", cwd=project.root))
    _assert_parked_without_agent(project)
    again = cli("batch", "apply", "demo", "--json", cwd=project.root)
    assert again.returncode == 1
    assert json.loads(again.stdout)["state"] == "blocked"  # parked: nothing spawns twice
    alpha = [entry["kind"] for entry in project.journal() if entry["key"] == "alpha"]
    assert alpha == ["step-started", "outcome"]


def test_unknown_agent_message_lists_the_available_agents(make_project: MakeProject) -> None:
    project = make_project(config={"batch": {"agent": "robot"}})
    shown = _blocked(cli("batch", "apply", "demo", cwd=project.root))
    assert "unknown agent 'robot'" in shown
    assert AVAILABLE_AGENTS in shown
    # The same reason is what `batch status` and the journal keep.
    park = json.loads((project.run_dir / "state.json").read_text())["parks"]["alpha"]
    assert AVAILABLE_AGENTS in park["reason"]
    assert AVAILABLE_AGENTS in project.journal()[-1]["message"]


@pytest.mark.parametrize(
    ("config", "env"),
    [
        pytest.param({"locus": "docker"}, {}, id="config"),
        pytest.param({}, {"PAIR_LOCUS": "docker"}, id="env"),
        pytest.param({"locus": "remote", "remote": {"host": "127.0.0.1", "port": 1}}, {}, id="rm"),
    ],
)
def test_an_unavailable_locus_blocks_the_step(
    make_project: MakeProject, config: dict[str, Any], env: dict[str, str]
) -> None:
    base = {"agent": "command", "agentCommand": [sys.executable, "-c", "pass"]}
    project = make_project(config={"batch": {**base, **config}})
    _blocked(cli("batch", "apply", "demo", cwd=project.root, env=env))
    _assert_parked_without_agent(project)


def test_docker_locus_message_says_what_is_wrong_and_what_to_do(make_project: MakeProject) -> None:
    base = {"agent": "command", "agentCommand": [sys.executable, "-c", "pass"]}
    project = make_project(config={"batch": {**base, "locus": "docker"}})
    shown = _blocked(cli("batch", "apply", "demo", cwd=project.root))
    assert "no Docker engine is reachable" in shown
    assert "local" in shown and "remote" in shown  # the other loci, as the remedy


# ---------------------------------------------------------------- the step lock


def _write_lock(project: Project, pid: int, start_time: str | None) -> Path:
    path = project.run_dir / "step.lock"
    owner = {"pid": pid, "startTime": start_time, "host": socket.gethostname()}
    path.write_text(json.dumps({**owner, "at": "2026-01-01T00:00:00+00:00"}) + "\n")
    return path


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["batch", "apply", "demo"], id="apply"),
        pytest.param(["batch", "apply", "demo", "--json"], id="apply-json"),
        pytest.param(["batch", "feedback", "demo", "--change", "alpha", "again"], id="feedback"),
        pytest.param(["batch", "rerun-proof", "demo", "--phase", "only"], id="rerun-proof"),
    ],
)
def test_a_live_lock_holder_makes_the_step_skip_with_exit_3(
    recorded: Recorded, argv: list[str]
) -> None:
    project = recorded(WITH_PROOF)
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        start_time = process_start_time(sleeper.pid)
        assert start_time is not None
        _write_lock(project, sleeper.pid, start_time)
        before = tree(project.root)
        line = error_line(cli(*argv, cwd=project.root), code=3)
        assert f"batch lock held by pid {sleeper.pid} on host {socket.gethostname()}" in line
        assert "try again when it finishes" in line
        assert tree(project.root) == before  # the lock, the journal and state.json untouched
    finally:
        sleeper.kill()
        sleeper.wait()
    assert len(project.agent_calls()) == 1


def test_a_dead_owners_lock_is_reclaimed(recorded: Recorded) -> None:
    project = recorded()
    finished = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    _write_lock(project, int(finished.stdout), "1")
    done = cli("batch", "apply", "demo", cwd=project.root)
    no_traceback(done)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("advanced: apply alpha")
    assert not (project.run_dir / "step.lock").exists()


def test_a_recycled_pid_does_not_keep_a_lock_alive(recorded: Recorded) -> None:
    project = recorded()
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        _write_lock(project, sleeper.pid, "1")  # a live pid, but not the process that locked
        done = cli("batch", "apply", "demo", cwd=project.root)
    finally:
        sleeper.kill()
        sleeper.wait()
    no_traceback(done)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("advanced: apply alpha")


# ---------------------------------------------------------------- usage


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        pytest.param([], "the following arguments are required: verb", id="no-args"),
        pytest.param(["frob"], "argument verb: invalid choice: 'frob'", id="unknown-verb"),
        pytest.param(["status"], "argument verb: invalid choice: 'status'", id="status-no-batch"),
        pytest.param(["batch"], "the following arguments are required: batch_verb", id="batch"),
        pytest.param(["batch", "frob"], "invalid choice: 'frob'", id="unknown-batch-verb"),
        pytest.param(["batch", "status"], "the following arguments are required: name", id="st"),
        pytest.param(["batch", "approve", "demo"], "required: --change", id="approve-no-change"),
        pytest.param(["batch", "apply", "demo", "-m"], "expected one argument", id="m-no-value"),
        pytest.param(["demo", "--max-steps", "many"], "invalid int value: 'many'", id="demo-int"),
        pytest.param(["--bogus"], "the following arguments are required: verb", id="bogus-flag"),
    ],
)
def test_usage_errors_exit_2_with_the_usage(tmp_path: Path, argv: list[str], expected: str) -> None:
    done = cli_in_process(*argv, cwd=tmp_path)
    assert expected in usage_error(done)
    assert list(tmp_path.iterdir()) == []


def test_unknown_verb_lists_the_verbs(tmp_path: Path) -> None:
    first = usage_error(cli_in_process("frob", cwd=tmp_path))
    for verb in ("validate", "demo", "propose", "apply", "verify", "batch"):
        assert f"'{verb}'" in first
    batch_first = usage_error(cli_in_process("batch", "frob", cwd=tmp_path))
    for verb in ("status", "apply", "report", "approve", "answer", "feedback", "retry"):
        assert f"'{verb}'" in batch_first


# ---------------------------------------------------------------- in this process, as the script


@dataclass(frozen=True)
class Kind:
    """A kind of refusal: the project it meets (`setup`, then `edit`: a file under .pair/ and
    its text), the command, its environment and its exit code."""

    setup: Literal["empty", "plain", "proof", "needs-input"]
    argv: str  # split on spaces
    code: int = 2
    env: tuple[tuple[str, str], ...] = ()
    edit: tuple[str, str] | None = None


KINDS = [
    pytest.param(Kind("empty", "batch status demo"), id="no-project"),
    pytest.param(Kind("empty", "frob"), id="usage-top"),
    pytest.param(Kind("plain", "batch report demo --change alpha"), id="usage"),
    pytest.param(Kind("plain", "batch approve nope --change alpha"), id="batch"),
    pytest.param(Kind("plain", "validate ../x"), id="batch-name"),
    pytest.param(
        Kind("plain", "batch report --progress hi", env=(("PAIR_CHANGE", "../x"),)),
        id="change-name-env",
    ),
    pytest.param(Kind("plain", "batch retry demo --change ghost"), id="change"),
    pytest.param(
        Kind("plain", "validate", edit=("config.yaml", "bogus: 1\n")), id="config-validate"
    ),
    pytest.param(
        Kind(
            "plain",
            "batch apply demo --json",
            edit=("config.yaml", "batch: {agent: [unclosed\n"),
        ),
        id="config-apply",
    ),
    pytest.param(
        Kind(
            "plain",
            "batch status demo --json",
            edit=("batches/demo/batch.yaml", "phases: [{name: only, changes: [alpha, alpha]}]\n"),
        ),
        id="manifest",
    ),
    pytest.param(
        Kind("plain", "batch apply demo", env=(("PAIR_LOCUS", "moon"),)), id="env-settings"
    ),
    pytest.param(
        Kind(
            "plain",
            # A relative path: from the working directory, both ways.
            "batch report demo --change alpha --complete x --findings findings.json",
            edit=("../findings.json", "{not json"),
        ),
        id="findings",
    ),
    pytest.param(
        Kind("needs-input", "batch answer demo --change alpha --mesage x"),
        id="stray-flag",
    ),
    pytest.param(Kind("needs-input", "batch answer demo --change alpha"), id="answer"),
    pytest.param(Kind("proof", "batch rerun-proof demo --phase only"), id="proof"),
    pytest.param(Kind("plain", "batch status demo", code=0), id="status"),
]


@pytest.mark.parametrize("kind", KINDS)
def test_in_process_ends_as_the_console_script(
    recorded: Recorded, parked: Parked, tmp_path: Path, kind: Kind
) -> None:
    """Each kind of refusal the tests above run in this process, run both ways on one project:
    the same exit code, stdout and stderr, byte for byte, and the project untouched by either."""
    if kind.setup == "empty":
        root = tmp_path / "empty"
        root.mkdir()
    elif kind.setup == "needs-input":
        root = parked("needs-input").root
    else:
        root = recorded(WITH_PROOF if kind.setup == "proof" else None).root
    if kind.edit is not None:
        path, text = kind.edit
        (root / ".pair" / path).write_text(text)
    before = tree(root)
    env = dict(kind.env)
    script = cli(*kind.argv.split(), cwd=root, env=env)
    no_traceback(script)
    assert script.returncode == kind.code, script.stderr
    here = cli_in_process(*kind.argv.split(), cwd=root, env=env)
    assert (here.returncode, here.stdout, here.stderr) == (
        script.returncode,
        script.stdout,
        script.stderr,
    )
    assert tree(root) == before


# ---------------------------------------------------------------- success is quiet and clear


def test_validate_prints_ok(make_project: MakeProject) -> None:
    project = make_project()
    before = tree(project.root)
    done = cli("validate", cwd=project.root)
    no_traceback(done)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok: .pair/config.yaml and 1 batch(es): demo\n"
    assert done.stderr == ""
    one = cli("validate", "demo", cwd=project.root)
    assert one.returncode == 0
    assert one.stdout.startswith("ok: ")
    assert tree(project.root) == before
