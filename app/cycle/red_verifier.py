"""The red contract verifier as a card's cycle runs it: the `verify-red` step around its agent.

An accepted `red` (its own checks passed: its tests newly fail, for an assertion, with a row
per finding, and the sealer took its fixScope) is not sealed yet: its would-be seal is
journaled as `red-contract` (`contract_entry`). The next step is `verify-red`: an independent,
read-only agent (role `redVerifier`, the `verify-red` stage's own agent and model) reads what
`verifier_notes` gives it — the contract, red's test diff, the failing output; the engine adds
the findings it answers — and accepts or refuses the contract row by row
(`app.domain.review.red_verdict`).

    judge_verdict(state, tree, outcome)   its vet: a result that changed a file is refused
                                          (sent back), so is a verdict that skips, invents or
                                          repeats a row; an accepted contract is sealed (the
                                          `sealed` entry, from `red-contract`), a refused one
                                          sends the card to red again with the reasons
                                          (`refusal_notes`); the engine parks the
                                          third refusal in a row (`failed-contract`)
    red_since(state, tree)                where a red's changes are measured from: the reviewed
                                          head while an earlier red of this round waits on, or
                                          was refused by, the verifier (its tests are red's own
                                          to revise, not existing tests)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from app.cycle import worktree as wt
from app.cycle.state import CardState
from app.domain.review.contract import CONTRACT_FILE
from app.domain.review.red_verdict import parse_red_verdict, refusal_reasons, verdict_problems
from app.domain.review.seal import Seal, is_agent_command_file
from app.engine import jsonl

# How much of red's test diff the verifier is shown (the rest is named, not shown).
DIFF_CHARS: Final = 20_000


@dataclass(frozen=True)
class VerifierJudgement:
    """What the vet made of a verify-red: problems (sent back), the seal it accepted, or the
    refusal reasons."""

    problems: tuple[str, ...] = ()
    sealed: Mapping[str, Any] | None = None
    refused: tuple[str, ...] = ()


def contract_entry(
    seal: Seal, *, round_: int, messages: Mapping[str, str], contract: str | None
) -> dict[str, Any]:
    """The `red-contract` entry: the seal red's result would make (what `sealed` records once
    the verifier accepts it), the failing output of its tests, and the contract as written."""
    return {
        "paths": list(seal.paths),
        "ids": list(seal.ids),
        "round": round_,
        **seal.to_json(),
        "failing": {test: messages.get(test, "") for test in seal.ids},
        "contract": contract or "",
    }


def red_since(state: CardState, tree: wt.Worktree) -> str:
    """Where a red's changes are measured from (see the module docstring)."""
    reviewed = state.rec.reviewed_head
    if state.rec.red_contract is None or reviewed is None or reviewed == tree.start:
        return tree.start
    fork = wt.git(tree.path, "merge-base", reviewed, tree.start, check=False)
    return reviewed if fork == reviewed else tree.start


def _completion_findings(state: CardState) -> Mapping[str, Any] | None:
    for record in reversed(jsonl.read_records(state.locus.journal)):
        if record.get("kind") == "completion" and record.get("key") == state.key:
            raw = record.get("findings")
            return raw if isinstance(raw, Mapping) else None
    return None  # pragma: no cover - an accepted verify-red always has its completion


def _changed(tree: wt.Worktree) -> list[str]:
    """The files the verifier changed (committed or not), pairbot's rendered command files
    left out; the tree is put back as the step began either way."""
    end = wt.commit_all(tree.path, "pair: verify-red (refused: it changed files)")
    changed = [c.path for c in wt.changed_paths(tree.path, tree.start, end)]
    wt.reset(tree.path, tree.start)
    return [path for path in changed if not is_agent_command_file(path)]


