"""What the console reads from the store: the run log with filters, one run's
transcript, the fleet (the monitor's last poll, as `fleet-agent fleet` shows
it; else as the newest run saw it), the business on the Snark Market in
market mode (starter/views/market.py), and the last 24 h for the plot.

Synchronous reads (the app runs them in a thread), each through the same
functions as the CLI's `runs`, `show-run` and `session` (starter/views/runlog.py,
starter/views/session.py) or the store's read classes; `open_store` turns a
missing or unreadable store into a `CliError`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal, get_args

from pydantic import ValidationError
from sqlalchemy.exc import SQLAlchemyError

from fleet_agent.demand.point import DemandPoint
from fleet_agent.fleet.snapshot import FleetInstance
from fleet_agent.llm.transcript import CONTEXT_SEQ
from fleet_agent.market.point import MarketPoint
from fleet_agent.models import RunStatus, TriggerKind
from fleet_agent.store import (
    DemandHistory,
    MessageRecord,
    RunRecord,
    SpendHour,
    Store,
    SummaryRecord,
    TrendReads,
)
from fleet_agent.store.run_fleets import FleetPoint, fleet_point, fleet_rows
from starter.agent_client import CliError
from starter.views.fleet import FleetView, read_fleet_view
from starter.views.market import market_of, market_series
from starter.views.runlog import open_store, read_run, read_runs
from starter.views.session import read_summary_of_run

__all__ = [
    "FILTERS",
    "FleetSeen",
    "MarketNow",
    "RunFilter",
    "RunNotFound",
    "RunView",
    "Trend",
    "fleet_now",
    "fleet_seen",
    "market_json",
    "market_now",
    "read_trend",
    "recent_messages",
    "run_log",
    "run_view",
]

RunFilter = Literal["all", "acted", "errors", "human", "in-prompt", "skipped"]
FILTERS: tuple[RunFilter, ...] = get_args(RunFilter)
TREND_WINDOW = timedelta(hours=24)
log = logging.getLogger("fleet_agent.console")


def _keeps(run: RunRecord, which: RunFilter) -> bool:
    if which == "acted":
        return run.verdict is not None and run.verdict.action
    if which == "errors":
        return bool(run.error or run.verdict_error) or run.status == RunStatus.FAILED
    if which == "human":
        return any(t.kind == TriggerKind.HUMAN_MESSAGE for t in run.triggers)
    if which == "in-prompt":
        return run.in_prompt
    if which == "skipped":
        return not run.in_prompt
    return True


def run_log(agent_id: str, which: RunFilter, limit: int) -> list[RunRecord]:
    """The newest `limit` records (replays included) that pass the filter,
    newest first. Filters apply to the newest `limit` records, as `runs --limit`."""
    runs = read_runs(agent_id, limit, None)
    return [r for r in reversed(runs) if _keeps(r, which)]


def recent_messages(agent_id: str, count: int = 5) -> list[tuple[str, RunRecord]]:
    """The operator's last `count` messages that a run took in, each with that
    run (newest first): the chat's history when the page loads."""
    found: list[tuple[str, RunRecord]] = []
    for run in reversed(read_runs(agent_id, 50, None)):
        texts = [t.text for t in run.triggers if t.kind == TriggerKind.HUMAN_MESSAGE]
        found += [(text, run) for text in reversed(texts)]
    return found[:count]


@dataclass(frozen=True)
class RunView:
    """One attempt of a run, every attempt, its messages, and its summary."""

    record: RunRecord
    attempts: list[RunRecord]
    messages: list[MessageRecord]
    summary: SummaryRecord | None


class RunNotFound(CliError):
    """The store has no such run, or no such attempt of it."""


def run_view(agent_id: str, run: int, attempt: int | None) -> RunView:
    """`show-run`'s reads; an unknown run or attempt is a `RunNotFound`, an
    unreadable store a `CliError`."""
    try:
        record, attempts, messages = read_run(agent_id, run, attempt)
    except CliError as exc:
        # read_run's two "not there" messages; anything else is the store's trouble.
        if str(exc).startswith((f"agent {agent_id!r} has no run", f"run {run} of agent")):
            raise RunNotFound(str(exc)) from None
        raise
    return RunView(record, attempts, messages, read_summary_of_run(agent_id, run))


@dataclass(frozen=True)
class FleetSeen:
    """The fleet in the context message of the newest run: its totals and rows."""

    run: int
    at: datetime
    point: FleetPoint | None
    instances: list[FleetInstance] | None


#: Runs looked at, newest first, for one whose context is written.
_SEEN_RUNS = 3


