"""A card batch's status is the card's status in every view: `pairbot batch status card-N`
(text and JSON), `pairbot card N status`, the App's pages (the cards overview, the card's own
page, the batches page), and the tracking comment on the card — for a card parked at the
prepare gate and for a card whose review converged and whose synthesis is next."""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from app.cli import run
from app.domain.text import mdtext
from app.store.base import JobRecord
from app.web.pages import html as html_pages
from app.web.pages.model import overview
from app.web.pages.read import card_views, read_local
from app.web.viewer import Viewer
from tests.support.card_project import CardProject
from tests.support.project import agent_env


@dataclass(frozen=True)
class Said:
    status: str
    next: str  # "none" or "<step>: <what it does>"
    why: str


def cli(project: CardProject, capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    env = agent_env(
        {"PAIR_TEST_AGENT_DIR": str(project.scratch), "PAIR_LOCAL_FORGE": str(project.forge.root)}
    )
    capsys.readouterr()
    assert run(["--root", str(project.root), *argv], env) == 0
    return capsys.readouterr().out


def from_text(text: str) -> Said:
    """The `status:`/`next:`/`why:` lines of an explanation or of `batch status`."""
    lines = dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)
    status = re.sub(r" \(pr-state:[a-z-]+\)$", "", lines.get("status") or lines[next(iter(lines))])
    return Said(status=status, next=lines["next"], why=lines["why"])


def from_tracking(body: str) -> Said:
    status = re.search(r"- \*\*Status:\*\* `([a-z-]+)`", body)
    nxt = re.search(r"- \*\*Next step:\*\* (.*)", body)
    why = re.search(r"- \*\*Why:\*\* (.*)", body)
    assert status and nxt and why, body
    return Said(status.group(1), nxt.group(1), why.group(1))


def job(project: CardProject) -> JobRecord:
    return JobRecord(
        id=1,
        delivery_id="d-1",
        kind="command",
        source="github",
        repo="octo/widget",
        installation=None,
        target="card",
        number=project.card,
        request={},
        state="done",
        stage="",
        attempts=1,
        not_before=0.0,
        result="executed by the worker",
        created_at=0.0,
        updated_at=0.0,
        verb="implement",
    )


def views(project: CardProject, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    batch = f"card-{project.card}"
    text = from_text(cli(project, capsys, "batch", "status", batch))
    data = json.loads(cli(project, capsys, "batch", "status", batch, "--json"))
    local = read_local(project.root, None)
    cards = card_views(local, [job(project)], "local/repo")
    everyone = Viewer.everyone()
    pages = (
        html_pages.overview_page(overview(cards, everyone), everyone),
        html_pages.card_page(cards[0], everyone),
        html_pages.batches_page(local.batches, everyone),
    )
    bodies = [c["body"] for c in project.comments(project.card) if "pair:tracking" in c["body"]]
    return {
        "text": text,
        "json": data,
        "page_view": local.batches,
        "cards": cards,
        "pages": pages,
        "tracking": from_tracking(bodies[0]),
    }


def assert_agree(project: CardProject, capsys: pytest.CaptureFixture[str], said: Said) -> None:
    seen = views(project, capsys)
    assert seen["text"] == said
    assert seen["tracking"] == Said(said.status, mdtext.inline(said.next), mdtext.inline(said.why))
    data = seen["json"]
    assert data["card"]["status"] == said.status
    assert data["changes"][f"card-{project.card}"]["status"] == said.status
    assert (data["card"]["next"] or "none") == said.next.split(":")[0]
    assert data["why"] == said.why
    (view,) = seen["page_view"]
    assert (view.status, view.next, view.why) == (said.status, said.next, said.why)
    (card,) = seen["cards"]
    assert card.repo == "octo/widget"  # the repository its command came from
    assert (card.status, card.next, card.why) == (said.status, said.next, said.why)
    # The overview, the card's page and the batches page all say the card's status and why
    # (HTML-escaped), never the engine's view of a checkout without the card's work, nor the
    # job's "done".
    for page in seen["pages"]:
        assert f">{said.status}</span>" in page and _html(said.why) in page, page
        assert "nothing runnable" not in page
        assert "executed by the worker" not in page


def _html(text: str) -> str:
    return html.escape(text, quote=True)


def test_a_card_waiting_for_approval_says_so_in_every_view(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = CardProject.create(tmp_path, cycle={"prepare": "always"})
    project.command("implement")
    said = from_text(cli(project, capsys, "card", str(project.card), "status"))
    assert said.status == "awaiting-approval"
    assert said.next == "none"
    assert_agree(project, capsys, said)


def test_a_converged_card_names_publish_in_every_view(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = CardProject.create(tmp_path)
    project.command("implement")
    while project.step().result.transition != "verify":
        pass
    said = from_text(cli(project, capsys, "card", str(project.card), "status"))
    assert said.next.startswith("publish: ")
    assert_agree(project, capsys, said)
