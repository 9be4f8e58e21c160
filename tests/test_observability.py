"""What an operator sees from outside: Prometheus metrics, search attributes,
and a run's answer in the Web UI.

On a dev server started with temporal-dev.yaml's search attributes, a worker
whose client carries a Prometheus runtime on a free port runs an agent through
one run that acts and one that does not; then /metrics is scraped with httpx
and the runs are listed by search-attribute queries, as in docs/OPERATIONS.md.
"""

from __future__ import annotations

import re
import socket
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import pytest_asyncio
import temporalio.workflow
from temporalio import activity
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment
from temporalio.worker import Replayer, Worker

from activities.visibility import VisibilityActivities, missing_attributes
from fleet_agent.config.metrics_address import metrics_address
from fleet_agent.config.settings import Settings
from fleet_agent.fleet.snapshot import FleetSnapshot
from fleet_agent.llm.anthropic_provider import AnthropicProvider
from fleet_agent.llm.verdict import ANSWER_PREVIEW_CHARS, answer_preview
from fleet_agent.models import (
    AgentConfig,
    AgentInput,
    AgentState,
    ConfigPatch,
    LastRun,
    Phase,
    RunResult,
    RunStatus,
    SpendSummary,
    Trigger,
    TriggerKind,
    Verdict,
)
from fleet_agent.store import Store
from fleet_agent.visibility.details import agent_details, last_run_line, run_details
from fleet_agent.visibility.search_attributes import SEARCH_ATTRIBUTES, search_attribute_mode
from runtime.telemetry import (
    STACK_METRICS_ADDRESS,
    MetricsUnavailable,
    install_stack_metrics,
    metrics_runtime,
)
from starter.cli import main as cli_main
from starter.devserver import load_dev_config
from testkit.fakes.anthropic_server import FakeAnthropic, Reply, Request
from testkit.servers import start_dev_env
from tests.helpers import eventually, running_worker, status_after
from tests.ports import free_port
from worker import worker_activities
from workflows import AgentRunWorkflow, FleetAgentWorkflow, metrics

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


def test_a_taken_metrics_port_is_a_clear_error() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        address = f"127.0.0.1:{held.getsockname()[1]}"
        with pytest.raises(MetricsUnavailable, match=f"cannot serve metrics on {address}"):
            metrics_runtime(address)


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


# ---------------------------------------------------------------- pure parts


@pytest.mark.parametrize(
    ("env", "address"),
    [
        ({}, None),
        ({"METRICS_PORT": "off"}, None),
        ({"METRICS_PORT": "9464"}, "127.0.0.1:9464"),
        ({"METRICS_PORT": " 0.0.0.0:9100 "}, "0.0.0.0:9100"),
        ({"METRICS_PORT": "[::]:9100"}, "[::]:9100"),
        ({"FLEET_METRICS_PORT": "9200"}, "127.0.0.1:9200"),
        ({"METRICS_PORT": "9300", "FLEET_METRICS_PORT": "9200"}, "127.0.0.1:9300"),
    ],
)
def test_metrics_port_settings(env: dict[str, str], address: str | None) -> None:
    assert metrics_address(env) == address
    assert Settings.from_env(env).metrics_address == address


@pytest.mark.parametrize(
    ("env", "name"),
    [
        ({"METRICS_PORT": "nine"}, "METRICS_PORT"),
        ({"METRICS_PORT": "70000"}, "METRICS_PORT"),
        ({"METRICS_PORT": "0"}, "METRICS_PORT"),
        ({"METRICS_PORT": ":9464"}, "METRICS_PORT"),
        ({"FLEET_METRICS_PORT": "host:"}, "FLEET_METRICS_PORT"),
    ],
)
def test_a_bad_metrics_port_names_the_variable(env: dict[str, str], name: str) -> None:
    with pytest.raises(ValueError, match=f"^{name} must be a port"):
        Settings.from_env(env)


def test_search_attribute_mode_setting() -> None:
    assert Settings.from_env({}).search_attributes == "auto"
    assert Settings.from_env({"FLEET_SEARCH_ATTRIBUTES": " ON "}).search_attributes == "on"
    assert search_attribute_mode({"FLEET_SEARCH_ATTRIBUTES": "off"}) == "off"
    with pytest.raises(ValueError, match=r"^FLEET_SEARCH_ATTRIBUTES must be auto, on or off"):
        Settings.from_env({"FLEET_SEARCH_ATTRIBUTES": "yes"})


