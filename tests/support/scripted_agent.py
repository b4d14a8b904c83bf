"""A scripted coding agent for tests: reads its instructions, edits files, reports via the CLI.

It is started by the real runtime through the `command` adapter, like any in-house agent.
What it does on each call comes from `.pair/script.json` in the project:

    {"default": "ok", "steps": {"<key>:<transition>": ["block", "ok"], "<transition>": [...]}}

Each call consumes the next behaviour of the most specific list (counters persist in
`.pair/script-state.json`); an exhausted list falls back to `default`. Behaviours:

    ok                 do the transition properly and report --complete
    block              report --blocker
    needs-input        report --needs-input
    crash              exit 3 without reporting
    quota              print claude's own credit-balance error and exit 1 (a quota failure)
    killed             kill itself with SIGKILL (a crashed CLI)
    silent             exit 0 without reporting (touching the disk for propose/apply)
    lie                report --complete without doing anything on disk
    foreign            a --complete carrying another session's id, nothing of its own
    complete-then-crash  do the work, report --complete, exit 1
    hang               sleep until killed
    findings-blocking  (verify) report a blocking finding r<round>-1
    findings-new       (verify) resolve the earlier findings and report a new blocking one,
                       r<round>-1, whose reproducer `needs fixed-r<round>-1` (a second fix round)
    drop-finding       (verify) report converged but drop the earlier finding ids
    slow               sleep a little (PAIR_TEST_SLOW seconds), then ok
    held               wait (at most 300 s) until the file $PAIR_TEST_RELEASE exists, then ok:
                       a test looks at a running step, then lets it finish
    scope-proposal     (verify) converge, proposing scope change sc-1
    break-tests        do the work but add a check that fails (the engine sends it back)
    edit-sealed        do the work and weaken the sealed red checks (refused)
    red-passing        (red) write a check that already passes (refused: proves nothing)
    edit-test          do the work and edit the existing tests/test_widget.py (refused)
    delete-check       do the work and delete the passing checks/baseline.check (refused)
    skip-check         do the work and turn checks/baseline.check into a skip (refused)
    edit-manifest      do the work and add a dependency to package.json (refused)
    file:<name>        (verify) report the findings file $PAIR_TEST_AGENT_DIR/<name>.json as it
                       is (its optional "verdict" key is the completion line)
    no-contract        (red) write the failing checks but no contract.json (the red verifier
                       refuses it)
    narrow-scope       (red) do the work with a contract whose fixScope is only README.md (a
                       narrowed fixScope after an earlier seal: failed-seal)
    widen-fix          (fix) do the work and also write outside.txt (outside the fixScope)
    red-erroring       (red) do the work, then make each check it wrote an `error:` line (a
                       runner that reports those as JUnit <error>s: it fails for the wrong reason)
    refuse-contract    (verify-red) refuse every row of red's contract, with a reason
    no-verdict         (verify-red) report --complete without a verdict file
    bad-verdict        (verify-red) report a verdict file that does not validate
    skip-row           (verify-red) accept, judging a row the contract does not have instead of
                       its own (a verdict that leaves rows unjudged)
    edit-tree          (verify-red) accept the contract, but write a file into the tree
    verdict-in-tree    (verify-red) accept the contract, its verdict file written in the tree
                       (as a real agent told to change nothing often does) and passed by a
                       relative path

`verify-red` (ok) accepts every row of the contract in `.pair/changes/<change>/contract.json`.

`red` (ok) also writes the contract `.pair/changes/<change>/contract.json`: a row per active
blocking finding (every finding, resolved ones too, when its instructions ask for a revision of
a seal group), its test `checks::<id>`, and `fixScope` from $PAIR_TEST_FIX_SCOPE (comma-separated)
when set. `red` (ok) writes `checks/<finding>.check` files that fail until `fix` (ok) writes "fixed"
into `<change>.txt` (or, for a finding whose reproducer says `needs <word>`, that word; an
open finding of kind `regression` gets a check that fails until fix writes "repaired <id>");
tests/support/checks.py runs the checks and writes JUnit XML.
Its files (script, counters, call log, findings) live in $PAIR_TEST_AGENT_DIR, else .pair/; each
line of the call log records the call's transition, argv, instructions, environment names and uid.
`apply` also appends a line to each file named in $PAIR_TEST_TOUCH (comma-separated paths).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

ROOT = Path(os.environ.get("PAIR_ROOT", "."))
# Where the script, its counters, the call log and the findings live. In a card cycle the agent
# works in a worktree that is reset between steps, so tests point this outside of it.
SCRATCH = Path(os.environ.get("PAIR_TEST_AGENT_DIR") or ROOT / ".pair")
CHANGE = os.environ["PAIR_CHANGE"]
TRANSITION = os.environ["PAIR_TRANSITION"]
# On a review panel the instructions name this reviewer (`r<round>-<slug>-<n>`): its findings
# carry the slug, its script may be `verify@<slug>`, and its findings file is its own.
REVIEWER = ""
INSTRUCTIONS = ""  # what the engine told this call (a red-spec revision names its group)


def _venv_packages() -> None:
    """Put the venv's site-packages on sys.path when `-S` left it off (AGENT_COMMAND).

    Not `site.addsitedir`: that runs the venv's .pth files, coverage's among them, which is what
    `-S` keeps out of this scaffolding.
    """
    if sys.flags.no_site:
        venv = str(Path(sys.executable).parent.parent)
        sys.path.append(
            sysconfig.get_path("purelib", "venv", vars={"base": venv, "platbase": venv})
        )


def report(*args: str) -> None:
    subprocess.run(["pairbot", "batch", "report", *args], check=True, cwd=ROOT)


def next_behaviour() -> str:
    script_path = SCRATCH / "script.json"
    script = json.loads(script_path.read_text()) if script_path.exists() else {}
    state_path = SCRATCH / "script-state.json"
    state = json.loads(state_path.read_text()) if state_path.exists() else {}
    steps = script.get("steps", {})
    keys = [f"{CHANGE}:{TRANSITION}", TRANSITION]
    if REVIEWER:
        keys.insert(0, f"{TRANSITION}@{REVIEWER}")
    for key in keys:
        if key in steps:
            used = state.get(key, 0)
            state[key] = used + 1
            write_atomic(state_path, json.dumps(state))
            queue = steps[key]
            if used < len(queue):
                return str(queue[used])
            break
    return str(script.get("default", "ok"))


def write_atomic(path: Path, text: str) -> None:
    """Write via a temp file and rename, so a kill mid-write never leaves half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def plan_path() -> Path:
    return ROOT / ".pair" / "changes" / CHANGE / "plan.md"


