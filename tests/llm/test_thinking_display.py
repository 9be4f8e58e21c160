"""`llm_thinking_display` defaults to "summarized": Sonnet 5.5 writes its
text between tool calls in thinking blocks ("text between tool calls comes
back in thinking blocks. An application that streams that text to its users
goes quiet between tool calls until it sets a display value that returns the
text", https://platform.claude.com/docs/en/models/sonnet-5-5/whats-new-sonnet-5-5),
so with "omitted" the run log and the digests lost the model's reasoning
between its calls.

- A new agent asks for summarized thinking; `show-run`, the console's run
  page, the digest of its fleet changes in a later run's prompt keep the
  text the model wrote before each call (a real worker on the time-skipping
  server, the vast.ai simulator, the fake Messages API behaving as Sonnet
  5.5: testkit/fakes/anthropic_thinking.py).
- An agent that ran before keeps its "omitted": its recorded history replays
  with the config it had (workflows/agent_state.py,
  THINKING_SUMMARIZED_PATCH).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
from starlette.testclient import TestClient
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import (
    Interceptor,
    Replayer,
    StartChildWorkflowInput,
    UnsandboxedWorkflowRunner,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
    WorkflowOutboundInterceptor,
)

from activities.fleet import FleetActivities
from fleet_agent.models import AgentConfig, RunInput, RunStatus
from fleet_agent.store import Store
from starter.agent_client import AgentClient, open_client
from starter.console import ConsoleSettings, create_app
from starter.views.runlog import run_detail
from testkit.fakes.anthropic_server import FakeAnthropic, Reply, Request
from tests.helpers import json_rows, running_worker, wait_runs
from tests.helpers.replay import BEFORE_PATCHES, load_recorded
from workflows import AgentRunWorkflow, FleetAgentWorkflow, FleetMonitorWorkflow

ACTED = '<verdict>{"action": true, "state_changed": true}</verdict>'
NOOP = '<verdict>{"action": false, "state_changed": false}</verdict>'
SEARCHING = "Short of the target by one machine: looking for offers first."
RENTING = "The cheapest offer covers the gap on its own: renting it."


def _respond(req: Request) -> Reply:
    """Run 1: search, rent the first offer, answer; each call with a note
    before it, which Sonnet 5.5 sends in a thinking block. Run 2: answer."""
    results = req.tool_results()
    if results:
        content = str(results[-1]["content"])
        if "offers pass the guardrails" in content:
            offer = json_rows(content)[0]["offer_id"]
            call = ("create_instance", {"offer_id": offer, "reason": "cover the gap"})
            return Reply(text=RENTING, tool_calls=[call])
        return Reply(text=f"Rented one machine.\n{ACTED}")
    if "second look" in req.last_user_text():
        return Reply(text=f"Nothing more to do.\n{NOOP}")
    return Reply(text=SEARCHING, tool_calls=[("search_offers", {"limit": 3})])


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def console_for(store: Store, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[TestClient]]:
    """The console on the test's store (Temporal unreachable: the run log
    needs only the store); call it with the agent's ID by appending."""
    monkeypatch.setenv("FLEET_DATABASE_URL", str(store.engine.url))
    clients: list[TestClient] = []
    yield clients
    for client in clients:
        client.__exit__(None, None, None)


def _console(agent_id: str, clients: list[TestClient]) -> TestClient:
    port = _closed_port()

    def connect():  # type: ignore[no-untyped-def]
        return open_client(f"127.0.0.1:{port}", None, connect_timeout=2)

    app = create_app(AgentClient(connect, agent_id), ConsoleSettings())
    client = TestClient(app, base_url="http://127.0.0.1:8080")
    client.__enter__()
    clients.append(client)
    return client


async def test_a_new_agent_keeps_the_text_between_its_calls(
    ts_env: WorkflowEnvironment,
    store: Store,
    fake_llm: FakeAnthropic,
    fleet: FleetActivities,
    console_for: list[TestClient],
) -> None:
    fake_llm.set_responder(_respond)
    async with running_worker(ts_env.client, store, fleet=fleet) as h:
        handle = await h.start_agent(monitor_enabled=False, heartbeat_seconds=3600)
        await ts_env.sleep(11)
        (first,) = await wait_runs(store, handle.id, 1)
        await handle.signal(FleetAgentWorkflow.human_message, "take a second look")
        await ts_env.sleep(11)
        runs = await wait_runs(store, handle.id, 2)
    assert first.status == RunStatus.OK and first.mutating_calls == 1, first.error
    asked = fake_llm.requests[0].body["thinking"]
    assert asked == {"type": "adaptive", "display": "summarized"}
    # The notes came back as thinking blocks, with their text.
    issued = [b for r in fake_llm.requests[:3] for b in r.content or []]
    assert {"type": "thinking", "thinking": RENTING} in [
        {"type": b["type"], "thinking": b.get("thinking")} for b in issued
    ]
    assert not any(b["type"] == "text" and b["text"] == RENTING for b in issued)

    # show-run and the console's run page.
    messages = store.messages.run_messages(handle.id, first.run)
    shown = run_detail(first, messages)
    assert SEARCHING in shown and RENTING in shown
    page = _console(handle.id, console_for).get(f"/runs/{first.run}")
    assert page.status_code == 200
    assert SEARCHING in page.text and RENTING in page.text

    # The digest of the run's fleet changes, and the later run's prompt.
    (change,) = first.actions_digest.splitlines()
    assert change.startswith("- create_instance: ") and change.endswith(
        f"(your note before it: {RENTING})"
    )
    later = next(r for r in fake_llm.requests if "second look" in r.last_user_text())
    assert f"(your note before it: {RENTING})" in str(later.messages)
    assert runs[1].status == RunStatus.OK


# ------------------------------------------------- an agent that ran before


class _Seen:
    """The thinking display of every run the replayed agent starts."""

    displays: ClassVar[list[str]] = []


class _Outbound(WorkflowOutboundInterceptor):
    async def start_child_workflow(self, input: StartChildWorkflowInput) -> Any:
        if input.args and isinstance(input.args[0], RunInput):
            _Seen.displays.append(input.args[0].config.llm_thinking_display)
        return await super().start_child_workflow(input)


class _Inbound(WorkflowInboundInterceptor):
    def init(self, outbound: WorkflowOutboundInterceptor) -> None:
        super().init(_Outbound(outbound))


class _Watch(Interceptor):
    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor] | None:
        return _Inbound


async def test_an_agent_that_ran_before_keeps_omitted_thinking() -> None:
    """The agent of release 0.1.0 (tests/histories/0.1.0/) started fresh on
    the old default and gave no display of its own: replayed, its runs still
    ask for "omitted", in its first execution and after its continue-as-new.
    This test goes with 0.1.0 (docs/decisions/patches.md)."""
    assert AgentConfig().llm_thinking_display == "summarized"
    replayer = Replayer(
        workflows=[FleetAgentWorkflow, AgentRunWorkflow, FleetMonitorWorkflow],
        data_converter=pydantic_data_converter,
        interceptors=[_Watch()],
        # The interceptor lives in a test module: no sandbox, which would
        # re-import pytest.
        workflow_runner=UnsandboxedWorkflowRunner(),
    )
    agent = [h for h in load_recorded(BEFORE_PATCHES) if h.workflow_id == "replay-agent"]
    assert len(agent) == 2, "both executions of the recorded agent"
    for history in agent:
        _Seen.displays = []
        await replayer.replay_workflow(history)
        assert _Seen.displays and set(_Seen.displays) == {"omitted"}, _Seen.displays