def test_missing_search_attributes_are_named_with_their_type() -> None:
    def kind(name: str) -> int:
        return IndexedValueType.Value(f"INDEXED_VALUE_TYPE_{name}")

    registered = {
        "FleetAgentId": kind("KEYWORD"),
        "FleetPhase": kind("TEXT"),  # the wrong type counts as missing
        "RunVerdictAction": kind("BOOL"),
        "RunNoop": kind("BOOL"),
    }
    assert missing_attributes(registered) == ["FleetPhase (Keyword)", "RunTriggers (KeywordList)"]
    registered |= {"FleetPhase": kind("KEYWORD"), "RunTriggers": kind("KEYWORD_LIST")}
    assert missing_attributes(registered) == []


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


def _serve(address: str) -> str:
    metrics_runtime(address)  # binds, or raises; dropped at once (the default runtime stays)
    return f"http://{address}/metrics"


def test_the_stacks_metrics_port() -> None:
    served: list[str] = []

    def record(address: str) -> str:
        served.append(address)
        return "URL"

    assert install_stack_metrics({}, record) == ("URL", "metrics:    URL")
    assert served == [STACK_METRICS_ADDRESS], "the default address when METRICS_PORT is unset"
    assert install_stack_metrics({"METRICS_PORT": "off"}, _serve) == (
        None,
        "metrics:    off (METRICS_PORT=off)",
    )
    port = free_port()
    url, line = install_stack_metrics({"METRICS_PORT": str(port)}, _serve)
    assert url == f"http://127.0.0.1:{port}/metrics" and line == f"metrics:    {url}"
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = str(held.getsockname()[1])
        with pytest.raises(MetricsUnavailable, match="set METRICS_PORT to a free port"):
            install_stack_metrics({"METRICS_PORT": taken}, _serve)
        # The default port taken (a second stack): metrics off, said plainly.

        def taken_default(address: str) -> str:
            return _serve(f"127.0.0.1:{taken}")

        url, line = install_stack_metrics({}, taken_default)
        assert url is None and line.startswith("metrics:    off: cannot serve metrics on")


def test_answer_preview_is_short_flat_and_without_the_verdict() -> None:
    text = "First line.\n\n  Second   line.\n" + "x" * 500 + '\n<verdict>{"action": true}</verdict>'
    preview = answer_preview(text)
    assert preview.startswith("First line. Second line. xxx") and "verdict" not in preview
    assert len(preview) == ANSWER_PREVIEW_CHARS and preview.endswith("…")
    assert answer_preview('Fine.\n<verdict>{"action": false}</verdict>') == "Fine."
    assert answer_preview("") == ""


def test_the_web_ui_details_lead_with_status_and_the_last_runs_answer() -> None:
    state = AgentState(config=AgentConfig(target_proofs_per_hour=500), run_count=7)
    state.last_run = LastRun(
        run=7,
        status=RunStatus.OK,
        verdict=Verdict(action=True, state_changed=True),
        noop=False,
        answer="Rented one.",
    )
    state.spend = SpendSummary(as_of=datetime(2026, 11, 29, tzinfo=UTC), current_dph=1.5)
    first, second, *_ = agent_details(state, Phase.IDLE, None, None).split("\n\n")
    assert first == "**idle** · target 500 proofs/h · $1.50/h now · session 1 · 7 runs"
    assert second == "last run #7: ok, acted — answer: “Rented one.”"
    quiet = LastRun(run=8, status=RunStatus.OK, verdict=None, noop=True)
    assert last_run_line(quiet) == "last run #8: ok, no-op"
    failed = RunResult(run=9, status=RunStatus.FAILED, error="LLM 400", rounds=1)
    assert run_details(failed).split("\n\n") == [
        "**failed** · verdict unknown · 1 round(s) · 0 tool call(s)",
        "LLM 400",
    ]
    done = RunResult(
        run=10, status=RunStatus.OK, verdict=Verdict(action=False, state_changed=False)
    )
    done.answer, done.noop = "All steady.", True
    assert run_details(done).endswith(
        "no-op · 0 round(s) · 0 tool call(s)\n\nanswer: “All steady.”"
    )