def judge_verdict(state: CardState, tree: wt.Worktree) -> VerifierJudgement:
    """The vet of an accepted verify-red (see the module docstring)."""
    changed = _changed(tree)
    if changed:
        return VerifierJudgement(
            problems=(
                f"the red verifier must not change the tree; it changed {', '.join(changed)}",
            )
        )
    pending = state.rec.red_contract
    if pending is None:
        pending = _sealed_already(state, tree.start)
    if pending is None:
        return VerifierJudgement(problems=("no red contract waits for verification",))
    if pending.get("commit") != tree.start:
        return VerifierJudgement(
            problems=(
                f"red's contract was made at {str(pending.get('commit'))[:12]}, the branch is "
                f"at {tree.start[:12]}: it verifies only the head red pushed",
            )
        )
    verdict = parse_red_verdict(_completion_findings(state))
    if isinstance(verdict, str):  # pragma: no cover - the engine refuses it before the vet
        return VerifierJudgement(problems=(verdict,))
    rows = [str(row) for row in pending.get("rows") or ()]
    problems = verdict_problems(verdict, rows)
    if problems:
        return VerifierJudgement(problems=tuple(problems))
    if verdict.accepted:
        if pending is not state.rec.red_contract:
            return VerifierJudgement()  # sealed before the verifier ran: nothing more to seal
        sealed = {k: v for k, v in pending.items() if k not in ("event", "failing", "contract")}
        return VerifierJudgement(sealed=sealed)
    return VerifierJudgement(refused=tuple(refusal_reasons(verdict)))


def _sealed_already(state: CardState, head: str) -> Mapping[str, Any] | None:
    """A red sealed at `head` by a pairbot that sealed without the verifier (a run from before
    it, resumed): its rows are what the verifier judges; accepted, nothing more is sealed."""
    rows = [row for seal in state.rec.seals if seal.commit == head for row in seal.rows]
    return {"commit": head, "rows": rows} if rows else None


def verifier_notes(state: CardState, tree: wt.Worktree) -> tuple[str, ...]:
    """What the red verifier reads beyond the findings: the contract, red's test diff against
    the reviewed head, and the failing output of each test the contract names."""
    pending = state.rec.red_contract or {}
    contract = str(pending.get("contract") or "") or _contract_file(tree.path, state.key)
    notes = [f"Red's contract (.pair/changes/{state.key}/{CONTRACT_FILE}):\n{contract}"]
    since = state.rec.reviewed_head
    if since is not None:
        diff = wt.git(
            tree.path, "diff", since, tree.start, "--", ".", ":(exclude).pair", check=False
        )
        shown = diff[:DIFF_CHARS]
        more = f"\n… ({len(diff) - DIFF_CHARS} more characters)" if len(diff) > DIFF_CHARS else ""
        notes.append(f"Red's test diff against the reviewed head {since[:12]}:\n{shown}{more}")
    failing = pending.get("failing")
    if isinstance(failing, Mapping) and failing:
        lines = [f"{test}:\n{text or '(no message)'}" for test, text in failing.items()]
        notes.append("The failing output of red's tests:\n" + "\n\n".join(lines))
    return tuple(notes)


def _contract_file(path: Path, key: str) -> str:
    file = path / ".pair" / "changes" / key / CONTRACT_FILE
    return file.read_text(encoding="utf-8", errors="replace") if file.is_file() else "(none)"


def refusal_notes(state: CardState) -> tuple[str, ...]:
    """For a red after the verifier refused the last contract: its reasons, row by row."""
    history = state.history.accepted
    last_verify = max((i for i, a in enumerate(history) if a.transition == "verify"), default=-1)
    checked = [a for a in history[last_verify + 1 :] if a.transition in ("red", "verify-red")]
    if not checked or checked[-1].transition != "verify-red" or checked[-1].converged is not False:
        return ()
    reasons = refusal_reasons(checked[-1].findings or {})
    return (
        "The red contract verifier refused your last contract: "
        + "; ".join(reasons or ["(no reason given)"])
        + ". Write the tests and the contract again, answering each refused row.",
    )
