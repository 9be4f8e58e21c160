"""Our Prometheus metrics recorded from activities (the SDK's activity meter).

An activity's metric counts each time the code runs: record only after the
side effect it measures is done, so a retried attempt that failed before it
counts nothing. Labels as in workflows/metrics.py: `agent_id` and closed sets.
"""

from __future__ import annotations

from temporalio import activity

__all__ = ["record_run_cost"]


def record_run_cost(agent_id: str, cost_usd: float) -> None:
    """The LLM cost of one closed run (`fleet_run_llm_cost_usd`; its `_sum`
    is the agent's LLM spend)."""
    activity.metric_meter().with_additional_attributes(
        {"agent_id": agent_id}
    ).create_histogram_float(
        "fleet_run_llm_cost_usd", "LLM cost of each run; its sum is the LLM spend", "USD"
    ).record(cost_usd)
