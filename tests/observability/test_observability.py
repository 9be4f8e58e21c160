"""What an operator sees from outside: Prometheus metrics, search attributes,
and a run's answer in the Web UI.

On a dev server started with temporal-dev.yaml's search attributes, a worker
whose client carries a Prometheus runtime on a free port runs an agent through
one run that acts and one that does not; then /metrics is scraped with httpx
and the runs are listed by search-attribute queries, as in docs/operations/watch.md.
The settings and pure parts behind it: tests/config/test_metrics_port.py,
tests/observability/test_visibility_details.py, tests/observability/test_workflow_metrics.py.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest_asyncio
from temporalio import activity
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment
from temporalio.worker import Replayer, Worker

from activities.visibility import VisibilityActivities
from fleet_agent.llm.anthropic_provider import AnthropicProvider
from fleet_agent.models import AgentInput, ConfigPatch, RunResult, RunStatus
from fleet_agent.store import Store
from fleet_agent.visibility.search_attributes import SEARCH_ATTRIBUTES
from runtime.telemetry import metrics_runtime
from starter.stack.devserver import load_dev_config
from testkit.fakes.anthropic_server import FakeAnthropic, Reply, Request
from testkit.servers import start_dev_env
from tests.helpers import eventually, running_worker, status_after
from tests.helpers.ports import free_port
from worker import worker_activities
from workflows import AgentRunWorkflow, FleetAgentWorkflow

ACT_ANSWER = "Rented two RTX 4090s to reach the target of 500 proofs/h."
ACT = f'{ACT_ANSWER}\n<verdict>{{"action": true, "state_changed": true}}</verdict>'
QUIET = 'All steady.\n<verdict>{"action": false, "state_changed": false}</verdict>'

_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][\w:]*)(?:\{(?P<labels>[^}]*)\})? (?P<value>\S+)$")


def upserted(history: WorkflowHistory) -> set[str]:
    """Names of the search attributes a history upserts."""
    found: set[str] = set()
    for e in history.events:
        if e.HasField("upsert_workflow_search_attributes_event_attributes"):
            attributes = e.upsert_workflow_search_attributes_event_attributes.search_attributes
            found |= set(attributes.indexed_fields)
    return found


def samples(text: str, name: str, **labels: str) -> list[float]:
    """Values of the series `name` whose labels include `labels`."""
    found: list[float] = []
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m is None or m["name"] != name:
            continue
        have = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m["labels"] or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            found.append(float(m["value"]))
    return found


@pytest_asyncio.fixture(scope="module")
async def sa_env() -> AsyncIterator[WorkflowEnvironment]:
    """A dev server with temporal-dev.yaml's search attributes, as `make run` has them."""
    config = load_dev_config()
    extra: list[str] = []
    for name, kind in config.search_attributes.items():
        extra += ["--search-attribute", f"{name}={kind}"]
    env = await start_dev_env(extra + config.dynamic_config_args())
    yield env
    await env.shutdown()


def _responder(req: Request) -> Reply:
    return Reply(text=ACT if "act-now" in req.last_user_text() else QUIET)


def test_the_dev_server_registers_every_search_attribute_the_workflows_upsert() -> None:
    assert load_dev_config().search_attributes == SEARCH_ATTRIBUTES


