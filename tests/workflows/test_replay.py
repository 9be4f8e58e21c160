"""Replay tests: workflow code must stay deterministic for agents already running.

- Live: a scenario on the time-skipping server with the vast.ai simulator
  behind the fleet tools: a human message, a tool round with
  schedule_next_check, a rental (search_offers → create_instance), the monitor
  signalling the new machine, a release (destroy_instance), the wake firing,
  and a reset that continues the agent as new. Then every history of it —
  each execution of the agent chain, each child run and the monitor — is
  replayed with `Replayer`.
- Recorded: the same histories, saved by release in tests/histories/<version>/,
  are replayed on every test run for each supported release (the current one,
  pyproject.toml's version, and the one before it), so a change that would
  break agents running either fails CI. A release's histories are recorded
  once, when it is cut (docs/decisions/patches.md)::

      # after bumping the version in pyproject.toml
      .venv/bin/python -m tests.workflows.test_replay --record
      # then delete the folder of the release before the previous one

File names encode the workflow ID ('/' as '__') and, for the agent, the
execution number of the continue-as-new chain.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, UnsandboxedWorkflowRunner
from temporalio.workflow import NondeterminismError

from activities.fleet import FleetActivities
from fleet_agent.config.settings import ProverSpec
from fleet_agent.models import Phase, RunInput, RunResult, RunStatus, TriggerKind
from fleet_agent.store import RunRecord, Store
from fleet_agent.vast.client import VastClient
from fleet_agent.vast.pacing import NO_PACING
from simulator import SimServer
from testkit.fakes.anthropic_server import FakeAnthropic, Reply, Request
from testkit.servers import start_time_skipping_env
from testkit.sim_helpers import SIM_RAM_GIB
from tests.helpers import (
    eventually,
    finished_runs,
    json_rows,
    message_after_a_reset,
    running_worker,
    status,
    status_after,
    wait_runs,
)
from tests.helpers.replay import (
    BEFORE_PATCHES,
    HISTORIES,
    SUPPORTED_COUNT,
    agent_chain,
    current_release,
    load_recorded,
    recorded_releases,
    supported_releases,
)
from workflows import AgentRunWorkflow, FleetAgentWorkflow, FleetMonitorWorkflow
from workflows.policies import STORE_TIMEOUT

AGENT_ID = "replay-agent"
RECORD_ENV = "FLEET_RECORD_HISTORIES"
ACTED = '<verdict>{"action": true, "state_changed": true}</verdict>'
NOOP = '<verdict>{"action": false, "state_changed": false}</verdict>'


def _respond(req: Request) -> Reply:
    """Scripted decisions that walk the interesting paths of the workflows."""
    text = req.last_user_text()
    results = req.tool_results()
    if results:
        content = str(results[-1]["content"])
        if "offers pass the guardrails" in content:
            offer = json_rows(content)[0]["offer_id"]
            return Reply(tool_calls=[("create_instance", {"offer_id": offer, "reason": "cover"})])
        if "capacity" in content and '"id"' in content:
            iid = json_rows(content)[0]["id"]
            return Reply(tool_calls=[("destroy_instance", {"instance_id": iid, "reason": "done"})])
        return Reply(text=f"Done.\n{ACTED}")
    if "please schedule" in text:
        return Reply(
            text="I will look again later.",
            tool_calls=[("schedule_next_check", {"delay_seconds": 900, "reason": "loading"})],
        )
    if "rent one" in text:
        return Reply(tool_calls=[("search_offers", {"gpu_name": "RTX 4090", "limit": 3})])
    if "release it" in text:
        return Reply(tool_calls=[("get_fleet_status", {})])
    if "after the reset" in text:
        return Reply(text=f"Hello again.\n{ACTED}")
    return Reply(text=f"Nothing to do.\n{NOOP}")


def replayer() -> Replayer:
    return Replayer(
        workflows=[FleetAgentWorkflow, AgentRunWorkflow, FleetMonitorWorkflow],
        data_converter=pydantic_data_converter,
    )


async def replay_all(histories: Iterable[WorkflowHistory]) -> None:
    """Replay each history; the first nondeterminism (or other failure) raises."""
    replay = replayer()
    for history in histories:
        await replay.replay_workflow(history)


async def scenario(
    env: WorkflowEnvironment, store: Store, fake: FakeAnthropic, fleet: FleetActivities
) -> dict[str, WorkflowHistory]:
    """Drive one agent through the interesting paths; return its histories by file stem."""
    fake.set_responder(_respond)
    client = env.client
    async with running_worker(client, store, fleet=fleet) as h:
        handle = await h.start_agent(
            agent_id=AGENT_ID,
            heartbeat_seconds=3600,
            monitor_poll_seconds=120,
            # "release it" destroys the machine minutes after renting it.
            min_release_age_minutes=0,
        )
        await handle.signal(FleetAgentWorkflow.human_message, "please schedule a check")
        runs = await wait_runs(store, AGENT_ID, 1)
        assert runs[0].tool_calls == 1 and runs[0].rounds == 2, runs[0]
        wakes = (await status_after(handle, 1)).wakes
        assert len(wakes) == 1, wakes
        # With the sender's id (`ask`), which the run's trigger carries.
        await handle.signal(
            FleetAgentWorkflow.human_message, {"text": "rent one", "message_id": "m-replay"}
        )
        runs = await wait_runs(store, AGENT_ID, 2)
        assert runs[1].mutating_calls == 1, runs[1]
        assert [r.run for r in store.run_reads.runs_with_message(AGENT_ID, "m-replay")] == [2]
        # The monitor sees the new machine at its next poll and signals it:
        # one more run (skip to that poll instead of waiting for it).
        await env.sleep(130)
        runs = await wait_runs(store, AGENT_ID, 3, timeout=60)
        assert any(t.kind == TriggerKind.STATE_CHANGED for t in runs[2].triggers), runs[2]
        await handle.signal(FleetAgentWorkflow.human_message, "release it")
        runs = await _wait_for(store, lambda rs: any(r.mutating_calls and r.run > 2 for r in rs))
        await env.sleep(1_000)  # the 900 s wake fires
        runs = await _wait_for(
            store, lambda rs: any(t.kind == TriggerKind.WAKE for r in rs for t in r.triggers)
        )
        await handle.signal(FleetAgentWorkflow.reset_session, {"reason": "replay test"})
        # No query while the continue-as-new is in flight (see test_agent_loop).
        await message_after_a_reset(handle, "hello after the reset")
        runs = await _wait_for(store, lambda rs: rs[-1].session == 2)
        assert runs[-1].status == RunStatus.OK

        async def settled() -> bool:
            st = await status(handle)
            return st.executions >= 2 and st.current_run is None and st.phase == Phase.IDLE

        await eventually(settled, what="the agent to settle after the reset")
        runs = await wait_runs(store, AGENT_ID, (await status(handle)).run_count)
    # The worker is gone and the agent terminated: every history is final.
    histories: dict[str, WorkflowHistory] = {}
    for n, history in enumerate(await agent_chain(client, AGENT_ID), start=1):
        histories[f"{AGENT_ID}.exec{n}"] = history
    for workflow_id in [f"{AGENT_ID}/run-{r.run}" for r in runs] + [f"{AGENT_ID}/monitor"]:
        histories[workflow_id.replace("/", "__")] = await client.get_workflow_handle(
            workflow_id
        ).fetch_history()
    return histories


async def _wait_for(store: Store, done: Callable[[list[RunRecord]], bool]) -> list[RunRecord]:
    async def probe() -> list[RunRecord]:
        runs = finished_runs(store, AGENT_ID)
        return runs if runs and done(runs) else []

    return await eventually(probe, timeout=60, what="the scenario's next run")


def save(histories: dict[str, WorkflowHistory], directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for old in directory.glob("*.json"):
        old.unlink()
    for stem, history in histories.items():
        (directory / f"{stem}.json").write_text(history.to_json() + "\n")


# ---------------------------------------------------------------- tests


async def test_live_histories_replay(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic, fleet: FleetActivities
) -> None:
    histories = await scenario(ts_env, store, fake_llm, fleet)
    assert {"replay-agent.exec1", "replay-agent.exec2", "replay-agent__monitor"} <= set(histories)
    assert sum("__run-" in stem for stem in histories) >= 6
    events = {
        stem: {
            e.activity_task_scheduled_event_attributes.activity_type.name
            for e in h.events
            if e.HasField("activity_task_scheduled_event_attributes")
        }
        for stem, h in histories.items()
    }
    run_activities = set().union(*(v for k, v in events.items() if "__run-" in k))
    assert {"create_instance", "destroy_instance", "search_offers"} <= run_activities
    # The poll says whether the agent runs (workflows/monitor.py, OPEN_IN_POLL_PATCH);
    # the recorded monitor history, older, still checks before every poll.
    assert "poll_fleet" in events["replay-agent__monitor"]
    assert "agent_is_open" not in events["replay-agent__monitor"]
    await replay_all(histories.values())
    if os.environ.get(RECORD_ENV) == "1":
        save(histories, HISTORIES / current_release())


def test_the_corpus_holds_the_supported_releases() -> None:
    """The newest folder is the current release, and no older release than
    the previous one is kept: its patches may be retiring."""
    releases = recorded_releases()
    assert releases and releases[-1] == current_release(), (releases, current_release())
    assert len(releases) <= SUPPORTED_COUNT, releases


@pytest.mark.parametrize("release", supported_releases())
def test_recorded_histories_are_small_and_complete(release: str) -> None:
    paths = sorted((HISTORIES / release).glob("*.json"))
    assert {p.stem for p in paths} >= {
        "replay-agent.exec1",
        "replay-agent.exec2",
        "replay-agent__monitor",
    }
    assert sum("__run-" in p.stem for p in paths) >= 6
    assert sum(p.stat().st_size for p in paths) < 600_000


def test_the_recorded_monitor_replays_the_check_before_every_poll() -> None:
    """Release 0.1.0's monitor, recorded before OPEN_IN_POLL_PATCH: its replay
    covers the old branch, `agent_is_open` before each poll. This test goes
    with 0.1.0, when the patch's old branch may go (docs/decisions/patches.md)."""
    monitor = next(h for h in load_recorded(BEFORE_PATCHES) if h.workflow_id.endswith("/monitor"))
    types = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in monitor.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    polls = [i for i, name in enumerate(types) if name == "poll_fleet"]
    assert polls and all(i > 0 and types[i - 1] == "agent_is_open" for i in polls), types


