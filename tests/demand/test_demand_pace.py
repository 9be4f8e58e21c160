"""Demand can no longer keep the agent busy: at most
`max_demand_changes_per_hour` demand target changes are applied in any hour,
past it the latest waits and is applied when the hour allows (across a
continue-as-new), and an operator's own target drops it. On the
time-skipping server; the changes are the monitor's `demand_target`
signal, sent as the monitor sends it (anyone able to signal the agent can)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from fleet_agent.autopilot.provider import AutopilotProvider
from fleet_agent.models import (
    DEMAND_TARGET,
    AgentConfig,
    AgentState,
    AgentStatus,
    DemandTargetChange,
    HeldDemandChange,
    TriggerKind,
)
from fleet_agent.store import Store
from tests.helpers import (
    eventually,
    finished_runs,
    replay_agent_chain,
    running_worker,
    status,
    wait_runs,
)
from workflows import FleetAgentWorkflow, agent_pace

MODE: dict[str, Any] = {
    "target_proofs_per_hour": 100,
    "target_mode": "demand",
    "min_target": 50,
    "max_target": 2000,
    "max_demand_changes_per_hour": 2,
    "heartbeat_seconds": 36_000,
}


def _change(target: float, reason: str) -> dict[str, Any]:
    return {"target_per_h": target, "previous_per_h": 0.0, "action": "raise", "reason": reason}


async def _target_is(handle: Any, value: float) -> AgentStatus:
    async def probe() -> AgentStatus | None:
        st = await status(handle)
        return st if st.config.target_proofs_per_hour == value else None

    found = await eventually(probe, what=f"the target at {value}")
    assert found is not None
    return found


async def _held(handle: Any, value: float) -> AgentStatus:
    async def probe() -> AgentStatus | None:
        st = await status(handle)
        pace = st.demand_pace
        held = pace.held if pace is not None else None
        return st if held is not None and held.change.target_per_h == value else None

    found = await eventually(probe, what=f"{value} held")
    assert found is not None
    return found


async def test_past_the_cap_the_latest_change_waits_for_the_hour_even_across_continue_as_new(
    ts_env: WorkflowEnvironment, store: Store
) -> None:
    async with running_worker(ts_env.client, store, provider=AutopilotProvider()) as h:
        handle = await h.start_agent(**MODE)
        await ts_env.sleep(11)
        await wait_runs(store, handle.id, 1)
        await handle.signal(DEMAND_TARGET, _change(200, "burst 1"))
        first = await _target_is(handle, 200)
        await handle.signal(DEMAND_TARGET, _change(300, "burst 2"))
        await _target_is(handle, 300)
        # The third in the hour waits; a newer one replaces it, not its time.
        await handle.signal(DEMAND_TARGET, _change(400, "burst 3"))
        held = await _held(handle, 400)
        await handle.signal(DEMAND_TARGET, _change(450, "burst 4"))
        st = await _held(handle, 450)
        pace = st.demand_pace
        assert pace is not None and pace.held is not None and held.demand_pace is not None
        assert held.demand_pace.held is not None
        assert pace.held.since == held.demand_pace.held.since
        assert (pace.changes_last_hour, pace.max_per_hour) == (2, 2)
        assert st.config.target_proofs_per_hour == 300
        assert st.demand is not None and st.demand.target_per_h == 300
        # It may apply an hour after the first change of the hour.
        assert first.demand is not None and first.demand.target_per_h == 200
        assert pace.release_at is not None

        # The held change rides through a continue-as-new (a reset is one).
        # No query while it is in flight (the time-skipping server can leave
        # one hanging and stop its clock): the reset's run says it is done.
        runs = len(finished_runs(store, handle.id))
        await handle.signal(FleetAgentWorkflow.reset_session, {"reason": "new day"})
        await ts_env.sleep(11)
        await wait_runs(store, handle.id, runs + 1)
        after = await status(handle)
        assert after.executions == st.executions + 1 and after.session == 2
        assert after.demand_pace is not None and after.demand_pace.held is not None
        assert after.demand_pace.held.change.target_per_h == 450
        assert after.config.target_proofs_per_hour == 300

        # When the first change of the hour is an hour old, the held one applies.
        await ts_env.sleep(3600)
        st = await _target_is(handle, 450)
        assert st.demand_pace is not None and st.demand_pace.held is None
        assert st.demand is not None and st.demand.reason == "burst 4"

        async def told() -> str:
            for run in finished_runs(store, handle.id):
                for t in run.triggers:
                    if t.kind == TriggerKind.CONFIG_CHANGED and "300 → 450" in t.reason:
                        return t.reason
            return ""

        reason = await eventually(told, what="a run told of the held change")
        assert "burst 4" in reason and "held from" in reason
        assert "max_demand_changes_per_hour 2" in reason
        # Replaced while held: no run was ever told of 400.
        changes = [
            t.reason
            for run in finished_runs(store, handle.id)
            for t in run.triggers
            if t.kind == TriggerKind.CONFIG_CHANGED
        ]
        assert not any("400" in r for r in changes), changes
        # The new paths replay (the held change's timer, its markers).
        assert await replay_agent_chain(ts_env.client, handle) == 2


async def test_a_held_change_is_dropped_by_the_operators_target_or_a_return_to_the_target(
    ts_env: WorkflowEnvironment, store: Store
) -> None:
    async with running_worker(ts_env.client, store, provider=AutopilotProvider()) as h:
        handle = await h.start_agent(**{**MODE, "max_demand_changes_per_hour": 1})
        await ts_env.sleep(11)
        await handle.signal(DEMAND_TARGET, _change(200, "up"))
        await _target_is(handle, 200)
        await handle.signal(DEMAND_TARGET, _change(500, "up again"))
        await _held(handle, 500)
        # The monitor's newest word is the target in force: nothing waits.
        await handle.signal(DEMAND_TARGET, _change(200, "back"))

        async def dropped() -> AgentStatus | None:
            st = await status(handle)
            return st if st.demand_pace is not None and st.demand_pace.held is None else None

        await eventually(dropped, what="the held change dropped")
        await handle.signal(DEMAND_TARGET, _change(700, "up once more"))
        await _held(handle, 700)
        # An operator's own target wins over a change held back.
        await handle.execute_update(
            FleetAgentWorkflow.update_config, {"target_proofs_per_hour": 350}
        )
        gone = await eventually(dropped, what="dropped by the operator's target")
        assert gone is not None and gone.config.target_proofs_per_hour == 350
        await ts_env.sleep(3600 + 60)
        st = await status(handle)
        assert st.config.target_proofs_per_hour == 350, "nothing held came back"


class _Clock:
    """The bits of `temporalio.workflow` the pacer reads, at a fixed instant."""

    def __init__(self, now: datetime) -> None:
        self._now = now
        self.logger = logging.getLogger("test")

    def now(self) -> datetime:
        return self._now

    def patched(self, patch_id: str) -> bool:
        return True


def _order(first: str, monkeypatch: pytest.MonkeyPatch) -> tuple[float, float | None]:
    """(target, held target) after the pace loop's release and the monitor's
    newer change at the instant the held change's slot opens, in `first` order."""
    slot = datetime(2040, 1, 1, 1, tzinfo=UTC)
    monkeypatch.setattr(agent_pace, "workflow", _Clock(slot))
    config = AgentConfig(**{**MODE, "target_proofs_per_hour": 300})
    state = AgentState(
        config=config,
        # The oldest change of the hour is an hour old at `slot`.
        demand_changes=[slot - timedelta(hours=1), slot - timedelta(minutes=30)],
        demand_held=HeldDemandChange(
            change=DemandTargetChange(**_change(400, "burst 3")),
            since=slot - timedelta(minutes=20),
        ),
    )
    pacer = agent_pace.DemandPacer(state, "a", enabled=True)
    newer = DemandTargetChange(**_change(450, "burst 4"))
    if first == "timer":
        config = _moved(config, [pacer.release(config)])
        config = _moved(config, pacer.take(newer, config))
    else:
        config = _moved(config, pacer.take(newer, config))
        if pacer.release_at(config) == slot:
            config = _moved(config, [pacer.release(config)])
    held = state.demand_held
    return config.target_proofs_per_hour, held.change.target_per_h if held else None


def _moved(config: AgentConfig, moves: Sequence[agent_pace.TargetMove | None]) -> AgentConfig:
    """The config after the pacer's moves, as the workflow applies them."""
    for move in moves:
        if move is not None:
            config = move.config
    return config


def test_a_change_signalled_as_the_held_one_comes_due_gives_one_outcome_in_either_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The monitor polls on the hour of a change it signalled, so its next
    change arrives at the very instant the held one may apply; the worker may
    handle either first (a demand day parted there, bench/demand_day/)."""
    assert _order("timer", monkeypatch) == (400, 450)
    assert _order("signal", monkeypatch) == (400, 450)
