"""Our Prometheus metrics recorded from activities (the SDK's activity meter).

An activity's metric counts each time the code runs: record only after the
side effect it measures is done, so a retried attempt that failed before it
counts nothing. Labels as in workflows/metrics.py: `agent_id` and closed sets.
"""

from __future__ import annotations

from temporalio import activity

__all__ = ["record_notification", "record_run_cost"]


def record_run_cost(agent_id: str, cost_usd: float) -> None:
    """The LLM cost of one closed run (`fleet_run_llm_cost_usd`; its `_sum`
    is the agent's LLM spend)."""
    activity.metric_meter().with_additional_attributes(
        {"agent_id": agent_id}
    ).create_histogram_float(
        "fleet_run_llm_cost_usd", "LLM cost of each run; its sum is the LLM spend", "USD"
    ).record(cost_usd)


def record_notification(agent_id: str, kind: str, outcome: str) -> None:
    """One delivery to one destination (`fleet_notifications_total`), by
    event kind and outcome: sent, failed, or duplicate (its key had gone out)."""
    activity.metric_meter().with_additional_attributes(
        {"agent_id": agent_id, "kind": kind, "outcome": outcome}
    ).create_counter(
        "fleet_notifications", "notification deliveries per destination, by outcome"
    ).add(1)
