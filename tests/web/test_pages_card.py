"""A card's page beyond its steps: the comments pairbot keeps for it (linked where the host has
a web address, named where it has none or the journal predates recording them), and the scope
proposals its reviews made with the maintainer's decision — from journals in the shapes the
cycle writes, and from a real cycle on the local forge."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.web.pages import html
from app.web.pages.comments import kept_comments, scope_proposals
from app.web.pages.model import card_view
from hosts.models import Target
from tests.support.card_project import MAINTAINER, CardProject, scope_decision_comment

KEY = "card-7"
SHA = "b" * 40
PULL = "https://github.example/o/r/pull/12"


def rec(kind: str, at: str, **fields: Any) -> dict[str, Any]:
    return {"kind": kind, "key": KEY, "at": f"2026-12-01T11:{at}+00:00", **fields}


def cycle(at: str, **data: Any) -> dict[str, Any]:
    return rec("cycle", at, data=data)


def kept(target: str, number: int, ident: str, url: str = "") -> dict[str, Any]:
    return {"target": target, "number": number, "id": ident, "url": url}


def on_pr(ident: str) -> dict[str, Any]:
    return kept("pull", 12, ident, f"{PULL}#issuecomment-{ident}")


def verify(at: str, session: str, *changes: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        rec("step-started", at + ".000", transition="verify", session=session),
        rec(
            "outcome",
            at + ".500",
            transition="verify",
            session=session,
            state="advanced",
            findings={"findings": [], "scopeChanges": list(changes)},
        ),
    ]


def journal() -> list[dict[str, Any]]:
    """A GitHub card's cycle: its tracking comment (first written before ids were recorded),
    its PR, two reviews proposing scope changes, the packet, a decision, the synthesis."""
    lockout = {
        "id": "sc-1",
        "type": "new-requirement",
        "evidence": "lock after 3",
        "affectedAc": "AC-1",
    }
    audit = {"id": "sc-2", "type": "new-requirement", "evidence": "audit log <b>"}
    return [
        cycle("00:00", event="bound", card=7, run="r1"),
        cycle("00:01", event="tracking", digest="d0", status="in-progress"),  # before ids
        cycle("00:02", event="pr", number=12, url=PULL),
        cycle(
            "00:03",
            event="tracking",
            digest="d1",
            status="in-progress",
            comment=kept("card", 7, "901", "https://github.example/o/r/issues/7#issuecomment-901"),
        ),
        *verify("01:00", "s1", {**lockout, "evidence": "lock after 5"}),
        cycle("01:01", event="review-published", head=SHA, comment=on_pr("902")),
        *verify("02:00", "s2", lockout, audit),
        cycle("02:01", event="review-published", head=SHA, comment=on_pr("902")),
        cycle("02:02", event="scope-packet", baseline="h1", comment=on_pr("903")),
        cycle("03:00", event="comment", kind="scope-refusal", comment=on_pr("904")),
        cycle("04:00", event="scope-card", proposal="sc-2", number=31),
        cycle(
            "04:01",
            event="scope-applied",
            ref="905",
            by="maint",
            url=PULL + "#issuecomment-905",
            scopeEpoch=1,
            dispositions=[
                {"id": "sc-1", "type": "new-requirement", "action": "ignore", "ref": "905"},
                {"id": "sc-2", "type": "new-requirement", "action": "new-card", "ref": "905"},
            ],
        ),
        cycle("04:02", event="scope-applied", ref="905", dispositions=[{"id": "sc-1"}]),
        cycle("05:00", event="synthesis", head=SHA, confirmed=True, comment=on_pr("906")),
    ]


def test_every_kept_comment_is_listed_once_with_its_last_address() -> None:
    comments = kept_comments(journal(), KEY, 7)
    assert [(c.kind, c.target, c.number, c.id) for c in comments] == [
        ("tracking", "card", 7, "901"),  # the entry from before ids were recorded is the same
        ("review", "pull", 12, "902"),  # one review comment per run, edited each round
        ("scope-packet", "pull", 12, "903"),
        ("scope-refusal", "pull", 12, "904"),
        ("synthesis", "pull", 12, "906"),
    ]
    tracking, review = comments[0], comments[1]
    assert tracking.label == "tracking comment on the card" and tracking.url.endswith("-901")
    assert review.label == "review comment on PR #12" and review.at.endswith("11:02:01+00:00")
    page = html.comments_section(card_view("o/r", KEY, journal(), {}))
    assert f'<a href="{PULL}#issuecomment-906">synthesis comment on PR #12</a>' in page


def test_a_journal_from_before_comment_ids_names_each_comment_without_a_link() -> None:
    old = [
        cycle("00:00", event="bound", card=7, run="r1"),
        cycle("00:01", event="tracking", digest="d0"),
        cycle("00:02", event="pr", number=12, url=PULL),
        cycle("00:03", event="review-published", head=SHA),
        cycle("00:04", event="tracking", digest="d1"),
        cycle("00:05", event="synthesis", head=SHA, confirmed=True),
    ]
    comments = kept_comments(old, KEY, 7)
    assert [(c.label, c.id, c.url) for c in comments] == [
        ("tracking comment on the card", "", ""),
        ("review comment on PR #12", "", ""),
        ("synthesis comment on PR #12", "", ""),
    ]
    page = html.comments_section(card_view("o/r", KEY, old, {}))
    assert "<a " not in page and "synthesis comment on PR #12" in page


def test_scope_proposals_carry_their_latest_wording_and_the_decision_taken() -> None:
    proposals, packet_at = scope_proposals(journal(), KEY)
    assert packet_at.endswith("11:02:02+00:00")
    lockout, audit = proposals
    assert (lockout.id, lockout.evidence, lockout.affected_ac, lockout.review_round) == (
        "sc-1",
        "lock after 3",
        "AC-1",
        2,
    )
    assert lockout.proposed_at.endswith("11:01:00.500+00:00")  # first proposed in round 1
    assert lockout.decision is not None and audit.decision is not None
    # The replayed decision (a second `scope-applied` naming sc-1 again) changes nothing.
    assert (lockout.decision.action, lockout.decision.by, lockout.decision.ref) == (
        "ignore",
        "maint",
        "905",
    )
    assert lockout.decision.outcome.startswith("declined")
    assert (audit.decision.action, audit.decision.new_card) == ("new-card", 31)
    view = card_view("o/r", KEY, journal(), {})
    data = view.to_json(detail=True)
    assert data["scope"][1]["decision"]["new_card"] == 31
    assert data["comments"][0]["url"].endswith("-901")
    assert "scope" not in view.to_json() and "comments" not in view.to_json()
    page = html.steps_fragment(view)
    assert "audit log &lt;b&gt;" in page and "card #31" in page and "by maint" in page
    assert f'<a href="{PULL}#issuecomment-905">their comment</a>' in page


def test_a_proposal_waiting_for_the_maintainer_says_so() -> None:
    waiting = journal()[:11]
    view = card_view("o/r", KEY, waiting, {})
    assert [p.decision for p in view.scope] == [None, None]
    assert "awaiting decision" in html.scope_section(view)
    assert html.scope_section(card_view("o/r", KEY, journal()[:4], {})) == ""


def test_a_real_cycle_on_the_local_forge_records_each_comment_it_keeps(tmp_path: Path) -> None:
    project = CardProject.create(tmp_path)
    project.script({"verify": ["scope-proposal", "ok"]})
    project.command("implement")
    project.until_quiet()
    pull = project.pull()
    assert pull is not None
    packet = next(c for c in project.comments(pull) if "pair:scope-packet" in c["body"])
    baseline = packet["body"].split('"scopeBaselineHash": "')[1].split('"')[0]
    decision = scope_decision_comment(baseline, {"id": "sc-1", "action": "ignore"})
    project.comment_as_maintainer(Target("pull", pull), decision)
    project.until_quiet()
    view = card_view("local/p", f"card-{project.card}", project.journal(), {})
    by_kind = {c.kind: c for c in view.comments}
    assert {"tracking", "review", "scope-packet", "synthesis"} <= set(by_kind)
    on_forge = {c["id"] for c in project.comments(pull)}
    for kind in ("review", "scope-packet", "synthesis"):
        assert by_kind[kind].id in on_forge and by_kind[kind].number == pull
    assert by_kind["tracking"].id and by_kind["tracking"].url == ""  # the forge has no URLs
    (proposal,) = view.scope
    assert proposal.decision is not None
    assert (proposal.decision.action, proposal.decision.by) == ("ignore", MAINTAINER.login)
    assert "<a " not in html.comments_section(view)


def test_a_work_item_comment_with_only_a_rest_address_links_to_its_work_item() -> None:
    item = "https://dev.azure.com/org/proj/_workitems/edit/7"
    rest = "https://dev.azure.com/org/proj-id/_apis/wit/workItems/7/comments/55"
    records = [
        cycle("00:00", event="bound", card=7, run="r1"),
        cycle("00:01", event="snapshot", card=7, title="t", url=item, comments=[]),
        cycle("00:02", event="tracking", digest="d", comment=kept("card", 7, "55", rest)),
    ]
    (tracking,) = card_view("org/proj/repo", KEY, records, {}).comments
    assert (tracking.id, tracking.url) == ("55", item)
    unknown = [r for r in records if r["data"]["event"] != "snapshot"]
    (label,) = card_view("org/proj/repo", KEY, unknown, {}).comments
    assert label.url == "" and "<a " not in html.comments_section(
        card_view("o/p/r", KEY, unknown, {})
    )
