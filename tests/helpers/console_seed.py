"""A store seeded for the console's tests: three runs of one agent over the
last hours, each with the fleet in its context message, and spend hours;
and, for demand mode's plot, readings of demand (`seed_demand`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from fleet_agent.demand.point import DemandPoint
from fleet_agent.fleet.snapshot import FleetInstance, FleetSnapshot
from fleet_agent.llm.transcript import StoredReply, dumps
from fleet_agent.models import TokenUsage, Trigger, TriggerKind, Verdict
from fleet_agent.store import DemandHistory, Store
from fleet_agent.store.tables import SpendHourRow, table_of
from tests.helpers import finish_ok

AGENT = "console-agent"
UI = "http://ui.test:8233"
NOW = datetime.now(UTC).replace(microsecond=0)


def snapshot(capacity: float, target: float) -> FleetSnapshot:
    return FleetSnapshot(
        instances=[
            FleetInstance(
                id=41,
                label="fa-x",
                state="running",
                gpu="RTX 4090",
                num_gpus=1,
                dph=0.42,
                proofs_per_hour=capacity,
                expected_proofs_per_hour=capacity,
                host_id=7,
                age_minutes=90,
            )
        ],
        target_proofs_per_hour=target,
        capacity_proofs_per_hour=capacity,
        expected_proofs_per_hour=capacity,
        fleet_dph=0.42,
    )


THOUGHT = "The operator greets me; the fleet holds 100 proofs/h, nothing to change."
SIGNATURE = "c2lnbmF0dXJlLW9mLXRoZS10aGlua2luZw=="


def seed(store: Store) -> None:
    """Three runs: one acted on a human message, one no-op skipped in the
    prompt, one failed; each with a context message holding the fleet."""
    specs: list[tuple[int, TriggerKind, dict[str, Any]]] = [
        (1, TriggerKind.HUMAN_MESSAGE, {"verdict": Verdict(action=True, state_changed=True)}),
        (2, TriggerKind.HEARTBEAT, {"noop": True, "in_prompt": False}),
        (3, TriggerKind.TRIGGER_NOW, {"error": "model unreachable", "status": "failed"}),
    ]
    for run, kind, fields in specs:
        at = NOW - timedelta(hours=4 - run)
        trigger = Trigger(
            seq=run, kind=kind, received_at=at, text="hello agent", message_id=f"m-seed-{run}"
        )
        store.sessions.ensure_session(AGENT, 1, "", at)
        store.run_writes.begin_run(AGENT, run, 1, [trigger], f"- {kind.value}", at, f"wfrun-{run}")
        context = f"[run #{run}]\n## Fleet\n{snapshot(100.0 * run, 250).to_text()}\n"
        store.messages.add_message(AGENT, run, 0, 0, "user", "context", context, at)
        if run == 1:
            # The model thought (llm_thinking_display "summarized"), then answered.
            reply = StoredReply(
                content=[
                    {"type": "thinking", "thinking": THOUGHT, "signature": SIGNATURE},
                    {"type": "text", "text": "answer 1"},
                ],
                stop_reason="end_turn",
                usage=TokenUsage(output_tokens=620, thinking_tokens=600),
            )
            store.messages.add_message(AGENT, run, 1, 1, "assistant", "assistant", dumps(reply), at)
        ended = at + timedelta(seconds=30)
        finish_ok(store, AGENT, run, ended, final_text=f"answer {run}", **fields)
    hours = table_of(SpendHourRow)
    with store.engine.begin() as conn:
        for back in (3, 2, 1):
            hour = (NOW - timedelta(hours=back)).replace(minute=0, second=0)
            conn.execute(
                hours.insert(),
                {"agent_id": AGENT, "instance_id": 41, "hour": hour, "usd": 0.42, "seconds": 3600},
            )


def seed_demand(store: Store, agent_id: str = AGENT, now: datetime = NOW) -> list[DemandPoint]:
    """Demand readings every 30 min over the last 3 h: arrivals rising from
    120/h, the forecast and the demand target above them; the first has too
    little history for an arrival rate."""
    points = [
        DemandPoint(
            at=now - timedelta(minutes=30 * back),
            queued=10 + back,
            in_flight=2,
            recent_per_h=None if back == 6 else 120.0 + 20 * (6 - back),
            forecast_per_h=130.0 + 20 * (6 - back),
            need_per_h=150.0 + 20 * (6 - back),
            target_per_h=200.0 if back > 3 else 260.0,
            capacity_per_h=210.0,
            action="raise" if back == 3 else "hold",
            reason="raise to 260/h: need 210/h" if back == 3 else "hold",
        )
        for back in range(6, -1, -1)
    ]
    history = DemandHistory(store)
    for p in points:
        history.record(agent_id, p)
    return points
