"""The files a user writes: `.pair/config.yaml` and `.pair/batches/<name>/batch.yaml`.

Both are validated on load with strict models (unknown keys refused). A validation error is a
`ConfigError` whose lines each name the file, the key path, the offending value and what is
allowed; it is raised before anything runs or any run-state is touched.

The paths and the YAML dialect (YAML 1.2 booleans) live in `app.engine.project_files`, which
needs no pydantic, and are re-exported here. These models are the only ones of the two files:
every command, `batch status` included, reads them through `load_project_config` and
`load_manifest`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from app.domain.card.autonomy import parse_gate_condition
from app.domain.card.binding import check_host_name
from app.domain.card.merge_method import MergeMethodSetting
from app.domain.review.panel import panel_slugs
from app.domain.review.verdict import DEFAULT_FLOOR, SHA_PATTERN, FindingKind, Severity
from app.engine.boundary import PrGrouping
from app.engine.gates import Gate
from app.engine.names import NAME_PATTERN, NAME_RULE
from app.engine.project_files import (
    PAIR_DIR,
    batches_dir,
    existing_manifest_path,
    list_batches,
    manifest_path,
    pair_dir,
    read_yaml,
)
from app.errors import ConfigError
from app.settings import AgentChoice, BatchSettings, StageEntry, StrictModel, stage_choice

LLM_JUDGE_REFUSAL = (
    "llm-judge proof-of-work is not yet supported by batch apply; use integration or blackbox."
)
_M = TypeVar("_M", bound=BaseModel)
__all__ = [
    "LLM_JUDGE_REFUSAL",
    "PAIR_DIR",
    "BatchManifest",
    "BudgetSettings",
    "ChangeRef",
    "CycleConfig",
    "HostsConfig",
    "LessonsConfig",
    "Phase",
    "ProjectConfig",
    "ProofOfWork",
    "RequiredFinding",
    "ReviewConfig",
    "TestsConfig",
    "batches_dir",
    "list_batches",
    "load_manifest",
    "load_project_config",
    "manifest_path",
    "pair_dir",
    "validate_manifest",
    "validate_project_config",
]
# Branch names pydantic puts in an error path for tagged unions; a user never wrote them.
_UNION_TAGS = frozenset({"agent-name", "agent-with-model", "agent-list", "stage-map", "[key]"})

HostName = Annotated[str, Field(min_length=1)]
CycleUntil = Literal["ready-for-merge", "merged"]
LessonsWhere = Literal["state-branch", "default-branch", "off"]
ProofPolicy = Literal["hard-gate", "warn"]


class _KeyedError(ValueError):
    """A cross-key problem a model validator found, with the key path and value it is about.

    A model validator's errors sit at the model's own location; this carries the exact key
    path so the error line can name it (see `_format_errors`).
    """

    def __init__(self, loc: tuple[str | int, ...], value: Any, message: str) -> None:
        super().__init__(message)
        self.loc = loc
        self.value = value


def _check_name(value: str) -> str:
    if not NAME_PATTERN.match(value):
        raise ValueError(f"{value!r} is not a valid name: use {NAME_RULE}")
    return value


def _check_gate(value: str) -> str:
    parse_gate_condition(value)
    return value


# ---------------------------------------------------------------- budgets


def _a_number(value: Any) -> Any:
    # YAML's `true` is an int to pydantic's lax mode: a budget of "true" dollars is a typo.
    if isinstance(value, bool):
        raise ValueError("must be a number greater than 0")
    return value


PositiveCount = Annotated[int, Field(strict=True, gt=0)]
PositiveMoney = Annotated[float, BeforeValidator(_a_number), Field(gt=0, allow_inf_nan=False)]


class BudgetSettings(StrictModel):
    """`budget:` — limits that park the card (or the batch) `awaiting-human` once an accepted
    step takes its spend over one; every key optional, every value greater than 0."""

    tokens: PositiveCount | None = None
    cost_usd: PositiveMoney | None = None
    steps: PositiveCount | None = None


# ---------------------------------------------------------------- .pair/config.yaml


class HostsConfig(StrictModel):
    """Which adapter holds the cards (pm) and which the pull requests (code)."""

    pm: HostName = "local"
    code: HostName = "local"

    # Refused when the file is read (and by `pairbot validate`), in the loader's one line,
    # rather than as `host-unsupported` once a run has started. An undeclared key is not
    # "local": `app.domain.card.binding.choose_binding` infers it from where pairbot runs.
    _known = field_validator("pm", "code")(check_host_name)


class CycleConfig(StrictModel):
    """The card cycle's stopping point and its human gates."""

    until: CycleUntil = "ready-for-merge"
    merge: str = "always"
    merge_method: MergeMethodSetting = "auto"
    prepare: str = "always"
    max_fix_rounds: Annotated[int, Field(strict=True, ge=0, le=20)] = 3

    _gates = field_validator("merge", "prepare")(_check_gate)


