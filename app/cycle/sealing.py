"""The sealer and red's contract checks as a card's vet runs them, and the fixScope a fix is
held to. (The red contract verifier, an agent, judges the contract after these pass:
`app.cycle.red_verifier`.)

    unsealed_for(state, routing)       the sealed test files a step may not touch: all of them,
                                       but a red-spec revision may rewrite its own group's
    judge_red(state, path, …)          after an accepted red: the red verifier's problems (sent
                                       back), a refused seal (`failed-seal`), or the `Seal`
    scope_problems(state, path, …)     a fix's paths outside the sealed fixScope (sent back)

What a contract, a seal and the custody check are: `app.domain.review.seal`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from app.cycle import worktree as wt
from app.cycle.state import CardState, last_review_findings
from app.domain.review.contract import CONTRACT_FILE, Contract, read_contract
from app.domain.review.guarded import glob_match
from app.domain.review.routing import Routing
from app.domain.review.seal import (
    NARROWED,
    Seal,
    current_seals,
    default_fix_scope,
    narrowed,
    outside_scope,
    seal_name,
    verify_contract,
)


@dataclass
class RedJudgement:
    """What the contract path decided about one result: the red verifier's or the fixScope's
    problems, the sealer's refusal, or the seal."""

    problems: list[str] = field(default_factory=list)  # sent back (the red verifier)
    refused: str | None = None  # the sealer refused: failed-seal
    seal: Seal | None = None


def unsealed_for(state: CardState, routing: Routing | None) -> dict[str, int]:
    """The sealed paths the guard holds: a red-spec revision may rewrite its group's tests."""
    sealed = dict(state.rec.sealed_paths)
    if routing is not None and routing.route == "red-spec" and routing.group is not None:
        group = current_seals(state.rec.seals).get(routing.group)
        for path in group.paths if group is not None else ():
            sealed.pop(path, None)
    return sealed


def contract_text(path: Path, key: str) -> str | None:
    """The contract red wrote in the worktree at `path`, None when there is none."""
    file = path / ".pair" / "changes" / key / CONTRACT_FILE
    return file.read_text(encoding="utf-8", errors="replace") if file.is_file() else None


def _to_answer(state: CardState, routing: Routing | None) -> list[str]:
    """The findings this red must answer with a row: a red-spec's gaps, else every blocking
    finding the last review left active."""
    if routing is not None and routing.route == "red-spec":
        return list(routing.findings)
    return [
        str(f.get("id"))
        for f in last_review_findings(state.history)
        if f.get("blocking") is True and f.get("transition", "open") in ("open", "human")
    ]


def _branch_files(path: Path, base: str, end: str) -> list[str]:
    """The files the card's branch changed against its base (the base as a local or a
    remote-tracking branch); none when neither is known here."""
    for ref in (base, f"origin/{base}"):
        fork = wt.git(path, "merge-base", ref, end, check=False)
        if fork:
            out = wt.git(path, "diff", "--name-only", "-z", fork, end, strip=False)
            return [name for name in out.split("\0") if name]
    return []


def blob_at(path: Path, commit: str, file: str) -> str | None:
    """The blob of `file` at `commit`, None when it is not there."""
    found = wt.git(path, "rev-parse", "--verify", "--quiet", f"{commit}:{file}", check=False)
    return found or None


def _blobs(path: Path, commit: str, files: list[str]) -> dict[str, str]:
    found = {f: blob_at(path, commit, f) for f in files}
    return {f: blob for f, blob in found.items() if blob}


def judge_red(
    state: CardState,
    path: Path,
    *,
    routing: Routing | None,
    base: str,
    start: str,
    end: str,
    failing: frozenset[str],
    errored: frozenset[str] = frozenset(),
) -> RedJudgement:
    """The red verifier, then the sealer (see the module docstring)."""
    read = read_contract(contract_text(path, state.key))
    if isinstance(read, str):
        return RedJudgement(problems=[read])
    contract: Contract = read
    groups = current_seals(state.rec.seals)
    predecessor = None
    if routing is not None and routing.route == "red-spec" and routing.group is not None:
        predecessor = groups.get(routing.group)
    problems = verify_contract(
        contract,
        findings=_to_answer(state, routing),
        newly_failing=failing,
        sealed_ids=state.rec.sealed_ids,
        errored=errored,
        predecessor=predecessor,
    )
    if problems:
        return RedJudgement(problems=problems)
    inherited = sorted({p for seal in groups.values() for p in seal.fix_scope})
    if contract.fix_scope:
        dropped = narrowed(inherited, contract.fix_scope)
        if dropped:
            refused = (
                f"failed-seal: {NARROWED}: the contract's fixScope drops {', '.join(dropped)} "
                "that the predecessor seal allowed; a revision or repair may only add paths"
            )
            return RedJudgement(refused=refused)
        scope = tuple(dict.fromkeys(contract.fix_scope))
    elif inherited:
        scope = tuple(inherited)
    else:
        scope = default_fix_scope(_branch_files(path, base, start))
    since = state.rec.reviewed_head or start
    new_kinds = ("added", "renamed", "copied")
    # The tests red created; its contract (under `.pair/`) is rewritten by the next red.
    added = [
        c.path
        for c in wt.changed_paths(path, since, end)
        if c.kind in new_kinds and not c.path.startswith(".pair/")
    ]
    paths = list(dict.fromkeys([*(predecessor.paths if predecessor else ()), *added]))
    acs = _acs(state, contract)
    if predecessor is not None:
        group, revision = predecessor.group, predecessor.revision + 1
    else:
        group, revision = max(groups, default=0) + 1, 0
    seal = Seal(
        name=seal_name(state.history.accepted_count("verify"), group, revision),
        group=group,
        revision=revision,
        commit=end,
        paths=tuple(paths),
        ids=tuple(sorted(failing)),
        blobs=_blobs(path, end, paths),
        fix_scope=scope,
        rows=tuple(row.id for row in contract.rows),
        acs=acs,
        supersedes=predecessor.name if predecessor is not None else None,
    )
    return RedJudgement(seal=seal)


def _acs(state: CardState, contract: Contract) -> Mapping[str, str]:
    """Each row's AC: as the contract says, else as the finding it answers says."""
    findings = last_review_findings(state.history)
    by_finding = {str(f.get("id")): str(f.get("ac")) for f in findings if f.get("ac")}
    acs: dict[str, str] = {}
    for row in contract.rows:
        ac = row.ac or by_finding.get(row.id)
        if ac:
            acs[row.id] = ac
    return acs


def scope_problems(state: CardState, path: Path, start: str, end: str) -> list[str]:
    """A fix's changed paths outside the fixScope of the card's current seals (none sealed
    with one: nothing to hold it to). A path the project itself allows an iteration to touch
    (`tests.mayModifyTests`, `tests.mayModifyManifests`) is the maintainer's word, not a breach."""
    scope = sorted({p for seal in current_seals(state.rec.seals).values() for p in seal.fix_scope})
    if not scope:
        return []
    tests = state.project.tests
    allowed = [*tests.may_modify_tests, *tests.may_modify_manifests]
    changed = [
        (c.path, c.kind == "added")
        for c in wt.changed_paths(path, start, end)
        if not any(glob_match(pattern, c.path) for pattern in allowed)
    ]
    outside = outside_scope(changed, scope)
    if not outside:
        return []
    return [
        f"{', '.join(outside)} outside the sealed fixScope ({', '.join(scope)}); a fix may touch "
        "only the paths its seal allows"
    ]
