"""The web console: a Starlette app over one agent, server-rendered with Jinja2,
htmx (vendored under static/) for the live parts.

It talks to the agent through the CLI's own `AgentClient` and actions
(starter/actions.py) and reads the store through the CLI's read functions
(starter/console/data.py): no second way to reach the agent. Pages:
`/` (status, chat, trigger and reset, approvals, wakes, fleet, 24 h plot),
`/runs` (the run log, with filters), `/runs/N` (a run's transcript) and
`/approvals/ID` (one pending approval, for a phone: what notifications link to);
and `/api/market`, the business on the Snark Market as JSON (market mode).

Who may use it and as whom is starter/console/auth.py's; every action is
recorded as the request's identity, never as text from the form.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any, NamedTuple

from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from fleet_agent.models import AgentStatus, SpendSummary
from starter import actions
from starter.agent_client import AgentClient
from starter.answers import send_message
from starter.console.auth import TokenGate
from starter.console.chart import trend_svg
from starter.console.chat import answer_for
from starter.console.data import (
    FILTERS,
    fleet_now,
    fleet_seen,
    market_json,
    market_now,
    read_trend,
    recent_messages,
    run_log,
    run_view,
)
from starter.console.web import (
    PACKAGE_DIR,
    ConsoleError,
    ConsoleSettings,
    agent_call,
    agent_of,
    bearer_request,
    done,
    fail,
    form_text,
    identity_of,
    in_thread,
    is_htmx,
    page,
    same_origin,
)
from starter.views.demand import stored_demand
from starter.views.fleet import ledger_spend
from starter.views.market import stored_market
from starter.views.market_render import market_rows, market_summary
from starter.views.notify import stored_failures, with_stored_failures
from starter.views.render import demand_text

__all__ = ["create_app"]

log = logging.getLogger("fleet_agent.console")

DEFAULT_LIMIT = 50
MAX_LIMIT = 1000


class _Status(NamedTuple):
    """What the status card shows: the query's answer or why it failed (a
    page still shows the store's parts); the spend: the ledger's as of now,
    else the query's (as of the last run's start); the demand line in
    demand mode ("" in fixed mode); the market's rows in market mode (none
    with the market off)."""

    st: AgentStatus | None
    error: str
    spend: SpendSummary | None
    demand: str
    market: list[tuple[str, str]]


async def _status(agent: AgentClient) -> _Status:
    try:
        status = await agent_call(agent.status())
    except ConsoleError as exc:
        return _Status(None, exc.message, None, "", [])
    ledger = await asyncio.to_thread(ledger_spend, agent.agent_id)
    # The monitor's failed deliveries and its readings of demand and of the
    # market are only in the store.
    failures = await asyncio.to_thread(stored_failures, agent.agent_id)
    demand = ""
    if status.config.target_mode == "demand":
        latest = await asyncio.to_thread(stored_demand, status)
        demand = demand_text(status, latest, datetime.now(UTC))
    market: list[tuple[str, str]] = []
    if status.config.market_mode == "snark":
        point = await asyncio.to_thread(stored_market, status)
        market = market_rows(point, datetime.now(UTC))
    shown = with_stored_failures(status, failures)
    return _Status(shown, "", ledger or status.spend, demand, market)


async def _agent_part(request: Request, **context: Any) -> Response:
    status, error, spend, demand, market = await _status(agent_of(request))
    return page(
        request,
        "_agent.html",
        status=200,
        st=status,
        st_error=error,
        spend=spend,
        demand=demand,
        market=market,
        **context,
    )


async def dashboard(request: Request) -> Response:
    status, error, spend, demand, market = await _status(agent_of(request))
    try:
        history = await in_thread(recent_messages, agent_of(request).agent_id)
    except ConsoleError:  # the fleet part below says what is wrong with the store
        history = []
    return page(
        request,
        "index.html",
        st=status,
        st_error=error,
        spend=spend,
        demand=demand,
        market=market,
        history=history,
    )


async def agent_part(request: Request) -> Response:
    return await _agent_part(request)


async def fleet_part(request: Request) -> Response:
    agent_id = agent_of(request).agent_id
    try:
        view = await in_thread(fleet_now, agent_id)
        # Without a monitor poll (monitor off, or not yet polled): the newest run's view.
        seen = None if view.as_of else await in_thread(fleet_seen, agent_id)
        svg = trend_svg(await in_thread(read_trend, agent_id))
        market = await in_thread(market_now, agent_id)
    except ConsoleError as exc:
        return page(request, "_fleet.html", view=None, seen=None, svg="", store_error=exc.message)
    # As `fleet-agent fleet`'s last line; "" with the market off.
    line = market_summary(market.point, datetime.now(UTC)) if market.mode else ""
    return page(
        request, "_fleet.html", view=view, seen=seen, svg=svg, store_error="", market_line=line
    )


async def market_api(request: Request) -> Response:
    """The business on the Snark Market as JSON, for a script or a dashboard:
    the latest point and the last 24 h's (market mode; else the mode alone)."""
    try:
        body = await in_thread(market_json, agent_of(request).agent_id)
    except ConsoleError as exc:
        return JSONResponse({"error": exc.message}, status_code=exc.status)
    return JSONResponse(body)


