"""The status pages' routes: HTML pages, the live card fragment, `/api/v1/…`, the retry control.

    GET  /                              cards overview (?repo=…&state=…)
    GET  /cards/{repo}/{n}              one card's cycle; /fragment is its live part, and
                                        /stream the same as server-sent events
    GET  /batches                       batches: phases, changes, gates, proofs-of-work
    GET  /jobs                          operator view: jobs, failed first, with a retry control
    POST /cards/{repo}/{n}/commands     a signed-in writer's `/pair approve|answer|implement|
                                        retry`, queued as their comment would be (actions.py)
    POST /jobs/{id}/retry               operators only: queue a failed job again
    GET  /api/v1/cards[/{repo}/{n}]     the same view-model as JSON
    GET  /api/v1/batches, /api/v1/jobs
    GET  /api/v1/cohort                 `pairbot report cohort --json` over the readable cards
    GET  /static/…                      the stylesheet and the script

Every route asks `viewer_of(request)` who is looking and shows only the repositories that
viewer can read (a card or job of another repository answers 404, as if it did not exist).
The shell is thin: it reads the store and the run-state (in a worker thread) and hands them to
`app.web.pages.model`, whose values (`app.web.pages.views`) both the HTML and the JSON are
rendered from. Under `execution: actions` the run-state of the repositories the viewer can read
also comes from their `pair-state` branches (`app.web.pages.remote_state`, bounded per view).

The live part of a card's page comes as server-sent events (`text/event-stream`): a
`fragment` event carries the part's HTML whenever it changed (looked at every `live_s`), a
comment keeps the connection alive, and the stream ends after `stream_s` (the browser
reconnects by itself, and its sign-in is checked again). An open stream holds a connection,
so at most `max_streams` are open at once; past that the stream answers 503 and the page's
script polls `/fragment` instead, as it does in a browser without EventSource.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from app.domain.reports.cohort import Cohort
from app.store.base import Store
from app.web.dashboard import BatchView
from app.web.pages import html
from app.web.pages.actions import BUTTONS, Commands, Refused, offered, read_answer
from app.web.pages.model import job_views, overview
from app.web.pages.read import Local, card_views, cohort_of_local, with_remote
from app.web.pages.remote_state import RemoteState
from app.web.pages.views import CardView
from app.web.viewer import Viewer, viewer_of

STATIC = Path(__file__).resolve().parent.parent / "static"
CSRF_KEY = "pairbot.csrf"  # the sign-in layer puts the form token here
# Scripts and styles come from this origin only: no inline script, style or handler runs.
PAGE_HEADERS: Mapping[str, str] = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
_API_HEADERS: Mapping[str, str] = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}
KEEP_ALIVE_S = 15.0  # a comment on a quiet stream, so proxies do not close it as idle


def sse(event: str, data: str) -> str:
    """One server-sent event; every line of `data` is a `data:` line (the browser joins them)."""
    lines = "".join(f"data: {line}\n" for line in data.split("\n"))
    return f"event: {event}\n{lines}\n"


class Pages:
    """The routes' shared parts: the store, the run-state reader and the worker's wake-up."""

    def __init__(
        self,
        store: Store,
        *,
        local: Callable[[], Local] | None,
        root_repo: str,
        clock: Callable[[], float],
        wake: Callable[[], None],
        remote: RemoteState | None = None,
        commands: Commands | None = None,
    ) -> None:
        self.store = store
        self.commands = commands  # None: the pages only show (no button acts)
        self.local = local
        self.remote = remote  # the `pair-state` branches of the installed repositories
        self.root_repo = root_repo
        self.clock = clock
        self.wake = wake
        self.live_s = float(html.LIVE_S)  # how often a stream looks for a change
        self.stream_s = 60.0  # how long one stream lasts before the browser reconnects
        self.max_streams = 32
        self.streams = 0  # open now

    async def _local(self, readable: Callable[[str], bool] | None = None) -> Local:
        """This machine's run-state; with `readable`, and the cards on the `pair-state` of
        every repository it admits (read again within the bounds of `RemoteState`)."""
        local = await asyncio.to_thread(self.local) if self.local is not None else Local()
        if self.remote is None or readable is None:
            return local
        return with_remote(local, await self.remote.cards(readable))

    async def _cards(self, local: Local) -> list[CardView]:
        return card_views(local, await self.store.jobs(500), self.root_repo)

    async def _card(self, request: Request) -> CardView | None:
        viewer = viewer_of(request)
        repo, number = str(request.path_params["repo"]), int(request.path_params["number"])
        if not viewer.can_read(repo):
            return None
        # A card's page reads its own repository's pair-state only.
        local = await self._local(lambda r: r.lower() == repo.lower())
        for card in await self._cards(local):
            if card.number == number and card.repo.lower() == repo.lower():
                return card
        return None

    def _batches(self, local: Local, viewer: Viewer) -> list[BatchView]:
        return [b for b in local.batches if viewer.can_read(b.checkout or self.root_repo)]

    # -- pages ------------------------------------------------------------------------------

    async def _cohort(self, viewer: Viewer, local: Local | None = None) -> Cohort:
        local = local if local is not None else await self._local(viewer.can_read)
        return cohort_of_local(local, viewer, self.root_repo)

    async def overview_page(self, request: Request) -> Response:
        viewer = viewer_of(request)
        # Once: the cards and the cohort read the same run-state.
        local = await self._local(viewer.can_read)
        view = overview(await self._cards(local), viewer, **_filters(request))
        return _page(html.overview_page(view, viewer, await self._cohort(viewer, local)))

    async def card_page(self, request: Request) -> Response:
        card = await self._card(request)
        if card is None:
            return _not_found(request)
        viewer = viewer_of(request)
        return _page(html.card_page(card, viewer, await self._controls(request, card)))

    async def _controls(self, request: Request, card: CardView) -> str:
        """The card page's buttons (or why this viewer has none); "" where none apply."""
        verbs = offered(card)
        if self.commands is None or not verbs:
            return ""
        viewer = viewer_of(request)
        refusal = await self.commands.may_act(viewer, card.repo)
        queued = request.query_params.get("queued", "")
        return html.act_section(
            card,
            verbs,
            csrf=str(request.scope.get(CSRF_KEY, "")),
            trigger=self.commands.trigger,
            refusal=refusal.text if refusal is not None else "",
            queued=queued if queued in BUTTONS else "",
        )

    async def card_command(self, request: Request) -> Response:
        """One of the card's buttons: checked as the page offered it, authorized as a comment
        is, queued as the comment's job (app.web.pages.actions). The sign-in layer has checked
        the CSRF token and the Origin already."""
        card = await self._card(request)
        if card is None or self.commands is None:
            return _not_found(request)
        form = parse_qs((await request.body()).decode("utf-8", "replace"))
        chosen = (form.get("verb") or [""])[0]
        verb = next((v for v in BUTTONS if v == chosen), None)
        trigger = self.commands.trigger
        if verb is None:
            allowed = ", ".join(BUTTONS)
            return _refused(
                request, 400, f"{chosen!r} is not a command this page sends; allowed: {allowed}."
            )
        if verb not in offered(card):
            now = "; ".join(card.actions) or "nothing"
            return _refused(
                request,
                409,
                f"Card #{card.number} is {card.status}: /{trigger} {verb} does not apply to it "
                f"now. What applies: {now}.",
            )
        text: str | None = None
        if verb == "answer":
            read = read_answer((form.get("text") or [""])[0])
            if isinstance(read, Refused):
                return _refused(request, read.status, read.text)
            text = read
        viewer = viewer_of(request)
        refusal = await self.commands.may_act(viewer, card.repo)
        if refusal is not None:
            return _refused(request, refusal.status, refusal.text)
        await self.commands.queue(viewer, card, verb, text)
        self.wake()
        return RedirectResponse(
            f"{html.card_path(card.repo, card.number)}?queued={verb}", status_code=303
        )

    async def card_fragment(self, request: Request) -> Response:
        card = await self._card(request)
        if card is None:
            return _not_found(request)
        return HTMLResponse(html.steps_fragment(card), headers=dict(PAGE_HEADERS))

    async def card_stream(self, request: Request) -> Response:
        """The live part as server-sent events (see the module docstring)."""
        if await self._card(request) is None:
            return _not_found(request)
        if self.streams >= self.max_streams:
            return PlainTextResponse(
                f"{self.streams} live streams are open, the most this server keeps: "
                "poll the fragment instead",
                status_code=503,
                headers={**PAGE_HEADERS, "Retry-After": str(max(1, int(self.stream_s)))},
            )
        headers = {**PAGE_HEADERS, "X-Accel-Buffering": "no"}  # a proxy must not hold events
        return StreamingResponse(
            self._events(request), media_type="text/event-stream", headers=headers
        )

    async def _events(self, request: Request) -> AsyncIterator[str]:
        self.streams += 1
        try:
            yield f"retry: {int(self.live_s * 1000)}\n\n"
            began, shown, quiet = self.clock(), "", 0.0
            while True:
                card = await self._card(request)
                if card is None:  # gone (or no longer readable): the page stops listening
                    yield sse("gone", "")
                    return
                body = html.steps_fragment(card)
                if body != shown:
                    shown, quiet = body, 0.0
                    yield sse("fragment", body)
                elif quiet >= KEEP_ALIVE_S:
                    quiet = 0.0
                    yield ": still here\n\n"
                if self.clock() - began >= self.stream_s:
                    return  # the browser reconnects after `retry`
                await asyncio.sleep(self.live_s)
                quiet += self.live_s
        finally:
            self.streams -= 1

    async def batches_page(self, request: Request) -> Response:
        viewer = viewer_of(request)
        return _page(html.batches_page(self._batches(await self._local(), viewer), viewer))

    async def jobs_page(self, request: Request) -> Response:
        viewer = viewer_of(request)
        jobs = job_views(await self.store.jobs(500), viewer, self.clock())
        csrf = str(request.scope.get(CSRF_KEY, ""))
        operator = viewer.operator
        return _page(
            html.jobs_page(
                jobs,
                viewer,
                csrf,
                installations=await self.store.installations() if operator else (),
                deliveries=await self.store.deliveries(50) if operator else (),
            )
        )

    async def retry(self, request: Request) -> Response:
        """Queue a failed job again (operators only); anything else is refused with why."""
        viewer = viewer_of(request)
        if not viewer.operator:
            return _refused(request, 403, "Only an operator can retry a job.")
        job = await self.store.job(int(request.path_params["id"]))
        if job is None or not viewer.can_read(job.repo):
            return _not_found(request)
        if job.state != "failed":
            return _refused(
                request, 409, f"Job {job.id} is {job.state}; only a failed job retries."
            )
        await self.store.retry_later(job.id, 0.0, f"retried by an operator; was: {job.result}")
        self.wake()
        return RedirectResponse("/jobs", status_code=303)

    # -- the JSON API -------------------------------------------------------------------------

    async def api_cards(self, request: Request) -> Response:
        viewer = viewer_of(request)
        local = await self._local(viewer.can_read)
        view = overview(await self._cards(local), viewer, **_filters(request))
        return _json(
            {
                "cards": [c.to_json() for c in view.cards],
                "filters": {"repo": view.repo, "state": view.state},
                "repos": list(view.repos),
                "states": list(view.states),
            }
        )

    async def api_card(self, request: Request) -> Response:
        card = await self._card(request)
        if card is None:
            return JSONResponse({"error": "no such card you can read"}, status_code=404)
        return _json({"card": card.to_json(detail=True)})

    async def api_cohort(self, request: Request) -> Response:
        return _json({"cohort": (await self._cohort(viewer_of(request))).to_json()})

    async def api_batches(self, request: Request) -> Response:
        batches = self._batches(await self._local(), viewer_of(request))
        return _json({"batches": [asdict(b) for b in batches]})

    async def api_jobs(self, request: Request) -> Response:
        viewer = viewer_of(request)
        jobs = job_views(await self.store.jobs(500), viewer, self.clock())
        data: dict[str, Any] = {"jobs": [j.to_json() for j in jobs]}
        if viewer.operator:  # accounts and deliveries of every repository: operators only
            data["installations"] = [asdict(i) for i in await self.store.installations()]
            data["deliveries"] = [asdict(d) for d in await self.store.deliveries(50)]
        return _json(data)

    def routes(self) -> Sequence[BaseRoute]:
        card = "/cards/{repo:path}/{number:int}"
        return [
            Route("/", self.overview_page, methods=["GET"]),
            Route(card + "/fragment", self.card_fragment, methods=["GET"]),
            Route(card + "/stream", self.card_stream, methods=["GET"]),
            Route(card, self.card_page, methods=["GET"]),
            Route(card + "/commands", self.card_command, methods=["POST"]),
            Route("/batches", self.batches_page, methods=["GET"]),
            Route("/jobs", self.jobs_page, methods=["GET"]),
            Route("/jobs/{id:int}/retry", self.retry, methods=["POST"]),
            Route("/api/v1/cards", self.api_cards, methods=["GET"]),
            Route("/api/v1" + card, self.api_card, methods=["GET"]),
            Route("/api/v1/batches", self.api_batches, methods=["GET"]),
            Route("/api/v1/cohort", self.api_cohort, methods=["GET"]),
            Route("/api/v1/jobs", self.api_jobs, methods=["GET"]),
            Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
        ]


def _filters(request: Request) -> dict[str, str]:
    return {
        "repo": request.query_params.get("repo", "").strip(),
        "state": request.query_params.get("state", "").strip(),
    }


def _page(body: str, status: int = 200) -> Response:
    return HTMLResponse(body, status_code=status, headers=dict(PAGE_HEADERS))


def _json(data: Mapping[str, Any]) -> Response:
    return JSONResponse({"apiVersion": 1, **data}, headers=dict(_API_HEADERS))


def _not_found(request: Request) -> Response:
    text = "No such card or job, or not one you can read."
    return _refused(request, 404, text)


def _refused(request: Request, status: int, text: str) -> Response:
    titles = {
        400: "Not understood",
        403: "Not allowed",
        404: "Not found",
        409: "Not now",
        503: "Try again",
    }
    return _page(html.message_page(titles.get(status, "Refused"), text, viewer_of(request)), status)
