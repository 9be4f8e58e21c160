"""`python worker.py` stops cleanly on SIGTERM or Ctrl-C: it stops polling,
lets the activities under way finish within FLEET_WORKER_SHUTDOWN_GRACE_S,
and exits 0. Real dev server, real worker processes, the fake Messages API
driven by the real anthropic client."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from fleet_agent.models import AgentInput, ConfigPatch
from testkit.fakes import FakeAnthropic, Reply
from testkit.fakes.anthropic_payloads import DEFAULT_TEXT
from tests.helpers import (
    as_background_job,
    eventually,
    status_or_none,
    worker_process_env,
)
from workflows import FleetAgentWorkflow
from workflows.policies import TASK_QUEUE

pytestmark = pytest.mark.devserver

ROOT = Path(__file__).resolve().parents[2]
#: How long the fake Messages API takes to answer: long enough to signal the
#: worker while the call is under way, well inside the grace.
REPLY_S = 3.0


class _Worker:
    """`python worker.py`, its stderr collected."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.err = ""
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def start(cls, env: dict[str, str], preexec: Callable[[], None] | None = None) -> _Worker:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(ROOT / "worker.py"),
            env=env,
            cwd=ROOT,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            preexec_fn=preexec,
        )
        worker = cls(proc)
        await eventually(worker.polling, timeout=60, what="the worker to start polling")
        return worker

    async def _read(self) -> None:
        assert self.proc.stderr is not None
        async for line in self.proc.stderr:
            self.err += line.decode()

    async def polling(self) -> bool:
        assert self.proc.returncode is None, self.err[-2000:]
        return "worker on task queue" in self.err

    async def stop(self, sig: signal.Signals) -> int:
        """Send `sig`; the exit code (the worker is killed after 30 s)."""
        self.proc.send_signal(sig)
        try:
            code = await asyncio.wait_for(self.proc.wait(), timeout=30)
        except TimeoutError:
            self.proc.kill()
            await self._reader
            tail = self.err[-3000:]
            raise AssertionError(f"the worker did not stop on {sig.name}: {tail}") from None
        await self._reader
        return code

    async def close(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
        with contextlib.suppress(Exception):
            await self._reader


def _env(dev_env: WorkflowEnvironment, tmp_path: Path, fake: FakeAnthropic) -> dict[str, str]:
    return worker_process_env(
        dev_env,
        f"sqlite:///{tmp_path / 'fleet.db'}",
        # Other tests' agents may run on this task queue of the shared server.
        FLEET_NEW_STORE="1",
        FLEET_LLM_PROVIDER="anthropic",
        **fake.env(),
    )


async def test_sigterm_lets_the_model_call_under_way_finish_and_exits_zero(
    dev_env: WorkflowEnvironment, fake_llm: FakeAnthropic, tmp_path: Path
) -> None:
    """SIGTERM while the first run's model call is under way: the call ends
    within the grace and is not made again by the next worker."""
    fake_llm.set_responder(lambda _: Reply(text=DEFAULT_TEXT, delay=REPLY_S))
    env = _env(dev_env, tmp_path, fake_llm)
    agent_id = f"worker-stop-{uuid.uuid4().hex[:6]}"
    first = await _Worker.start(env)
    second: _Worker | None = None
    handle: WorkflowHandle[FleetAgentWorkflow, None] | None = None
    try:
        handle = await dev_env.client.start_workflow(
            FleetAgentWorkflow.run,
            AgentInput(config=ConfigPatch(monitor_enabled=False)),
            id=agent_id,
            task_queue=TASK_QUEUE,
        )
        # P0: the first run starts after 2 s, not the start-up trigger's 10 s.
        await handle.signal(FleetAgentWorkflow.trigger_now, {"reason": "test"})

        async def calling() -> bool:
            return fake_llm.in_flight > 0

        await eventually(calling, timeout=60, what="the model call to be under way")
        assert await first.stop(signal.SIGTERM) == 0, first.err[-2000:]
        assert "stopping: activities under way get 10 s" in first.err
        assert "worker stopped" in first.err
        assert "Traceback" not in first.err, first.err[-3000:]
        assert len(fake_llm.requests) == 1 and fake_llm.in_flight == 0

        # The next worker takes the run on from the call's result.
        second = await _Worker.start(env)

        async def ended() -> bool:
            st = await status_or_none(handle)
            return st is not None and st.last_run is not None

        await eventually(ended, timeout=60, what="the first run to end")
        assert len(fake_llm.requests) == 1, "the call was made again after the stop"
    finally:
        if handle is not None:
            with contextlib.suppress(Exception):
                await handle.terminate("test finished")
        for worker in (first, second):
            if worker is not None:
                await worker.close()


async def test_ctrl_c_stops_a_worker_started_in_the_background(
    dev_env: WorkflowEnvironment, fake_llm: FakeAnthropic, tmp_path: Path
) -> None:
    """A shell's background job inherits SIGINT ignored; the worker still
    stops on it."""
    worker = await _Worker.start(_env(dev_env, tmp_path, fake_llm), as_background_job)
    try:
        assert await worker.stop(signal.SIGINT) == 0, worker.err[-2000:]
        assert "worker stopped" in worker.err
    finally:
        await worker.close()