def do_work() -> None:
    if TRANSITION == "propose":
        plan_path().parent.mkdir(parents=True, exist_ok=True)
        write_atomic(
            plan_path(),
            f"# {CHANGE}\n\n## Acceptance criteria\nAC-1: it works\n\n"
            "## Tasks\n- [ ] write the test\n- [ ] make it pass\n",
        )
    elif TRANSITION == "apply":
        (ROOT / f"{CHANGE}.txt").write_text("implemented\n")
        # More files the work touches, comma-separated (a shared module two cards both edit).
        for name in filter(None, os.environ.get("PAIR_TEST_TOUCH", "").split(",")):
            touched = ROOT / name
            touched.parent.mkdir(parents=True, exist_ok=True)
            before = touched.read_text() if touched.exists() else ""
            touched.write_text(before + f"touched by {CHANGE}\n")
        write_atomic(plan_path(), plan_path().read_text().replace("- [ ]", "- [x]"))
    elif TRANSITION == "red":
        # A check (tests/checks.py runs them) that fails until fix writes "fixed".
        checks = ROOT / "checks"
        checks.mkdir(exist_ok=True)
        for finding in red_findings():
            word = needed(finding) or "fixed"
            if finding.get("kind") == "regression" and finding.get("transition", "open") == "open":
                word = f"repaired {finding['id']}"
            (checks / f"{finding['id']}.check").write_text(f"{CHANGE}.txt contains {word}\n")
        write_contract(os.environ.get("PAIR_TEST_FIX_SCOPE", ""))
    elif TRANSITION == "fix":
        target = ROOT / f"{CHANGE}.txt"
        words = ["fixed", *(w for f in previous_findings() if (w := needed(f)))]
        words += [
            f"repaired {f['id']}"
            for f in previous_findings()
            if f.get("kind") == "regression" and f.get("transition", "open") == "open"
        ]
        before = target.read_text() if target.exists() else ""
        target.write_text(before + "".join(f"{word}\n" for word in words))
    elif TRANSITION == "decompose":
        _venv_packages()
        import yaml  # the venv's interpreter runs this agent

        manifest = ROOT / ".pair" / "batches" / os.environ["PAIR_BATCH"] / "batch.yaml"
        data = yaml.safe_load(manifest.read_text())
        for phase in data["phases"]:
            if phase["name"] == CHANGE and not phase.get("changes"):
                phase["changes"] = [f"{CHANGE}-a", f"{CHANGE}-b"]
        write_atomic(manifest, yaml.safe_dump(data, sort_keys=False))


