"""The scripted model of the prompt-caching loop test and what the fake
Messages API reported: `respond` looks at the fleet once, then answers with an
acting verdict (`ACTED`); `reported` reads a request's usage as the API
reported it, as a `TokenUsage`."""

from __future__ import annotations

from typing import Any

from fleet_agent.models import TokenUsage
from testkit.fakes.anthropic_server import Reply, Request

ACTED = '<verdict>{"action": true, "state_changed": false}</verdict>'


def respond(req: Request) -> Reply:
    if req.tool_results():
        return Reply(text=f"The fleet is empty; nothing to rent at target 0.\n{ACTED}")
    if "agent started" in req.last_user_text().lower():
        return Reply(text="Looking first.", tool_calls=[("get_fleet_status", {})])
    return Reply(text=f"Noted; the fleet stays as it is.\n{ACTED}")


def reported(req: Request) -> TokenUsage:
    usage: dict[str, Any] | None = req.usage
    assert usage is not None
    return TokenUsage(
        input_tokens=usage["input_tokens"],
        output_tokens=usage["output_tokens"],
        cache_read_input_tokens=usage["cache_read_input_tokens"],
        cache_creation_input_tokens=usage["cache_creation_input_tokens"],
        cache_creation_1h_input_tokens=usage["cache_creation"]["ephemeral_1h_input_tokens"],
        # Part of output_tokens: Sonnet 5.5 thinks, and says how much.
        thinking_tokens=usage.get("output_tokens_details", {}).get("thinking_tokens", 0),
    )
