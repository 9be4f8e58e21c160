"""`fleet-agent cancel`: stop an agent for good, so its watchdog does not
bring it back.

In this order: delete the watchdog schedule (nothing starts the agent any
more), end any watchdog look still running (one started just before the
delete could otherwise start the agent again), then cancel the agent
workflow and wait until it has ended. A run in flight is a child workflow
that outlives its agent (ParentClosePolicy.ABANDON): it finishes and
records itself in the store; the fleet monitor ends within a poll once its
agent is gone. Machines at vast.ai are left as they are: `freeze
--destroy-all` first to destroy them.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sys
import time

from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError

from starter.agent_client import AgentClient, CliError
from starter.hints import CLI
from starter.watchdog_schedule import delete_watchdog, watchdog_id

__all__ = ["cancel", "confirmed"]

_POLL_SECONDS = 0.5
# What Temporal appends to the ID of each workflow a Schedule starts.
_LOOK_SUFFIX = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def confirmed(agent_id: str, yes: bool) -> bool:
    """--yes, or a `y` typed at the terminal; without a terminal, a CliError."""
    if yes:
        return True
    if not sys.stdin.isatty():
        raise CliError(
            f"cancel stops agent {agent_id!r} for good: confirm with --yes (no terminal to ask on)"
        )
    answer = input(
        f"Cancel agent {agent_id!r} and delete its watchdog (nothing will restart it)? [y/N] "
    )
    return answer.strip().lower() in {"y", "yes"}


async def cancel(agent: AgentClient, yes: bool, wait: float) -> int:
    """Exit 0 once the watchdog is gone and the agent has ended (or was not
    running); 1 if it is still running after `wait` seconds."""
    if not confirmed(agent.agent_id, yes):
        print("not cancelled")
        return 1
    client = await agent.client()
    with agent.rpc("delete the watchdog schedule"):
        deleted = await delete_watchdog(client, agent.agent_id)
    print(
        f"watchdog schedule {watchdog_id(agent.agent_id)!r} "
        + ("deleted" if deleted else "was not there")
    )
    with agent.rpc("end the watchdog's looks in flight"):
        await _end_looks(agent)
    status = await agent.execution_status()
    if status != WorkflowExecutionStatus.RUNNING:
        state = "never started" if status is None else f"its last execution is {status.name}"
        print(f"agent {agent.agent_id!r} is not running ({state}): nothing to cancel")
        return 0
    with agent.rpc("cancel the agent"):
        await (await agent.handle()).cancel()
    deadline = time.monotonic() + wait
    while (status := await agent.execution_status()) == WorkflowExecutionStatus.RUNNING:
        if time.monotonic() > deadline:
            print(
                f"agent {agent.agent_id!r} asked to cancel but still running after {wait:g}s; "
                f"is a worker running on task queue {agent.task_queue!r}? "
                f"(`{CLI} status` shows it)"
            )
            return 1
        await asyncio.sleep(_POLL_SECONDS)
    name = "ended" if status is None else status.name.lower()
    print(f"agent {agent.agent_id!r} {name}; nothing restarts it (`{CLI} start` does)")
    return 0


async def _end_looks(agent: AgentClient) -> None:
    """Terminate the watchdog workflows of this agent still running."""
    client = await agent.client()
    prefix = watchdog_id(agent.agent_id).replace('"', "")
    query = (
        f'WorkflowType = "AgentWatchdogWorkflow" AND ExecutionStatus = "Running" '
        f'AND WorkflowId STARTS_WITH "{prefix}-"'
    )
    async for wf in client.list_workflows(query):
        if not _LOOK_SUFFIX.fullmatch(wf.id[len(prefix) + 1 :]):
            continue  # a look of agent "<id>-x", whose prefix starts with ours
        # One that ended meanwhile is not found: that is as good.
        with contextlib.suppress(RPCError):
            await client.get_workflow_handle(wf.id, run_id=wf.run_id).terminate(
                "the agent is being cancelled"
            )
