"""The approval tests' pieces: an agent's workflow handle (`Agent`), the
scripted model that rents the first offer once per run (`renter`), the
simulator's count of creates, what the model was told about its last
create_instance call, and an agent started so that every create asks for an
approval (`start`)."""

from __future__ import annotations

from typing import Any

from temporalio.client import WorkflowHandle

from simulator.server import SimServer
from testkit.fakes import scripts
from testkit.fakes.anthropic_server import FakeAnthropic
from tests.helpers import ASKS_EVERY_CREATE
from workflows import FleetAgentWorkflow

Agent = WorkflowHandle[FleetAgentWorkflow, None]


renter = scripts.renter()


def creates(sim: SimServer) -> int:
    return int(sim.market.state()["counters"]["creates"])


def create_result(fake: FakeAnthropic) -> str:
    """What the model was told about its last create_instance call."""
    for req in reversed(fake.requests):
        if len(req.messages) < 2:
            continue
        asked = req.messages[-2].get("content")
        uses = {
            b.get("id")
            for b in (asked if isinstance(asked, list) else [])
            if isinstance(b, dict) and b.get("name") == "create_instance"
        }
        for block in req.tool_results():
            if block.get("tool_use_id") in uses:
                content = block.get("content")
                if isinstance(content, list):
                    return "".join(str(c.get("text", "")) for c in content)
                return str(content)
    raise AssertionError("no create_instance result reached the model")


async def start(h: Any, **config: Any) -> Agent:
    handle: Agent = await h.start_agent(**(ASKS_EVERY_CREATE | config))
    return handle
