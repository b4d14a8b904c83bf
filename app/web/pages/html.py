"""The status pages as HTML, from the view-model (pure; every value escaped).

The pages carry no inline script, style or event handler, so a strict Content-Security-Policy
(`script-src 'self'`, `style-src 'self'`) holds: the stylesheet and the one script are static
files served by the app (`/static/pairbot.css`, `/static/pairbot.js`). The script only
refreshes the region of a page marked `data-live` with the fragment its URL names (streamed
from `data-live-stream` where the browser can, else polled); without it every page is
complete and a reload shows the same. A status is a badge with its name as text:
colour is never the only signal.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from urllib.parse import quote

from app.domain.reports.cohort import Cohort, render_cohort
from app.store.base import DeliveryRecord, InstallationRecord
from app.web.dashboard import BatchView
from app.web.pages.views import (
    MAX_ANSWER_CHARS,
    TONE,
    CardView,
    JobView,
    KeptComment,
    Overview,
    ScopeProposal,
    Step,
    stamp,
)
from app.web.viewer import Viewer

LIVE_S = 2  # how often a card's page asks for its steps while a step runs


def e(value: object) -> str:
    return html.escape(str(value), quote=True)


def card_path(repo: str, number: int) -> str:
    return f"/cards/{quote(repo, safe='/')}/{number}"


def _link(text: str, url: str) -> str:
    if not url.startswith(("https://", "http://", "/")):
        return e(text)
    return f'<a href="{e(url)}">{e(text)}</a>'


def badge(status: str, tone: str) -> str:
    return f'<span class="badge tone-{e(tone)}">{e(status)}</span>'


def layout(title: str, body: str, viewer: Viewer, *, current: str = "") -> str:
    """The page around `body`: landmarks, navigation, who is looking."""
    nav = "".join(
        f'<li><a href="{href}"{" aria-current=page" if href == current else ""}>{label}</a></li>'
        for href, label in (("/", "Cards"), ("/batches", "Batches"), ("/jobs", "Jobs"))
    )
    who = "operator" if viewer.operator else (e(viewer.login) if viewer.login else "visitor")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{e(title)} · pairbot</title>
<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/static/pairbot.css">
<script src="/static/pairbot.js" defer></script>
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header><nav aria-label="pages"><strong>pairbot</strong><ul>{nav}</ul></nav>
<p class="who">viewing as {who}</p></header>
<main id="main" tabindex="-1">
{body}
</main>
</body></html>
"""


def _table(caption: str, headers: Sequence[str], rows: Iterable[Sequence[str]], empty: str) -> str:
    """A table of already-escaped cells."""
    # Each cell names its column (data-label): on a phone the rows stack as labelled cards.
    body = "".join(
        "<tr>"
        + "".join(f'<td data-label="{e(h)}">{c}</td>' for h, c in zip(headers, row, strict=True))
        + "</tr>"
        for row in rows
    )
    if not body:
        return f'<p class="empty">{e(empty)}</p>'
    head = "".join(f'<th scope="col">{e(h)}</th>' for h in headers)
    return (
        f'<div class="scroll"><table><caption>{e(caption)}</caption>'
        f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"
    )


def _figure(quantity: object) -> str:
    if not isinstance(quantity, dict) or quantity.get("of", 0) == 0:
        return "—"
    value = quantity.get("value")
    shown = "unknown" if value is None else f"{value:,}"
    return f"{shown} ({quantity.get('reported')} of {quantity.get('of')} steps)"


def _select(name: str, label: str, choices: Sequence[str], chosen: str) -> str:
    options = '<option value="">all</option>' + "".join(
        f'<option value="{e(c)}"{" selected" if c == chosen else ""}>{e(c)}</option>'
        for c in choices
    )
    return f'<label>{e(label)} <select name="{e(name)}">{options}</select></label>'


def cohort_section(cohort: Cohort) -> str:
    """How the cards the viewer can read are doing together (`pairbot report cohort`)."""
    if not cohort.cards:
        return ""
    lines = render_cohort(cohort).splitlines()
    items = "".join(f"<li>{e(line)}</li>" for line in lines)
    heading = '<h2 id="cohort">Cohort</h2>'
    return f'<section aria-labelledby="cohort">{heading}<ul>{items}</ul></section>'


