"""Which of the App's failed webhook deliveries to ask GitHub for again: a pure decision.

    items  = read_deliveries(json_items)                  GitHub's hook-delivery items, read
    plan   = plan_redeliveries(items, routes, now=…, window_s=…, cap=…)
    plan.redeliver                                        oldest first, at most `cap`

GitHub never redelivers a failed delivery by itself. A command whose delivery the App refused
(a 503 under load, a restart, a store outage) or never saw (the App down) would be lost; the
App's catch-up (`app.web.catchup`) lists its own deliveries and asks for each lost one again.
A delivery is asked for again when all of these hold:

- it is in the window (`delivered_at` within `window_s` of `now`; GitHub keeps 3 days);
- no attempt of its guid succeeded: every attempt (the original and its redeliveries share the
  guid, which is the `X-GitHub-Delivery` the App de-duplicates on) answered outside 2xx, or
  never got an answer (`status_code` 0: GitHub could not connect);
- its newest answer could change: not 400, 413, 415 or 422 (the App's verdicts on the bytes,
  which a redelivery repeats exactly);
- its (event, action) is one the App acts on (`app.web.events.GITHUB_ROUTES`);
- its guid has had fewer than `max_attempts` attempts, so a delivery that keeps failing is
  asked for a bounded number of times, not every pass for three days;
- it is not awaiting a redelivery already asked for: GitHub accepts a redelivery (202) and
  sends it afterwards, so until the new attempt is listed the newest attempt is still the one
  asked for (`asked`: attempt id → when it was asked); after `pending_s` without a new attempt
  it is asked for again.

Each guid is asked for once per pass (its newest attempt's id), oldest first, at most `cap` per
pass (the rest wait for the next pass: GitHub's rate limit is shared with everything the App
does). An item missing what the decision needs is skipped and counted, never a failure.
No I/O, no clock (`now` is given).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

__all__ = [
    "DEFAULT_MAX_ATTEMPTS",
    "FINAL_STATUSES",
    "GITHUB_KEEPS_S",
    "PENDING_S",
    "HookDelivery",
    "Plan",
    "plan_redeliveries",
    "read_deliveries",
]

# GitHub keeps a hook's deliveries for 3 days; older ones cannot be redelivered.
GITHUB_KEEPS_S: Final = 3 * 24 * 3600.0
# Answers about the delivery's bytes themselves: a redelivery sends the same bytes.
FINAL_STATUSES: Final = frozenset({400, 413, 415, 422})
DEFAULT_MAX_ATTEMPTS: Final = 5
# How long an accepted redelivery may take to show up as a new attempt before it is asked for
# again. GitHub documents no bound; a redelivery to an App that is up lands in seconds, and ten
# minutes covers an App busy under the very flood that made it refuse.
PENDING_S: Final = 600.0

Route = tuple[str, str | None]


@dataclass(frozen=True)
class HookDelivery:
    """One attempt at delivering one webhook, as GitHub lists it."""

    id: int
    guid: str
    delivered_at: float  # epoch seconds
    redelivery: bool
    status_code: int  # 0: no HTTP answer (GitHub could not connect, or timed out)
    event: str
    action: str | None
    installation_id: int | None = None
    repository_id: int | None = None

    @property
    def succeeded(self) -> bool:
        return 200 <= self.status_code < 300


@dataclass(frozen=True)
class Plan:
    """What one pass does: `redeliver`, and why the others are left (counts, for its log)."""

    redeliver: tuple[HookDelivery, ...]
    failed: int = 0  # guids with no successful attempt in the window
    not_ours: int = 0  # failed, of an event the App does not act on
    final: int = 0  # failed with an answer a redelivery would repeat
    exhausted: int = 0  # failed `max_attempts` times already
    pending: int = 0  # redelivery asked for and accepted, its attempt not listed yet
    deferred: int = 0  # over this pass's cap: the next pass takes them


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _when(value: Any) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.timestamp() if moment.tzinfo is not None else None


def read_deliveries(items: Iterable[Any]) -> tuple[list[HookDelivery], int]:
    """GitHub's hook-delivery items → `HookDelivery`s, and how many were unreadable. Pure."""
    read: list[HookDelivery] = []
    unreadable = 0
    for item in items:
        data: Mapping[str, Any] = item if isinstance(item, Mapping) else {}
        ident, guid, event = _int(data.get("id")), data.get("guid"), data.get("event")
        when = _when(data.get("delivered_at"))
        status = data.get("status_code")
        action = data.get("action")
        if (
            ident is None
            or ident < 1
            or not isinstance(guid, str)
            or not guid
            or not isinstance(event, str)
            or when is None
        ):
            unreadable += 1
            continue
        read.append(
            HookDelivery(
                id=ident,
                guid=guid,
                delivered_at=when,
                redelivery=data.get("redelivery") is True,
                status_code=_int(status) or 0,
                event=event,
                action=action if isinstance(action, str) and action else None,
                installation_id=_int(data.get("installation_id")),
                repository_id=_int(data.get("repository_id")),
            )
        )
    return read, unreadable


def plan_redeliveries(
    deliveries: Iterable[HookDelivery],
    routes: Collection[Route],
    *,
    now: float,
    window_s: float = GITHUB_KEEPS_S,
    cap: int = 20,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    asked: Mapping[int, float] | None = None,
    pending_s: float = PENDING_S,
) -> Plan:
    """The deliveries to ask for again, oldest first (see the module docstring). Pure."""
    since = now - min(window_s, GITHUB_KEEPS_S)
    attempts: dict[str, list[HookDelivery]] = {}
    for delivery in deliveries:
        if delivery.delivered_at >= since:
            attempts.setdefault(delivery.guid, []).append(delivery)
    wanted: list[HookDelivery] = []
    failed = not_ours = final = exhausted = pending = 0
    asked = asked or {}
    for tries in attempts.values():
        if any(attempt.succeeded for attempt in tries):
            continue
        failed += 1
        newest = max(tries, key=lambda attempt: (attempt.delivered_at, attempt.id))
        if (newest.event, newest.action) not in routes:
            not_ours += 1
        elif newest.status_code in FINAL_STATUSES:
            final += 1
        elif len(tries) >= max_attempts:
            exhausted += 1
        elif newest.id in asked and now - asked[newest.id] < pending_s:
            pending += 1
        else:
            wanted.append(newest)
    oldest = {guid: min(a.delivered_at for a in tries) for guid, tries in attempts.items()}
    wanted.sort(key=lambda d: (oldest[d.guid], d.id))  # commands in the order they were made
    return Plan(
        redeliver=tuple(wanted[: max(cap, 0)]),
        failed=failed,
        not_ours=not_ours,
        final=final,
        exhausted=exhausted,
        pending=pending,
        deferred=max(len(wanted) - max(cap, 0), 0),
    )