async def runs_page(request: Request) -> Response:
    which = request.query_params.get("filter", "all")
    if which not in FILTERS:
        raise ConsoleError(f"unknown filter {which!r}; choose from {', '.join(FILTERS)}")
    limit = _int_param(request, "limit", DEFAULT_LIMIT)
    if not 1 <= limit <= MAX_LIMIT:
        raise ConsoleError(f"limit must be between 1 and {MAX_LIMIT}, not {limit}")
    runs = await in_thread(run_log, agent_of(request).agent_id, which, limit)
    return page(request, "runs.html", runs=runs, which=which, filters=FILTERS, limit=limit)


async def run_page(request: Request) -> Response:
    run = int(request.path_params["run"])
    attempt = request.query_params.get("attempt")
    chosen = _int_param(request, "attempt", 0) if attempt is not None else None
    view = await in_thread(run_view, agent_of(request).agent_id, run, chosen)
    return page(request, "run.html", view=view, run=view.record)


def _int_param(request: Request, name: str, default: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConsoleError(f"{name} must be a whole number, not {raw!r}") from None


async def approval_page(request: Request) -> Response:
    """One pending approval and its approve/deny buttons, on a page of its
    own: what a notification links to (a phone that opened the console once
    with ``?token=`` has the session cookie). Read-only: deciding goes through
    `decide` and its confirmation step."""
    approval_id = str(request.path_params["approval_id"])
    st = await agent_call(agent_of(request).status())
    approval = next((a for a in st.pending_approvals if a.id == approval_id), None)
    waiting = ", ".join(a.id for a in st.pending_approvals)
    return page(
        request, "approval.html", approval=approval, approval_id=approval_id, waiting=waiting
    )


# ---------------------------------------------------------------- actions


async def say(request: Request) -> Response:
    form = await request.form()
    text = form_text(form, "text", required=True)
    assert text is not None
    sent = await agent_call(send_message(agent_of(request), text, identity_of(request)), 400)
    return done(request, "_chat.html", text=text, sent=sent, answer=None)


async def answer_part(request: Request) -> Response:
    message_id = request.query_params.get("id", "")
    text = request.query_params.get("text", "")
    answer = await in_thread(answer_for, agent_of(request).agent_id, message_id)
    return page(request, "_chat.html", text=text, message_id=message_id, answer=answer, sent=None)


async def trigger(request: Request) -> Response:
    form = await request.form()
    started = await agent_call(
        actions.request_trigger(agent_of(request), form_text(form, "reason") or "web console"),
        400,
    )
    note = "agent started; run requested" if started else "run requested"
    return done(request, "_notice.html", message=note, error=False)


async def reset(request: Request) -> Response:
    form = await request.form()
    await agent_call(
        actions.request_reset(agent_of(request), form_text(form, "reason") or "web console"), 400
    )
    message = "reset requested: a new session starts after the current run"
    return done(request, "_notice.html", message=message, error=False)


async def cancel_wake(request: Request) -> Response:
    wake_id = str(request.path_params["wake_id"])
    await agent_call(actions.cancel_wake(agent_of(request), wake_id), 400)
    return await _after_change(request, f"cancelled wake {wake_id}")


async def decide(request: Request) -> Response:
    """Approve or deny in two steps: the first post answers the approval as
    the agent has it ($/h, reason, expiry) with a form to confirm; only a post
    whose ``confirm`` names this approval decides."""
    approval_id = str(request.path_params["approval_id"])
    form = await request.form()
    verdict = form_text(form, "decision", required=True)
    if verdict not in ("approve", "deny"):
        raise ConsoleError(f"decision must be approve or deny, not {verdict!r}")
    note = form_text(form, "note")
    if form_text(form, "confirm") != approval_id:
        return await _confirm(request, approval_id, verdict, note)
    outcome = await agent_call(
        actions.decide_approval(
            agent_of(request), approval_id, verdict == "approve", note, identity_of(request)
        ),
        400,
    )
    said = "approved" if outcome.decision.approve else "denied"
    notice = f"{said} {approval_id}" + (f" (but: {outcome.error})" if outcome.error else "")
    return await _after_change(request, notice, clear_notice=True)


async def _confirm(request: Request, approval_id: str, verdict: str, note: str | None) -> Response:
    """The confirmation step of `decide`: nothing is decided. For htmx a
    fragment in the page's #notice (the status part refreshes every 3 s and
    would wipe it); without JavaScript a page."""
    st = await agent_call(agent_of(request).status())
    approval = next((a for a in st.pending_approvals if a.id == approval_id), None)
    if approval is None:
        waiting = ", ".join(a.id for a in st.pending_approvals) or "none"
        raise ConsoleError(f"no pending approval {approval_id!r} (pending: {waiting})")
    context: dict[str, Any] = {"approval": approval, "verdict": verdict, "note": note or ""}
    if not is_htmx(request):
        return page(request, "confirm.html", **context)
    response = page(request, "_confirm.html", **context)
    response.headers["HX-Retarget"] = "#notice"
    response.headers["HX-Reswap"] = "innerHTML"
    return response


async def _after_change(request: Request, notice: str, *, clear_notice: bool = False) -> Response:
    """The agent part again (its wakes and approvals changed) for htmx; else
    back to the dashboard. `clear_notice`: also empty the page's #notice (where
    a confirmation stood)."""
    if not is_htmx(request):
        return done(request, "_agent.html")
    return await _agent_part(request, notice=notice, clear_notice=clear_notice)


# ---------------------------------------------------------------- app


async def _console_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ConsoleError)
    return fail(request, exc)


