"""A second `fleet-agent up` of a running stack: it attaches, and starts nothing.

It connects to the stack's Temporal server, makes sure its agent runs (on the
running stack's worker), and then follows the agent's runs until Ctrl-C, or
does one run with `--check`. No worker and no simulator start here: the first
`up` has them (`--add-worker` is the explicit way to add a worker).

`first_run` and `check_summary` are the `--check` smoke test of both modes.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from temporalio.client import Client

from fleet_agent.models import AgentStatus, RunStatus
from starter.agent_client import AgentClient, CliError, open_client
from starter.stack.guard import OwnedStack, StackRecord, claim_stack
from starter.views.render import last_run_text

__all__ = ["attach", "check_summary", "connect_retrying", "first_run"]

CHECK_POLL_INTERVAL = 0.5
FOLLOW_INTERVAL = 1.0


async def connect_retrying(address: str, namespace: str, within: float) -> Client:
    """Connect, retrying while a just-started server finishes booting."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        try:
            return await open_client(address, namespace, connect_timeout=5.0)
        except CliError:
            if loop.time() > deadline:
                raise
            await asyncio.sleep(0.2)


async def first_run(agent: AgentClient, within: float) -> AgentStatus:
    """Ask for a run now and wait until it has finished (the `--check` smoke test)."""
    baseline = (await agent.status()).run_count
    await agent.signal("trigger_now", {"reason": "fleet-agent up --check"})
    st: AgentStatus | None = None
    try:
        async with asyncio.timeout(within):
            while True:
                st = await agent.status()
                if st.last_run is not None and st.last_run.run > baseline:
                    return st
                await asyncio.sleep(CHECK_POLL_INTERVAL)
    except TimeoutError:
        phase = "unknown" if st is None else st.phase.value
        raise CliError(f"no run finished within {within:g}s (phase: {phase})") from None


def check_summary(st: AgentStatus) -> int:
    """Print the `--check` result; 0 when the run ended ok."""
    last = st.last_run
    assert last is not None  # first_run returns only once a run has finished
    print(f"check: run {last_run_text(last)}", flush=True)
    print(f"check: session {st.session}, {st.run_count} run(s), phase {st.phase.value}", flush=True)
    return 0 if last.status == RunStatus.OK else 1


async def _newest_run(agent: AgentClient) -> int:
    """The number of the agent's newest finished run (0: none yet, or no answer)."""
    try:
        last = (await agent.status()).last_run
    except CliError:
        return 0
    return 0 if last is None else last.run


def _owner_gone(stack_file: Path) -> bool:
    """Whether the `up` that owned the stack has ended (its lock is free)."""
    claim = claim_stack(stack_file)
    if isinstance(claim, OwnedStack):
        claim.release()  # not ours to keep: this process runs no stack
        return True
    return False


async def attach(
    owner: StackRecord | None,
    *,
    address: str,
    namespace: str,
    agent_id: str,
    task_queue: str,
    stack_file: Path,
    stop: asyncio.Event,
    check_timeout: float | None,
    connect_within: float,
) -> int:
    """Attach to the running stack: start no worker or simulator; see the module doc.

    Touches the Temporal server (connect, start the agent if it is not
    running, status queries) and reads the stack file; returns the exit code.
    """
    who = "starting" if owner is None else f"pid {owner.pid}, since {owner.started_at:%H:%M:%S} UTC"
    print(
        f"fleet-agent is already running in this checkout ({who}), Temporal {address}: "
        "attaching to it. This process starts no worker and no simulator "
        "(--add-worker adds a worker to the running stack).",
        flush=True,
    )
    client = await connect_retrying(address, namespace, connect_within)
    agent = AgentClient(client, agent_id, task_queue=task_queue)
    started = await agent.start(None)
    print(f"agent {'started' if started else 'was already running: attached'}", flush=True)
    if check_timeout is not None:
        return check_summary(await first_run(agent, check_timeout))
    # The baseline comes first: a run that ends after the line below is news.
    seen = await _newest_run(agent)
    print("following the agent's runs; Ctrl-C detaches (the stack keeps running)", flush=True)
    while not stop.is_set():
        if _owner_gone(stack_file):
            print("the stack stopped", flush=True)
            return 0
        # CliError: the agent may be between executions, or the server busy.
        with contextlib.suppress(CliError):
            last = (await agent.status()).last_run
            if last is not None and last.run > seen:
                print(f"run {last_run_text(last)}", flush=True)
                seen = last.run
        try:
            async with asyncio.timeout(FOLLOW_INTERVAL):
                await stop.wait()
        except TimeoutError:
            pass
    print("detached; the stack keeps running", flush=True)
    return 0
