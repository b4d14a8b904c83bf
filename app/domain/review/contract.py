"""The acceptance contract `red` writes beside its tests, as a file. Pure.

After a review that blocks, `red` writes failing tests and `.pair/changes/<card>/contract.json`:

    {"fixScope": ["src/widget.py", "src/lib/"],        the paths the fix may touch (globs as
                                                        `app.domain.review.guarded.glob_match`)
     "rows": [{"id": "r1-1", "ac": "AC-1",             one row per finding it answers: the
               "tests": ["tests/test_w.py::test_edge"]}]}   finding's id, its AC, its tests

`read_contract` parses it or says why it is none; what the red verifier and the sealer make of
it is `app.domain.review.seal`.
"""

from __future__ import annotations

from typing import Final

from pydantic import Field, ValidationError

from app.settings import StrictModel

CONTRACT_FILE: Final = "contract.json"


class ContractRow(StrictModel):
    """One finding the contract answers, and the tests that prove it."""

    id: str = Field(min_length=1)
    ac: str | None = None
    tests: list[str] = Field(default_factory=list)


class Contract(StrictModel):
    """What `red` wrote: the rows and the paths the fix may touch."""

    fix_scope: list[str] = Field(default_factory=list)
    rows: list[ContractRow] = Field(default_factory=list)


def read_contract(text: str | None) -> Contract | str:
    """The contract in `text`, or the reason it is not one."""
    if text is None:
        return "contract-incomplete:contract:no-contract (red wrote no contract.json)"
    try:
        return Contract.model_validate_json(text)
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        return f"contract-incomplete:contract:no-contract ({where}: {first['msg']})"