_SUPPORTED_HISTORIES = [(r, h) for r in supported_releases() for h in load_recorded(HISTORIES / r)]


@pytest.mark.parametrize(
    ("release", "history"),
    _SUPPORTED_HISTORIES,
    ids=[f"{r}/{h.workflow_id}@{h.run_id[:8]}" for r, h in _SUPPORTED_HISTORIES],
)
async def test_recorded_history_replays(release: str, history: WorkflowHistory) -> None:
    result = await replayer().replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure


@workflow.defn(name="AgentRunWorkflow")
class _ChangedRunWorkflow:
    """AgentRunWorkflow as a careless edit might leave it: one more activity first."""

    @workflow.run
    async def run(self, inp: RunInput) -> RunResult:
        await workflow.execute_activity(
            "load_agent_counters", inp.agent_id, start_to_close_timeout=STORE_TIMEOUT
        )
        return RunResult(run=inp.run, status=RunStatus.OK)


async def test_a_nondeterministic_change_fails_replay() -> None:
    """The control: the recorded histories do catch an incompatible change."""
    oldest = HISTORIES / supported_releases()[0]
    child = next(h for h in load_recorded(oldest) if "/run-" in h.workflow_id)
    changed = Replayer(
        workflows=[_ChangedRunWorkflow],
        data_converter=pydantic_data_converter,
        # Defined in a test module: no sandbox, which would re-import pytest.
        workflow_runner=UnsandboxedWorkflowRunner(),
    )
    with pytest.raises(NondeterminismError):
        await changed.replay_workflow(child)


