"""An agent begun on the code from before the one path of a message's text
(workflows/agent_runs.py, ONE_PATH_PATCH) keeps its paths until it continues
as new, and still delivers its messages.

The agent of each supported release (tests/histories/<version>/, recorded
before the patch) is replayed on today's code, watching what it asks for:
its store loop still schedules `store_operator_messages` (the activity that
queries the texts back and writes them to the store), and every message the
operator sent reaches a run's input. The replay passing proves the commands
are the old ones; the watch proves the old path is the one taken. The new
path is tests/run/test_run_carries_texts.py. This test goes with the releases
recorded before the patch (docs/decisions/patches.md).
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import (
    Interceptor,
    Replayer,
    StartActivityInput,
    StartChildWorkflowInput,
    UnsandboxedWorkflowRunner,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
    WorkflowOutboundInterceptor,
)

from fleet_agent.models import RunInput, TriggerKind
from tests.workflows.test_replay import HISTORIES, load_recorded, supported_releases, version_key
from workflows import AgentRunWorkflow, FleetAgentWorkflow, FleetMonitorWorkflow

# The supported releases recorded before the patch (its *since*: 0.3.0).
BEFORE_ONE_PATH = [r for r in supported_releases() if version_key(r) < version_key("0.3.0")]
# What the operator sent in the recorded scenario (tests/workflows/test_replay.py).
SENT = {"please schedule a check", "rent one", "release it", "hello after the reset"}


class _Seen:
    activities: ClassVar[list[str]] = []
    messages: ClassVar[list[str]] = []


class _Outbound(WorkflowOutboundInterceptor):
    def start_activity(self, input: StartActivityInput) -> Any:
        _Seen.activities.append(input.activity)
        return super().start_activity(input)

    async def start_child_workflow(self, input: StartChildWorkflowInput) -> Any:
        if input.args and isinstance(input.args[0], RunInput):
            _Seen.messages += [
                t.text for t in input.args[0].triggers if t.kind == TriggerKind.HUMAN_MESSAGE
            ]
        return await super().start_child_workflow(input)


class _Inbound(WorkflowInboundInterceptor):
    def init(self, outbound: WorkflowOutboundInterceptor) -> None:
        super().init(_Outbound(outbound))


class _Watch(Interceptor):
    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor] | None:
        return _Inbound


@pytest.mark.parametrize("release", BEFORE_ONE_PATH)
async def test_an_agent_begun_before_the_one_path_still_delivers_its_messages(
    release: str,
) -> None:
    replayer = Replayer(
        workflows=[FleetAgentWorkflow, AgentRunWorkflow, FleetMonitorWorkflow],
        data_converter=pydantic_data_converter,
        interceptors=[_Watch()],
        # The interceptor lives in a test module: no sandbox, which would
        # re-import pytest.
        workflow_runner=UnsandboxedWorkflowRunner(),
    )
    agent = [h for h in load_recorded(HISTORIES / release) if h.workflow_id == "replay-agent"]
    assert len(agent) == 2, "both executions of the recorded agent"
    _Seen.activities, _Seen.messages = [], []
    for history in agent:
        await replayer.replay_workflow(history)
    assert "store_operator_messages" in _Seen.activities, _Seen.activities
    assert set(_Seen.messages) == SENT, _Seen.messages
