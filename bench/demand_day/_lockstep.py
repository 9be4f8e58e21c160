"""The demand day's clocks: the simulator's market and the time-skipping
server's workflow time, moved together so that one seed gives one day
(bench/demand_day/_day.py; docs/decisions/demand.md, "A demand day reproduces").

What made two runs of one seed differ, and what this does about each:

* The simulator's clock started at the wall clock's time, and its demand
  draws each minute's arrivals from a stream seeded by (seed, minute since
  the epoch) and each day's bursts by (seed, day): every run had other
  work. The market now starts at `DAY_EPOCH`, and the server is skipped to
  the same instant before the agent starts.
* The test server's clock runs with the wall clock whenever anything is in
  flight (a workflow task, an activity, a signal), so workflow time gained
  each activity's real seconds, the agent's timers (the monitor's polls,
  debounces, wakes, the heartbeat) drifted against the market's steps by
  what the machine's speed and load made them, and a poll or a run landed
  before or after a step by chance. `frozen` runs the server with its clock
  stopped (testkit/servers.py): workflow time moves only by skips, and the
  server skips to a time only when nothing before it is still running.
* The market moved while the agent's work was in flight: `_advance` moved
  it, then slept the server, and the sleep returned while work due at its
  end could still run. Now each move ends with `BARRIER`: a sleep of a
  millisecond more, which on the frozen server returns only once every
  workflow task and activity due by the boundary is done. The market
  moves only then.

Without libfaketime (`frozen` False: `--clock wall`) the driver waits
after each step until the agent has no run in flight and its monitor no
activity pending (`quiet`), but the drift above remains: a day then
reproduces only roughly (its spread is in the results).
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from simulator.server import SimServer
from testkit.agents import status_or_none

__all__ = ["BARRIER", "DAY_EPOCH", "Lockstep", "monitor_instants"]

#: The simulator's clock at the start of every day (UTC midnight; after the
#: frozen server's start, testkit/servers.py's FROZEN_START, and years ahead
#: of any wall clock this bench runs under: the server's clock only moves
#: forward). The demand curve is moved to it (`on_the_day`).
DAY_EPOCH = datetime(2040, 1, 1, tzinfo=UTC).timestamp()
#: What the server's clock passes after each move of the market: on the
#: frozen server a sleep returns only once everything due by then is done.
BARRIER = timedelta(milliseconds=1)
#: Wall mode: how long the driver waits for the agent to go quiet after a step.
QUIET_TIMEOUT_S = 60.0


class Lockstep:
    """Moves `sim`'s market and `env`'s workflow time together, step by step.

    Touches: the simulator's clock (`Market.advance`), the server's clock
    (its sleeps), and in wall mode the agent's status query and the
    describe of its monitor."""

    def __init__(self, env: WorkflowEnvironment, sim: SimServer, *, frozen: bool) -> None:
        self.env = env
        self.sim = sim
        self.frozen = frozen
        #: Sleeps the test server gave up on (RPC timeout): a loaded machine;
        #: the day goes on, its workflow clock a little behind.
        self.sleep_timeouts = 0
        #: Wall mode: steps after which the agent was still busy at the timeout.
        self.not_quiet = 0
        self._handle: Any = None

    def watch(self, handle: Any) -> None:
        """The agent whose quiet the wall mode waits for after each step."""
        self._handle = handle

    async def start(self) -> None:
        """Skip the server to the market's clock (`DAY_EPOCH`): both start at one instant."""
        await self._sleep_to(self.sim.market.now())

    async def move(self, seconds: float) -> None:
        """Move the market `seconds`, then the server to the same time; return
        once the agent's work due by then is done (frozen) or the agent is
        quiet (wall)."""
        self.sim.market.advance(seconds)
        await self._sleep_to(self.sim.market.now())
        if self.frozen:
            await self._sleep(BARRIER.total_seconds())
        else:
            await self.quiet()

    async def advance(self, seconds: float, step: int) -> None:
        """`move` `step` at a time, `seconds` in all."""
        left = seconds
        while left > 0:
            move = min(step, left)
            await self.move(move)
            left -= move

    async def quiet(self) -> None:
        """Wall mode: wait until no run is in flight and the monitor has no
        activity pending (the test server lists no workflows: the monitor's
        ID is `<agent>/monitor`, workflows/agent_monitor.py)."""
        if self._handle is None:
            return
        monitor = self.env.client.get_workflow_handle(f"{self._handle.id}/monitor")
        deadline = time.monotonic() + QUIET_TIMEOUT_S
        while time.monotonic() < deadline:
            st = await status_or_none(self._handle)
            if st is not None and st.current_run is None:
                try:
                    described = await monitor.describe()
                except RPCError:
                    return  # no monitor (yet, or any more): nothing to wait for
                if not described.raw_description.pending_activities:
                    return
            await asyncio.sleep(0.02)
        self.not_quiet += 1

    async def _sleep_to(self, target: float) -> None:
        """Sleep the server until its clock reads `target` (epoch seconds):
        the time it gained on its own (wall mode) is taken off the sleep."""
        now = (await self.env.get_current_time()).timestamp()
        if target - now >= 0.001:
            await self._sleep(target - now)

    async def _sleep(self, seconds: float) -> None:
        # A sleep whose RPC times out (the worker too slow for the server's
        # deadline) is counted, not fatal: a day of work is not thrown away for it.
        try:
            await self.env.sleep(seconds)
        except RPCError as exc:
            if "Timeout" not in str(exc):
                raise
            self.sleep_timeouts += 1


async def monitor_instants(client: Client, agent_id: str) -> set[int]:
    """The instants (epoch ms) at which `agent_id`'s monitor scheduled an
    activity (a poll, a demand reading, a reconcile), from the histories of
    every execution of `<agent>/monitor` (newest first, back along
    continue-as-new). On the frozen server a run that starts at one of them
    shares its instant with the monitor: the one order left to the worker
    (docs/decisions/demand.md, "A demand day reproduces")."""
    instants: set[int] = set()
    run_id: str | None = None
    for _ in range(1000):  # a day's chain: a few executions
        handle = client.get_workflow_handle(f"{agent_id}/monitor", run_id=run_id)
        previous = ""
        async for event in handle.fetch_history_events():
            if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                instants.add(event.event_time.ToMilliseconds())
            elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
                attrs = event.workflow_execution_started_event_attributes
                previous = attrs.continued_execution_run_id
        if not previous:
            break
        run_id = previous
    return instants
