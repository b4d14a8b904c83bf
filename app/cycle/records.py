"""What the card cycle recorded about its host side, folded from the journal. Pure.

The engine's own entries (`step-started`, `outcome`, reports) say what the agents did; the
card cycle adds `cycle` entries (`data.event`) for what it did on the hosts, so a restarted or
re-run tick knows what is already published and never does it twice:

    bound            {card, run, mode: implement|refine, until?, merge?, prepare?, agent?}
                                                 a `run` other than the current one starts a
                                                 new cycle (after an abandoned or merged one):
                                                 its own run id, PR, review and synthesis
    hosts            {binding: {version, pm, code}}  the host binding of the card's first run;
                                                 the first one recorded holds for good
    pushed           {sha, transition}           the branch was pushed after an accepted step
    pr               {number, url}               the card's (draft) pull request
    sealed           {paths, ids, round, seal?, group?, revision?, commit?, blobs?,
                      fixScope?, rows?, acs?, supersedes?}
                                                 red's failing tests, sealed for later steps: the
                                                 contract's seal (app.domain.review.seal)
    red-contract     {…the sealed fields, failing, contract}
                                                 an accepted red's would-be seal, its tests'
                                                 failing output and its contract, waiting for the
                                                 red contract verifier (`verify-red`); cleared by
                                                 the `sealed` its acceptance writes
    routed           {route, findings, round, seal?}  where a blocking review sent the card
                                                 (app.domain.review.routing), once per review
    custody-breach   {head, problems}            the custody check refused a head before a fix
                                                 or verify: nothing reset, the seal kept
    evidence         {head, checks: [{name, source, state, url, required, summary}]}
                                                 the checks others reported on the head, read
                                                 before a verify (app.domain.review.evidence);
                                                 written when they differ from the last one recorded
    reviewed         {head, cardHash, converged, blocking, round}
    review-published {head, comment?}            review comment + `pair-review` status are set
    scope-packet     {baseline, comment?}        the scope-decision packet comment is up
    scope-applied    {ref, dispositions, scopeEpoch, by?, url?}  a maintainer's decision
                                                 (by whom, its comment's URL), applied once
    scope-card       {proposal, number}          a card created for a `new-card` decision
    synthesis        {head, confirmed, comment?} the synthesis comment, read back
    merge-approved   {head}                      `/pair approve` at the merge gate
    merged           {head, sha}
    abandoned        {}
    pr-closed        {number}                    the PR closed by `/pair abandon`
    interrupted      {transition, session}       a step started and never recorded an outcome
                                                 (its run died); cleared by a later step, a
                                                 `/pair retry` or `/pair implement`
    resumed          {}                          `/pair retry` on an interrupted card
    step-raised      {transition, error}         a step ended by an error its run reported
                                                 (not a dead run: the next step runs it again)
    command          {verb, delivery}            a command applied (its delivery is never re-run)
    label            {state}                     the `pr-state:*` label last set (card and PR)
    tracking         {digest, status?, next?, why?, comment?}  the tracking comment's
                                                 last body digest
                                                 (null: another writer changed it; publish it
                                                 again) and the status, next step and reason it
                                                 shows — what every other view of the card says
    snapshot         {at, card, title, body, author, authorWrites, comments}  the card as it
                                                 was when a command was accepted; the latest one
                                                 is what agents read (app.cycle.snapshot)
    remediation      {batch, head, findings}     an accepted fix: the batch `fix-<round>`, the
                                                 head it produced, the findings it remediated
    risk             {action, risk, ...}         a regression-risk ledger entry
                                                 (app.domain.review.regression), this run's only
    rewrite-retry    {spent?}                    `/pair retry` at a history-rewrite escalation:
                                                 the next step reviews the branch's new head
                                                 (`spent`: it found the head unchanged)
    comment          {kind, comment}             a marker-keyed reply written (a refusal, help)

`comment` (where present: journals written before it have none) is the comment pairbot wrote,
`{target: card|pull, number, id, url}`; `url` is "" where the host gives none (the local forge).

`fold_cycle(records, key)` reads them once, in order, into `CycleRecord`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.domain.review.seal import Seal


@dataclass
class CycleRecord:
    """The host-side facts of one card's cycle."""

    card: int | None = None
    binding: Mapping[str, Any] | None = None  # as stored; `Binding.from_json` reads it
    run_id: str | None = None  # the cycle's run id (markers carry it); set by the first bound
    mode: str = "implement"
    until: str | None = None
    merge: str | None = None
    prepare: str | None = None
    agent: str | None = None
    pushed: str | None = None  # last pushed head
    pr: int | None = None
    pr_url: str = ""
    sealed_paths: dict[str, int] = field(default_factory=dict)  # test file -> fix round
    sealed_ids: tuple[str, ...] = ()
    # This run's named seals, in order (a revision after its group); a new cycle's branch
    # holds none of them, so custody is checked against the seals of the run that made them.
    seals: tuple[Seal, ...] = ()
    routes: tuple[Mapping[str, Any], ...] = ()  # this run's `routed` entries
    red_contract: Mapping[str, Any] | None = None  # red's contract waiting for verify-red
    reviewed_head: str | None = None
    reviewed_card_hash: str | None = None
    review_converged: bool | None = None
    review_blocking: int = 0
    review_published: str | None = None  # head whose review comment + status are set
    evidence: Mapping[str, Any] | None = None  # the last `evidence` entry (checks on a head)
    scope_baseline_posted: str | None = None
    applied_refs: tuple[str, ...] = ()
    snapshot: Mapping[str, Any] | None = None  # the latest card snapshot (app.cycle.snapshot)
    dispositions: tuple[Mapping[str, Any], ...] = ()
    split_cards: dict[str, int] = field(default_factory=dict)  # proposal id -> created card
    scope_epoch: int = 0
    synthesis_head: str | None = None
    merge_approved_head: str | None = None
    merged_sha: str | None = None
    abandoned: bool = False
    deliveries: set[str] = field(default_factory=set)  # deliveries whose command was applied
    label: str | None = None
    label_pr: int | None = None  # the PR the label was last set on too
    tracking_digest: str | None = None
    sendbacks: int = 0  # consecutive sent-back outcomes of the current step
    last_sendback: str = ""
    pr_closed: bool = False  # `/pair abandon` closed the PR
    interrupted: Mapping[str, Any] | None = None  # the step a dead run left unfinished
    # What the tracking comment last said: the status, the next step and why.
    shown_status: str | None = None
    shown_next: str | None = None
    shown_why: str = ""
    cycles: int = 0  # how many cycles ran on this card (a new one after abandoned or merged)
    # This run's remediation batches (`fix-<round>` -> the head it produced, the findings it
    # remediated), the heads its reviews reviewed, and its regression-risk ledger.
    remediations: dict[str, str] = field(default_factory=dict)
    remediated: dict[str, tuple[str, ...]] = field(default_factory=dict)
    reviewed_heads: tuple[str, ...] = ()
    risks: tuple[Mapping[str, Any], ...] = ()
    rewrite_retry: bool = False  # `/pair retry` at a rewrite escalation since the last review

    def new_cycle(self, run: str) -> None:
        """Start the card's next cycle under `run`: what belonged to the last cycle's PR and
        review is forgotten; the card, its binding, its seals, its scope decisions (they
        outlive cycles), the commands already applied and the labels on the hosts stay."""
        keep = CycleRecord(
            card=self.card,
            binding=self.binding,
            sealed_paths=self.sealed_paths,
            sealed_ids=self.sealed_ids,
            applied_refs=self.applied_refs,
            dispositions=self.dispositions,
            split_cards=self.split_cards,
            scope_epoch=self.scope_epoch,
            deliveries=self.deliveries,
            label=self.label,
            label_pr=self.label_pr,
            tracking_digest=self.tracking_digest,
            pushed=self.pushed,
            shown_status=self.shown_status,
            shown_next=self.shown_next,
            shown_why=self.shown_why,
            cycles=self.cycles + 1,
        )
        self.__dict__.update(keep.__dict__)
        self.run_id = run

    @property
    def finished(self) -> bool:
        """The cycle is over: abandoned, or its PR merged. A new `/pair implement` starts the
        card's next cycle instead of continuing this one."""
        return self.abandoned or self.merged_sha is not None


