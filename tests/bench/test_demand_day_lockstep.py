"""The demand day's clocks (bench/demand_day/_lockstep.py): on the frozen
test server an activity's real seconds add no workflow time, and the market
moves only once the work due at a step's end is done; and the autopilot's
tool call ids, in the labels it rents under, are the same for the same run."""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime, timedelta

from temporalio import activity, workflow
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from bench.demand_day._lockstep import DAY_EPOCH, Lockstep
from fleet_agent.autopilot.provider import AutopilotProvider
from simulator.server import SimServer
from testkit.servers import FROZEN_START, start_time_skipping_env
from tests.helpers.policy_rows import FLEET_TOOLS, context_of

#: Real seconds the activities below take: far more than the barrier's
#: millisecond, and than the drift of the frozen clock.
WORK_S = 0.4
STEP_S = 120


class _Reads:
    """An activity that works `WORK_S` real seconds, then reads the market's clock."""

    def __init__(self, sim: SimServer | None = None) -> None:
        self._sim = sim

    @activity.defn(name="slow_read")
    async def slow_read(self) -> float:
        await asyncio.sleep(WORK_S)
        return self._sim.market.now() if self._sim is not None else 0.0


@workflow.defn(sandboxed=False)
class _AtTheStep:
    """Waits `seconds`, then runs slow_read; returns (market time read,
    workflow seconds the activity took)."""

    @workflow.run
    async def run(self, seconds: float) -> tuple[float, float]:
        await asyncio.sleep(seconds)
        began = workflow.now()
        read = await workflow.execute_activity(
            "slow_read", result_type=float, start_to_close_timeout=timedelta(seconds=30)
        )
        return read, (workflow.now() - began).total_seconds()


async def test_an_activitys_real_seconds_add_no_workflow_time_on_the_frozen_server() -> None:
    env = await start_time_skipping_env(frozen=True)
    try:
        # A whole second, so the clock's next millisecond is 10^5 real seconds away.
        assert await env.get_current_time() == datetime.fromisoformat(f"{FROZEN_START}+00:00")
        queue = f"frozen-{uuid.uuid4().hex[:8]}"
        async with Worker(
            env.client,
            task_queue=queue,
            workflows=[_AtTheStep],
            activities=[_Reads().slow_read],
            workflow_runner=UnsandboxedWorkflowRunner(),
        ):
            _, took = await env.client.execute_workflow(
                _AtTheStep.run, 0.0, id=f"frozen-{uuid.uuid4().hex[:8]}", task_queue=queue
            )
        # On the wall clock's server the activity took WORK_S of workflow time.
        assert took < 0.01, took
    finally:
        await env.shutdown()


async def test_the_market_moves_only_once_the_work_due_at_the_steps_end_is_done() -> None:
    env = await start_time_skipping_env(frozen=True)
    try:
        with SimServer(seed=1, speed=0, offers=50, rate_limits=False, start_epoch=DAY_EPOCH) as sim:
            clocks = Lockstep(env, sim, frozen=True)
            await clocks.start()
            assert (await env.get_current_time()).timestamp() == sim.market.now() == DAY_EPOCH
            reads = _Reads(sim)
            queue = f"lockstep-{uuid.uuid4().hex[:8]}"
            async with Worker(
                env.client,
                task_queue=queue,
                workflows=[_AtTheStep],
                activities=[reads.slow_read],
                workflow_runner=UnsandboxedWorkflowRunner(),
            ):
                # Its timer ends exactly at the first step's end: the work due
                # then runs beside the driver's own sleep.
                handle = await env.client.start_workflow(
                    _AtTheStep.run, float(STEP_S), id=f"at-{uuid.uuid4().hex[:8]}", task_queue=queue
                )
                await clocks.move(STEP_S)
                await clocks.move(STEP_S)  # too early, and the activity reads this step
                now = (await env.get_current_time()).timestamp()
                assert sim.market.now() == DAY_EPOCH + 2 * STEP_S
                assert abs(now - sim.market.now()) < 0.01, "the two clocks move together"
                read, _ = await handle.result()
            # The step it was due in, whatever the machine's speed.
            assert read == DAY_EPOCH + STEP_S
    finally:
        await env.shutdown()


async def test_the_autopilot_names_its_calls_after_the_run_not_at_random() -> None:
    async def ids(text: str) -> list[str]:
        reply = await AutopilotProvider().complete(
            system="s",
            messages=[{"role": "user", "content": text}],
            tools=FLEET_TOOLS,
            max_tokens=100,
        )
        return [b["id"] for b in reply.content if b["type"] == "tool_use"]

    text = context_of([], 100.0)  # run #7, no machine: it searches
    first = await ids(text)
    assert first and all(i.startswith("toolu_") for i in first)
    assert await ids(text) == first  # ids in labels: the same run, the same labels
    assert set(await ids(text.replace("[run #7 ", "[run #8 "))).isdisjoint(first)
