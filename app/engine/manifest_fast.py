"""The light path of `batch status`: vouch for a manifest and a config without pydantic.

Building the pydantic models costs several times more than a 1,000-entry status itself, so
`batch status` first offers the parsed YAML to these pure checks. Each accepts only a
conservative subset that the models certainly accept with the same values (camelCase keys,
exact types, plain agent names, …) and answers `None` for anything else, valid or not; the
caller then validates with the models, which accept it or write the usual error lines naming
the file, the key path, the value and what is allowed. So the light path never decides that
a file is wrong and never words an error: it only skips the models for files they would pass.

    fast_manifest(data)  -> LightManifest | None     a batch.yaml
    fast_project(data)   -> LightProject | None      .pair/config.yaml (what status reads of it)

`tests/engine/test_manifest_fast.py` holds the contract: whatever these accept, the models
accept with equal values.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Final, NamedTuple, get_args

from app.engine.boundary import PrGrouping
from app.engine.gates import Gate
from app.engine.manifest_view import (
    CycleUntil,
    LessonsWhere,
    LightChange,
    LightManifest,
    LightPhase,
    LightProof,
)
from app.engine.names import NAME_PATTERN
from app.engine.proof import ProofPolicy

__all__ = ["LOCI", "LightProject", "fast_manifest", "fast_project"]

# `app.settings.LOCI` (that module loads pydantic); a test keeps the two equal.
LOCI: Final = ("local", "docker", "remote")
_GATES: Final = frozenset(get_args(Gate))
_GROUPINGS: Final = frozenset(get_args(PrGrouping))
_POLICIES: Final = frozenset(get_args(ProofPolicy))
_UNTIL: Final = frozenset(get_args(CycleUntil))
_WHERE: Final = frozenset(get_args(LessonsWhere))
# The models' trigger pattern, anchored at both ends (Python's `$` would allow a final newline).
_TRIGGER = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
# The proof kinds `batch apply` runs; `llm-judge` is refused by the models with a remedy.
_PROOF_KINDS: Final = frozenset({"integration", "blackbox"})


class _Unsure(Exception):
    """Outside the subset the light path vouches for: the models decide."""


class LightProject(NamedTuple):
    """What status reads of `.pair/config.yaml`."""

    max_fix_rounds: int = 3
    trigger: str = "pair"


def fast_manifest(data: Any) -> LightManifest | None:
    """The manifest when the light path vouches for `data`, else None (validate with the models)."""
    try:
        return _manifest(data)
    except _Unsure:
        return None


def fast_project(data: Any) -> LightProject | None:
    """The config when the light path vouches for `data`, else None (validate with the models)."""
    try:
        return _project({} if data is None else data)
    except _Unsure:
        return None


# ---------------------------------------------------------------- building blocks


def _ensure(condition: bool) -> None:
    if not condition:
        raise _Unsure


def _mapping(value: Any, allowed: frozenset[str]) -> Mapping[str, Any]:
    """A dict whose keys are all among `allowed` (camelCase spellings only)."""
    _ensure(type(value) is dict and all(type(k) is str and k in allowed for k in value))
    return value  # type: ignore[no-any-return]  # a dict of str keys, checked above


def _str(value: Any) -> str:
    _ensure(type(value) is str)
    return value  # type: ignore[no-any-return]  # checked above


def _opt_str(value: Any) -> str | None:
    return None if value is None else _str(value)


def _non_empty(value: Any) -> str:
    text = _str(value)
    _ensure(bool(text))
    return text


def _int(value: Any, low: int, high: int | None = None) -> int:
    # `type is int`: YAML's `true` is an int subclass, and the models refuse it (strict ints).
    _ensure(type(value) is int and value >= low and (high is None or value <= high))
    return value  # type: ignore[no-any-return]  # checked above


def _one_of(value: Any, allowed: frozenset[str]) -> str:
    _ensure(type(value) is str and value in allowed)
    return value  # type: ignore[no-any-return]  # checked above


def _list(value: Any) -> list[Any]:
    _ensure(type(value) is list)
    return value  # type: ignore[no-any-return]  # checked above


def _str_list(value: Any, item: Callable[[Any], str] = _str) -> list[str]:
    return [item(entry) for entry in _list(value)]


def _name(value: Any) -> str:
    text = _str(value)
    _ensure(NAME_PATTERN.match(text) is not None)
    return text


# ---------------------------------------------------------------- batch.yaml


_MANIFEST_KEYS: Final = frozenset({"gate", "prGrouping", "baseBranch", "settings", "phases"})
_PHASE_KEYS: Final = frozenset({"name", "goal", "success", "proofOfWork", "changes"})
_PROOF_KEYS: Final = frozenset({"kind", "run", "pass", "policy"})
_CHANGE_KEYS: Final = frozenset({"name", "card", "dependsOn"})


def _manifest(data: Any) -> LightManifest:
    top = _mapping(data, _MANIFEST_KEYS)
    if "settings" in top:
        _settings(top["settings"])  # status needs none of it, but it must be valid
    phases = tuple(_phase(raw) for raw in _list(top.get("phases")))
    _ensure(len(phases) > 0)
    _consistent(phases)
    gate: Any = _one_of(top.get("gate", "voluntary"), _GATES)
    grouping: Any = _one_of(top.get("prGrouping", "per-change"), _GROUPINGS)
    return LightManifest(
        phases=phases,
        gate=gate,
        pr_grouping=grouping,
        base_branch=_opt_str(top.get("baseBranch")),
    )


def _phase(value: Any) -> LightPhase:
    raw = _mapping(value, _PHASE_KEYS)
    _ensure("name" in raw)
    changes = _list(raw.get("changes", []))
    proof = raw.get("proofOfWork")
    return LightPhase(
        name=_name(raw["name"]),
        goal=_str(raw.get("goal", "")),
        success=_str(raw.get("success", "")),
        proof_of_work=None if proof is None else _proof(proof),
        changes=tuple(_change(change) for change in changes),
    )


def _proof(value: Any) -> LightProof:
    raw = _mapping(value, _PROOF_KEYS)
    run = _str(raw.get("run", ""))
    _ensure(bool(run.strip()))
    policy: Any = _one_of(raw.get("policy", "hard-gate"), _POLICIES)
    return LightProof(
        kind=_one_of(raw.get("kind", "integration"), _PROOF_KINDS),
        run=run,
        pass_=_str(raw.get("pass", "")),
        policy=policy,
    )


def _change(value: Any) -> LightChange:
    if type(value) is str:
        return LightChange(name=_name(value))
    raw = _mapping(value, _CHANGE_KEYS)
    _ensure("name" in raw)
    card = raw.get("card")
    _ensure(card is None or type(card) in (int, str))
    return LightChange(
        name=_name(raw["name"]),
        card=card,
        depends_on=tuple(_str_list(raw.get("dependsOn", []))),
    )


def _consistent(phases: tuple[LightPhase, ...]) -> None:
    """The models' cross-key rules; any breach is for them to word."""
    phase_names = [phase.name for phase in phases]
    change_names = [name for phase in phases for name in phase.change_names]
    _ensure(len(set(phase_names)) == len(phase_names))
    _ensure(len(set(change_names)) == len(change_names))
    _ensure(not set(phase_names) & set(change_names))
    order = {name: i for i, name in enumerate(change_names)}
    for phase in phases:
        for change in phase.changes:
            for dep in change.depends_on:
                _ensure(order.get(dep, len(order)) < order[change.name])