def overview_page(view: Overview, viewer: Viewer, cohort: Cohort | None = None) -> str:
    rows = []
    for card in view.cards:
        title = f"#{card.number}" + (f" {card.title}" if card.title else "")
        pr = _link(f"PR #{card.pr}", card.pr_url or "") if card.pr is not None else "—"
        review = "—"
        if card.reviewed_head:
            verdict = "converged" if card.review_converged else "not converged"
            review = f"{e(verdict)} on <code>{e(card.reviewed_head[:12])}</code>"
        rows.append(
            (
                e(card.repo),
                f'<a href="{e(card_path(card.repo, card.number))}">{e(title)}</a>'
                + (f" · {_link('card', card.url)}" if card.url else ""),
                pr,
                badge(card.status, card.tone),
                f"{e(card.gate)}<br><small>{e(card.why)}</small>",
                e(card.next),
                review,
                e(f"{card.fix_rounds} of {card.max_fix_rounds}") if card.local else "—",
                f"tokens {e(_figure(card.tokens))}<br>cost $ {e(_figure(card.cost_usd))}",
                f"{e(card.last_step or card.last_command)}<br><small>{e(card.last_at)}</small>",
            )
        )
    form = (
        '<form class="filters" method="get" action="/" role="search">'
        + _select("repo", "Repository", view.repos, view.repo)
        + _select("state", "State", view.states, view.state)
        + '<button type="submit">Filter</button></form>'
    )
    table = _table(
        "Cards, what needs a person first",
        (
            "repository",
            "card",
            "PR",
            "pr-state",
            "blocked by · why",
            "next step",
            "pair-review",
            "fix rounds",
            "budget used",
            "last step",
        ),
        rows,
        "No cards to show." if not (view.repo or view.state) else "No card matches the filters.",
    )
    body = f"<h1>Cards</h1>{form}{table}" + (cohort_section(cohort) if cohort else "")
    if not view.cards and not (view.repo or view.state):
        # A fresh `--dev` demo has a plain batch and no card yet: say where the work is.
        body += (
            "<p>A card appears here once a <code>/pair implement</code> comment starts its "
            'cycle. Plain batches are on the <a href="/batches">Batches</a> page.</p>'
        )
    return layout("Cards", body, viewer, current="/")


def _step_row(step: Step) -> str:
    outcome = badge("running", "busy") if step.running else e(step.outcome or "")
    who = " · ".join(x for x in (step.agent, step.model) if x)
    usage = []
    if step.usage.tokens is not None:
        usage.append(f"{step.usage.tokens:,} tokens")
    if step.usage.cost_usd is not None:
        usage.append(f"${step.usage.cost_usd:,.4f}")
    duration = f"{step.duration_s:.1f} s" if step.duration_s is not None else "—"
    details = e(step.message)
    if step.commit:
        details += f"<br><small>pushed <code>{e(step.commit[:12])}</code></small>"
    if step.reports and step.running:
        lines = "".join(
            f"<li><small>{e(r.at)}</small> {e(r.kind)}: {e(r.message)}</li>" for r in step.reports
        )
        details += f'<ol class="stream" aria-label="agent reports">{lines}</ol>'
    if step.live_output and step.running:
        output = e("\n".join(step.live_output))
        details += (
            '<pre class="stream live-output" aria-live="polite" '
            f'aria-label="agent output, last {len(step.live_output)} lines">{output}</pre>'
        )
    if step.findings:
        found = "".join(
            f"<li>{e(f.transition)}: <code>{e(f.id)}</code> {e(f.severity)} {e(f.text)}</li>"
            for f in step.findings
        )
        details += f"<p>Findings of review round {e(step.review_round or '?')}:</p><ul>{found}</ul>"
    return (
        f'<li class="step" data-transition="{e(step.transition)}">'
        f"<h3>{e(step.transition)} {outcome}</h3>"
        f"<p><small>{e(who or 'no agent recorded')} · started {e(step.started_at)} · "
        f"{e(duration)} · {e(', '.join(usage) or 'usage not reported')} · "
        f"journal line {step.journal_ref + 1}</small></p>"
        f"<div>{details}</div></li>"
    )