def _strs(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def fold_cycle(records: Sequence[Mapping[str, Any]], key: str) -> CycleRecord:
    """One pass over a batch journal's records into `key`'s cycle record."""
    rec = CycleRecord()
    for record in records:
        if record.get("key") != key:
            continue
        kind = record.get("kind")
        if kind in ("step-started", "retry"):
            rec.interrupted = None  # a step runs again, or a person cleared it
        if kind == "outcome":
            state = record.get("state")
            if state == "sent-back":
                rec.sendbacks += 1
                rec.last_sendback = str(record.get("message", ""))
            else:
                rec.sendbacks = 0
            continue
        if kind != "cycle":
            continue
        data = record.get("data")
        if not isinstance(data, Mapping):
            continue
        _apply(rec, str(data.get("event", "")), data)
    return rec


def _apply(rec: CycleRecord, event: str, data: Mapping[str, Any]) -> None:
    """Fold one `cycle` entry into `rec`, through the reader of its event's group."""
    reader = _READERS.get(event)
    if reader is not None:
        reader(rec, event, data)


def _apply_run(rec: CycleRecord, event: str, data: Mapping[str, Any]) -> None:
    """The cycle's course: bound, its hosts and snapshot, commands, the merge, its end."""
    if event == "bound":
        _apply_bound(rec, data)
    elif event == "snapshot":
        rec.snapshot = data
    elif event == "hosts":
        if rec.binding is None and isinstance(data.get("binding"), Mapping):
            rec.binding = data["binding"]  # a running card never moves host: first one wins
    elif event == "merge-approved":
        rec.merge_approved_head = str(data.get("head"))
    elif event == "merged":
        rec.merged_sha = str(data.get("sha"))
    elif event == "abandoned":
        rec.abandoned = True
    elif event == "interrupted":
        rec.interrupted = data
    elif event == "resumed":
        rec.interrupted = None
    elif event == "command":
        rec.deliveries.add(str(data.get("delivery")))


def _apply_bound(rec: CycleRecord, data: Mapping[str, Any]) -> None:
    card = data.get("card")
    rec.card = card if isinstance(card, int) else rec.card
    run = str(data.get("run") or "")
    if run and rec.run_id is not None and run != rec.run_id:
        rec.new_cycle(run)
    elif run and rec.run_id is None:
        rec.run_id, rec.cycles = run, 1
    rec.interrupted = None
    rec.mode = str(data.get("mode", "implement"))
    for name in ("until", "merge", "prepare", "agent"):
        value = data.get(name)
        if value is not None:
            setattr(rec, name, str(value))
    rec.abandoned = False


def _apply_work(rec: CycleRecord, event: str, data: Mapping[str, Any]) -> None:
    """The branch and its pull request: pushes, the PR, seals, remediations, risks."""
    if event == "pushed":
        rec.pushed = str(data.get("sha"))
    elif event == "pr":
        number = data.get("number")
        rec.pr = number if isinstance(number, int) else rec.pr
        rec.pr_url = str(data.get("url", ""))
    elif event == "pr-closed":
        rec.pr_closed = True
    elif event == "red-contract":
        rec.red_contract = data
    elif event == "sealed":
        rec.red_contract = None
        round_ = data.get("round")
        for sealed in _strs(data.get("paths")):
            rec.sealed_paths.setdefault(sealed, round_ if isinstance(round_, int) else 0)
        rec.sealed_ids = tuple(dict.fromkeys((*rec.sealed_ids, *_strs(data.get("ids")))))
        seal = Seal.from_json(data)
        if seal is not None and seal.name not in {s.name for s in rec.seals}:
            rec.seals = (*rec.seals, seal)
    elif event == "routed":
        rec.routes = (*rec.routes, data)
    elif event == "remediation":
        batch = str(data.get("batch"))
        rec.remediations[batch] = str(data.get("head"))
        rec.remediated[batch] = _strs(data.get("findings"))
    elif event == "risk":
        rec.risks = (*rec.risks, data)


def _apply_review(rec: CycleRecord, event: str, data: Mapping[str, Any]) -> None:
    """The reviews: a reviewed head, the evidence on it, its publication, the synthesis."""
    if event == "reviewed":
        rec.reviewed_head = str(data.get("head"))
        rec.reviewed_heads = (*rec.reviewed_heads, rec.reviewed_head)
        rec.rewrite_retry = False
        card_hash = data.get("cardHash")
        rec.reviewed_card_hash = str(card_hash) if card_hash else None
        converged = data.get("converged")
        rec.review_converged = converged if isinstance(converged, bool) else None
        blocking = data.get("blocking")
        rec.review_blocking = blocking if isinstance(blocking, int) else 0
    elif event == "rewrite-retry":
        rec.rewrite_retry = not data.get("spent")
    elif event == "evidence":
        rec.evidence = data
    elif event == "review-published":
        rec.review_published = str(data.get("head"))
    elif event == "synthesis":
        rec.synthesis_head = str(data.get("head")) if data.get("confirmed") else None


def _apply_scope(rec: CycleRecord, event: str, data: Mapping[str, Any]) -> None:
    """The maintainer's scope decisions: the packet, each decision once, split cards."""
    if event == "scope-packet":
        rec.scope_baseline_posted = str(data.get("baseline"))
    elif event == "scope-applied":
        ref = str(data.get("ref"))
        if ref not in rec.applied_refs:
            rec.applied_refs = (*rec.applied_refs, ref)
            items = data.get("dispositions")
            if isinstance(items, list):
                rec.dispositions = (
                    *rec.dispositions,
                    *(i for i in items if isinstance(i, Mapping)),
                )
            epoch = data.get("scopeEpoch")
            rec.scope_epoch = epoch if isinstance(epoch, int) else rec.scope_epoch
    elif event == "scope-card":
        number = data.get("number")
        if isinstance(number, int):
            rec.split_cards[str(data.get("proposal"))] = number


def _apply_shown(rec: CycleRecord, event: str, data: Mapping[str, Any]) -> None:
    """What the hosts show: the `pr-state:*` label and the tracking comment."""
    if event == "label":
        rec.label = str(data.get("state"))
        rec.label_pr = data.get("pr") if isinstance(data.get("pr"), int) else None
    elif event == "tracking":
        digest = data.get("digest")  # null: the comment was rewritten by someone else
        rec.tracking_digest = str(digest) if digest is not None else None
        if data.get("status"):
            rec.shown_status = str(data["status"])
            rec.shown_next = str(data["next"]) if data.get("next") else None
            rec.shown_why = str(data.get("why") or "")


_Reader = Callable[[CycleRecord, str, Mapping[str, Any]], None]
_GROUPS: tuple[tuple[_Reader, tuple[str, ...]], ...] = (
    (
        _apply_run,
        (
            "bound",
            "snapshot",
            "hosts",
            "merge-approved",
            "merged",
            "abandoned",
            "interrupted",
            "resumed",
            "command",
        ),
    ),
    (
        _apply_work,
        ("pushed", "pr", "pr-closed", "red-contract", "sealed", "routed", "remediation", "risk"),
    ),
    (
        _apply_review,
        ("reviewed", "rewrite-retry", "evidence", "review-published", "synthesis"),
    ),
    (_apply_scope, ("scope-packet", "scope-applied", "scope-card")),
    (_apply_shown, ("label", "tracking")),
)
# Which group reads each event; an event no group names (a newer writer's) is skipped.
_READERS: dict[str, _Reader] = {event: reader for reader, events in _GROUPS for event in events}