def red_findings() -> list[dict[str, object]]:
    """What red answers: the findings file this agent last reported, else the blocking findings
    its instructions list (a panel reviewer's file is its own), else r1-1."""
    asked = [
        {"id": ident, "kind": kind, "blocking": True}
        for ident, kind in re.findall(
            r"^- (r\d+-(?:[a-z0-9]+-)?\d+) \(([a-z-]+)\):$", INSTRUCTIONS, re.M
        )
    ]
    return previous_findings() or asked or [{"id": "r1-1", "blocking": True}]


def write_contract(scope: str) -> None:
    """The red's contract: one row per finding it answers, each with its check's test id."""
    revising = "Revise only seal group" in INSTRUCTIONS
    rows = [
        {"id": f["id"], "tests": [f"checks::{f['id']}"], **({"ac": f["ac"]} if f.get("ac") else {})}
        for f in red_findings()
        if revising or (f.get("blocking") and f.get("transition", "open") in ("open", "human"))
    ]
    contract: dict[str, object] = {"rows": rows}
    if scope:
        contract["fixScope"] = scope.split(",")
    write_atomic(ROOT / ".pair" / "changes" / CHANGE / "contract.json", json.dumps(contract))


def needed(finding: dict[str, object]) -> str | None:
    """The word a finding's reproducer says the fix must write (`needs <word>`), if any."""
    reproducer = str(finding.get("reproducer") or "")
    return reproducer.removeprefix("needs ") if reproducer.startswith("needs ") else None


TAMPERING = ("edit-test", "delete-check", "skip-check", "edit-manifest")


def tamper(behaviour: str) -> None:
    """Edit what decides passing, the way each TAMPERING behaviour says (see the docstring)."""
    baseline = ROOT / "checks" / "baseline.check"
    if behaviour == "edit-test":
        (ROOT / "tests" / "test_widget.py").write_text("def test_widget():\n    pass  # weakened\n")
    elif behaviour == "delete-check":
        baseline.unlink()
    elif behaviour == "skip-check":
        baseline.write_text("skip: later\n")
    else:
        (ROOT / "package.json").write_text(
            '{"name": "widget", "dependencies": {"left-pad": "1.3.0"}}\n'
        )


def verify_report(
    findings: list[dict[str, object]], verdict: str, scope: list[dict[str, object]] | None = None
) -> None:
    path = findings_path()
    report_data: dict[str, object] = {
        "acTests": {"AC-1": "tests/test_x.py::test_it"},
        "findings": findings,
    }
    if scope:
        report_data["scopeChanges"] = scope
    write_atomic(path, json.dumps(report_data))  # this script's memory for the next round
    # The file reported is a copy: pairbot takes a reported file out of the tree when it lies
    # there (app/engine/findings_files.py), and the memory may lie in the tree (ROOT/.pair).
    reported = path.with_name(f"report-{path.name}")
    write_atomic(reported, json.dumps(report_data))
    report("--complete", verdict, "--findings", str(reported))


def stream_json(text: str) -> None:
    """Speak claude's stream-json when started with its argv (as the `claude` adapter does)."""
    if "stream-json" not in sys.argv:
        print(text, flush=True)
        return
    events = [
        {"type": "system", "subtype": "init", "session_id": "s1"},
        {"type": "stream_event", "event": {"type": "message_start", "message": {"id": "m1"}}},
        {
            "type": "stream_event",
            "event": {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": text},
            },
        },
        {"type": "stream_event", "event": {"type": "content_block_stop", "index": 0}},
        {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "total_cost_usd": 0.0123,
            "usage": {"input_tokens": 1200, "output_tokens": 345},
        },
    ]
    for event in events:
        print(json.dumps(event), flush=True)