def _comment_item(comment: KeptComment) -> str:
    # A host with no web address for it (the local forge) gets a plain label.
    name = _link(comment.label, comment.url) if comment.url else e(comment.label)
    ident = f" · id <code>{e(comment.id)}</code>" if comment.id else ""
    return (
        f'<li class="comment" data-kind="{e(comment.kind)}">{name}'
        f"<small>{ident} · last written {e(comment.at)} · journal line "
        f"{comment.journal_ref + 1}</small></li>"
    )


def comments_section(card: CardView) -> str:
    """Links to every comment pairbot keeps for the card (a label where the host has no URL)."""
    items = "".join(_comment_item(c) for c in card.comments) or "<li>none yet</li>"
    return (
        '<section aria-labelledby="comments-h"><h2 id="comments-h">Comments pairbot keeps</h2>'
        f'<ul class="comments">{items}</ul></section>'
    )


def _proposal_row(proposal: ScopeProposal) -> tuple[str, ...]:
    decision = proposal.decision
    if decision is None:
        decided = badge("awaiting decision", "wait")
    else:
        decided = f"{badge(decision.action, 'good')} {e(decision.outcome)}"
        if decision.ac:
            decided += f" ({e(decision.ac)})"
        if decision.new_card is not None:
            decided += f" · card #{decision.new_card}"
        who = f"by {e(decision.by)}" if decision.by else "by the maintainer"
        comment = _link("their comment", decision.url) if decision.url else ""
        decided += f"<br><small>{who} · {e(decision.at)}" + (
            f" · {comment}</small>" if comment else "</small>"
        )
    origin = f"review round {proposal.review_round}" if proposal.review_round else "—"
    return (
        f"<code>{e(proposal.id)}</code>",
        e(proposal.type),
        e(proposal.affected_ac or "—"),
        e(proposal.evidence) + f"<br><small>{e(origin)} · {e(proposal.proposed_at)}</small>",
        decided,
    )


def scope_section(card: CardView) -> str:
    """The scope proposals the reviews made and what the maintainer decided for each."""
    if not card.scope:
        return ""
    packet = (
        f"<p>Decision packet posted {e(card.scope_packet_at)}.</p>" if card.scope_packet_at else ""
    )
    table = _table(
        "Scope proposals and decisions",
        ("proposal", "adds or changes", "affected AC", "evidence", "decision"),
        [_proposal_row(p) for p in card.scope],
        "",
    )
    return (
        f'<section aria-labelledby="scope-h"><h2 id="scope-h">Scope</h2>{packet}{table}</section>'
    )


def steps_fragment(card: CardView) -> str:
    """The live part of a card's page: its status, steps and events (the script swaps it in)."""
    steps = "".join(_step_row(s) for s in card.steps) or '<li class="empty">No step yet.</li>'
    events = "".join(
        f"<li><small>{e(ev.at)}</small> {e(ev.text)} <small>(journal line {ev.journal_ref + 1})"
        "</small></li>"
        for ev in card.events
    )
    actions = "".join(f"<li><code>{e(a)}</code></li>" for a in card.actions)
    pr = _link(f"PR #{card.pr}", card.pr_url) if card.pr is not None else "none yet"
    return (
        f'<section aria-labelledby="status-h"><h2 id="status-h">Status</h2><dl class="facts">'
        f"<dt>pr-state</dt><dd>{badge(card.status, card.tone)}</dd>"
        f"<dt>pull request</dt><dd>{pr}</dd>"
        f"<dt>next step</dt><dd>{e(card.next)}</dd>"
        f"<dt>blocked by</dt><dd>{e(card.gate)}</dd>"
        f"<dt>why</dt><dd>{e(card.why)}</dd>"
        f"<dt>budget</dt><dd>{e(card.budget or '—')}</dd>"
        f"<dt>what you can do</dt><dd><ul>{actions or '<li>nothing</li>'}</ul></dd></dl></section>"
        f'<section aria-labelledby="steps-h"><h2 id="steps-h">Cycle</h2>'
        f'<ol class="steps">{steps}</ol></section>'
        f"{scope_section(card)}{comments_section(card)}"
        f'<section aria-labelledby="events-h"><h2 id="events-h">Host events</h2>'
        f"<ol>{events or '<li>none yet</li>'}</ol></section>"
    )


