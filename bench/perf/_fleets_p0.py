"""Where a message's P0 latency goes (bench/perf/fleets.py), from the agents'
histories: the client's send to the signal's workflow task, the 2 s window,
the window's task waiting and running, and the run's first task.

For each run that took a message, the agent's history holds the workflow
task whose completion started the run (`StartChildWorkflowExecutionInitiated`
follows its `WorkflowTaskCompleted`) and what scheduled that task (the
window's timer firing, or the end of the run before). The parts add up to
the P0 latency of `p0_to_run_start_s`.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from bench._common import percentile

__all__ = ["PARTS", "p0_parts", "summarize"]

#: The parts, in order: each one's meaning is in bench/README.md.
PARTS = ("send_to_signal_task", "window", "task_wait", "task_run", "to_run_task")


class _Handled(Protocol):
    run_id: str
    started_at: datetime
    received_at: datetime


@dataclass
class _Start:
    """The agent's workflow task that started a run."""

    cause_at: datetime  # what scheduled the task: a timer firing, a child's end, ...
    cause: str  # that event's type, e.g. TIMER_FIRED, ACTIVITY_TASK_COMPLETED
    scheduled: datetime
    started: datetime
    completed: datetime


async def _run_starts(client: Client, agent: str, gate: asyncio.Semaphore) -> dict[str, _Start]:
    """Run workflow ID → the agent's task that started it, from one history."""
    async with gate:
        history = await client.get_workflow_handle(agent).fetch_history()
    out: dict[str, _Start] = {}
    previous: tuple[int, datetime] | None = None  # the last event before a task was scheduled
    scheduled: dict[int, tuple[datetime, int, datetime]] = {}  # id → (at, cause type, cause at)
    started: dict[int, tuple[datetime, int]] = {}  # started id → (at, scheduled id)
    last_completed: tuple[datetime, int] | None = None  # (at, started id)
    for ev in history.events:
        at = ev.event_time.ToDatetime(tzinfo=UTC)
        kind = ev.event_type
        if kind == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
            cause, cause_at = previous if previous is not None else (0, at)
            scheduled[ev.event_id] = (at, cause, cause_at)
        elif kind == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
            started[ev.event_id] = (
                at,
                ev.workflow_task_started_event_attributes.scheduled_event_id,
            )
        elif kind == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            last_completed = (at, ev.workflow_task_completed_event_attributes.started_event_id)
        elif (
            kind == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED
            and last_completed is not None
        ):
            done_at, started_id = last_completed
            began, scheduled_id = started.get(started_id, (done_at, 0))
            sched_at, cause, cause_at = scheduled.get(scheduled_id, (began, 0, began))
            wid = ev.start_child_workflow_execution_initiated_event_attributes.workflow_id
            out[wid] = _Start(
                cause_at=cause_at,
                cause=EventType.Name(EventType.ValueType(cause)).removeprefix("EVENT_TYPE_")
                if cause
                else "?",
                scheduled=sched_at,
                started=began,
                completed=done_at,
            )
        if kind not in (
            EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
            EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED,
        ):
            previous = (kind, at)
    return out


async def p0_parts(
    client: Client,
    found: Mapping[str, _Handled],
    sent: Mapping[str, datetime],
    fetches: int = 16,
) -> dict[str, dict[str, Any]]:
    """Message ID → seconds of each part (PARTS), for every message a run
    took whose start is in its agent's history. A run started right after
    the one before (no timer) has as its `window` its wait for that run."""
    agents = sorted({h.run_id.rsplit("/run-", 1)[0] for h in found.values()})
    gate = asyncio.Semaphore(fetches)
    starts: dict[str, _Start] = {}
    for part in await asyncio.gather(*(_run_starts(client, a, gate) for a in agents)):
        starts.update(part)
    out: dict[str, dict[str, Any]] = {}
    for uid, handled in found.items():
        start = starts.get(handled.run_id)
        if start is None:
            continue
        values: Sequence[timedelta] = (
            handled.received_at - sent[uid],
            start.cause_at - handled.received_at,
            start.started - start.cause_at,
            start.completed - start.started,
            handled.started_at - start.completed,
        )
        out[uid] = {
            **{name: value.total_seconds() for name, value in zip(PARTS, values, strict=True)},
            "cause": start.cause,
        }
    return out


def summarize(parts: Mapping[str, Mapping[str, Any]], p0: Mapping[str, float]) -> dict[str, Any]:
    """Each part's p50 and p95 over all messages, and its mean over the
    messages whose P0 (`p0`, by message ID) is at or above the p95: where
    the tail's time goes; and what ended the window (`cause`: the event that
    scheduled the task that started the run), over all and over that tail."""
    if not parts:
        return {}
    # Nearest rank, as every other percentile of the benchmark (_common).
    p95 = percentile([p0[u] for u in parts], 95)
    tail = [u for u in parts if p95 is not None and p0[u] >= p95]
    out: dict[str, Any] = {}
    for name in PARTS:
        values = [v[name] for v in parts.values()]
        out[name] = {
            "p50": percentile(values, 50),
            "p95": percentile(values, 95),
            "tail_mean": sum(parts[u][name] for u in tail) / len(tail),
        }
    # The P0 latency of the messages whose window ended on its own timer:
    # the others waited for a run already in flight (one run at a time).
    timed = [p0[u] for u, v in parts.items() if v["cause"] == "TIMER_FIRED"]
    out["p0_window_timer_only"] = {
        "messages": len(timed),
        "p50": percentile(timed, 50),
        "p95": percentile(timed, 95),
    }
    out["cause"] = dict(Counter(v["cause"] for v in parts.values()).most_common())
    out["cause_in_tail"] = dict(Counter(parts[u]["cause"] for u in tail).most_common())
    return out
