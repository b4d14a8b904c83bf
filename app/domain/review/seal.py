"""The seal of the acceptance contract `red` writes, the fixScope and the custody check. Pure.

The contract (`.pair/changes/<card>/contract.json`: rows and a fixScope) is read by
`app.domain.review.contract`. The red verifier (`verify_contract`) holds the contract to the
findings before anything is sealed; each problem is `contract-incomplete:<row>:<family>`:

    no-contract     no contract file, or one that is not the shape above
    no-row          a finding red had to answer has no row
    no-test         a row names no test
    not-failing     a row's test does not fail after red (and is not sealed already): it
                    proves nothing about the finding
    wrong-reason    a row's test fails with an error (the runner's `<error>`: a fixture, a
                    setup or the test itself could not run), not an assertion: it fails for a
                    reason other than the finding
    row-dropped     a revision lost a row of the group it revises (row ids are stable)

The sealer (`app.cycle.sealing.judge_red`) turns an accepted red into a `Seal`, journaled once
the red contract verifier, an agent of its own, accepts the contract (`app.cycle.red_verifier`):
which tests (files, ids, their rows), at which commit, expected failing, and the fixScope. A
seal belongs to a group `g<k>` (one per red round); a red-spec revision of group k makes its
successor `r<n>-g<k>-rev<m>`, and the earlier seal is history. A revision inherits its
predecessor's fixScope and may only add paths: a narrowed one is refused (`fixScope-narrowed`,
the card is `failed-seal`).

The custody check (`custody_problems`) before each step of a run that sealed (a fix and a verify
above all): every current seal's commit
is an ancestor of the head, and every sealed test file is byte-identical there (its blob). A
breach is `failed-custody`; the trusted snapshot (the seal) is kept, and nothing is reset.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from app.domain.review.guarded import DEFAULT_TEST_FILES, glob_match, normalize_path

if TYPE_CHECKING:
    # Only a type here: the cycle's records read seals on an idle tick, which loads no pydantic.
    from app.domain.review.contract import Contract

NARROWED: Final = "fixScope-narrowed"
# The command files pairbot's runtime renders into the tree for each agent (the paths of
# `app.runtime.commands.STYLES`): pairbot's own, never the implementation's, so no fixScope
# holds or names them.
AGENT_COMMAND_FILES: Final[tuple[str, ...]] = (
    ".claude/commands/pair/*",
    ".cursor/commands/pair-*",
    ".gemini/commands/pair-*",
    ".agents/skills/pair-*/SKILL.md",
    ".opencode/commands/pair-*",
)


def is_agent_command_file(path: str) -> bool:
    """Whether `path` is a command file pairbot's runtime renders for an agent."""
    return any(glob_match(p, path) for p in AGENT_COMMAND_FILES)


def _pairbots(path: str) -> bool:
    return path.startswith(".pair/") or is_agent_command_file(path)


