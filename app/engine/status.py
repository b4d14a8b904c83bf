"""`pairbot batch status`'s read side: gather a batch's facts from disk and derive its status.

    batch_status(root, batch)     validate the config and manifest, read, derive; touches nothing
    gather_facts(root, batch, manifest, project)   disk, journal and parks → `BatchFacts`

Apart from `app.engine.runner` (which re-exports both and runs steps with them) so that reading
a status loads the manifest's models, the journal and selection only, not the step machinery
(agents, instructions, outcomes, work vets) that applying a step needs. Both files are validated
by the one model of each (`app.engine.manifest`), so a wrong file is refused with the same error
lines as every other command refuses it.
"""

from __future__ import annotations

from pathlib import Path

from app.engine.journal import read_index
from app.engine.manifest import BatchManifest, ProjectConfig, load_manifest, load_project_config
from app.engine.runstate import RunLocus, read_parks
from app.engine.selection import BatchFacts, BatchStatus, compute_batch_status
from app.engine.transition import read_change_disk

__all__ = ["batch_status", "gather_facts"]


def gather_facts(
    root: Path, batch: str, manifest: BatchManifest, project: ProjectConfig
) -> BatchFacts:
    """Read disk, journal and parks into the pure engine's input."""
    locus = RunLocus.for_batch(root, batch)
    return BatchFacts(
        name=batch,
        manifest=manifest,
        disks={name: read_change_disk(root, name) for name in manifest.change_names},
        journal=read_index(locus.journal),
        parks=read_parks(locus),
        max_fix_rounds=project.cycle.max_fix_rounds,
    )


def batch_status(root: Path, batch: str, manifest: BatchManifest | None = None) -> BatchStatus:
    """`pairbot batch status`: validate, read, derive. Touches nothing.

    `manifest` is the batch's, when the caller has already read it (`load_manifest`).
    """
    project = load_project_config(root)
    if manifest is None:
        manifest = load_manifest(root, batch)
    return compute_batch_status(gather_facts(root, batch, manifest, project))