def card_page(card: CardView, viewer: Viewer, controls: str = "") -> str:
    """A card's page; `controls` is its `act_section` (outside the live part, so a form being
    filled in is never swapped away)."""
    links = [f'<a href="{e(card_path(card.repo, card.number))}">this page</a>']
    if card.url:
        links.append(_link("the card", card.url))
    title = f"{card.repo} #{card.number}" + (f" — {card.title}" if card.title else "")
    live = card_path(card.repo, card.number)
    body = (
        f"<h1>{e(title)}</h1><p>{' · '.join(links)} · "
        f'<a href="/api/v1{e(card_path(card.repo, card.number))}">JSON</a></p>'
        f'<div id="live" data-live="{e(live)}/fragment" data-live-stream="{e(live)}/stream" '
        f'data-live-every="{LIVE_S}" aria-live="polite">{steps_fragment(card)}</div>'
        f"{controls}"
    )
    return layout(title, body, viewer)


_BUTTON_TEXT = {
    "approve": "Approve",
    "answer": "Send the answer",
    "implement": "Implement",
    "retry": "Retry the step",
}


def act_section(
    card: CardView,
    verbs: Sequence[str],
    *,
    csrf: str,
    trigger: str,
    refusal: str = "",
    queued: str = "",
) -> str:
    """The card's buttons: one form per command that applies (`verbs`), each posting the
    session's CSRF token; or why this viewer has none (`refusal`). `queued`: the verb just
    queued, announced."""
    parts = ['<section aria-labelledby="act-h"><h2 id="act-h">Act on this card</h2>']
    if queued:
        parts.append(
            f'<p role="status" class="notice">Queued <code>/{e(trigger)} {e(queued)}</code>: '
            "it runs as your comment would, and the card's tracking comment follows it.</p>"
        )
    if refusal:
        parts.append(f"<p>{e(refusal)}</p></section>")
        return "".join(parts)
    action = f"{card_path(card.repo, card.number)}/commands"
    for verb in verbs:
        field = ""
        if verb == "answer":
            field = (
                '<label for="answer-text">Your answer (plain text; it reaches the card as '
                'quoted text, never as a command)</label><textarea id="answer-text" '
                f'name="text" rows="4" maxlength="{MAX_ANSWER_CHARS}" required></textarea>'
            )
        parts.append(
            f'<form method="post" action="{e(action)}" class="act">'
            f'<input type="hidden" name="csrf" value="{e(csrf)}">'
            f'<input type="hidden" name="verb" value="{e(verb)}">{field}'
            f'<button type="submit">{_BUTTON_TEXT.get(verb, verb)} '
            f"<small>(<code>/{e(trigger)} {e(verb)}</code>)</small></button></form>"
        )
    parts.append(
        "<p><small>Each button queues the same command a comment would, as you: pairbot checks "
        "your permission on the repository (write, maintain or admin) with GitHub first."
        "</small></p></section>"
    )
    return "".join(parts)


