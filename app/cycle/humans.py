"""What humans record against a batch: approve, answer, feedback, retry, rerun-proof, and
what agents record: reports. Each is one journal append (plus clearing a park), under the
batch lock for human verbs; agent reports take no lock because the engine holds it while the
agent runs.

An agent's report (`record_report`, `load_findings`) is what every agent step runs, in a
process of its own (`pairbot batch report`): what only the human verbs need (the step lock,
the budget's spend reduction), what only a verifier's findings need, and the manifest's models
(which the engine's `PAIR_MANIFEST_KEYS` usually spares a report: `app.engine.known_keys`)
are imported inside the functions that use them, so a report does not pay for them
(tests/packaging/test_report_imports.py).
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from app.engine.journal import JournalEntry, append_entry, read_index
from app.engine.known_keys import keys_from_memo
from app.engine.names import NAME_PATTERN, NAME_RULE
from app.engine.project_files import existing_manifest_path, pair_dir
from app.engine.runstate import RunLocus, read_parks, write_parks
from app.errors import UnknownChangeError, UserError

ReportKind = Literal["progress", "blocker", "needs-input", "completion"]
HumanVerb = Literal["approve", "answer", "feedback", "retry"]


def _known_keys(root: Path, batch: str, memo: str | None = None) -> list[str]:
    """Every change then every phase of `batch`: from the engine's `memo` of its manifest when
    that is for the manifest as it is now (`app.engine.known_keys`), else validated here."""
    if memo is not None:
        keys = keys_from_memo(existing_manifest_path(root, batch), memo)
        if keys is not None:
            return keys
    from app.engine.manifest import load_manifest  # noqa: PLC0415  # see the module docstring

    manifest = load_manifest(root, batch)
    return [*manifest.change_names, *(phase.name for phase in manifest.phases)]


def _check_key(batch: str, key: str, known: list[str], parks: dict[str, Any]) -> None:
    if key not in known and key not in parks and not key.startswith(f"pr:{batch}"):
        raise UnknownChangeError(
            f"batch {batch!r} has no change or phase {key!r}; known: {', '.join(known) or '(none)'}"
        )


def load_findings(path: Path, transition: str | None = None) -> dict[str, Any]:
    """Read and validate a verifier's findings file; errors name the file and the problem.
    The red contract verifier's (`verify-red`) is its contract verdict
    (`app.domain.review.red_verdict`)."""
    from pydantic import ValidationError  # noqa: PLC0415  # only a verifier's report has one

    from app.domain.review.verdict import FindingsReport  # noqa: PLC0415

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as err:
        raise UserError(f"{path}: findings file not found") from err
    except OSError as err:  # a directory, no permission: one line, not a traceback
        raise UserError(f"{path}: cannot read the findings file ({err.strerror or err})") from err
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise UserError(f"{path}: findings file is not valid JSON ({err})") from err
    if transition == "verify-red":
        # Only the red contract verifier's report reads a verdict: deferred for the others.
        from app.domain.review.red_verdict import parse_red_verdict  # noqa: PLC0415

        verdict = parse_red_verdict(data)
        if isinstance(verdict, str):
            raise UserError(f"{path}: {verdict}")
        return verdict.model_dump(by_alias=True)
    try:
        report = FindingsReport.model_validate(data)
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise UserError(
            f"{path}: {where}: {first['msg'].removeprefix('Value error, ')} "
            "(expected {acTests, findings, scopeChanges}; see docs/cli.md)"
        ) from None
    return report.model_dump(by_alias=True, exclude_none=True)


def record_report(
    root: Path,
    *,
    batch: str | None,
    key: str,
    kind: ReportKind,
    message: str,
    transition: str | None,
    session: str | None,
    findings: dict[str, Any] | None,
    now: datetime,
    findings_file: str | None = None,
    manifest_memo: str | None = None,
) -> int:
    """Append an agent's report to the batch's (or the standalone change's) journal;
    `findings_file`: where its findings file lay in the agent's tree (app.cli.batch);
    `manifest_memo`: the engine's `PAIR_MANIFEST_KEYS` (`app.engine.known_keys`)."""
    pair_dir(root)
    if findings is not None and kind != "completion":
        raise UserError("--findings goes with --complete (a verifier's final verdict)")
    if batch is not None:
        locus = RunLocus.for_batch(root, batch)
        _check_key(batch, key, _known_keys(root, batch, manifest_memo), {})
    else:
        # The key becomes a directory name (.pair/changes/<key>/.run/): never a path.
        if not NAME_PATTERN.match(key):
            raise UserError(f"{key!r} is not a valid change name: use {NAME_RULE}")
        locus = RunLocus.for_change(root, key)
    entry = JournalEntry(
        kind=kind,
        key=key,
        at=now.isoformat(timespec="milliseconds"),
        transition=transition,
        message=message,
        session=session,
        findings=findings,
        findings_file=findings_file,
    )
    return append_entry(locus.journal, entry)


def record_human(
    root: Path, batch: str, key: str, verb: HumanVerb, message: str, *, now: datetime
) -> str:
    """Clear a park with a human's decision; returns a one-line confirmation."""
    # The lock and the budget's key (its module reduces the spend: the metrics' models) are
    # deferred to here, out of an agent's report (see the module docstring).
    from app.domain.card.budget import BUDGET_APPROVAL  # noqa: PLC0415
    from app.engine import lock  # noqa: PLC0415

    # Validate the project, the batch name and its manifest before the lock creates run/.
    known = _known_keys(root, batch)
    locus = RunLocus.for_batch(root, batch)
    with lock.held(locus.lock, now=now) as proof:
        parks = read_parks(locus)
        _check_key(batch, key, known, dict(parks))
        park = parks.get(key)
        state = park.state if park else "not parked"
        transition: str | None = park.transition if park else None
        approvable = ("awaiting-approval", "awaiting-human")
        if verb == "approve" and (park is None or park.state not in approvable):
            raise UserError(f"{key} is not awaiting approval ({state}); nothing to approve")
        if verb in ("answer", "retry") and (park is None or park.state in approvable):
            raise UserError(
                f"{key} is not blocked ({state}); `{verb}` clears a blocked or needs-input step"
            )
        if verb in ("answer", "feedback") and not message.strip():
            raise UserError(
                f"`{verb}` needs a MESSAGE: pairbot batch {verb} {batch} --change {key} MESSAGE"
            )
        if verb == "feedback" and transition is None:
            history = read_index(locus.journal).history(key)
            if not history.accepted:
                raise UserError(f"{key} has no completed step to give feedback on")
            transition = history.accepted[-1].transition
        append_entry(
            locus.journal,
            JournalEntry(
                kind="approval" if verb == "approve" else verb,
                key=key,
                at=now.isoformat(timespec="milliseconds"),
                transition=transition,
                message=message,
                # Past a budget: the spend is counted afresh from this approval.
                data={BUDGET_APPROVAL: True}
                if park is not None and park.state == "awaiting-human"
                else None,
            ),
        )
        parks.pop(key, None)
        write_parks(locus, parks, proof)
    done = {
        "approve": "approved",
        "answer": "answer recorded",
        "feedback": "feedback recorded",
        "retry": "retry recorded",
    }[verb]
    rerun = f"; the next apply re-runs {transition}" if verb == "feedback" else ""
    return f"{key}: {done}{rerun}"


def rerun_proof(root: Path, batch: str, phase: str, *, now: datetime) -> str:
    """Append the invalidation marker for a phase's recorded proof (never edits the record)."""
    from app.engine import lock  # noqa: PLC0415  # deferred: see record_human
    from app.engine.manifest import load_manifest  # noqa: PLC0415

    manifest = load_manifest(root, batch)
    target = manifest.phase_named(phase)
    if target is None:
        names = ", ".join(p.name for p in manifest.phases)
        raise UnknownChangeError(f"batch {batch!r} has no phase {phase!r}; phases: {names}")
    if target.proof_of_work is None:
        raise UserError(f"phase {phase!r} has no proofOfWork to re-run")
    locus = RunLocus.for_batch(root, batch)
    with lock.held(locus.lock, now=now):
        if phase not in read_index(locus.journal).proofs:
            raise UserError(f"phase {phase!r} has no recorded proof-of-work to invalidate")
        append_entry(
            locus.journal,
            JournalEntry(
                kind="proof-of-work-invalidated",
                key=phase,
                at=now.isoformat(timespec="milliseconds"),
                message="rerun-proof",
            ),
        )
    return f"proof-of-work for phase {phase} invalidated; the next apply re-runs it"