async def _not_found(request: Request, exc: Exception) -> Response:
    return fail(request, ConsoleError(f"no page at {request.url.path}", 404))


async def _internal(request: Request, exc: Exception) -> Response:
    # A bug, not an operator's mistake: the traceback goes to the log, the page says where.
    log.error("console: %s %s failed", request.method, request.url.path, exc_info=exc)
    message = f"internal error ({type(exc).__name__}); the console's log has the details"
    return fail(request, ConsoleError(message, 500))


#: No inline or injected script runs (htmx's eval-based features included:
#: static/console.js holds the page's own code), forms post only here, and no
#: other page may frame this one (clickjacking).
CSP = (
    "script-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)


class _NoFraming:
    """Every answer forbids being framed by another page (clickjacking):
    ``X-Frame-Options: DENY`` and CSP ``frame-ancestors 'none'``, with the
    rest of `CSP`. ``Referrer-Policy: same-origin``: a page opened with
    ``?token=`` does not hand its URL to the Web UI link."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def framed(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers["X-Frame-Options"] = "DENY"
                headers["Content-Security-Policy"] = CSP
                headers["Referrer-Policy"] = "same-origin"
            await send(message)

        await self.app(scope, receive, framed)


def _guarded(endpoint: Any) -> Any:
    """Refuse cross-site posts before the endpoint reads anything."""

    async def guarded(request: Request) -> Response:
        allowed = request.app.state.settings.allowed_hosts
        if not same_origin(request.headers, allowed, bearer=bearer_request(request)):
            return fail(request, ConsoleError("cross-site request refused", 403))
        response: Response = await endpoint(request)
        return response

    return guarded


def create_app(agent: AgentClient, settings: ConsoleSettings | None = None) -> Starlette:
    """The console for `agent`; nothing connects until the first request."""
    settings = settings or ConsoleSettings()
    post = ["POST"]
    app = Starlette(
        routes=[
            Route("/", dashboard),
            Route("/runs", runs_page),
            Route("/runs/{run:int}", run_page),
            Route("/parts/agent", agent_part),
            Route("/parts/fleet", fleet_part),
            Route("/parts/answer", answer_part),
            Route("/api/market", market_api),
            Route("/say", _guarded(say), methods=post),
            Route("/trigger", _guarded(trigger), methods=post),
            Route("/reset", _guarded(reset), methods=post),
            Route("/wakes/{wake_id}/cancel", _guarded(cancel_wake), methods=post),
            Route("/approvals/{approval_id}", approval_page),
            Route("/approvals/{approval_id}/decide", _guarded(decide), methods=post),
            Mount("/static", StaticFiles(directory=PACKAGE_DIR / "static"), name="static"),
        ],
        exception_handlers={ConsoleError: _console_error, 404: _not_found, Exception: _internal},
        middleware=[
            # Starlette's own: a request whose Host is not ours gets 400 before
            # any endpoint runs (DNS rebinding), whatever its Origin says.
            Middleware(TrustedHostMiddleware, allowed_hosts=list(settings.allowed_hosts)),
            Middleware(_NoFraming),
            # Then the token (with tokens), before any endpoint or static file.
            Middleware(TokenGate, tokens=settings.tokens, identity=settings.identity),
        ],
    )
    app.state.agent = agent
    app.state.settings = settings
    return app
