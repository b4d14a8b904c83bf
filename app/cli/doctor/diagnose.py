"""`pairbot doctor [--json]`: is this machine ready to run the agents the project is configured for?

    load_profiles(root, env)    the settings to check: the standalone ones (env > project
                                config > defaults) plus each batch manifest that changes them,
                                resolved with the cascade the engine uses
    diagnose(root, env)         plan what they need (`needs`), gather what this machine has
                                (`probes`), check one against the other (`checks`)
    render_text(report)         one line per check, a remedy under each that is not ok

`Report.exit_code` is 0 exactly when nothing the settings need fails.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from app.cli.doctor.checks import build_checks
from app.cli.doctor.isolation_checks import isolation_summary
from app.cli.doctor.model import Check, Profile, Report
from app.cli.doctor.needs import plan
from app.cli.doctor.probes import Probes, gather
from app.engine.manifest import PAIR_DIR, list_batches, load_manifest, load_project_config
from app.errors import UserError
from app.settings import BatchSettings, ResolvedSettings, resolve_settings


def load_profiles(root: Path, env: Mapping[str, str]) -> tuple[tuple[Profile, ...], Check]:
    """The settings to check (standalone, then each batch that changes them) and a config check.

    Broken files do not stop doctor: the config check fails naming them, and the rest is
    checked against whatever resolved (at worst the built-in defaults).
    """
    problems: list[str] = []

    def resolve(manifest: BatchSettings | None, project: BatchSettings | None) -> ResolvedSettings:
        try:
            return resolve_settings(env=env, manifest=manifest, project=project)
        except UserError as err:  # a bad PAIR_LOCUS / PAIR_AGENT
            problems.append(str(err))
            return resolve_settings(env={}, manifest=manifest, project=project)

    if not (root / PAIR_DIR).is_dir():
        profile = Profile("built-in defaults", resolve(None, None))
        note = Check(
            "config",
            "warn",
            f"no {PAIR_DIR}/ in {root}: checked against the built-in defaults",
            "run pairbot doctor in the project root, or pass --root",
        )
        return (profile,), _config_check(problems, 0) if problems else note

    project: BatchSettings | None = None
    try:
        project = load_project_config(root).batch
    except UserError as err:
        problems.append(str(err))
    standalone = Profile("project settings", resolve(None, project))
    profiles = [standalone]
    batches = list_batches(root)
    for name in batches:
        try:
            manifest = load_manifest(root, name).settings
        except UserError as err:
            problems.append(str(err))
            continue
        settings = resolve(manifest, project)
        if settings != standalone.settings:
            profiles.append(Profile(f"batch {name}", settings))
    return tuple(profiles), _config_check(problems, len(batches))


def _config_check(problems: Sequence[str], batches: int) -> Check:
    unique = list(dict.fromkeys(problems))
    if unique:
        return Check(
            "config",
            "fail",
            "; ".join(unique),
            "fix the file named above (`pairbot validate` checks them all)",
        )
    return Check("config", "ok", f"{PAIR_DIR}/config.yaml and {batches} batch(es) load")


def diagnose(root: Path, env: Mapping[str, str], probes: Probes | None = None) -> Report:
    """Check this machine against the settings of the project at `root`."""
    profiles, config = load_profiles(root, env)
    needs = plan(profiles)
    facts = gather(needs, probes or Probes(), root, env)
    return Report((config, *build_checks(needs, facts)), isolation_summary(needs, facts))


def render_text(report: Report) -> str:
    """The report for a terminal: one line per check, a remedy under each that is not ok."""
    width = max(len(check.name) for check in report.checks)
    lines: list[str] = []
    for check in report.checks:
        lines.append(f"{check.status:<4}  {check.name:<{width}}  {check.detail}")
        if check.status != "ok" and check.remedy:
            lines.append(f"{'':<4}  {'':<{width}}  → {check.remedy}")
    counts = dict.fromkeys(("ok", "warn", "fail"), 0)
    for check in report.checks:
        counts[check.status] += 1
    verdict = "ready" if report.exit_code == 0 else "not ready"
    lines.append(
        f"doctor: {verdict} ({counts['ok']} ok, {counts['warn']} warn, {counts['fail']} fail)"
    )
    return "\n".join(lines)


def run(args: argparse.Namespace, root: Path, env: Mapping[str, str]) -> int:
    """The report for this machine, as text or `--json`; its exit code."""
    report = diagnose(root, env)
    print(json.dumps(report.to_json()) if args.json else render_text(report))
    return report.exit_code
