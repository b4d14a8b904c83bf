"""`pairbot batch status`'s read side: gather a batch's facts from disk and derive its status.

    read_manifest(root, batch)    the manifest, validated; the light path when it vouches
    read_max_fix_rounds(root)     what status needs of `.pair/config.yaml`, validated likewise
    batch_status(root, batch)     validate the config and manifest, read, derive; touches nothing
    gather_facts(root, batch, manifest, project)   disk, journal and parks → `BatchFacts`

Apart from `app.engine.runner` (which re-exports both and runs steps with them) so that reading
a status loads the manifest, the journal and selection only, not the step machinery (agents,
instructions, outcomes, work vets) that applying a step needs. The files are validated through
`app.engine.manifest_fast` first, which vouches for ordinary files without loading pydantic;
whatever it does not vouch for goes through the models, so a wrong file is refused with the
models' own error lines, as every other command refuses it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from app.engine.journal import read_index
from app.engine.manifest_fast import fast_manifest, fast_project
from app.engine.project_files import existing_manifest_path, pair_dir, read_yaml
from app.engine.runstate import RunLocus, read_parks
from app.engine.selection import BatchFacts, BatchStatus, compute_batch_status
from app.engine.transition import read_change_disk

if TYPE_CHECKING:
    from app.engine.manifest import ProjectConfig
    from app.engine.manifest_view import ManifestView

__all__ = ["batch_status", "gather_facts", "read_manifest", "read_max_fix_rounds"]


def read_manifest(root: Path, batch: str) -> ManifestView:
    """The batch's manifest, validated: `load_manifest`'s errors for a wrong or missing one."""
    path = existing_manifest_path(root, batch)
    data = read_yaml(path)
    light = fast_manifest(data)
    if light is not None:
        return light
    from app.engine.manifest import validate_manifest  # noqa: PLC0415  # pydantic, only here

    return validate_manifest(path, data)


def read_max_fix_rounds(root: Path) -> int:
    """`cycle.maxFixRounds` of a validated config: `load_project_config`'s errors when wrong."""
    path = pair_dir(root) / "config.yaml"
    data = read_yaml(path) if path.exists() else None
    light = fast_project(data)
    if light is not None:
        return light.max_fix_rounds
    from app.engine.manifest import validate_project_config  # noqa: PLC0415  # pydantic

    return validate_project_config(path, data).cycle.max_fix_rounds


def gather_facts(
    root: Path, batch: str, manifest: ManifestView, project: ProjectConfig
) -> BatchFacts:
    """Read disk, journal and parks into the pure engine's input."""
    return _gather(root, batch, manifest, project.cycle.max_fix_rounds)


def _gather(root: Path, batch: str, manifest: ManifestView, max_fix_rounds: int) -> BatchFacts:
    locus = RunLocus.for_batch(root, batch)
    return BatchFacts(
        name=batch,
        manifest=manifest,
        disks={name: read_change_disk(root, name) for name in manifest.change_names},
        journal=read_index(locus.journal),
        parks=read_parks(locus),
        max_fix_rounds=max_fix_rounds,
    )


def batch_status(root: Path, batch: str, manifest: ManifestView | None = None) -> BatchStatus:
    """`pairbot batch status`: validate, read, derive. Touches nothing.

    `manifest` is the batch's, when the caller has already read it (`read_manifest`).
    """
    max_fix_rounds = read_max_fix_rounds(root)
    if manifest is None:
        manifest = read_manifest(root, batch)
    return compute_batch_status(_gather(root, batch, manifest, max_fix_rounds))
