"""The status pages and `/api/v1`: the view-model (steps, findings, sorting, filtering), who
sees what, the operator's retry control, the static files and the headers a strict CSP needs."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from app.domain.reports.cohort import reduce_cohort
from app.engine.jsonl import append_record
from app.engine.runstate import Park
from app.store.base import JobRecord, NewJob
from app.web.app import create_app
from app.web.pages import html
from app.web.pages.model import CardSettings, card_view, job_views, overview, remote_card
from app.web.pages.read import Local, LocalCard, card_views, read_local
from app.web.pages.steps import card_steps
from app.web.viewer import Viewer
from tests.web.conftest import OPERATOR, AppGitHub, app_settings, github_forges, served, view_as

KEY = "card-7"
OPERATOR_AUTH = {"Authorization": f"Bearer {OPERATOR}"}
SHA = "a" * 40


def rec(kind: str, at: str, **fields: Any) -> dict[str, Any]:
    return {"kind": kind, "key": KEY, "at": f"2026-12-01T10:{at}+00:00", **fields}


def cycle(at: str, **data: Any) -> dict[str, Any]:
    return rec("cycle", at, data=data)


def journal(*, running: bool = False) -> list[dict[str, Any]]:
    """A card's journal in the shapes the cycle writes: bound, propose, apply, two reviews
    (one blocking finding that the second resolves), a fix, and optionally a running verify."""
    usage = {"inputTokens": 100, "outputTokens": 20, "costUsd": 0.01}
    records = [
        cycle("00:00.000", event="bound", card=7, mode="implement", run="r1"),
        cycle("00:00.100", event="snapshot", card=7, title="Add <b>login</b>", comments=[]),
        rec("step-started", "00:01.000", transition="propose", session="s1", data={"agent": "a"}),
        rec("progress", "00:02.000", transition="propose", session="s1", message="reading"),
        rec("outcome", "00:04.500", transition="propose", session="s1", state="advanced",
            usage=usage, message="planned"),
        rec("step-started", "00:05.000", transition="apply", session="s2",
            data={"agent": "b", "model": "m-1"}),
        cycle("00:09.000", event="pushed", sha=SHA, transition="apply"),
        rec("outcome", "00:09.100", transition="apply", session="s2", state="advanced",
            usage={"inputTokens": 400, "outputTokens": 100}),
        cycle("00:09.200", event="pr", number=12, url="https://github.example/o/r/pull/12"),
        rec("step-started", "00:10.000", transition="verify", session="s3"),
        rec("outcome", "00:11.000", transition="verify", session="s3", state="advanced",
            findings={"findings": [{"id": "F1", "severity": "blocking", "title": "no test"}]}),
        cycle("00:11.100", event="reviewed", head=SHA, converged=False, blocking=1, round=1),
        rec("step-started", "00:12.000", transition="fix", session="s4"),
        rec("outcome", "00:13.000", transition="fix", session="s4", state="advanced"),
        rec("step-started", "00:14.000", transition="verify", session="s5"),
        rec("outcome", "00:15.000", transition="verify", session="s5", state="advanced",
            findings={"findings": [{"id": "F2", "severity": "minor", "summary": "naming"}]}),
        cycle("00:15.100", event="reviewed", head=SHA, converged=True, blocking=0, round=2),
        cycle("00:15.200", event="tracking", status="in-progress", next="publish",
              why="nothing blocks: the next step runs publish"),
        {"kind": "outcome", "key": "other", "at": "x", "transition": "apply", "state": "failed"},
    ]  # fmt: skip
    if running:
        records += [
            rec("step-started", "00:20.000", transition="verify", session="s6"),
            rec("progress", "00:21.000", transition="verify", session="s6", message="<b>42</b>"),
        ]
    return records


def job(ident: int, repo: str, number: int, state: str, **fields: Any) -> JobRecord:
    values: dict[str, Any] = {
        "id": ident,
        "delivery_id": f"d-{ident}",
        "kind": "command",
        "source": "github",
        "repo": repo,
        "installation": None,
        "target": "card",
        "number": number,
        "request": {},
        "state": state,
        "stage": "",
        "attempts": 1,
        "not_before": 0.0,
        "result": "",
        "created_at": float(ident),
        "updated_at": float(ident),
        "verb": "implement",
    }
    values.update(fields)
    return JobRecord(**values)


# -- the view-model --------------------------------------------------------------------------


def test_steps_pair_starts_with_outcomes_and_reviews_show_how_findings_moved() -> None:
    steps, events = card_steps(journal(running=True), KEY)
    assert [(s.transition, s.outcome) for s in steps] == [
        ("propose", "advanced"),
        ("apply", "advanced"),
        ("verify", "advanced"),
        ("fix", "advanced"),
        ("verify", "advanced"),
        ("verify", None),
    ]
    propose, apply, first, _fix, second, live = steps
    assert (propose.agent, propose.duration_s, propose.usage.tokens) == ("a", 3.5, 120)
    assert propose.usage.cost_usd == 0.01 and propose.reports[0].message == "reading"
    assert (apply.model, apply.commit, apply.usage.tokens) == ("m-1", SHA, 500)
    assert [(f.id, f.transition) for f in first.findings] == [("F1", "new")]
    assert [(f.id, f.transition, f.text) for f in second.findings] == [
        ("F2", "new", "naming"),
        ("F1", "resolved", "no test"),
    ]
    assert (first.review_round, second.review_round) == (1, 2)
    assert live.running and live.reports[0].message == "<b>42</b>"
    texts = [e.text for e in events]
    assert "opened PR #12" in texts and any("round 2" in t and "converged" in t for t in texts)
    assert all(e.journal_ref >= 0 for e in events)


def test_a_finding_the_reviewer_carries_forward_as_resolved_is_not_shown_still_open() -> None:
    first = {
        "findings": [
            {"id": "r1-1", "severity": "major", "summary": "empty string"},
            {"id": "r1-2", "severity": "minor", "summary": "wording"},
        ]
    }
    second = {
        "findings": [
            {"id": "r1-1", "severity": "major", "transition": "resolved"},
            {"id": "r1-2", "severity": "minor", "transition": "superseded"},
            {"id": "r2-1", "severity": "major", "transition": "human"},
        ]
    }
    third = {"findings": []}
    records = [
        rec("outcome", "00:01.000", transition="verify", session="v1", state="advanced",
            findings=first),
        rec("outcome", "00:02.000", transition="verify", session="v2", state="advanced",
            findings=second),
        rec("outcome", "00:03.000", transition="verify", session="v3", state="advanced",
            findings=third),
    ]  # fmt: skip
    steps, _ = card_steps(records, KEY)
    assert [[(f.id, f.transition) for f in s.findings] for s in steps] == [
        [("r1-1", "new"), ("r1-2", "new")],
        [("r1-1", "resolved"), ("r1-2", "superseded"), ("r2-1", "needs a person")],
        [("r2-1", "resolved")],  # only what was still open can go away
    ]


def test_a_card_view_says_what_its_tracking_comment_says_with_the_explanations_budget() -> None:
    view = card_view("octo/widget", KEY, journal(), {}, settings=CardSettings(max_fix_rounds=2))
    assert (view.status, view.next.split(":")[0], view.why) == (
        "in-progress",
        "publish",
        "nothing blocks: the next step runs publish",
    )
    assert (view.pr, view.pr_url, view.fix_rounds, view.max_fix_rounds) == (
        12,
        "https://github.example/o/r/pull/12",
        1,
        2,
    )
    assert view.title == "Add <b>login</b>" and view.gate == "nothing blocks"
    assert view.url == "https://github.example/o/r/issues/7"  # beside its pull request
    assert view.tokens == {"value": 620, "coverage": "partial", "reported": 2, "of": 5}
    assert "fix rounds: 1 of 2 used" in view.budget and view.last_step == "verify: advanced"
    assert view.reviewed_head == SHA and view.review_converged is True
    data = view.to_json(detail=True)
    assert data["running"] is False and len(data["steps"]) == 5
    assert "steps" not in view.to_json()


def test_a_parked_card_names_its_gate_and_why() -> None:
    park = Park(state="awaiting-approval", transition="propose", reason="the plan waits")
    view = card_view("o/r", KEY, journal()[:5], {KEY: park})
    assert view.status == "awaiting-approval" and view.gate == "the prepare gate"
    assert view.next == "none" and view.tone == "wait"
    assert any(a.endswith("approve") for a in view.actions)


def test_a_card_only_the_queue_knows_claims_no_status_from_a_finished_command() -> None:
    view = remote_card(job(3, "o/r", 9, "done", result="executed by the worker"))
    assert view.status == "unknown" and not view.local
    assert view.last_command == "/implement: done (executed by the worker)"


def test_the_overview_filters_by_viewer_repository_and_state_and_puts_people_first() -> None:
    cards = [
        card_view("o/a", KEY, journal(), {}),  # in-progress
        card_view("o/b", KEY, journal()[:5], {KEY: Park("needs-input", "propose", "which db?")}),
        remote_card(job(1, "secret/x", 1, "done")),
    ]
    everyone = overview(cards, Viewer.everyone())
    assert [c.repo for c in everyone.cards] == ["o/b", "o/a", "secret/x"]
    assert everyone.states == ("needs-input", "in-progress", "unknown")
    reader = Viewer.reader_of("ada", ["O/A", "o/b"])
    assert [c.repo for c in overview(cards, reader).cards] == ["o/b", "o/a"]
    assert overview(cards, reader).repos == ("o/a", "o/b")
    assert [c.repo for c in overview(cards, reader, repo="O/A").cards] == ["o/a"]
    assert [c.repo for c in overview(cards, reader, state="needs-input").cards] == ["o/b"]
    assert overview(cards, Viewer.nobody()).cards == ()
    page = html.overview_page(overview(cards, reader, state="merged"), reader)
    assert "No card matches the filters." in page and "secret/x" not in page


def test_jobs_are_failed_first_and_only_an_operator_gets_the_retry_control() -> None:
    jobs = [
        job(1, "o/r", 1, "done"),
        job(2, "o/r", 2, "failed", result="agent crashed"),
        job(3, "o/r", 3, "queued", not_before=100.0),
        job(4, "hidden/r", 4, "failed"),
    ]
    reader = Viewer.reader_of("ada", ["o/r"])
    views = job_views(jobs, reader, now=50.0)
    assert [(v.id, v.state) for v in views] == [(2, "failed"), (3, "queued"), (1, "done")]
    assert views[1].retry_at == "1970-01-01T00:01:40Z"
    assert html.jobs_page(views, reader, "tok").count("<form") == 0
    operator = Viewer.everyone(operator=True)
    page = html.jobs_page(job_views(jobs, operator, 50.0), operator, "t<k")
    assert page.count('action="/jobs/') == 2 and 'value="t&lt;k"' in page


def test_card_views_match_local_cards_to_their_checkout_and_add_the_queues_others() -> None:
    mine = LocalCard("octo/widget", KEY, tuple(journal()), {})
    root = LocalCard("", "card-8", tuple(dict(r, key="card-8") for r in journal()), {})
    jobs = [
        job(1, "octo/widget", 7, "running"),
        job(2, "octo/other", 7, "done"),
        job(3, "elsewhere/r", 8, "done"),
    ]
    views = card_views(Local(cards=(mine, root)), jobs, "local/demo")
    by = {(v.repo, v.number): v for v in views}
    assert by[("octo/widget", 7)].last_command == "/implement: running"
    assert by[("elsewhere/r", 8)].local  # the served project's card, named by its job
    assert not by[("octo/other", 7)].local
    assert card_views(Local(cards=(root,)), [], "local/demo")[0].repo == "local/demo"


def test_a_parked_plain_batch_runs_nothing_on_its_own_and_says_what_holds_it(
    tmp_path: Path,
) -> None:
    from app.cli.demo import prepare

    prepare(tmp_path)
    run = tmp_path / ".pair" / "batches" / "hello" / "run"
    run.mkdir(parents=True, exist_ok=True)
    park = {"state": "needs-input", "transition": "propose", "reason": "which greeting?"}
    (run / "state.json").write_text(json.dumps({"parks": {"add-greeting": park}}))
    (batch,) = read_local(tmp_path, None).batches
    page = html.batches_page([batch], Viewer.everyone())
    assert batch.next == "none"
    changes = {c.name: c for c in batch.changes}
    assert changes["add-greeting"].next == "" and changes["add-greeting"].reason
    assert "next: propose" not in page and "held: which greeting?" in page
    assert [p.name for p in batch.phases] == ["core", "polish"]
    assert "proof-of-work: none yet" in page


def test_a_change_of_a_gated_phase_shows_no_next_step(tmp_path: Path) -> None:
    from app.cli.demo import prepare

    prepare(tmp_path)
    (batch,) = read_local(tmp_path, None).batches
    changes = {c.name: c for c in batch.changes}
    assert batch.next == "propose add-greeting (phase core)"
    assert changes["add-greeting"].next == "propose"
    assert changes["add-farewell"].next == ""  # its phase waits for core's gate
    gated = [p for p in batch.phases if p.gated_by]
    assert [p.name for p in gated] == ["polish"]
    assert "gated by phase" in html.batches_page([batch], Viewer.everyone())


# -- the routes ------------------------------------------------------------------------------


LIVE = {"s6": ("reading src/app.py", "<script>alert(1)</script> & done"), "s5": ("old",)}


def pages_app(fake: AppGitHub, tmp_path: Path, viewer: Viewer | None) -> Any:
    card = LocalCard("octo/widget", KEY, tuple(journal(running=True)), {}, live=LIVE)
    other = LocalCard("secret/repo", "card-3", tuple(dict(r, key="card-3") for r in journal()), {})
    app = create_app(
        app_settings(tmp_path),
        github=github_forges(fake),
        poll_s=0.05,
        local=lambda: Local(cards=(card, other)),
    )
    return view_as(app, viewer) if viewer is not None else app


def failed_job(app: Any) -> int:
    """A job the worker runs and fails (its request names no card): its id, once failed."""
    new = NewJob(
        kind="command",
        source="github",
        repo="octo/widget",
        installation=None,
        target="card",
        number=7,
        dedupe_key="k1",
        serial_key="s1",
        request={},
    )
    store = app.service.store
    app.run(store.enqueue_delivery("d-1", "issue_comment", "created", [new]))
    (ident,) = [j.id for j in app.run(store.jobs(10))]
    wait_for(app, ident, lambda j: j.state == "failed")
    return int(ident)


def wait_for(app: Any, ident: int, test: Any) -> JobRecord:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = app.run(app.service.store.job(ident))
        if found is not None and test(found):
            return found  # type: ignore[no-any-return]
        time.sleep(0.05)
    raise AssertionError(f"job {ident} never got there: {found}")


def test_a_reader_sees_only_their_repositories_in_pages_and_api(
    fake: AppGitHub, tmp_path: Path
) -> None:
    with served(pages_app(fake, tmp_path, Viewer.reader_of("ada", ["octo/widget"]))) as app:
        overview_page = app.page("/")
        api = app.page("/api/v1/cards").json()
        card = app.page("/cards/octo/widget/7")
        fragment = app.page("/cards/octo/widget/7/fragment")
        detail = app.page("/api/v1/cards/octo/widget/7").json()
        hidden = [app.page(p) for p in ("/cards/secret/repo/3", "/api/v1/cards/secret/repo/3")]
        filtered = app.page("/api/v1/cards?state=merged").json()
        static = [app.page("/static/pairbot.js"), app.page("/static/pairbot.css")]
    assert overview_page.status_code == 200 and "secret/repo" not in overview_page.text
    csp = overview_page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert "<script>" not in overview_page.text and " on" + "click" not in overview_page.text
    assert [(c["repo"], c["number"]) for c in api["cards"]] == [("octo/widget", 7)]
    assert api["apiVersion"] == 1 and api["repos"] == ["octo/widget"]
    assert card.status_code == 200 and 'data-live="/cards/octo/widget/7/fragment"' in card.text
    assert "&lt;b&gt;42&lt;/b&gt;" in card.text and "<b>42</b>" not in card.text
    assert fragment.text.startswith("<section") and "running" in fragment.text
    # The running step shows its live output, escaped; a finished step's log is not shown.
    assert '<pre class="stream live-output" aria-live="polite"' in fragment.text
    assert (
        "reading src/app.py\n&lt;script&gt;alert(1)&lt;/script&gt; &amp; done</pre>"
        in fragment.text
    )
    assert "<script>alert" not in fragment.text and ">old<" not in fragment.text
    steps = detail["card"]["steps"]
    assert steps[-1]["live_output"] == list(LIVE["s6"])
    assert [s["live_output"] for s in steps[:-1]] == [[]] * 5
    assert detail["card"]["running"] and steps[-1]["running"] and len(steps) == 6
    assert [s["transition"] for s in steps] == [t.split(" ")[0] for t in _step_titles(card.text)]
    assert [r.status_code for r in hidden] == [404, 404]
    assert filtered["cards"] == [] and filtered["filters"]["state"] == "merged"
    assert [s.status_code for s in static] == [200, 200]


def _step_titles(page: str) -> list[str]:
    return re.findall(r"<h3>([a-z]+ )", page)


def test_a_visitor_who_is_not_signed_in_gets_no_card_data(fake: AppGitHub, tmp_path: Path) -> None:
    with served(pages_app(fake, tmp_path, None)) as app:
        page = app.get("/")
        api = app.get("/api/v1/cards")
        card = app.get("/cards/octo/widget/7/fragment")
        static = app.get("/static/pairbot.css")
    assert page.status_code in (303, 401) and "octo/widget" not in page.text
    assert api.status_code == 401 and "octo/widget" not in api.text
    assert card.status_code in (303, 401) and "octo/widget" not in card.text
    assert static.status_code == 200  # the assets are public: the sign-in page uses them


def test_only_an_operator_retries_and_only_a_failed_job(fake: AppGitHub, tmp_path: Path) -> None:
    reader = Viewer.reader_of("ada", ["octo/widget"])
    with served(pages_app(fake, tmp_path / "r", reader)) as app:
        ident = failed_job(app)
        refused = app.post(f"/jobs/{ident}/retry", b"", OPERATOR_AUTH)
        jobs = app.page("/api/v1/jobs").json()
    assert refused.status_code == 403 and "operator" in refused.text
    assert jobs["jobs"][0]["retryable"] and "deliveries" not in jobs
    operator = Viewer.everyone(operator=True)
    with served(pages_app(fake, tmp_path / "o", operator)) as app:
        ident = failed_job(app)
        before = app.run(app.service.store.job(ident)).attempts
        page = app.page("/jobs").text
        retried = app.post(f"/jobs/{ident}/retry", b"", OPERATOR_AUTH)
        # It runs again (and fails again: its request is still broken).
        job_now = wait_for(app, ident, lambda j: j.attempts > before and j.state == "failed")
        app.run(app.service.store.retry_later(ident, 1e12, "parked for later"))
        again = app.post(f"/jobs/{ident}/retry", b"", OPERATOR_AUTH)  # queued now, not failed
        missing = app.post("/jobs/999/retry", b"", OPERATOR_AUTH)
        api = app.page("/api/v1/jobs").json()
    assert f'action="/jobs/{ident}/retry"' in page and 'name="csrf"' in page
    assert "Recent deliveries" in page and "issue_comment.created" in page
    assert retried.status_code == 303 and retried.headers["location"] == "/jobs"
    assert again.status_code == 409 and "only a failed job retries" in again.text
    assert missing.status_code == 404
    assert job_now.attempts > before
    assert "deliveries" in api and "installations" in api
    assert api["jobs"][0]["retry_at"] == "1000000000000 s after the epoch"


def test_the_host_events_of_a_cycle_read_as_lines_and_bookkeeping_is_left_out() -> None:
    records = [
        cycle("00:01.000", event="merged", sha=SHA),
        cycle("00:02.000", event="abandoned"),
        cycle("00:03.000", event="scope-decision", item="sc-1", decision="defer", epoch=2),
        cycle("00:04.000", event="scope-baseline"),
        cycle("00:05.000", event="snapshot", card=7),
        rec("outcome", "00:06.000", transition="verify", session="s9", state="advanced",
            findings={"findings": ["not an object", {"severity": "minor"}]}),
    ]  # fmt: skip
    steps, events = card_steps(records, KEY)
    assert [e.text for e in events] == [
        f"merged as {SHA[:12]}",
        "abandoned",
        "scope-decision (item: sc-1, decision: defer, epoch: 2)",
        "scope-baseline",
    ]
    (verify,) = steps  # an outcome with no recorded start still shows
    assert verify.started_at == verify.ended_at and verify.duration_s == 0.0
    assert [(f.id, f.severity) for f in verify.findings] == [("#2", "minor")]


CARD_BATCH = """gate: voluntary
prGrouping: per-change
phases:
- name: card
  changes:
  - name: card-{n}
    card: {n}