def fleet_seen(agent_id: str) -> FleetSeen | None:
    """The fleet as the newest run that has read it saw it at its start; None
    before any run. A run that has just begun has not written its context
    yet: the one before it stands in (else the page showed no fleet at the
    start of every run)."""
    store = open_store()
    try:
        newest = store.run_reads.list_runs(agent_id, limit=_SEEN_RUNS)
        if not newest:
            return None
        run, message = newest[0].run, None
        for record in newest:
            message = store.messages.get_message(agent_id, record.run, CONTEXT_SEQ)
            if message is not None:
                run = record.run
                break
    except SQLAlchemyError as exc:
        raise CliError(f"cannot read the run log ({store!r}): {str(exc).splitlines()[0]}") from None
    finally:
        store.dispose()
    if message is None:
        return FleetSeen(run, newest[0].started_at, None, None)
    return FleetSeen(
        run,
        message.created_at,
        fleet_point(message.content, message.created_at, run),
        fleet_rows(message.content),
    )


def fleet_now(agent_id: str) -> FleetView:
    """`fleet-agent fleet`'s view: the monitor's last poll and the spend ledger."""
    store = open_store()
    try:
        return read_fleet_view(store, agent_id)
    finally:
        store.dispose()


@dataclass(frozen=True)
class MarketNow:
    """Whether the agent sells on the Snark Market (its last known config)
    and, if so, its latest point (None: no reading yet)."""

    mode: bool
    point: MarketPoint | None


def market_now(agent_id: str) -> MarketNow:
    """The business as `fleet-agent fleet` shows it under the fleet."""
    store = open_store()
    try:
        return MarketNow(*market_of(store, agent_id))
    finally:
        store.dispose()


def _market_row(p: MarketPoint) -> dict[str, object]:
    """One point of the JSON's series: the plotted figures, no ledger ids."""
    return {
        "at": p.at.isoformat(),
        "slots_total": p.slots_total,
        "slots_used": p.slots_used,
        "gpus": p.gpus,
        "challenges": p.ledger.challenges,
        "price_nfil": p.price_nfil,
        "market_price_nfil": p.market_price_nfil,
        "enabled": p.enabled,
        "queued": p.queued,
        "rows_open": p.rows_open,
        "revenue_nfil_per_h": p.revenue_nfil_per_h,
        "revenue_usd_per_h": p.revenue_usd_per_h,
        "cost_usd_per_h": p.cost_usd_per_h,
        "profit_usd_per_h": p.profit_usd_per_h,
    }


def market_json(agent_id: str, now: datetime | None = None) -> dict[str, object]:
    """`/api/market`: the mode, the latest point whole (its `line` too) and
    the last 24 h's points as the plot draws them; with the market off, the
    mode alone and nothing else read."""
    end = now or datetime.now(UTC)
    store = open_store()
    try:
        mode, latest = market_of(store, agent_id)
        series = market_series(store, agent_id, end - TREND_WINDOW, end) if mode else []
    finally:
        store.dispose()
    return {
        "agent_id": agent_id,
        "market_mode": "snark" if mode else "off",
        "latest": None if latest is None else latest.model_dump(mode="json"),
        "line": None if latest is None else latest.line(),
        "age_seconds": None if latest is None else round((end - latest.at).total_seconds(), 1),
        "series": [_market_row(p) for p in series],
    }


def _demand_series(
    store: Store, agent_id: str, start: datetime, end: datetime
) -> list[DemandPoint]:
    """The demand readings in [start, end]; a row that no longer parses
    leaves the plot without demand (logged), never without the fleet."""
    try:
        series = DemandHistory(store).series(agent_id, start)
    except ValidationError as exc:
        log.warning("demand history of %s unreadable: %s", agent_id, exc)
        return []
    return [p for p in series if p.at <= end]


@dataclass(frozen=True)
class Trend:
    """The last 24 h: the fleet at each run's start, spend per hour, the
    monitor's readings of demand (none outside demand mode) and of the
    business on the Snark Market (none outside market mode)."""

    start: datetime
    end: datetime
    points: list[FleetPoint] = field(default_factory=list)
    hours: list[SpendHour] = field(default_factory=list)
    demand: list[DemandPoint] = field(default_factory=list)
    market: list[MarketPoint] = field(default_factory=list)


def read_trend(agent_id: str, now: datetime | None = None) -> Trend:
    """Capacity and target from each run's context message, $/h from the
    spend ledger's hours, demand from the demand history, the business from
    the market history (market mode only), over the 24 h before `now`."""
    end = now or datetime.now(UTC)
    start = end - TREND_WINDOW
    store = open_store()
    try:
        reads = TrendReads(store)
        messages = reads.context_messages_since(agent_id, start)
        hours = reads.spend_hours_since(agent_id, start)
        demand = _demand_series(store, agent_id, start, end)
        market = market_series(store, agent_id, start, end)
    except SQLAlchemyError as exc:
        raise CliError(f"cannot read the run log ({store!r}): {str(exc).splitlines()[0]}") from None
    finally:
        store.dispose()
    points = [p for m in messages if (p := fleet_point(m.content, m.created_at, m.run))]
    return Trend(start, end, points, hours, demand, market)