class _Gauges:
    """Stands in for the workflow's metric meter: keeps the last value set on
    each gauge, and refuses anything else."""

    def __init__(self, values: dict[str, float]) -> None:
        self.values = values

    def with_additional_attributes(self, additional_attributes: Any) -> _Gauges:
        return self

    def _gauge(self, name: str, *_: Any) -> Any:
        values = self.values

        class Gauge:
            def set(self, value: float, attributes: Any = None) -> None:
                values[name] = value

        return Gauge()

    create_gauge = create_gauge_float = _gauge


def test_the_monitors_poll_sets_the_fleet_gauges(monkeypatch: pytest.MonkeyPatch) -> None:
    values: dict[str, float] = {}
    monkeypatch.setattr(temporalio.workflow, "metric_meter", lambda: _Gauges(values))
    snap = FleetSnapshot(
        target_proofs_per_hour=500,
        capacity_proofs_per_hour=420,
        expected_proofs_per_hour=480,
        fleet_dph=3.25,
    )
    metrics.record_fleet("a", snap)
    assert values == {
        "fleet_capacity_proofs_per_hour": 420,
        "fleet_expected_proofs_per_hour": 480,
        "fleet_dph_usd": 3.25,
        "fleet_instances": 0,
    }
    values.clear()
    metrics.record_fleet("a", FleetSnapshot(error="vast.ai down"))
    assert values == {}, "a failed poll leaves the last figures"


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


def test_a_worker_whose_metrics_port_is_taken_says_so_and_exits_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        monkeypatch.setenv("METRICS_PORT", str(port))
        monkeypatch.setenv("FLEET_LLM_PROVIDER", "autopilot")
        # Nothing listens on this Temporal address: metrics fail first.
        monkeypatch.setenv("TEMPORAL_ADDRESS", f"127.0.0.1:{free_port()}")
        assert cli_main(["worker"]) == 1
    err = capsys.readouterr().err
    assert f"cannot serve metrics on 127.0.0.1:{port}" in err
    monkeypatch.setenv("METRICS_PORT", "nine")
    assert cli_main(["worker"]) != 0
    assert "METRICS_PORT must be a port (1-65535), HOST:PORT, or off, not 'nine'" in (
        capsys.readouterr().err
    )


class _Recorder:
    """Stands in for the workflow's metric meter: keeps what counters add and
    histograms record, by metric name and labels."""

    def __init__(self) -> None:
        self.added: dict[tuple[str, str], int] = {}
        self.recorded: dict[str, list[float]] = {}

    def with_additional_attributes(self, additional_attributes: Any) -> _Recorder:
        return self

    def create_counter(self, name: str, *_: Any) -> Any:
        added = self.added

        class Counter:
            def add(self, value: int, attributes: dict[str, str]) -> None:
                key = (name, ",".join(f"{k}={v}" for k, v in sorted(attributes.items())))
                added[key] = added.get(key, 0) + value

        return Counter()

    def create_histogram_float(self, name: str, *_: Any) -> Any:
        recorded = self.recorded.setdefault(name, [])

        class Histogram:
            def record(self, value: float) -> None:
                recorded.append(value)

        return Histogram()


def test_p0_latency_counts_operator_triggers_only(monkeypatch: pytest.MonkeyPatch) -> None:
    meter = _Recorder()
    monkeypatch.setattr(temporalio.workflow, "metric_meter", lambda: meter)
    now = datetime(2026, 11, 29, 12, 0, 10, tzinfo=UTC)

    def trigger(kind: TriggerKind, seconds_ago: float, count: int = 1) -> Trigger:
        return Trigger(
            seq=0, kind=kind, received_at=now - timedelta(seconds=seconds_ago), count=count
        )

    metrics.record_run_started(
        "a",
        [
            trigger(TriggerKind.HUMAN_MESSAGE, 3.0),
            trigger(TriggerKind.TRIGGER_NOW, 1.5),
            trigger(TriggerKind.WAKE, 0.0),
            trigger(TriggerKind.STATE_CHANGED, 9.0, count=3),
        ],
        now,
    )
    assert meter.recorded == {"fleet_p0_latency_seconds": [3.0, 1.5]}
    assert meter.added == {
        ("fleet_run_triggers", "kind=human_message"): 1,
        ("fleet_run_triggers", "kind=trigger_now"): 1,
        ("fleet_run_triggers", "kind=wake"): 1,
        ("fleet_run_triggers", "kind=state_changed"): 3,
    }