"""


def test_the_run_state_reader_reads_the_tail_of_a_cards_live_log(tmp_path: Path) -> None:
    from app.cli.demo import prepare
    from app.engine.livelog import LiveLog
    from app.engine.runstate import RunLocus

    root = tmp_path / "root"
    prepare(root)
    card = root / ".pair" / "batches" / "card-7"
    card.mkdir(parents=True)
    (card / "batch.yaml").write_text(CARD_BATCH.format(n=7))
    locus = RunLocus.for_batch(root, KEY)
    for record in journal(running=True):
        append_record(locus.journal, record)
    log = LiveLog(locus.directory, "s6")
    for n in range(250):
        log.line(f"line {n} <i>")
    log.close()
    (local_card,) = read_local(root, None).cards
    assert local_card.live["s6"] == tuple(f"line {n} <i>" for n in range(50, 250))
    (view,) = card_views(read_local(root, None), [], "octo/widget")
    assert view.running is not None and view.running.live_output[-1] == "line 249 <i>"
    fragment = html.steps_fragment(view)
    assert "line 249 &lt;i&gt;" in fragment and "line 49 " not in fragment


def test_the_run_state_reader_survives_what_it_cannot_read(tmp_path: Path) -> None:
    from app.cli.demo import prepare

    assert read_local(tmp_path / "nothing", None) == Local()
    root = tmp_path / "root"
    prepare(root)
    card = root / ".pair" / "batches" / "card-4"
    (card / "run").mkdir(parents=True)
    (card / "batch.yaml").write_text(CARD_BATCH.format(n=4))
    (card / "run" / "state.json").write_text('{"parks": 7}')  # corrupt: its row says so
    checkouts = tmp_path / "checkouts"
    other = checkouts / "octo" / "svc"
    prepare(other)
    (other / ".pair" / "config.yaml").write_text("cycle: [not, a, mapping]\n")
    (other / ".pair" / "batches" / "card-5" / "run").mkdir(parents=True)
    (other / ".pair" / "batches" / "card-5" / "batch.yaml").write_text(CARD_BATCH.format(n=5))
    local = read_local(root, checkouts)
    assert [(c.checkout, c.key, c.settings.max_fix_rounds) for c in local.cards] == [
        ("octo/svc", "card-5", 3)
    ]
    names = {(b.checkout, b.name): b for b in local.batches}
    assert names[("", "card-4")].error and ("octo/svc", "hello") in names
    page = html.batches_page(list(local.batches), Viewer.everyone())
    assert "error" in page and "octo/svc" in page
    assert "No batches on this machine." in html.batches_page([], Viewer.everyone())
    pulls = card_views(local, [job(1, "octo/svc", 5, "done", target="pull")], "local/root")
    assert [(v.repo, v.local) for v in pulls] == [("octo/svc", True)]


def test_pages_for_cards_that_do_not_exist_answer_404(fake: AppGitHub, tmp_path: Path) -> None:
    with served(pages_app(fake, tmp_path, Viewer.everyone())) as app:
        missing = [app.page(p) for p in ("/cards/octo/widget/99", "/cards/octo/widget/99/fragment")]
        batches = app.page("/batches")
    assert [r.status_code for r in missing] == [404, 404]
    assert "not one you can read" in missing[0].text
    assert batches.status_code == 200 and "No batches on this machine." in batches.text


def test_the_cohort_counts_only_the_cards_the_viewer_can_read(
    fake: AppGitHub, tmp_path: Path
) -> None:
    with served(pages_app(fake, tmp_path, Viewer.reader_of("ada", ["octo/widget"]))) as app:
        page = app.page("/")
        cohort = app.page("/api/v1/cohort").json()["cohort"]
    with served(pages_app(fake, tmp_path / "ops", Viewer.everyone(operator=True))) as app:
        everyone = app.page("/api/v1/cohort").json()["cohort"]
    # The reader's one card (card 7 of octo/widget, one fix round); the operator's two cards
    # are two repositories' cards, never merged by number.
    assert (cohort["cards"], everyone["cards"]) == (1, 2)
    assert [c["card"] for c in cohort["perCard"]] == [7]
    assert sorted(c["card"] for c in everyone["perCard"]) == [3, 7]
    assert cohort["fixRounds"]["total"] == 1 and everyone["fixRounds"]["total"] == 2
    assert 'id="cohort"' in page.text and "cards: 1" in page.text
    assert "fix rounds: 1 in all" in page.text


def test_no_cohort_section_without_a_card() -> None:
    assert html.cohort_section(reduce_cohort([])) == ""