async def test_metrics_search_attributes_and_the_answer(
    sa_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    fake_llm.set_responder(_responder)
    port = free_port()
    client = await Client.connect(
        sa_env.client.service_client.config.target_host,
        namespace=sa_env.client.namespace,
        data_converter=pydantic_data_converter,
        runtime=metrics_runtime(f"127.0.0.1:{port}"),
    )
    async with running_worker(client, store) as h:
        handle = await h.start_agent(p0_debounce_seconds=0.2, p1_debounce_seconds=0.2)
        agent = handle.id
        await status_after(handle, 1)  # the start-up run: quiet
        await handle.signal(FleetAgentWorkflow.human_message, {"text": "act-now please"})
        st = await status_after(handle, 2)

        # The answer: in the run's result (the Web UI's output), and the
        # agent's details lead with the last run's verdict and answer.
        result = await client.get_workflow_handle(f"{agent}/run-2", result_type=RunResult).result()
        assert result.answer == ACT_ANSWER
        assert st.last_run is not None and st.last_run.answer == ACT_ANSWER
        # Current details are served by the metadata query (not history).
        meta = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
        current = meta.current_details
        assert current.split("\n\n")[0].startswith("**idle** · target ")
        assert f"last run #2: ok, acted — answer: “{ACT_ANSWER}”" in current

        # Search attributes: runs that acted, and runs of this agent.
        async def listed(query: str) -> list[str]:
            return sorted([wf.id async for wf in client.list_workflows(query)])

        acted_query = f"FleetAgentId = '{agent}' AND RunVerdictAction = true"
        quiet_query = f"FleetAgentId = '{agent}' AND RunVerdictAction = false AND RunNoop = true"
        assert await eventually(lambda: listed(acted_query), what="the run that acted") == [
            f"{agent}/run-2"
        ]
        assert await eventually(lambda: listed(quiet_query), what="the quiet run") == [
            f"{agent}/run-1"
        ]
        human = f"FleetAgentId = '{agent}' AND RunTriggers = 'human_message'"
        assert await eventually(lambda: listed(human), what="runs by trigger") == [f"{agent}/run-2"]
        idle = f"FleetAgentId = '{agent}' AND FleetPhase = 'idle'"
        assert await eventually(lambda: listed(idle), what="the idle agent") == [agent]

        # The upserts replay: the histories that carry them are deterministic.
        replayer = Replayer(
            workflows=[FleetAgentWorkflow, AgentRunWorkflow],
            data_converter=pydantic_data_converter,
        )
        for workflow_id, names in (
            (agent, {"FleetAgentId", "FleetPhase"}),
            (f"{agent}/run-1", {"RunVerdictAction", "RunNoop"}),
            (f"{agent}/run-2", {"RunVerdictAction", "RunNoop"}),
        ):
            history = await client.get_workflow_handle(workflow_id).fetch_history()
            assert names <= upserted(history), workflow_id
            await replayer.replay_workflow(history)

        # Prometheus: ours and the SDK's, with sensible values.
        async def scrape() -> str:
            async with httpx.AsyncClient() as http:
                text = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
            return text if samples(text, "fleet_runs_finished_total", agent_id=agent) else ""

        text = await eventually(scrape, what="our metrics on /metrics")
        ok_acted = samples(
            text, "fleet_runs_finished_total", agent_id=agent, status="ok", acted="true"
        )
        ok_quiet = samples(
            text, "fleet_runs_finished_total", agent_id=agent, acted="false", noop="true"
        )
        assert ok_acted == [1.0] and ok_quiet == [1.0]
        assert samples(text, "fleet_run_triggers_total", agent_id=agent, kind="human_message") == [
            1.0
        ]
        (p0_count,) = samples(text, "fleet_p0_latency_seconds_count", agent_id=agent)
        (p0_sum,) = samples(text, "fleet_p0_latency_seconds_sum", agent_id=agent)
        assert p0_count == 1.0 and 0.2 <= p0_sum < 10.0, "the debounce, and not much more"
        (runs_timed,) = samples(text, "fleet_run_duration_seconds_count", agent_id=agent)
        assert runs_timed == 2.0
        assert samples(text, "fleet_llm_tokens_total", agent_id=agent, kind="output_tokens")[0] > 0
        (cost_count,) = samples(text, "fleet_run_llm_cost_usd_count", agent_id=agent)
        (cost_sum,) = samples(text, "fleet_run_llm_cost_usd_sum", agent_id=agent)
        assert cost_count == 2.0 and cost_sum > 0
        assert samples(text, "fleet_pending_triggers", agent_id=agent) == [0.0]
        assert samples(text, "fleet_frozen", agent_id=agent) == [0.0]
        assert samples(text, "fleet_runs_total", agent_id=agent) == [2.0]
        assert samples(text, "fleet_target_proofs_per_hour", agent_id=agent) == [
            st.config.target_proofs_per_hour
        ]
        # The SDK's own, from the same runtime.
        assert samples(text, "temporal_workflow_task_schedule_to_start_latency_count")
        assert samples(text, "temporal_activity_execution_latency_count")
        # No free text in any label: each label value is short and plain.
        for value in re.findall(r'="([^"]*)"', text):
            assert len(value) <= 80 and "act-now" not in value and ACT_ANSWER not in value


async def test_search_attributes_ready_asks_the_namespace(
    sa_env: WorkflowEnvironment, dev_env: WorkflowEnvironment
) -> None:
    """True where they are registered, False where not (the workflows then
    never upsert); on and off skip the question."""
    for env, expected in ((sa_env, True), (dev_env, False)):
        activities = ActivityEnvironment(client=env.client)
        assert await activities.run(VisibilityActivities().search_attributes_ready) is expected
    assert await ActivityEnvironment().run(VisibilityActivities("on").search_attributes_ready)
    assert not await ActivityEnvironment().run(VisibilityActivities("off").search_attributes_ready)


@activity.defn(name="search_attributes_ready")
async def _broken_check() -> bool:
    raise RuntimeError("this worker cannot tell")


async def test_an_agent_whose_check_fails_runs_without_search_attributes(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    fake_llm.set_responder(_responder)
    task_queue = f"fleet-agent-test-{uuid.uuid4().hex[:8]}"
    activities = [
        a
        for a in worker_activities(store, AnthropicProvider())
        if getattr(a, "__name__", "") != "search_attributes_ready"
    ]
    async with Worker(
        ts_env.client,
        task_queue=task_queue,
        workflows=[FleetAgentWorkflow, AgentRunWorkflow],
        activities=[*activities, _broken_check],
    ):
        handle = await ts_env.client.start_workflow(
            FleetAgentWorkflow.run,
            AgentInput(config=ConfigPatch(monitor_enabled=False, p1_debounce_seconds=0.2)),
            id=f"agent-{uuid.uuid4().hex[:8]}",
            task_queue=task_queue,
        )
        try:
            st = await status_after(handle, 1)
            assert st.last_run is not None and st.last_run.status == RunStatus.OK
            history = await handle.fetch_history()
            failed = [
                e for e in history.events if e.HasField("activity_task_failed_event_attributes")
            ]
            assert len(failed) == 1, "tried (three attempts, one failure event), then went on"
            # (The SDK itself upserts TemporalChangeVersion with the patch marker.)
            assert not upserted(history) & set(SEARCH_ATTRIBUTES), upserted(history)
        finally:
            await handle.terminate("test finished")