# ---------------------------------------------------------------- recording


async def record(directory: Path) -> dict[str, WorkflowHistory]:
    """Run the scenario on a fresh time-skipping server and save its histories."""
    env = await start_time_skipping_env()
    try:
        with (
            tempfile.TemporaryDirectory() as tmp,
            FakeAnthropic() as fake,
            SimServer(seed=11, speed=0, scenario="ideal", offers=500, rate_limits=False) as sim,
        ):
            os.environ.update(fake.env())
            store = Store(f"sqlite:///{Path(tmp) / 'fleet.db'}")
            store.create_all()
            try:
                async with VastClient(
                    sim.api_key, sim.url, timeout=2, backoff_base=0.01, pacing=NO_PACING
                ) as vast:
                    fleet = FleetActivities(
                        vast,
                        ProverSpec(
                            mode="curio_on_host", allow_loopback=True, min_host_ram_gib=SIM_RAM_GIB
                        ),
                        store=store,
                        clock=sim.market.now,
                    )
                    histories = await scenario(env, store, fake, fleet)
            finally:
                store.dispose()
    finally:
        await env.shutdown()
    await replay_all(histories.values())
    save(histories, directory)
    return histories


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--record",
        action="store_true",
        help="record the current release's histories into tests/histories/<version>/",
    )
    parser.add_argument(
        "--force", action="store_true", help="replace that release's histories if recorded"
    )
    args = parser.parse_args(argv)
    if not args.record:
        parser.print_help()
        return 2
    directory = HISTORIES / current_release()
    if directory.exists() and not args.force:
        # A release's histories stand for the agents it started: recorded once.
        print(f"{directory} exists: bump the version in pyproject.toml, or --force")
        return 1
    histories = asyncio.run(record(directory))
    for stem in histories:
        size = (directory / f"{stem}.json").stat().st_size
        print(f"{directory / stem}.json  {size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