def batches_page(batches: Sequence[BatchView], viewer: Viewer) -> str:
    parts = ["<h1>Batches</h1>"]
    if not batches:
        parts.append('<p class="empty">No batches on this machine.</p>')
    for batch in batches:
        where = batch.checkout or "this project"
        head = f"<h2>{e(batch.name)} <small>({e(where)})</small></h2>"
        if batch.error:
            parts.append(f"{head}<p>{badge('error', 'alert')} {e(batch.error)}</p>")
            continue
        if batch.card is not None:
            status = badge(batch.status, TONE.get(batch.status, "busy"))
            parts.append(
                f"{head}<p>card #{batch.card}: {status} · next: {e(batch.next)}"
                + (f" · why: {e(batch.why)}" if batch.why else "")
                + "</p>"
            )
            continue
        state = "done" if batch.done else "in progress"
        summary = f"<p>{badge(state, 'good' if batch.done else 'busy')} · next: {e(batch.next)}"
        summary += (f" · held: {e(batch.why)}" if batch.why else "") + "</p>"
        phases = []
        for phase in batch.phases:
            gate = f"gated by {e(phase.gated_by)}" if phase.gated_by else "not gated"
            proof = (
                f"proof-of-work: {e(phase.proof or 'none yet')}"
                if phase.proof_required
                else "no proof-of-work required"
            )
            changes = "".join(
                f"<li>{e(c.name)}: {e(c.status)}"
                + (f" — next: {e(c.next)}" if c.next else "")
                + (f" — held: {e(c.reason)}" if c.reason else "")
                + "</li>"
                for c in batch.changes
                if c.phase == phase.name
            )
            done = "complete" if phase.complete else "open"
            phases.append(
                f"<li><strong>{e(phase.name)}</strong> ({done}; {gate}; {proof})"
                f"<ol>{changes}</ol></li>"
            )
        parts.append(head + summary + f'<ol class="phases">{"".join(phases)}</ol>')
    return layout("Batches", "".join(parts), viewer, current="/batches")


def jobs_page(
    jobs: Sequence[JobView],
    viewer: Viewer,
    csrf: str,
    *,
    installations: Sequence[InstallationRecord] = (),
    deliveries: Sequence[DeliveryRecord] = (),
) -> str:
    """The queue, failed first; for operators also the installations and recent deliveries
    (they name accounts and repositories of every kind, so only an operator sees them)."""
    rows = []
    for job in jobs:
        control = ""
        if viewer.operator and job.retryable:
            control = (
                f'<form method="post" action="/jobs/{job.id}/retry">'
                f'<input type="hidden" name="csrf" value="{e(csrf)}">'
                f'<button type="submit">Retry job {job.id}</button></form>'
            )
        target = f"{'PR ' if job.target == 'pull' else ''}#{job.number}"
        tone = {"failed": "alert", "done": "good"}.get(job.state, "busy")
        state = badge(job.state, tone) + (f" {e(job.stage)}" if job.stage else "")
        if job.retry_at:
            state += f"<br><small>retry at {e(job.retry_at)}</small>"
        rows.append(
            (
                str(job.id),
                e(job.repo),
                _link(target, card_path(job.repo, job.number))
                if job.target == "card"
                else e(target),
                e(job.command),
                state,
                str(job.attempts),
                e(job.result),
                e(job.updated_at),
                control,
            )
        )
    table = _table(
        "Jobs, failed first",
        ("job", "repository", "target", "command", "state", "attempts", "reason", "updated", ""),
        rows,
        "No jobs yet.",
    )
    body = f"<h1>Jobs</h1>{table}"
    if viewer.operator:
        body += "<h2>Installations</h2>" + _table(
            "Installations of the App",
            ("installation", "account", "repositories", "state"),
            [
                (
                    str(i.id),
                    e(i.account),
                    e(", ".join(i.repos) or "(all or none listed)"),
                    "suspended" if i.suspended else "active",
                )
                for i in installations
            ],
            "No installation events received yet.",
        )
        body += "<h2>Recent deliveries</h2>" + _table(
            "Deliveries, newest first",
            ("received", "source", "event", "delivery", "outcome", "jobs"),
            [
                (
                    e(stamp(d.received_at)),
                    e(d.source),
                    e(d.event + (f".{d.action}" if d.action else "")),
                    e(d.id),
                    e(d.status),
                    str(d.jobs),
                )
                for d in deliveries
            ],
            "No deliveries received yet.",
        )
    return layout("Jobs", body, viewer, current="/jobs")


def message_page(title: str, text: str, viewer: Viewer) -> str:
    return layout(title, f"<h1>{e(title)}</h1><p>{e(text)}</p>", viewer)