@dataclass(frozen=True)
class Seal:
    """A sealed contract: its tests at one commit, expected failing, and the fixScope."""

    name: str  # r<n>-g<k>, or r<n>-g<k>-rev<m> for a revision
    group: int
    revision: int
    commit: str
    paths: tuple[str, ...]  # the group's sealed test files
    ids: tuple[str, ...]  # the test ids that failed at `commit` (the fix makes them pass)
    blobs: Mapping[str, str]  # sealed file -> its blob at `commit`
    fix_scope: tuple[str, ...]
    rows: tuple[str, ...] = ()
    acs: Mapping[str, str] = field(default_factory=dict)  # row id -> AC
    supersedes: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The `sealed` journal entry's fields beyond `paths`, `ids`, `round`."""
        return {
            "seal": self.name,
            "group": self.group,
            "revision": self.revision,
            "commit": self.commit,
            "blobs": dict(self.blobs),
            "fixScope": list(self.fix_scope),
            "rows": list(self.rows),
            "acs": dict(self.acs),
            "supersedes": self.supersedes,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Seal | None:
        """A journaled `sealed` entry; None for one written before seals were named."""
        name, commit = data.get("seal"), data.get("commit")
        if not isinstance(name, str) or not isinstance(commit, str):
            return None
        blobs = data.get("blobs")
        acs = data.get("acs")
        return cls(
            name=name,
            group=_int(data.get("group")),
            revision=_int(data.get("revision")),
            commit=commit,
            paths=_strs(data.get("paths")),
            ids=_strs(data.get("ids")),
            blobs={str(k): str(v) for k, v in blobs.items()} if isinstance(blobs, dict) else {},
            fix_scope=_strs(data.get("fixScope")),
            rows=_strs(data.get("rows")),
            acs={str(k): str(v) for k, v in acs.items()} if isinstance(acs, dict) else {},
            supersedes=str(data["supersedes"]) if data.get("supersedes") else None,
        )


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _strs(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def current_seals(seals: Iterable[Seal]) -> dict[int, Seal]:
    """The newest seal of each group (an earlier revision is history)."""
    newest: dict[int, Seal] = {}
    for seal in seals:
        newest[seal.group] = seal
    return newest


def ac_groups(seals: Iterable[Seal]) -> dict[str, int]:
    """Which group covers each AC (the newest group naming it wins)."""
    groups: dict[str, int] = {}
    for seal in current_seals(seals).values():
        for ac in seal.acs.values():
            groups[ac] = seal.group
    return groups


def verify_contract(
    contract: Contract,
    *,
    findings: Sequence[str],
    newly_failing: Iterable[str],
    sealed_ids: Iterable[str] = (),
    errored: Iterable[str] = (),
    predecessor: Seal | None = None,
) -> list[str]:
    """The red verifier: every problem of the contract, `contract-incomplete:<row>:<family>`."""
    failing, sealed, broken = set(newly_failing), set(sealed_ids), set(errored)
    rows = {row.id: row for row in contract.rows}
    problems = [f"contract-incomplete:{f}:no-row" for f in findings if f not in rows]
    if not contract.rows:
        problems.append("contract-incomplete:contract:no-row (the contract has no row)")
    for row in contract.rows:
        if not row.tests:
            problems.append(f"contract-incomplete:{row.id}:no-test")
        kept = predecessor is not None and row.id in predecessor.rows
        for test in row.tests:
            if test not in failing and not (kept and test in sealed):
                problems.append(f"contract-incomplete:{row.id}:not-failing ({test} does not fail)")
            elif test in broken:
                problems.append(
                    f"contract-incomplete:{row.id}:wrong-reason ({test} errors: it could not "
                    "run, so its failure says nothing about the finding)"
                )
    if predecessor is not None:
        problems += [
            f"contract-incomplete:{r}:row-dropped" for r in predecessor.rows if r not in rows
        ]
    return problems


def narrowed(before: Sequence[str], after: Sequence[str]) -> list[str]:
    """The predecessor's fixScope paths a revision dropped (empty: it only added)."""
    kept = {normalize_path(p) for p in after}
    return [p for p in before if normalize_path(p) not in kept]


def default_fix_scope(changed: Iterable[str]) -> tuple[str, ...]:
    """Without a fixScope in the contract: the files the card's branch changed, tests and
    pairbot's own `.pair/` files left out (what the implementation touched so far)."""
    scope = {
        normalize_path(p)
        for p in changed
        if not _pairbots(p) and not any(glob_match(t, p) for t in DEFAULT_TEST_FILES)
    }
    return tuple(sorted(scope))


def outside_scope(changed: Iterable[tuple[str, bool]], scope: Sequence[str]) -> list[str]:
    """The paths a fix touched outside `scope`; `changed` is (path, added). A new test file is
    no breach (the fix stage may add tests, `STAGE_POLICY`), nor are pairbot's own files
    (`.pair/` is guarded on its own; the agents' command files are rendered by pairbot)."""
    out: list[str] = []
    for path, added in changed:
        if _pairbots(path) or (added and any(glob_match(t, path) for t in DEFAULT_TEST_FILES)):
            continue
        if not any(glob_match(pattern, path) for pattern in scope):
            out.append(path)
    return sorted(set(out))


def custody_problems(
    seals: Iterable[Seal],
    head: str,
    *,
    ancestors: Mapping[str, bool],
    blobs_at_head: Mapping[str, str | None],
) -> list[str]:
    """What breaks custody at `head`: a current seal whose commit is not an ancestor of it
    (`ancestors[commit]`), a sealed file whose blob there differs or is gone."""
    problems: list[str] = []
    for seal in sorted(current_seals(seals).values(), key=lambda s: s.group):
        if not ancestors.get(seal.commit, False):
            problems.append(
                f"seal {seal.name}'s commit {seal.commit[:12]} is not an ancestor of the head "
                f"{head[:12]} (the branch was rewritten)"
            )
            continue
        for path, blob in sorted(seal.blobs.items()):
            now = blobs_at_head.get(path)
            if now is None:
                problems.append(f"sealed test {path} (seal {seal.name}) is gone at {head[:12]}")
            elif now != blob:
                problems.append(
                    f"sealed test {path} (seal {seal.name}) was changed after the seal: "
                    f"{blob[:12]} at {seal.commit[:12]}, {now[:12]} at {head[:12]}"
                )
    return problems


def seal_name(review_round: int, group: int, revision: int) -> str:
    """`r<n>-g<k>`, or `r<n>-g<k>-rev<m>` for the m-th revision of group k."""
    base = f"r{review_round}-g{group}"
    return f"{base}-rev{revision}" if revision else base