class LessonsConfig(StrictModel):
    """`lessons:` — where a finished card's lesson is written, and how much of them a later
    proposal on the same files is given.

    `state-branch` (the default) keeps lessons with the run-state (`.pair/lessons/` in the
    checkout that holds it); `default-branch` proposes each one through a PR of its own to the
    base branch (read once merged); `off` writes none and gives none.
    """

    where: LessonsWhere = "state-branch"
    budget_bytes: Annotated[int, Field(strict=True, ge=256, le=65_536)] = 4_000


class TestsConfig(StrictModel):
    """How the engine runs the project's tests around apply, red and fix, and what it guards.

    `may_modify_tests` lifts the guard on tests and the runner's configuration for the paths
    it matches, `may_modify_manifests` the one on dependency manifests
    (`app.domain.review.guarded`).
    """

    command: str | None = None
    junit: str | None = None
    may_modify_tests: list[str] = Field(default_factory=list)
    may_modify_manifests: list[str] = Field(default_factory=list)


CheckName = Annotated[str, Field(min_length=1, max_length=200)]


class RequiredFinding(StrictModel):
    """Verified evidence a card carries into its review: the final verifier re-proves it on the
    same reviewed head (a finding of kind `regression` when the defect is still there)."""

    id: Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_-]*$")]
    card: Annotated[int, Field(strict=True, ge=1)]
    observed_head: Annotated[str, Field(pattern=SHA_PATTERN)]
    kind: FindingKind = "defect"
    severity: Severity
    summary: Annotated[str, Field(min_length=1)]
    oracle: Annotated[str, Field(min_length=1)]  # what decides present or absent
    probe: Annotated[str, Field(min_length=1)]  # the command or steps that observe it
    observed: Annotated[str, Field(min_length=1)]  # what the probe showed at observedHead


class ReviewConfig(StrictModel):
    """`review:` — who reviews a card's head, what outside the review counts, and how findings
    are judged.

    `panel` names the reviewer agents of every verify, each entry written like the `agent`
    setting (a name, `{name, model}` or a fallback list of two); empty means the verify stage's
    own agent reviews alone. `required_checks` names the CI checks (or commit statuses) on the
    head that must be green before the review can converge, beside those the host's branch
    protection requires. `severity_floor` decides which findings block; `required_findings` is
    the verified evidence cards carry into their reviews.
    """

    panel: list[StageEntry] = Field(default_factory=list)
    required_checks: list[CheckName] = Field(default_factory=list)
    severity_floor: Severity = DEFAULT_FLOOR
    required_findings: list[RequiredFinding] = Field(default_factory=list)

    @field_validator("panel")
    @classmethod
    def _distinct_reviewers(cls, value: list[StageEntry]) -> list[StageEntry]:
        panel_slugs([(c.name, c.model) for c in (stage_choice(e, "project") for e in value)])
        return value

    @model_validator(mode="after")
    def _unique(self) -> ReviewConfig:
        seen: set[tuple[int, str]] = set()
        for item in self.required_findings:
            if (item.card, item.id) in seen:
                raise ValueError(
                    f"requiredFindings: card {item.card} names {item.id!r} twice; each id once"
                )
            seen.add((item.card, item.id))
        return self

    def reviewers(self) -> list[tuple[str, AgentChoice]]:
        """Each panel entry as `(slug, agent)`, in the order written; empty without a panel."""
        choices = [stage_choice(entry, "project") for entry in self.panel]
        return list(zip(panel_slugs([(c.name, c.model) for c in choices]), choices, strict=True))

    def required_for(self, card: int) -> list[RequiredFinding]:
        """The required findings `card` carries."""
        return [item for item in self.required_findings if item.card == card]


