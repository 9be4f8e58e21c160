"""Our own Prometheus metrics, recorded from the workflows.

`workflow.metric_meter()` is replay-safe: the SDK drops what a replayed
workflow task records, so a metric counts each event once however often a
workflow is replayed (a worker restart, a cache eviction). Recording emits no
command: these calls change nothing in any history.

Labels: `agent_id`, plus small closed sets (status, acted, trigger kind, tool,
token kind). Never a secret, a text, or anything unbounded. The SDK adds
`namespace`, `task_queue` and `workflow_type`. docs/operations/watch.md lists them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from temporalio import workflow
from temporalio.common import MetricMeter

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models only.
    from fleet_agent.demand.point import DemandPoint
    from fleet_agent.fleet.snapshot import FleetSnapshot
    from fleet_agent.llm.verdict import acted
    from fleet_agent.market.point import MarketPoint
    from fleet_agent.models import AgentState, Phase, RunResult, ToolResult, Trigger, TriggerKind

__all__ = [
    "record_agent_state",
    "record_demand",
    "record_fleet",
    "record_market",
    "record_run_finished",
    "record_run_started",
    "record_tool_results",
]

_OPERATOR_KINDS = frozenset({TriggerKind.HUMAN_MESSAGE, TriggerKind.TRIGGER_NOW})
# Token kinds as the Messages API counts them (TokenUsage's fields).
_TOKEN_KINDS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)


def _meter(agent_id: str) -> MetricMeter:
    return workflow.metric_meter().with_additional_attributes({"agent_id": agent_id})


def record_run_started(agent_id: str, triggers: Sequence[Trigger], now: datetime) -> None:
    """Triggers taken by a run, by kind, and the P0 latency of each operator
    trigger (human_message, trigger_now): received → the run that takes it
    starts, the debounce included. A due wake is P0 too, but it becomes a
    trigger only as its run starts: its latency would always be 0."""
    meter = _meter(agent_id)
    taken = meter.create_counter(
        "fleet_run_triggers", "Triggers taken by runs, by kind (coalesced ones counted whole)"
    )
    latency = meter.create_histogram_float(
        "fleet_p0_latency_seconds",
        "Seconds from an operator's trigger (human_message, trigger_now) to the start of its run",
        "s",
    )
    for t in triggers:
        taken.add(t.count, {"kind": t.kind.value})
        if t.kind in _OPERATOR_KINDS:
            latency.record(max(0.0, (now - t.received_at).total_seconds()))


def record_run_finished(agent_id: str, result: RunResult) -> None:
    """A run ended: by status and whether it acted, its duration, its tokens."""
    meter = _meter(agent_id)
    meter.create_counter("fleet_runs_finished", "Runs that ended, by status and verdict").add(
        1,
        {
            "status": result.status.value,
            "acted": "true" if acted(result) else "false",
            "noop": "true" if result.noop else "false",
        },
    )
    if result.started_at is not None and result.ended_at is not None:
        meter.create_histogram_float(
            "fleet_run_duration_seconds", "Seconds from a run's start to its end", "s"
        ).record(max(0.0, (result.ended_at - result.started_at).total_seconds()))
    tokens = meter.create_counter("fleet_llm_tokens", "LLM tokens, by kind (Messages API usage)")
    for kind in _TOKEN_KINDS:
        value = getattr(result.usage, kind)
        if value:
            tokens.add(value, {"kind": kind})


def record_tool_results(agent_id: str, results: Sequence[ToolResult]) -> None:
    """Tool calls by tool and outcome; `error` counts guardrail refusals, bad
    inputs, vast.ai refusals and failures alike (the model gets them all as
    error results)."""
    counter = _meter(agent_id).create_counter("fleet_tool_calls", "Tool calls, by tool and outcome")
    for r in results:
        outcome = "not_run" if r.not_run else "error" if r.is_error else "ok"
        counter.add(1, {"tool": r.name, "outcome": outcome})


def record_agent_state(agent_id: str, state: AgentState, phase: Phase) -> None:
    """Gauges of the agent: what waits, wakes, approvals, frozen, target, spend."""
    meter = _meter(agent_id)
    meter.create_gauge("fleet_pending_triggers", "Triggers waiting for a run").set(
        sum(t.count for t in state.pending_triggers)
    )
    meter.create_gauge("fleet_wakes", "Wakes scheduled").set(len(state.wakes))
    meter.create_gauge("fleet_pending_approvals", "Approvals waiting for an operator").set(
        len(state.pending_approvals)
    )
    meter.create_gauge("fleet_frozen", "1 while the agent is frozen (the kill switch)").set(
        1 if state.config.frozen else 0
    )
    meter.create_gauge("fleet_paused", "1 while the agent is paused").set(
        1 if state.config.paused else 0
    )
    meter.create_gauge("fleet_running", "1 while a run is in flight").set(
        1 if phase == Phase.RUNNING else 0
    )
    meter.create_gauge_float("fleet_target_proofs_per_hour", "The target capacity").set(
        state.config.target_proofs_per_hour
    )
    meter.create_gauge("fleet_runs_total", "The agent's run counter (never reset)").set(
        state.run_count
    )
    if state.spend is not None:
        meter.create_gauge_float(
            "fleet_spend_today_usd", "Fleet spend today (UTC) as of the last run", "USD"
        ).set(state.spend.today_usd)


def record_fleet(agent_id: str, snap: FleetSnapshot) -> None:
    """Gauges of one monitor poll: capacity measured and expected, target, $/h."""
    if snap.error:
        return
    meter = _meter(agent_id)
    meter.create_gauge_float(
        "fleet_capacity_proofs_per_hour", "Proofs/h of the running machines (measured)"
    ).set(snap.capacity_proofs_per_hour)
    meter.create_gauge_float(
        "fleet_expected_proofs_per_hour", "Proofs/h once the loading machines are up"
    ).set(snap.expected_proofs_per_hour)
    meter.create_gauge_float("fleet_dph_usd", "The fleet's $/hour now", "USD/h").set(snap.fleet_dph)
    meter.create_gauge("fleet_instances", "Machines of the fleet").set(len(snap.instances))


def record_demand(agent_id: str, point: DemandPoint) -> None:
    """Gauges of one demand decision (demand mode, after a poll): arrivals,
    forecast, need, backlog and the target the rule chose. Arrivals are left
    as they were while the history is too short for a rate."""
    meter = _meter(agent_id)
    if point.recent_per_h is not None:
        meter.create_gauge_float(
            "fleet_demand_arrivals_proofs_per_hour", "Proofs arriving per hour (the last hour)"
        ).set(point.recent_per_h)
    meter.create_gauge_float(
        "fleet_demand_forecast_proofs_per_hour", "Arrivals per hour forecast a lead time ahead"
    ).set(point.forecast_per_h)
    meter.create_gauge_float(
        "fleet_demand_need_proofs_per_hour", "Proofs/h needed for the forecast and the backlog"
    ).set(point.need_per_h)
    meter.create_gauge("fleet_demand_backlog", "Proofs queued or in flight at the source").set(
        point.backlog
    )
    meter.create_gauge_float(
        "fleet_demand_target_proofs_per_hour", "The target demand mode decided"
    ).set(point.target_per_h)


def record_market(agent_id: str, point: MarketPoint) -> None:
    """Gauges of one reading of the business on the Snark Market (market
    mode, after a poll): slots, challenges, the ask price and the market's,
    revenue, cost and profit per hour, requests on or off, the queue. The
    market's price, revenue and profit are left as they were while the point
    has none (the market's price unread; no FIL price)."""
    meter = _meter(agent_id)
    meter.create_gauge("fleet_market_slots_total", "Work slots (challenge proofs / 50)").set(
        point.slots_total
    )
    meter.create_gauge("fleet_market_slots_used", "Work slots holding paid work").set(
        point.slots_used
    )
    meter.create_gauge(
        "fleet_market_challenges", "The challenge balance as the agent counts it"
    ).set(point.ledger.challenges)
    meter.create_gauge("fleet_market_price_nfil", "The node's ask price per proof", "nFIL").set(
        point.price_nfil
    )
    if point.market_price_nfil is not None:
        meter.create_gauge(
            "fleet_market_market_price_nfil", "The market's current price per proof", "nFIL"
        ).set(point.market_price_nfil)
    if point.revenue_usd_per_h is not None:
        meter.create_gauge_float(
            "fleet_market_revenue_usd_per_hour", "Revenue over the last hour", "USD/h"
        ).set(point.revenue_usd_per_h)
    meter.create_gauge_float(
        "fleet_market_cost_usd_per_hour", "Rental and LLM cost per hour", "USD/h"
    ).set(point.cost_usd_per_h)
    if point.profit_usd_per_h is not None:
        # A gauge takes no negative value (temporalio/runtime.py: "Metric value
        # cannot be negative", raised in the workflow task, which would fail the
        # monitor at every retry): a loss is its own gauge.
        profit = point.profit_usd_per_h
        meter.create_gauge_float(
            "fleet_market_profit_usd_per_hour", "Revenue less cost per hour, when above 0", "USD/h"
        ).set(max(0.0, profit))
        meter.create_gauge_float(
            "fleet_market_loss_usd_per_hour", "Cost less revenue per hour, when above 0", "USD/h"
        ).set(max(0.0, -profit))
    meter.create_gauge(
        "fleet_market_requests_enabled", "1 while the node asks the market for work"
    ).set(1 if point.enabled else 0)
    meter.create_gauge("fleet_market_queue_waiting", "Proofs waiting for a machine").set(
        point.queued
    )
