"""Loading `.pair/config.yaml` and batch manifests: every error line names the file, the key
path, the offending value and what is allowed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from app.domain.card.budget import Budget, budget_of
from app.engine.manifest import (
    LLM_JUDGE_REFUSAL,
    BatchManifest,
    ProjectConfig,
    list_batches,
    load_manifest,
    load_project_config,
)
from app.errors import ConfigError, NotInitialisedError, UnknownBatchError, UserError
from app.settings import AgentChoice, resolve_settings

NAME_RULE = "use lowercase letters, digits, '.', '_' or '-', starting with a letter or digit"


def write_manifest(root: Path, text: str | bytes, batch: str = "demo") -> Path:
    path = root / ".pair" / "batches" / batch / "batch.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def write_config(root: Path, text: str) -> Path:
    path = root / ".pair" / "config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# ---------------------------------------------------------------- batch.yaml errors

MANIFEST_ERRORS = [
    pytest.param(
        "phases:\n  - name: a\n    foo: 1\n",
        "phases.0.foo: unknown key; allowed keys here: name, goal, success, proofOfWork, changes"
        " (got 1)",
        id="unknown-phase-key",
    ),
    pytest.param(
        "phasez: []\nphases: [{name: a}]\n",
        "phasez: unknown key; allowed keys here: gate, prGrouping, baseBranch, settings, phases,"
        " budget (got [])",
        id="unknown-top-level-key",
    ),
    pytest.param(
        "phases: [{name: a, changes: [{name: x, after: y}]}]\n",
        "phases.0.changes.0.after: unknown key; allowed keys here: name, card, dependsOn (got 'y')",
        id="unknown-change-key",
    ),
    pytest.param(
        "phases: [{name: a, proofOfWork: {run: x, when: always}}]\n",
        "phases.0.proofOfWork.when: unknown key; allowed keys here: kind, run, pass, policy"
        " (got 'always')",
        id="unknown-proof-key",
    ),
    pytest.param(
        "settings: {agnt: x}\nphases: [{name: a}]\n",
        "settings.agnt: unknown key; allowed keys here: agent, agentCommand, locus, image, remote,"
        " agentTimeoutMs, permissions (got 'x')",
        id="unknown-settings-key",
    ),
    pytest.param(
        "settings: {agent: {name: claude, modle: x}}\nphases: [{name: a}]\n",
        "settings.agent.modle: unknown key; allowed keys here: name, model (got 'x')",
        id="unknown-agent-key",
    ),
    pytest.param(
        "gate: sometimes\nphases: [{name: a}]\n",
        "gate: Input should be 'voluntary', 'after-propose', 'every-phase' or 'autonomous'"
        " (got 'sometimes')",
        id="bad-gate",
    ),
    pytest.param(
        "gate: on\nphases: [{name: a}]\n",
        "gate: Input should be 'voluntary', 'after-propose', 'every-phase' or 'autonomous'"
        " (got 'on')",
        id="yaml-1.2-on-is-a-string",
    ),
    pytest.param(
        "prGrouping: per-group\nphases: [{name: a}]\n",
        "prGrouping: Input should be 'off', 'whole-batch', 'per-phase' or 'per-change'"
        " (got 'per-group')",
        id="bad-pr-grouping",
    ),
    pytest.param(
        "prGrouping: no\nphases: [{name: a}]\n",
        "prGrouping: Input should be 'off', 'whole-batch', 'per-phase' or 'per-change' (got 'no')",
        id="yaml-1.2-no-is-a-string",
    ),
    pytest.param(
        "phases: [{name: a, proofOfWork: {run: x, policy: maybe}}]\n",
        "phases.0.proofOfWork.policy: Input should be 'hard-gate' or 'warn' (got 'maybe')",
        id="bad-proof-policy",
    ),
    pytest.param(
        "phases: [{name: a, proofOfWork: {kind: smoke, run: x}}]\n",
        "phases.0.proofOfWork.kind: Input should be 'integration', 'blackbox' or 'llm-judge'"
        " (got 'smoke')",
        id="bad-proof-kind",
    ),
    pytest.param(
        "phases: [{name: a, proofOfWork: {kind: llm-judge, run: judge}}]\n",
        f"phases.0.proofOfWork: {LLM_JUDGE_REFUSAL}",
        id="llm-judge-refused",
    ),
    pytest.param(
        "phases: [{name: a, proofOfWork: {run: '  '}}]\n",
        "phases.0.proofOfWork: a integration proof-of-work needs a non-empty `run` command",
        id="proof-without-command",
    ),
    pytest.param(
        "phases:\n  - name: a\n  - name: a\n",
        "phases.1.name: phase 'a' is declared twice; phase names are unique (got 'a')",
        id="duplicate-phase",
    ),
    pytest.param(
        "phases: [{name: a, changes: [x, x]}]\n",
        "phases.0.changes.1.name: change 'x' is declared twice; change names are unique across"
        " the batch (got 'x')",
        id="duplicate-change",
    ),
    pytest.param(
        "phases: [{name: a, changes: [x]}, {name: b, changes: [y, x]}]\n",
        "phases.1.changes.1.name: change 'x' is declared twice; change names are unique across"
        " the batch (got 'x')",
        id="duplicate-change-across-phases",
    ),
    pytest.param(
        "phases: [{name: a, changes: [x, {name: y, dependsOn: [x, zz]}]}]\n",
        "phases.0.changes.1.dependsOn.1: change 'y' depends on 'zz', which is not in this batch;"
        " known changes: x, y (got 'zz')",
        id="unknown-depends-on",
    ),
    pytest.param(
        "phases: [{name: a, changes: [{name: x, dependsOn: [y]}, y]}]\n",
        "phases.0.changes.0.dependsOn.0: change 'x' depends on 'y', which comes at or after it;"
        " a change may only depend on changes listed before it (got 'y')",
        id="forward-depends-on",
    ),
    pytest.param(
        "phases: [{name: a, changes: [x]}, {name: b, changes: [{name: y, dependsOn: [z]}, z]}]\n",
        "phases.1.changes.0.dependsOn.0: change 'y' depends on 'z', which comes at or after it;"
        " a change may only depend on changes listed before it (got 'z')",
        id="forward-depends-on-in-a-later-phase",
    ),
    pytest.param(
        "phases: [{name: a, changes: [{name: x, dependsOn: [x]}]}]\n",
        "phases.0.changes.0.dependsOn.0: change 'x' depends on 'x', which comes at or after it;"
        " a change may only depend on changes listed before it (got 'x')",
        id="self-dependency",
    ),
    pytest.param(
        "phases: [{name: Build It}]\n",
        f"phases.0.name: 'Build It' is not a valid name: {NAME_RULE} (got 'Build It')",
        id="invalid-phase-name",
    ),
    pytest.param(
        "phases: [{name: a, changes: ['-x']}]\n",
        f"phases.0.changes.0.name: '-x' is not a valid name: {NAME_RULE} (got '-x')",
        id="invalid-change-name",
    ),
    pytest.param(
        "phases: [{name: a, changes: [{card: 3}]}]\n",
        "phases.0.changes.0.name: Field required",
        id="change-without-name",
    ),
    pytest.param(
        "phases: [{name: a, changes: x}]\n",
        "phases.0.changes: Input should be a valid list (got 'x')",
        id="changes-not-a-list",
    ),
    pytest.param("gate: voluntary\n", "phases: Field required", id="no-phases"),
    pytest.param(
        "phases: []\n",
        "phases: List should have at least 1 item after validation, not 0 (got [])",
        id="empty-phases",
    ),
    pytest.param(
        "settings: {agentTimeoutMs: true}\nphases: [{name: a}]\n",
        "settings.agentTimeoutMs: Input should be a valid integer (got True)",
        id="strict-timeout",
    ),
    pytest.param(
        "- a\n- b\n", "(top level): expected a mapping of keys, got ['a', 'b']", id="a-list"
    ),
    pytest.param(
        "just text\n", "(top level): expected a mapping of keys, got 'just text'", id="a-scalar"
    ),
]


@pytest.mark.parametrize(("text", "line"), MANIFEST_ERRORS)
def test_manifest_errors_name_file_key_value_and_what_is_allowed(
    tmp_path: Path, text: str, line: str
) -> None:
    path = write_manifest(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_manifest(tmp_path, "demo")
    assert str(err.value) == f"{path}: {line}"
    assert err.value.exit_code == 2


def test_several_errors_give_one_line_each(tmp_path: Path) -> None:
    path = write_manifest(tmp_path, "gate: x\nprGrouping: y\nphases: [{name: a, foo: 1}]\n")
    with pytest.raises(ConfigError) as err:
        load_manifest(tmp_path, "demo")
    lines = str(err.value).splitlines()
    assert [line.split(": ")[1] for line in lines] == ["gate", "prGrouping", "phases.0.foo"]
    assert all(line.startswith(f"{path}: ") for line in lines)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        pytest.param("phases:\n  - name: a\n   bad: [\n", "line 3, column 4", id="indentation"),
        pytest.param("phases: [{name: a}\n", "line 2, column 1", id="unclosed-flow"),
        pytest.param("gate: 'x\n", "line 2, column 1", id="unclosed-quote"),
    ],
)
def test_invalid_yaml_names_line_and_column(tmp_path: Path, text: str, where: str) -> None:
    path = write_manifest(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_manifest(tmp_path, "demo")
    assert str(err.value).startswith(f"{path}: not valid YAML at {where}: ")


def test_non_utf8_manifest(tmp_path: Path) -> None:
    path = write_manifest(tmp_path, b"phases: \xff\n")
    with pytest.raises(ConfigError, match="not UTF-8 text") as err:
        load_manifest(tmp_path, "demo")
    assert str(err.value).startswith(f"{path}: ")


# ---------------------------------------------------------------- valid manifests


@pytest.mark.parametrize(
    ("text", "grouping"),
    [
        pytest.param("prGrouping: off\n", "off", id="off-stays-a-string"),
        pytest.param("prGrouping: 'off'\n", "off", id="quoted-off"),
        pytest.param("prGrouping: whole-batch\n", "whole-batch", id="whole-batch"),
        pytest.param("", "per-change", id="default"),
    ],
)
def test_pr_grouping(tmp_path: Path, text: str, grouping: str) -> None:
    write_manifest(tmp_path, text + "phases: [{name: a}]\n")
    assert load_manifest(tmp_path, "demo").pr_grouping == grouping


def test_a_full_manifest_loads(tmp_path: Path) -> None:
    write_manifest(
        tmp_path,
        "gate: every-phase\n"
        "prGrouping: per-phase\n"
        "baseBranch: trunk\n"
        "settings: {agent: {name: claude, model: opus}, agentTimeoutMs: 5000}\n"
        "phases:\n"
        "  - name: core\n"
        "    goal: the core\n"
        "    proofOfWork: {kind: blackbox, run: make e2e, pass: 'contains: ok', policy: warn}\n"
        "    changes: [alpha, {name: beta, card: 12, dependsOn: [alpha]}]\n"
        "  - name: later\n",
    )
    manifest = load_manifest(tmp_path, "demo")
    assert manifest.gate == "every-phase"
    assert manifest.base_branch == "trunk"
    assert manifest.change_names == ["alpha", "beta"]
    assert manifest.all_changes[1].depends_on == ["alpha"]
    assert manifest.all_changes[1].card == 12
    core = manifest.phase_named("core")
    assert core is not None
    assert core.proof_of_work is not None
    assert (core.proof_of_work.kind, core.proof_of_work.pass_) == ("blackbox", "contains: ok")
    assert core.proof_of_work.policy == "warn"
    assert manifest.phase_of("beta") == core
    assert manifest.phase_of("ghost") is None
    assert manifest.phase_named("ghost") is None
    later = manifest.phase_named("later")
    assert later is not None
    assert later.change_names == ()


def test_model_validate_refuses_llm_judge_directly() -> None:
    with pytest.raises(ValueError, match=LLM_JUDGE_REFUSAL.replace(".", r"\.")):
        BatchManifest.model_validate(
            {"phases": [{"name": "a", "proofOfWork": {"kind": "llm-judge", "run": "x"}}]}
        )


# ---------------------------------------------------------------- config.yaml

CONFIG_ERRORS = [
    pytest.param(
        "hosts: {pm: local, issues: x}\n",
        "hosts.issues: unknown key; allowed keys here: pm, code (got 'x')",
        id="unknown-hosts-key",
    ),
    pytest.param(
        "colour: blue\n",
        "colour: unknown key; allowed keys here: hosts, trigger, maintainer, cycle, tests, batch,"
        " budget, lessons, review (got 'blue')",
        id="unknown-top-level-key",
    ),
    pytest.param(
        "cycle: {merge: sometimes}\n",
        "cycle.merge: 'sometimes' is not a gate; allowed: always | never | when has:<labels>"
        " lacks:<labels> (got 'sometimes')",
        id="bad-merge-gate",
    ),
    pytest.param(
        "cycle: {until: shipped}\n",
        "cycle.until: Input should be 'ready-for-merge' or 'merged' (got 'shipped')",
        id="bad-until",
    ),
    pytest.param(
        "cycle: {maxFixRounds: 99}\n",
        "cycle.maxFixRounds: Input should be less than or equal to 20 (got 99)",
        id="fix-rounds-bound",
    ),
    pytest.param(
        "trigger: 1x\n",
        "trigger: String should match pattern '^[A-Za-z][A-Za-z0-9_-]*$' (got '1x')",
        id="bad-trigger",
    ),
    pytest.param(
        "batch: {locus: moon}\n",
        "batch.locus: Input should be 'local', 'docker' or 'remote' (got 'moon')",
        id="bad-locus",
    ),
    pytest.param("[1]\n", "(top level): expected a mapping of keys, got [1]", id="a-list"),
    pytest.param(
        "budget: {steps: 0}\n",
        "budget.steps: Input should be greater than 0 (got 0)",
        id="budget-zero-steps",
    ),
    pytest.param(
        "budget: {tokens: -5}\n",
        "budget.tokens: Input should be greater than 0 (got -5)",
        id="budget-negative-tokens",
    ),
    pytest.param(
        "budget: {costUsd: 0.0}\n",
        "budget.costUsd: Input should be greater than 0 (got 0.0)",
        id="budget-zero-cost",
    ),
    pytest.param(
        "budget: {costUsd: true}\n",
        "budget.costUsd: must be a number greater than 0 (got True)",
        id="budget-bool-cost",
    ),
    pytest.param(
        "budget: {tokens: 10, minutes: 5}\n",
        "budget.minutes: unknown key; allowed keys here: tokens, costUsd, steps (got 5)",
        id="budget-unknown-key",
    ),
    pytest.param(
        "batch: {agent: [claude]}\n",
        "batch.agent: List should have at least 2 items after validation, not 1 (got ['claude'])",
        id="fallback-list-of-one",
    ),
    pytest.param(
        "batch: {agent: [claude, codex, gemini]}\n",
        "batch.agent: List should have at most 2 items after validation, not 3"
        " (got ['claude', 'codex', 'gemini'])",
        id="fallback-list-of-three",
    ),
    pytest.param(
        "batch: {agent: {apply: [codex, codex]}}\n",
        "batch.agent.apply: a fallback list names two different agents: the agent, then the one"
        " that takes over after a quota, auth or crash failure (got ['codex', 'codex'])",
        id="fallback-list-twice-the-same",
    ),
]


@pytest.mark.parametrize(("text", "line"), CONFIG_ERRORS)
def test_config_errors_name_file_key_value_and_what_is_allowed(
    tmp_path: Path, text: str, line: str
) -> None:
    path = write_config(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_project_config(tmp_path)
    assert str(err.value) == f"{path}: {line}"


@pytest.mark.parametrize(
    "text",
    [pytest.param(None, id="absent"), pytest.param("", id="empty"), pytest.param("{}\n", id="{}")],
)
def test_config_defaults(tmp_path: Path, text: str | None) -> None:
    (tmp_path / ".pair").mkdir()
    if text is not None:
        write_config(tmp_path, text)
    assert load_project_config(tmp_path) == ProjectConfig()


def test_config_reads_camel_case(tmp_path: Path) -> None:
    write_config(
        tmp_path, "cycle: {maxFixRounds: 5, prepare: 'when has:risky'}\ntests: {command: make}\n"
    )
    config = load_project_config(tmp_path)
    assert config.cycle.max_fix_rounds == 5
    assert config.cycle.prepare == "when has:risky"
    assert config.tests.command == "make"


# ---------------------------------------------------------------- missing project / batch


@pytest.mark.parametrize(
    "load",
    [
        pytest.param(load_project_config, id="config"),
        pytest.param(lambda root: load_manifest(root, "demo"), id="manifest"),
    ],
)
def test_missing_pair_directory(tmp_path: Path, load: Callable[[Path], object]) -> None:
    with pytest.raises(NotInitialisedError) as err:
        load(tmp_path)
    assert str(err.value) == (
        f"{tmp_path} is not a pairbot project: no .pair/ directory "
        "(run `pairbot init` to create one, or run pairbot from the project root)"
    )
    assert isinstance(err.value, UserError)


@pytest.mark.parametrize(
    ("batches", "known"),
    [
        pytest.param([], "(none)", id="no-batches"),
        pytest.param(["zeta", "alpha"], "alpha, zeta", id="sorted"),
    ],
)
def test_unknown_batch_lists_known_batches(tmp_path: Path, batches: list[str], known: str) -> None:
    (tmp_path / ".pair").mkdir()
    for name in batches:
        write_manifest(tmp_path, "phases: [{name: a}]\n", batch=name)
    (tmp_path / ".pair" / "batches" / "stray").mkdir(parents=True, exist_ok=True)
    expected = tmp_path / ".pair" / "batches" / "ghost" / "batch.yaml"
    with pytest.raises(UnknownBatchError) as err:
        load_manifest(tmp_path, "ghost")
    assert str(err.value) == f"no batch named 'ghost' (expected {expected}); known batches: {known}"
    assert list_batches(tmp_path) == sorted(batches)


@pytest.mark.parametrize("name", ["Demo", "../demo", "", "a b"])
def test_invalid_batch_name(tmp_path: Path, name: str) -> None:
    (tmp_path / ".pair").mkdir()
    with pytest.raises(UnknownBatchError) as err:
        load_manifest(tmp_path, name)
    assert str(err.value) == f"{name!r} is not a valid batch name: {NAME_RULE}"


def test_budgets_and_fallback_lists_load(tmp_path: Path) -> None:
    write_config(
        tmp_path,
        "budget: {tokens: 100000, costUsd: 1.5, steps: 4}\n"
        "batch: {agent: {apply: [claude, {name: codex, model: o3}]}}\n",
    )
    config = load_project_config(tmp_path)
    assert config.budget is not None
    assert budget_of(config.budget) == Budget(tokens=100_000, cost_usd=1.5, steps=4)
    settings = resolve_settings(env={}, manifest=None, project=config.batch)
    apply = settings.agent_for("apply")
    assert (apply.name, apply.fallback) == (
        "claude",
        AgentChoice(name="codex", model="o3", scope="project"),
    )
    assert settings.agent_for("verify").fallback is None
    write_manifest(tmp_path, "budget: {steps: 2}\nphases: [{name: p, changes: [a]}]\n")
    manifest = load_manifest(tmp_path, "demo")
    assert manifest.budget is not None and manifest.budget.steps == 2


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "lessons: {where: main}\n",
            "lessons.where: Input should be 'state-branch', 'default-branch' or 'off'",
            id="lessons-where",
        ),
        pytest.param(
            "lessons: {budgetBytes: 10}\n",
            "lessons.budgetBytes: Input should be greater than or equal to 256",
            id="lessons-budget-too-small",
        ),
    ],
)
def test_lessons_config_errors_name_the_key_and_what_is_allowed(
    tmp_path: Path, text: str, expected: str
) -> None:
    (tmp_path / ".pair").mkdir()
    (tmp_path / ".pair" / "config.yaml").write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_project_config(tmp_path)
    assert expected in str(caught.value)


def test_lessons_default_to_the_state_branch(tmp_path: Path) -> None:
    (tmp_path / ".pair").mkdir()
    config = load_project_config(tmp_path)
    assert (config.lessons.where, config.lessons.budget_bytes) == ("state-branch", 4_000)
    (tmp_path / ".pair" / "config.yaml").write_text("lessons: {where: default-branch}\n")
    assert load_project_config(tmp_path).lessons.where == "default-branch"


def test_review_section_loads_a_panel_with_models_and_fallbacks(tmp_path: Path) -> None:
    write_config(
        tmp_path,
        "review:\n"
        "  panel: [claude, {name: codex, model: o3}, [gemini, opencode]]\n"
        "  requiredChecks: [ci/build, lint]\n",
    )
    review = load_project_config(tmp_path).review
    assert review.required_checks == ["ci/build", "lint"]
    reviewers = review.reviewers()
    assert [slug for slug, _ in reviewers] == ["claude", "codex", "gemini"]
    assert reviewers[1][1] == AgentChoice(name="codex", model="o3", scope="project")
    gemini = reviewers[2][1]
    assert gemini.fallback == AgentChoice(name="opencode", model=None, scope="project")


def test_review_defaults_to_no_panel() -> None:
    assert ProjectConfig().review.reviewers() == []


def test_one_agent_twice_on_a_panel_is_told_apart_by_model(tmp_path: Path) -> None:
    write_config(
        tmp_path,
        "review: {panel: [{name: claude, model: opus-4}, {name: claude, model: sonnet-4}]}\n",
    )
    slugs = [slug for slug, _ in load_project_config(tmp_path).review.reviewers()]
    assert slugs == ["claudeopus4", "claudesonnet4"]


@pytest.mark.parametrize(
    ("text", "line"),
    [
        pytest.param(
            "review: {panel: [claude, claude]}\n",
            "review.panel: two panel entries review as the same reviewer 'claude':"
            " name each agent once, or give entries of the same agent different models"
            " (got ['claude', 'claude'])",
            id="same-reviewer-twice",
        ),
        pytest.param(
            "review: {requiredChecks: ['']}\n",
            "review.requiredChecks.0: String should have at least 1 character (got '')",
            id="empty-check-name",
        ),
        pytest.param(
            "review: {quorum: 2}\n",
            "review.quorum: unknown key; allowed keys here: panel, requiredChecks,"
            " severityFloor, requiredFindings (got 2)",
            id="unknown-review-key",
        ),
    ],
)
def test_review_errors_name_the_key(tmp_path: Path, text: str, line: str) -> None:
    path = write_config(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_project_config(tmp_path)
    assert str(err.value) == f"{path}: {line}"