class ProjectConfig(StrictModel):
    """`.pair/config.yaml`; every key is optional."""

    hosts: HostsConfig = Field(default_factory=HostsConfig)
    trigger: Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_-]*$")] = "pair"
    maintainer: str | None = None
    cycle: CycleConfig = Field(default_factory=CycleConfig)
    tests: TestsConfig = Field(default_factory=TestsConfig)
    batch: BatchSettings = Field(default_factory=BatchSettings)
    # Each card's (each change's) own limits; a batch's manifest may add one for the batch.
    budget: BudgetSettings | None = None
    lessons: LessonsConfig = Field(default_factory=LessonsConfig)
    review: ReviewConfig = Field(default_factory=ReviewConfig)


# ---------------------------------------------------------------- batch.yaml


class ProofOfWork(StrictModel):
    """A phase's proof-of-work: a command run in the project root and its pass condition."""

    kind: Literal["integration", "blackbox", "llm-judge"] = "integration"
    run: str = ""
    pass_: str = Field(default="", alias="pass")
    policy: ProofPolicy = "hard-gate"

    @model_validator(mode="after")
    def _supported(self) -> ProofOfWork:
        if self.kind == "llm-judge":
            raise ValueError(LLM_JUDGE_REFUSAL)
        if not self.run.strip():
            raise ValueError(f"a {self.kind} proof-of-work needs a non-empty `run` command")
        return self


class ChangeRef(StrictModel):
    """A change with options; a bare string in `changes:` is a change with none."""

    name: str
    card: int | str | None = None
    depends_on: list[str] = Field(default_factory=list)

    _name = field_validator("name")(_check_name)


class Phase(StrictModel):
    """One phase: a goal, its changes in order, and the proof that closes it."""

    name: str
    goal: str = ""
    success: str = ""
    proof_of_work: ProofOfWork | None = None
    changes: list[ChangeRef] = Field(default_factory=list)

    _name = field_validator("name")(_check_name)

    @field_validator("changes", mode="before")
    @classmethod
    def _bare_names(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"name": item} if isinstance(item, str) else item for item in value]
        return value

    @property
    def change_names(self) -> tuple[str, ...]:
        """The phase's change names, in order."""
        return tuple(change.name for change in self.changes)


class BatchManifest(StrictModel):
    """`.pair/batches/<name>/batch.yaml`."""

    gate: Gate = "voluntary"
    pr_grouping: PrGrouping = "per-change"
    base_branch: str | None = None
    settings: BatchSettings = Field(default_factory=BatchSettings)
    phases: Annotated[list[Phase], Field(min_length=1)]
    budget: BudgetSettings | None = None  # the whole batch's limits (every change's steps)

    @model_validator(mode="after")
    def _consistent(self) -> BatchManifest:
        seen_phases: set[str] = set()
        seen: set[str] = set()
        for p, phase in enumerate(self.phases):
            if phase.name in seen_phases:
                raise _KeyedError(
                    ("phases", p, "name"),
                    phase.name,
                    f"phase {phase.name!r} is declared twice; phase names are unique",
                )
            seen_phases.add(phase.name)
            for c, change in enumerate(phase.changes):
                if change.name in seen:
                    raise _KeyedError(
                        ("phases", p, "changes", c, "name"),
                        change.name,
                        f"change {change.name!r} is declared twice; change names are unique "
                        "across the batch",
                    )
                seen.add(change.name)
        for p, phase in enumerate(self.phases):
            if phase.name in seen:
                # The journal and the parks key a decomposition by its phase name and a change
                # step by its change name: the two must never collide.
                raise _KeyedError(
                    ("phases", p, "name"),
                    phase.name,
                    f"phase {phase.name!r} has the same name as a change; a phase and a change "
                    "may not share a name",
                )
        order = {name: i for i, name in enumerate(self.change_names)}
        for p, phase in enumerate(self.phases):
            for c, change in enumerate(phase.changes):
                for d, dep in enumerate(change.depends_on):
                    loc = ("phases", p, "changes", c, "dependsOn", d)
                    if dep not in order:
                        raise _KeyedError(
                            loc,
                            dep,
                            f"change {change.name!r} depends on {dep!r}, which is not in this "
                            f"batch; known changes: {', '.join(order) or '(none)'}",
                        )
                    if order[dep] >= order[change.name]:
                        raise _KeyedError(
                            loc,
                            dep,
                            f"change {change.name!r} depends on {dep!r}, which comes at or after "
                            "it; a change may only depend on changes listed before it",
                        )
        return self

    @property
    def all_changes(self) -> list[ChangeRef]:
        """Every change, in batch order."""
        return [change for phase in self.phases for change in phase.changes]

    @property
    def change_names(self) -> list[str]:
        """Every change name, in batch order."""
        return [change.name for change in self.all_changes]

    def phase_of(self, change: str) -> Phase | None:
        """The phase that lists `change`, if any."""
        for phase in self.phases:
            if change in phase.change_names:
                return phase
        return None

    def phase_named(self, name: str) -> Phase | None:
        """The phase called `name`, if any."""
        return next((phase for phase in self.phases if phase.name == name), None)


