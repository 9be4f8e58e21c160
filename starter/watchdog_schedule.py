"""The watchdog of an agent: a Temporal Schedule that brings it back.

`fleet-agent start` (and `up`, so `make run`) creates or updates the
schedule `fleet-agent-watchdog-<agent>`; every `FLEET_WATCHDOG_MINUTES`
(default 5, `start --watchdog-minutes`) it starts `AgentWatchdogWorkflow`,
which starts the agent workflow unless it is running (workflows/watchdog_look.py).
`fleet-agent cancel` deletes the schedule before it cancels the agent, so an
operator who stops an agent is not overruled. See docs/operations/watchdog.md, "The
watchdog: an agent that comes back".
"""

from __future__ import annotations

import hashlib
import os
from datetime import timedelta

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
    ScheduleUpdate,
    ScheduleUpdateInput,
)
from temporalio.service import RPCError, RPCStatusCode

from fleet_agent.models import WatchdogInput
from starter.agent_client import AgentClient, UsageError
from starter.hints import CLI

__all__ = [
    "DEFAULT_WATCHDOG_MINUTES",
    "WATCHDOG_ENV",
    "delete_watchdog",
    "ensure_watchdog",
    "setup_watchdog",
    "watchdog_id",
    "watchdog_interval",
    "watchdog_offset",
]

WATCHDOG_ENV = "FLEET_WATCHDOG_MINUTES"
DEFAULT_WATCHDOG_MINUTES = 5.0
# Fractions of a minute are for tests and demos (0.05 = every 3 s); a
# Schedule's interval is whole seconds.
_MIN_SECONDS = 1
# A look missed while the server was down is made up for if it is this
# recent: one is enough, the next comes within the interval anyway.
_CATCHUP = timedelta(minutes=1)
_WORKFLOW = "AgentWatchdogWorkflow"


def watchdog_id(agent_id: str) -> str:
    """The schedule's ID, and the prefix of the ID of each look it starts."""
    return f"fleet-agent-watchdog-{agent_id}"


def watchdog_offset(agent_id: str, every: timedelta) -> timedelta:
    """Where in each interval the agent's looks fall: a fixed point from a
    hash of its ID. An interval alone is aligned to the epoch, so every
    agent's look came in the same second (at :00, :05, ...): 101 agents
    started 101 workflows at once, and the messages that arrived then waited
    seconds for the worker (docs/decisions/hostile-hosts.md, "The watchdog's looks are
    spread"). Whole seconds, as a Schedule's spec takes them."""
    seconds = int(every.total_seconds())
    digest = hashlib.sha256(agent_id.encode()).digest()
    return timedelta(seconds=int.from_bytes(digest[:8], "big") % max(seconds, 1))


def watchdog_interval(minutes: float | None = None) -> timedelta:
    """`minutes`, else FLEET_WATCHDOG_MINUTES, else 5; a malformed value is a UsageError."""
    if minutes is None:
        raw = os.environ.get(WATCHDOG_ENV, "").strip()
        try:
            minutes = float(raw) if raw else DEFAULT_WATCHDOG_MINUTES
        except ValueError:
            raise UsageError(f"{WATCHDOG_ENV} must be a number of minutes, got {raw!r}") from None
    seconds = round(minutes * 60)
    if not seconds >= _MIN_SECONDS:
        raise UsageError(f"the watchdog interval must be at least 1 second, got {minutes:g} min")
    return timedelta(seconds=seconds)


def _schedule(agent_id: str, task_queue: str, every: timedelta, paused: bool) -> Schedule:
    note = (
        f"fleet-agent watchdog of agent {agent_id!r}: every {_every_text(every)} it starts "
        f"the agent workflow on task queue {task_queue!r} unless it is running. "
        f"To stop the agent for good: `{CLI} cancel --agent-id {agent_id}` "
        "(deletes this schedule, then cancels the agent)."
    )
    return Schedule(
        action=ScheduleActionStartWorkflow(
            _WORKFLOW,
            WatchdogInput(agent_id=agent_id, task_queue=task_queue),
            id=watchdog_id(agent_id),
            task_queue=task_queue,
            static_summary=f"watchdog look at agent {agent_id!r}",
        ),
        spec=ScheduleSpec(
            intervals=[ScheduleIntervalSpec(every=every, offset=watchdog_offset(agent_id, every))]
        ),
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP, catchup_window=_CATCHUP),
        state=ScheduleState(note=note, paused=paused),
    )


def _every_text(every: timedelta) -> str:
    seconds = int(every.total_seconds())
    return f"{seconds // 60} min" if seconds % 60 == 0 else f"{seconds} s"


async def ensure_watchdog(client: Client, agent_id: str, task_queue: str, every: timedelta) -> bool:
    """Create the agent's schedule, or bring an existing one to `every` and
    `task_queue` (a schedule an operator paused in the Web UI stays paused).
    True if it was created now."""
    memo = {
        "what": f"fleet-agent watchdog of agent {agent_id}",
        "stop": f"{CLI} cancel --agent-id {agent_id}",
    }
    try:
        await client.create_schedule(
            watchdog_id(agent_id), _schedule(agent_id, task_queue, every, False), memo=memo
        )
        return True
    except ScheduleAlreadyRunningError:
        pass

    def update(current: ScheduleUpdateInput) -> ScheduleUpdate:
        paused = current.description.schedule.state.paused
        return ScheduleUpdate(schedule=_schedule(agent_id, task_queue, every, paused))

    await client.get_schedule_handle(watchdog_id(agent_id)).update(update)
    return False


async def delete_watchdog(client: Client, agent_id: str) -> bool:
    """Delete the agent's schedule; False if there was none."""
    try:
        await client.get_schedule_handle(watchdog_id(agent_id)).delete()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return True


def _agent_arg(agent: AgentClient) -> str:
    return "" if agent.agent_id == "fleet-agent" else f" --agent-id {agent.agent_id}"


async def setup_watchdog(agent: AgentClient, every: timedelta, env: str = "") -> None:
    """Create or update the agent's watchdog schedule, and say so (`env`: the
    variables that lead the CLI to this stack, as its banner prints them)."""
    with agent.rpc("create the watchdog schedule"):
        created = await ensure_watchdog(
            await agent.client(), agent.agent_id, agent.task_queue, every
        )
    print(
        f"watchdog {'created' if created else 'updated'}: schedule "
        f"{watchdog_id(agent.agent_id)!r} starts the agent within {every.total_seconds():g}s "
        f"if it ends; `{env}{CLI} cancel{_agent_arg(agent)}` stops the agent and removes it"
    )
