"""Every shape of input the agent workflow can be sent: refused clearly, never fatal.

Time-skipping server; the payloads go through the real client and the pydantic
data converter, as the temporal CLI or a script would send them.
"""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from fleet_agent.loop.inputs import parse_start
from fleet_agent.models import AgentConfig, Phase, TriggerKind
from fleet_agent.store import Store
from testkit.fakes.anthropic_server import FakeAnthropic
from tests.helpers import eventually, running_worker, status, wait_runs
from workflows import FleetAgentWorkflow


def _event(
    start: str = "2026-12-07T14:00:00Z", end: str = "2026-12-07T16:00:00Z"
) -> dict[str, Any]:
    """A known demand event as JSON, as the CLI or a start config sends it."""
    return {"start": start, "end": end, "multiplier": 2.0}


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ({"config": {"heartbeat_seconds": 5}}, "heartbeat_seconds"),
        ({"config": {"max_instances": True}}, "max_instances: Input should be a valid integer"),
        ({"config": {"paused": "yes"}}, "paused: Input should be a valid boolean"),
        ({"config": []}, "expected a JSON object"),
        ({"confg": {"paused": True}}, "unknown field(s): confg"),
        ([], "expected a JSON object, got list"),
        ("start please", "expected a JSON object, got str"),
        # Valid field by field, not as a whole: applying it raised in the
        # workflow's first task, which failed for good.
        ({"config": {"min_target": 500.0, "max_target": 100.0}}, "min_target must not exceed"),
        (
            {"config": {"demand_events": [_event("0001-01-01T00:30:00+01:00")]}},
            "demand_events.0.start: Value error, time out of range",
        ),
    ],
)
async def test_a_bad_start_input_starts_on_defaults_and_says_why(
    ts_env: WorkflowEnvironment,
    store: Store,
    fake_llm: FakeAnthropic,
    raw: Any,
    problem: str,
) -> None:
    async with running_worker(ts_env.client, store) as h:
        agent_id = "bad-start"
        await ts_env.client.start_workflow(
            "FleetAgentWorkflow",
            raw,
            id=agent_id,
            task_queue=h.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        )
        h.agent_ids.add(agent_id)
        handle = ts_env.client.get_workflow_handle_for(FleetAgentWorkflow.run, agent_id)
        st = await status(handle)
        assert [r.signal for r in st.rejected] == ["start config"]
        assert problem in st.rejected[0].error
        assert st.config == AgentConfig(monitor_enabled=True) or st.config == AgentConfig()
        # Alive and working: the start-up run happens.
        await ts_env.sleep(11)
        runs = await wait_runs(store, agent_id, 1)
        assert runs[0].triggers[0].kind == TriggerKind.AGENT_STARTED


def test_a_corrupt_continue_as_new_state_is_not_silently_replaced() -> None:
    with pytest.raises(ValueError, match="run_count"):
        parse_start({"state": {"run_count": "many"}})


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"max_instances": True}, "max_instances: Input should be a valid integer"),
        ({"target_proofs_per_hour": "500"}, "target_proofs_per_hour: Input should be a valid"),
        ({"dry_run": 1}, "dry_run: Input should be a valid boolean"),
        ({"allowed_gpus": ["A100"] * 51}, "allowed_gpus"),
        ({"allowed_gpus": [""]}, "allowed_gpus.0"),
        ([], "expected a JSON object"),
        (None, "expected a JSON object"),
        ("paused", "expected a JSON object"),
        ({}, "the update changes nothing"),
        ({"demand_events": [_event("0001-01-01T00:30:00+01:00")]}, "time out of range"),
        ({"demand_events": [_event(end="9999-12-31T23:30:00-05:00")]}, "time out of range"),
        ({"min_target": 500.0, "max_target": 100.0}, "min_target must not exceed max_target"),
    ],
)
async def test_bad_config_updates_are_refused_with_a_clear_message(
    ts_env: WorkflowEnvironment,
    store: Store,
    fake_llm: FakeAnthropic,
    patch: Any,
    message: str,
) -> None:
    async with running_worker(ts_env.client, store) as h:
        handle = await h.start_agent(paused=True)
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await handle.execute_update("update_config", patch)
        cause = refused.value.cause
        assert isinstance(cause, ApplicationError)
        text = cause.message
        assert text.startswith("invalid config: ") and message in text, text
        assert len(text) < 200
        assert "pydantic" not in text and "errors.pydantic.dev" not in text
        st = await status(handle)
        assert st.config.max_instances == 20 and st.config.paused
        # The loop goes on: a good update still applies.
        new = await handle.execute_update(FleetAgentWorkflow.update_config, {"max_instances": 3})
        assert new.max_instances == 3


@pytest.mark.parametrize(
    ("signal", "payload", "message"),
    [
        (
            "human_message",
            [],
            "expected a JSON object or a string (text, author, message_id), got list",
        ),
        (
            "human_message",
            None,
            "expected a JSON object or a string (text, author, message_id), got null",
        ),
        ("human_message", 42, "got int"),
        ("human_message", {"text": "hi", "author": 7}, "author: Input should be a valid string"),
        ("state_changed", "7 died", "expected a JSON object"),
        ("state_changed", {"instance_id": 7, "new_state": "x"}, "instance_id"),
        ("trigger_now", [1], "expected a JSON object or a string"),
        ("cancel_wake", {}, "wake_id: Field required"),
        ("reset_session", {"reason": 5}, "reason: Input should be a valid string"),
    ],
)
async def test_bad_signal_payloads_are_recorded_and_the_loop_goes_on(
    ts_env: WorkflowEnvironment,
    store: Store,
    fake_llm: FakeAnthropic,
    signal: str,
    payload: Any,
    message: str,
) -> None:
    async with running_worker(ts_env.client, store) as h:
        handle = await h.start_agent(paused=True)
        await handle.signal(signal, payload)

        async def refused() -> bool:
            return (await status(handle)).rejected_total == 1

        await eventually(refused, what="the refusal")
        st = await status(handle)
        assert st.rejected[0].signal == signal
        assert message in st.rejected[0].error, st.rejected[0].error
        assert st.phase == Phase.PAUSED and st.session == 1
        await handle.signal(FleetAgentWorkflow.human_message, "still there?")
        await eventually(lambda: _pending_message(handle), what="a good message after the bad one")


async def _pending_message(handle: Any) -> bool:
    st = await status(handle)
    return any(t.kind == TriggerKind.HUMAN_MESSAGE for t in st.pending_triggers)


async def test_unknown_signals_are_recorded_by_name(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    async with running_worker(ts_env.client, store) as h:
        handle = await h.start_agent(paused=True)
        await handle.signal("no_such_signal", {"text": "hello there"})
        await handle.signal("human_mesage")

        async def both() -> bool:
            return (await status(handle)).rejected_total == 2

        await eventually(both, what="two refusals")
        st = await status(handle)
        assert [r.signal for r in st.rejected] == ["no_such_signal", "human_mesage"]
        assert all("unknown signal" in r.error and "human_message" in r.error for r in st.rejected)
        assert st.rejected[0].preview == "hello there"
