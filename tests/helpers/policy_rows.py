"""Snapshot rows and search results as the autopilot's policy reads them
(fleet_agent/autopilot/policy.py), for the policy's tests."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from fleet_agent.autopilot.provider import AutopilotProvider
from fleet_agent.fleet.snapshot import FleetSnapshot
from fleet_agent.llm.prompt import context_message
from fleet_agent.models import AgentConfig, Wake
from fleet_agent.policy.checks import TRADE_CHECK_REASON

__all__ = [
    "FLEET_TOOLS",
    "context_of",
    "machine",
    "offer",
    "reply_to_search",
    "tool_results",
    "trade_check",
]

#: The fleet tools the autopilot is offered, checks included (names only).
FLEET_TOOLS = [
    {"name": n}
    for n in ("search_offers", "create_instance", "destroy_instance", "schedule_next_check")
]


def machine(iid: int, rate: float, dph: float = 0.4, **extra: Any) -> dict[str, Any]:
    """A healthy running machine, old enough to release, measured at `rate`."""
    return {
        "id": iid,
        "state": "running",
        "dph": dph,
        "expected_proofs_per_hour": rate,
        "proofs_per_hour": rate,
        "measured_proofs_per_hour": rate,
        "age_minutes": 600.0,
        **extra,
    }


def offer(offer_id: int, rate: float, dph: float) -> dict[str, Any]:
    """An offer as search_offers shows it."""
    return {"offer_id": offer_id, "est_proofs_per_hour": rate, "dph": dph}


def context_of(
    rows: list[dict[str, Any]], target: float, *, wakes: list[Wake] | None = None, **limits: Any
) -> str:
    """A run's context message with these fleet rows, as the autopilot reads it."""
    snap = FleetSnapshot(instances=[], target_proofs_per_hour=target)
    fleet_text = snap.to_text().split("\n")[0] + "\n```json\n" + json.dumps(rows) + "\n```"
    return context_message(
        run=7,
        session=1,
        now=datetime(2026, 12, 2, tzinfo=UTC),
        trigger_block="Trigger: the operator changed the target.",
        fleet_text=fleet_text,
        # The spare off unless a test asks for it (spare_one_machine=True).
        config=AgentConfig(
            **{"target_proofs_per_hour": target, "spare_one_machine": False, **limits}
        ),
        wakes=wakes or [],
        next_heartbeat_at=None,
    )


def tool_results(tool_use_id: str, content: str) -> dict[str, Any]:
    """The user message carrying one tool's result."""
    return {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": tool_use_id, "content": content}],
    }


def trade_check() -> Wake:
    """A pending check of the trades (trade.py): no search for one meanwhile."""
    return Wake(
        id="w6-1",
        due_at=datetime(2026, 12, 2, 0, 30, tzinfo=UTC),
        reason=TRADE_CHECK_REASON,
        requested_by_run=6,
    )


async def reply_to_search(
    context: str, result: str, tools: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The autopilot's reply once its first call, a search_offers on a run
    with `context`, has answered `result`."""
    first = await AutopilotProvider().complete(
        system="s", messages=[{"role": "user", "content": context}], tools=tools, max_tokens=100
    )
    (search,) = first.content
    assert search["name"] == "search_offers"
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": context},
        {"role": "assistant", "content": [search]},
        tool_results(search["id"], result),
    ]
    second = await AutopilotProvider().complete(
        system="s", messages=messages, tools=tools, max_tokens=100
    )
    return second.content