def main() -> int:
    global REVIEWER, INSTRUCTIONS  # noqa: PLW0603 - read once from the instructions
    instructions = sys.stdin.read()
    INSTRUCTIONS = instructions
    on_panel = re.search(r"`r\d+-([a-z0-9]+)-<n>`", instructions)
    REVIEWER = on_panel.group(1) if on_panel and TRANSITION == "verify" else ""
    log = SCRATCH / "agent-log.jsonl"
    with log.open("a") as handle:
        handle.write(
            json.dumps(
                {
                    "change": CHANGE,
                    "transition": TRANSITION,
                    "argv": sys.argv[1:],
                    "instructions": instructions,
                    "env": sorted(os.environ),
                    # Who ran it: the posture tests check the agent ran as its own OS user.
                    "uid": os.geteuid(),
                }
            )
            + "\n"
        )
    behaviour = next_behaviour()
    stream_json(f"scripted agent: {behaviour} {TRANSITION} {CHANGE}")
    if behaviour == "slow":
        time.sleep(float(os.environ.get("PAIR_TEST_SLOW", "0.2")))
        behaviour = "ok"
    if behaviour == "held":
        release = Path(os.environ["PAIR_TEST_RELEASE"])
        deadline = time.monotonic() + 300
        while not release.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        behaviour = "ok"
    if behaviour == "block":
        report("--blocker", "cannot find the module to change")
        return 0
    if behaviour == "needs-input":
        report("--needs-input", "which database should this use?")
        return 0
    if behaviour == "crash":
        print("boom", file=sys.stderr)
        return 3
    if behaviour == "quota":
        # What claude prints when the account has no credit left (its own words).
        print(
            "Credit balance is too low · Add funds: https://console.anthropic.com/settings/billing"
        )
        return 1
    if behaviour == "killed":
        os.kill(os.getpid(), signal.SIGKILL)
    if behaviour == "hang":
        time.sleep(3600)
        return 0
    if behaviour == "silent":
        do_work()
        return 0
    if behaviour == "foreign":
        # A report carrying another (dead) session's id, as a straggler would.
        env = {**os.environ, "PAIR_SESSION": "dead-session"}
        subprocess.run(["pairbot", "batch", "report", "--complete", "late"], check=True, env=env)
        return 0
    if behaviour == "break-tests":
        # Work that breaks an existing check: the engine must send it back.
        do_work()
        checks = ROOT / "checks"
        checks.mkdir(exist_ok=True)
        (checks / "broken.check").write_text("missing-file.txt contains anything\n")
        report("--complete", f"{TRANSITION} done (tests broken)")
        return 0
    if behaviour == "edit-sealed":
        do_work()
        for sealed in (ROOT / "checks").glob("r*.check"):
            sealed.write_text(f"{CHANGE}.txt contains implemented\n")
        report("--complete", f"{TRANSITION} done (sealed test weakened)")
        return 0
    if behaviour in TAMPERING:
        do_work()
        tamper(behaviour)
        report("--complete", f"{TRANSITION} done ({behaviour})")
        return 0
    if behaviour == "no-contract":
        do_work()
        (ROOT / ".pair" / "changes" / CHANGE / "contract.json").unlink()
        report("--complete", "red done (no contract)")
        return 0
    if behaviour == "narrow-scope":
        os.environ["PAIR_TEST_FIX_SCOPE"] = "README.md"
        do_work()
        report("--complete", "red done (narrowed fixScope)")
        return 0
    if behaviour == "red-erroring":
        do_work()
        for finding in red_findings():
            (ROOT / "checks" / f"{finding['id']}.check").write_text("error: fixture missing\n")
        report("--complete", "red done (its checks error)")
        return 0
    if behaviour == "widen-fix":
        do_work()
        (ROOT / "outside.txt").write_text("not in the fixScope\n")
        report("--complete", "fix done (outside the fixScope)")
        return 0
    if behaviour == "red-passing":
        checks = ROOT / "checks"
        checks.mkdir(exist_ok=True)
        (checks / "r1-1.check").write_text(f"{CHANGE}.txt contains implemented\n")
        report("--complete", "red done (tests pass)")
        return 0
    if behaviour == "lie":
        report("--complete", "all done (not really)")
        return 0
    if TRANSITION == "verify-red":
        return verify_red(behaviour)
    if TRANSITION == "verify" and behaviour.startswith("file:"):
        data = json.loads((SCRATCH / f"{behaviour.removeprefix('file:')}.json").read_text())
        verdict = str(data.pop("verdict", "Ready for archive"))
        path = SCRATCH / f"findings-{CHANGE}.json"
        write_atomic(path, json.dumps(data))
        report("--complete", verdict, "--findings", str(path))
        return 0
    if TRANSITION == "verify":
        found = re.search(r"`r(\d+)-(?:[a-z0-9]+-)?<n>`", instructions)
        rnd = found.group(1) if found else "1"
        mine = f"{REVIEWER}-" if REVIEWER else ""
        if behaviour == "findings-blocking":
            earlier = [{**f, "transition": "open"} for f in previous_findings()]
            verify_report(
                earlier
                or [
                    {
                        "id": f"r{rnd}-{mine}1",
                        "kind": "defect",
                        "severity": "critical",
                        "blocking": True,
                        "summary": "off by one",
                        "reproducer": "pytest -k edge",
                    }
                ],
                f"{len(earlier) or 1} critical issue(s) found",
            )
            return 0
        if behaviour == "findings-new":
            verify_report(
                [
                    *previous_findings_resolved(),
                    {
                        "id": f"r{rnd}-1",
                        "kind": "defect",
                        "severity": "critical",
                        "blocking": True,
                        "summary": f"the empty input still fails (round {rnd})",
                        "reproducer": f"needs fixed-r{rnd}-1",
                    },
                ],
                "1 critical issue(s) found",
            )
            return 0
        if behaviour == "scope-proposal":
            verify_report(
                previous_findings_resolved(),
                "Ready for archive",
                scope=[
                    {
                        "id": "sc-1",
                        "type": "new-requirement",
                        "evidence": "users will also want a lockout notice",
                        "affectedAc": "AC-1",
                    }
                ],
            )
            return 0
        if behaviour == "drop-finding":
            verify_report([], "Ready for archive")
            return 0
        verify_report(previous_findings_resolved(), "Ready for archive")
        return 0
    do_work()
    report("--complete", f"{TRANSITION} done for {CHANGE}")
    return 1 if behaviour == "complete-then-crash" else 0


