"""The contract (`app.domain.review.contract`), its seal, the fixScope and the custody check
(`app.domain.review.seal`)."""

from __future__ import annotations

import json

import pytest

from app.domain.review.contract import Contract, read_contract
from app.domain.review.seal import (
    Seal,
    ac_groups,
    current_seals,
    custody_problems,
    default_fix_scope,
    narrowed,
    outside_scope,
    seal_name,
    verify_contract,
)

SHA_A, SHA_B, HEAD = "a" * 40, "b" * 40, "c" * 40


def seal(group: int = 1, revision: int = 0, **fields: object) -> Seal:
    base: dict[str, object] = {
        "name": seal_name(1, group, revision),
        "group": group,
        "revision": revision,
        "commit": SHA_A,
        "paths": ("checks/r1-1.check",),
        "ids": ("checks::r1-1",),
        "blobs": {"checks/r1-1.check": "1" * 40},
        "fix_scope": ("src/widget.py",),
        "rows": ("r1-1",),
        "acs": {"r1-1": "AC-1"},
    }
    base.update(fields)
    return Seal(**base)  # type: ignore[arg-type]


def contract(**data: object) -> Contract:
    read = read_contract(json.dumps(data))
    assert isinstance(read, Contract), read
    return read


def test_a_seal_round_trips_through_its_journal_entry() -> None:
    made = seal(supersedes="r1-g1")
    data = {"paths": list(made.paths), "ids": list(made.ids), **made.to_json()}
    assert Seal.from_json(data) == made
    assert Seal.from_json({"paths": ["x"], "ids": [], "round": 1}) is None  # an older entry


def test_seal_names_and_the_newest_seal_per_group() -> None:
    assert seal_name(2, 1, 0) == "r2-g1"
    assert seal_name(3, 1, 2) == "r3-g1-rev2"
    first, revised, other = seal(), seal(revision=1, acs={"r1-1": "AC-2"}), seal(group=2)
    assert current_seals([first, revised, other]) == {1: revised, 2: other}
    assert ac_groups([first, revised, other]) == {"AC-2": 1, "AC-1": 2}


@pytest.mark.parametrize(
    ("text", "detail"),
    [
        (None, "(red wrote no contract.json)"),
        ("[]", "((top level): Input should be an object)"),
        ('{"rows": [{"id": "r1-1", "test": []}]}', "(rows.0.test: Extra inputs are not permitted)"),
    ],
)
def test_a_missing_or_malformed_contract_is_named(text: str | None, detail: str) -> None:
    assert read_contract(text) == f"contract-incomplete:contract:no-contract {detail}"


def test_the_red_verifier_names_each_incomplete_row() -> None:
    written = contract(
        rows=[
            {"id": "r1-1", "tests": ["checks::r1-1"]},
            {"id": "r1-2", "tests": []},
            {"id": "r1-3", "tests": ["checks::passing"]},
        ]
    )
    problems = verify_contract(
        written, findings=["r1-1", "r1-2", "r1-4"], newly_failing={"checks::r1-1"}
    )
    assert problems == [
        "contract-incomplete:r1-4:no-row",
        "contract-incomplete:r1-2:no-test",
        "contract-incomplete:r1-3:not-failing (checks::passing does not fail)",
    ]
    assert verify_contract(contract(rows=[]), findings=[], newly_failing=set()) == [
        "contract-incomplete:contract:no-row (the contract has no row)"
    ]


def test_a_revision_keeps_its_groups_rows_and_may_reuse_their_sealed_tests() -> None:
    before = seal(rows=("r1-1", "r1-2"))
    kept = contract(
        rows=[{"id": "r1-1", "tests": ["checks::r1-1"]}, {"id": "r2-1", "tests": ["checks::r2"]}]
    )
    problems = verify_contract(
        kept,
        findings=["r2-1"],
        newly_failing={"checks::r2"},
        sealed_ids={"checks::r1-1"},
        predecessor=before,
    )
    assert problems == ["contract-incomplete:r1-2:row-dropped"]


def test_a_fix_scope_may_only_grow() -> None:
    assert narrowed(["src/a.py", "src/lib/"], ["src/lib/", "src/a.py", "src/b.py"]) == []
    assert narrowed(["src/a.py", "src/lib/"], ["./src/a.py"]) == ["src/lib/"]


def test_the_default_fix_scope_and_what_lies_outside_it() -> None:
    changed = ["src/w.py", "tests/test_w.py", ".pair/changes/card-1/plan.md", "README.md"]
    assert default_fix_scope(changed) == ("README.md", "src/w.py")
    touched = [
        ("src/w.py", False),
        ("src/lib/x.py", False),
        ("tests/test_new.py", True),  # a new test: the fix stage may add tests
        (".claude/commands/pair/fix.md", True),  # pairbot's own rendered command
        ("setup.cfg", False),
    ]
    assert outside_scope(touched, ["src/w.py", "docs/"]) == ["setup.cfg", "src/lib/x.py"]
    assert outside_scope(touched, ["src/**", "setup.cfg"]) == []


def test_custody_holds_only_for_unchanged_sealed_tests_on_a_descendant() -> None:
    sealed = seal()
    blob = sealed.blobs["checks/r1-1.check"]
    ok = custody_problems(
        [sealed], HEAD, ancestors={SHA_A: True}, blobs_at_head={"checks/r1-1.check": blob}
    )
    assert ok == []
    edited = custody_problems(
        [sealed], HEAD, ancestors={SHA_A: True}, blobs_at_head={"checks/r1-1.check": "2" * 40}
    )
    assert edited == [
        "sealed test checks/r1-1.check (seal r1-g1) was changed after the seal: "
        f"111111111111 at {SHA_A[:12]}, 222222222222 at {HEAD[:12]}"
    ]
    gone = custody_problems([sealed], HEAD, ancestors={SHA_A: True}, blobs_at_head={})
    assert gone == [f"sealed test checks/r1-1.check (seal r1-g1) is gone at {HEAD[:12]}"]
    rewritten = custody_problems([sealed], HEAD, ancestors={}, blobs_at_head={})
    assert rewritten == [
        f"seal r1-g1's commit {SHA_A[:12]} is not an ancestor of the head {HEAD[:12]} "
        "(the branch was rewritten)"
    ]
    # A revision supersedes its group's earlier seal: only the newest one is held.
    revised = seal(revision=1, commit=SHA_B, blobs={"checks/r1-1.check": "3" * 40})
    assert (
        custody_problems(
            [sealed, revised],
            HEAD,
            ancestors={SHA_B: True},
            blobs_at_head={"checks/r1-1.check": "3" * 40},
        )
        == []
    )


def test_a_row_test_that_errors_fails_for_the_wrong_reason() -> None:
    written = contract(rows=[{"id": "r1-1", "tests": ["t::a", "t::b"]}])
    problems = verify_contract(
        written, findings=["r1-1"], newly_failing={"t::a", "t::b"}, errored={"t::b"}
    )
    assert problems == [
        "contract-incomplete:r1-1:wrong-reason (t::b errors: it could not run, so its failure "
        "says nothing about the finding)"
    ]
