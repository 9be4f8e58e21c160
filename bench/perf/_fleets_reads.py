"""What bench/perf/fleets.py reads once the messages are sent: from the store,
the run that took each message and the runs of the window; from the
histories, the workflow tasks' timings and the activities scheduled."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sqlalchemy.exc import OperationalError, ProgrammingError
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from fleet_agent.models import TriggerKind
from fleet_agent.store import Store

__all__ = [
    "Handled",
    "TaskTimes",
    "handled_messages",
    "runs_since",
    "task_times",
    "wait_answered",
    "wait_started",
]

POLL_S = 1.0
HISTORY_FETCHES = 16  # histories read at once after the window


@dataclass
class Handled:
    """Where the store says a message went: the run that took it."""

    run_id: str  # the run's workflow ID, <agent>/run-<n>
    started_at: datetime  # the run workflow's own start (workflow.now())
    ended_at: datetime | None
    received_at: datetime  # when the agent workflow took the signal


def handled_messages(
    store: Store, agents: list[str], sent: dict[str, datetime]
) -> dict[str, Handled]:
    """Every sent message found in a run's triggers (by its message_id), with
    the first run that took it (a run retried in the store has several
    attempts, the same triggers)."""
    found: dict[str, Handled] = {}
    for agent in agents:
        for run in store.run_reads.list_runs(agent, limit=100_000):
            for t in run.triggers:
                if t.kind != TriggerKind.HUMAN_MESSAGE or t.message_id not in sent:
                    continue
                old = found.get(t.message_id)
                if old is None or run.started_at < old.started_at:
                    found[t.message_id] = Handled(
                        f"{agent}/run-{run.run}", run.started_at, run.ended_at, t.received_at
                    )
    return found


def runs_since(store: Store, agents: list[str], since: datetime) -> tuple[list[str], Counter[str]]:
    """Workflow IDs of the runs that started at or after `since`, and those
    runs counted by the kinds of trigger they took (a run with a message and
    a state change counts under "human_message+state_changed"): a run that
    no message caused is one a message may have to wait for."""
    ids: set[str] = set()
    kinds: Counter[str] = Counter()
    for agent in agents:
        for run in store.run_reads.list_runs(agent, limit=100_000):
            wid = f"{agent}/run-{run.run}"
            if run.started_at < since or wid in ids:
                continue
            ids.add(wid)
            kinds["+".join(sorted({t.kind.value for t in run.triggers})) or "none"] += 1
    return sorted(ids), kinds


async def wait_answered(
    store: Store, agents: list[str], sent: dict[str, datetime], settle: float
) -> None:
    """Poll the store until every message's run has ended, or `settle` s pass."""
    deadline = time.monotonic() + settle
    while time.monotonic() < deadline:
        found = await asyncio.to_thread(handled_messages, store, agents, sent)
        if sum(1 for h in found.values() if h.ended_at is not None) >= len(sent):
            return
        await asyncio.sleep(POLL_S)


async def wait_started(store: Store, agents: list[str], limit: float) -> int:
    """Poll the store until every agent's start-up run has ended (the worker
    and the agents are up), or `limit` s pass; returns the agents whose
    first run ended."""
    deadline = time.monotonic() + limit

    def done() -> int:
        try:
            return sum(
                1
                for a in agents
                if any(r.ended_at is not None for r in store.run_reads.list_runs(a, limit=5))
            )
        except (OperationalError, ProgrammingError):  # no store yet (SQLite; PostgreSQL)
            return 0

    while True:
        ready = await asyncio.to_thread(done)
        if ready == len(agents) or time.monotonic() > deadline:
            return ready
        await asyncio.sleep(POLL_S)


@dataclass
class TaskTimes:
    """Workflow tasks and activities in the histories, scheduled in a window."""

    schedule_to_start: list[float] = field(default_factory=list)
    start_to_complete: list[float] = field(default_factory=list)
    tasks: Counter[str] = field(default_factory=Counter)  # by kind: agent, run, monitor
    activities: Counter[str] = field(default_factory=Counter)  # by activity type


def _kind(workflow_id: str) -> str:
    tail = workflow_id.rsplit("/", 1)[-1]
    return "monitor" if tail == "monitor" else "run" if tail.startswith("run-") else "agent"


async def task_times(
    client: Client, ids: Iterable[str], since: datetime, until: datetime
) -> TaskTimes:
    """Workflow task schedule-to-start (WorkflowTaskScheduled → Started) and
    start-to-complete (Started → Completed: the worker's time on the task,
    waiting for the GIL included) of the tasks scheduled in [since, until),
    and the activities scheduled then, from the workflows' histories."""
    out = TaskTimes()
    gate = asyncio.Semaphore(HISTORY_FETCHES)

    async def one(wid: str) -> None:
        async with gate:
            history = await client.get_workflow_handle(wid).fetch_history()
        scheduled: dict[int, datetime] = {}
        started: dict[int, datetime] = {}
        for ev in history.events:
            at = ev.event_time.ToDatetime(tzinfo=UTC)
            if ev.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
                if since <= at < until:
                    scheduled[ev.event_id] = at
            elif ev.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
                sched = scheduled.get(ev.workflow_task_started_event_attributes.scheduled_event_id)
                if sched is not None:
                    started[ev.event_id] = at
                    out.schedule_to_start.append((at - sched).total_seconds())
            elif ev.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
                begun = started.get(ev.workflow_task_completed_event_attributes.started_event_id)
                if begun is not None:
                    out.start_to_complete.append((at - begun).total_seconds())
                    out.tasks[_kind(wid)] += 1
            elif (
                ev.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
                and since <= at < until
            ):
                name = ev.activity_task_scheduled_event_attributes.activity_type.name
                out.activities[name] += 1

    await asyncio.gather(*(one(wid) for wid in ids))
    return out