# ---------------------------------------------------------------- loading


def _model_at(model: type[BaseModel], loc: Sequence[int | str]) -> type[BaseModel] | None:
    """The model class that owns the key at `loc`, to list its allowed keys."""
    current: type[BaseModel] | None = model
    for part in loc:
        if current is None:
            return None
        if isinstance(part, int):
            continue
        field = next(
            (f for n, f in current.model_fields.items() if part in (n, f.alias)),
            None,
        )
        if field is None:
            return current
        current = _first_model(field.annotation)
    return current


def _first_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _first_model(arg)
        if found is not None:
            return found
    return None


def _format_errors(path: Path, root: type[BaseModel], err: ValidationError) -> ConfigError:
    lines = []
    for error in err.errors(include_url=False):
        loc = [part for part in error["loc"] if str(part) not in _UNION_TAGS]
        got = error.get("input")
        keyed = (error.get("ctx") or {}).get("error")
        if isinstance(keyed, _KeyedError):
            loc, got = [*loc, *keyed.loc], keyed.value
        key = ".".join(str(p) for p in loc) or "(top level)"
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            owner = _model_at(root, loc[:-1])
            allowed = (
                ", ".join(f.alias or n for n, f in owner.model_fields.items()) if owner else "?"
            )
            message = f"unknown key; allowed keys here: {allowed}"
        shown = "" if error["type"] in ("missing",) else f" (got {got!r})"
        if isinstance(got, dict) and error["type"] != "extra_forbidden":
            shown = ""
        lines.append(f"{path}: {key}: {message}{shown}")
    return ConfigError("\n".join(lines))


def _validate(path: Path, model: type[_M], data: Any) -> _M:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: (top level): expected a mapping of keys, got {data!r}")
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise _format_errors(path, model, err) from None


def load_project_config(root: Path) -> ProjectConfig:
    """Read and validate `.pair/config.yaml` (absent: every default)."""
    path = pair_dir(root) / "config.yaml"
    if not path.exists():
        return ProjectConfig()
    return validate_project_config(path, read_yaml(path))


def load_manifest(root: Path, batch: str) -> BatchManifest:
    """Read and validate a batch manifest."""
    path = existing_manifest_path(root, batch)
    return validate_manifest(path, read_yaml(path))


def validate_manifest(path: Path, data: Any) -> BatchManifest:
    """Validate a manifest's parsed YAML (`path` names the file in the error lines)."""
    return _validate(path, BatchManifest, data)


def validate_project_config(path: Path, data: Any) -> ProjectConfig:
    """Validate `.pair/config.yaml`'s parsed YAML (`path` names the file in the error lines)."""
    return _validate(path, ProjectConfig, data)