# ---------------------------------------------------------------- .pair/config.yaml


_PROJECT_KEYS: Final = frozenset(
    {"hosts", "trigger", "maintainer", "cycle", "tests", "batch", "lessons"}
)
_HOSTS_KEYS: Final = frozenset({"pm", "code"})
_CYCLE_KEYS: Final = frozenset({"until", "merge", "prepare", "maxFixRounds"})
_TESTS_KEYS: Final = frozenset({"command", "junit", "mayModifyTests", "mayModifyManifests"})
_LESSONS_KEYS: Final = frozenset({"where", "budgetBytes"})
_SETTINGS_KEYS: Final = frozenset({"agent", "agentCommand", "locus", "image", "agentTimeoutMs"})
# The gate forms that need no parsing; `when has:…` ones go to the models.
_PLAIN_GATES: Final = frozenset({"always", "never"})


def _project(data: Any) -> LightProject:
    top = _mapping(data, _PROJECT_KEYS)
    if "hosts" in top:
        _hosts(top["hosts"])
    if top.get("maintainer") is not None:
        _str(top["maintainer"])
    cycle = _mapping(top.get("cycle", {}), _CYCLE_KEYS)
    if "until" in cycle:
        _one_of(cycle["until"], _UNTIL)
    for gate in ("merge", "prepare"):
        if gate in cycle:
            _one_of(cycle[gate], _PLAIN_GATES)
    tests = _mapping(top.get("tests", {}), _TESTS_KEYS)
    for key in ("command", "junit"):
        _opt_str(tests.get(key))
    for key in ("mayModifyTests", "mayModifyManifests"):
        _str_list(tests.get(key, []))
    if "batch" in top:
        _settings(top["batch"])
    lessons = _mapping(top.get("lessons", {}), _LESSONS_KEYS)
    if "where" in lessons:
        _one_of(lessons["where"], _WHERE)
    if "budgetBytes" in lessons:
        _int(lessons["budgetBytes"], 256, 65_536)
    trigger = _str(top.get("trigger", "pair"))
    _ensure(_TRIGGER.fullmatch(trigger) is not None)
    return LightProject(max_fix_rounds=_int(cycle.get("maxFixRounds", 3), 0, 20), trigger=trigger)


def _hosts(value: Any) -> None:
    from app.domain.card.binding import KNOWN_HOSTS  # noqa: PLC0415  # only a config that names hosts

    for name in _mapping(value, _HOSTS_KEYS).values():
        _ensure(_str(name) in KNOWN_HOSTS)


def _settings(value: Any) -> None:
    """`batch:` / `settings:` with plain values: an agent name, a command, locus, image, timeout."""
    raw = _mapping(value, _SETTINGS_KEYS)
    agent = raw.get("agent")
    if agent is not None:
        _ensure(not any(char.isspace() for char in _non_empty(agent)))
    if raw.get("agentCommand") is not None:
        _ensure(len(_str_list(raw["agentCommand"], _non_empty)) > 0)
    if raw.get("locus") is not None:
        _one_of(raw["locus"], frozenset(LOCI))
    if raw.get("image") is not None:
        _non_empty(raw["image"])
    if raw.get("agentTimeoutMs") is not None:
        _int(raw["agentTimeoutMs"], 1)