def verify_red(behaviour: str) -> int:
    """The red contract verifier: a verdict on every row of red's contract (see the docstring)."""
    contract_path = ROOT / ".pair" / "changes" / CHANGE / "contract.json"
    contract = json.loads(contract_path.read_text()) if contract_path.exists() else {}
    ids = [str(row.get("id")) for row in contract.get("rows", [])]
    if behaviour == "no-verdict":
        report("--complete", "contract looks fine")
        return 0
    refuse = behaviour == "refuse-contract"
    row = "refuse" if refuse else "accept"
    why = "the test asserts nothing the finding names" if refuse else "fails for the finding"
    verdict: dict[str, object] = {
        "verdict": row,
        "rows": [{"id": ident, "verdict": row, "reason": why} for ident in ids],
    }
    if behaviour == "bad-verdict":
        verdict = {"verdict": "maybe", "rows": []}
    if behaviour == "skip-row":
        verdict["rows"] = [{"id": "r9-9", "verdict": "accept", "reason": "not a row"}]
    if behaviour == "edit-tree":
        (ROOT / f"{CHANGE}.txt").write_text("the verifier was here\n")
    path = SCRATCH / f"red-verdict-{CHANGE}.json"
    if behaviour == "verdict-in-tree":
        path = ROOT / "red-verdict.json"
    write_atomic(path, json.dumps(verdict))
    shown = path.relative_to(ROOT) if behaviour == "verdict-in-tree" else path
    said = f"contract {'refused' if refuse else 'accepted'}"
    report("--complete", said, "--findings", str(shown))
    return 0


def findings_path() -> Path:
    return SCRATCH / (
        f"findings-{CHANGE}-{REVIEWER}.json" if REVIEWER else f"findings-{CHANGE}.json"
    )


def previous_findings() -> list[dict[str, object]]:
    path = findings_path()
    if not path.exists():
        return []
    return list(json.loads(path.read_text()).get("findings", []))


def previous_findings_resolved() -> list[dict[str, object]]:
    return [{**f, "transition": "resolved"} for f in previous_findings()]


sys.exit(main())
