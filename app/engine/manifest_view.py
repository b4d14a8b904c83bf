"""What status and selection read of a batch manifest, as read-only protocols and plain values.

`app.engine.selection` takes a `ManifestView`: the validated pydantic `BatchManifest` is one,
and so is the `LightManifest` that `batch status` builds from a manifest the light path has
vouched for (`app.engine.manifest_fast`) without loading pydantic at all.

The light values are `NamedTuple`s rather than frozen dataclasses: this module is imported by
every `batch status`, and a frozen dataclass costs ten times as much to define.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, NamedTuple, Protocol

from app.engine.boundary import PrGrouping
from app.engine.gates import Gate
from app.engine.proof import ProofPolicy

__all__ = [
    "ChangeView",
    "CycleUntil",
    "LessonsWhere",
    "LightChange",
    "LightManifest",
    "LightPhase",
    "LightProof",
    "ManifestView",
    "PhaseView",
]

# Closed sets of `.pair/config.yaml` that both the models and the light path check.
CycleUntil = Literal["ready-for-merge", "merged"]
LessonsWhere = Literal["state-branch", "default-branch", "off"]


class ChangeView(Protocol):
    """A change as selection sees it."""

    @property
    def name(self) -> str: ...

    @property
    def depends_on(self) -> Sequence[str]: ...


class PhaseView(Protocol):
    """A phase as selection sees it; only whether it has a proof-of-work matters there."""

    @property
    def name(self) -> str: ...

    @property
    def changes(self) -> Sequence[ChangeView]: ...

    @property
    def change_names(self) -> tuple[str, ...]: ...

    @property
    def proof_of_work(self) -> object | None: ...


class ManifestView(Protocol):
    """A batch manifest as status and selection see it."""

    @property
    def phases(self) -> Sequence[PhaseView]: ...

    @property
    def pr_grouping(self) -> PrGrouping: ...

    @property
    def change_names(self) -> Sequence[str]: ...


class LightProof(NamedTuple):
    """A phase's proof-of-work, as written."""

    kind: str
    run: str
    pass_: str
    policy: ProofPolicy


class LightChange(NamedTuple):
    """A change entry, as written (a bare name has no card and no dependencies)."""

    name: str
    card: int | str | None = None
    depends_on: tuple[str, ...] = ()


class LightPhase(NamedTuple):
    """A phase, as written."""

    name: str
    goal: str = ""
    success: str = ""
    proof_of_work: LightProof | None = None
    changes: tuple[LightChange, ...] = ()

    @property
    def change_names(self) -> tuple[str, ...]:
        """The phase's change names, in order."""
        return tuple(change.name for change in self.changes)


class LightManifest(NamedTuple):
    """The fields of a batch manifest that status reads, with the models' defaults."""

    phases: tuple[LightPhase, ...]
    gate: Gate = "voluntary"
    pr_grouping: PrGrouping = "per-change"
    base_branch: str | None = None

    @property
    def change_names(self) -> list[str]:
        """Every change name, in batch order."""
        return [change.name for phase in self.phases for change in phase.changes]
