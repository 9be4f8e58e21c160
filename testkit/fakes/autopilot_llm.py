"""A scripted model for the fake Messages API: the autopilot policy's decisions.

The fleet then runs through the real anthropic client, HTTP and the API's
validation, with decisions a real model would plausibly make (rent the
cheapest capacity to target, replace dead machines, release surplus).
"""

from __future__ import annotations

import asyncio

from fleet_agent.autopilot.provider import AutopilotProvider

from .anthropic_server import Reply, Request

__all__ = ["autopilot_reply"]


def autopilot_reply(req: Request) -> Reply:
    """The autopilot's answer to `req` as a fake reply (runs in the fake's thread)."""
    reply = asyncio.run(
        AutopilotProvider().complete(
            system=req.system_text(), messages=req.messages, tools=req.tools, max_tokens=1024
        )
    )
    return Reply(
        text="\n".join(b["text"] for b in reply.content if b["type"] == "text"),
        tool_calls=[(b["name"], b["input"]) for b in reply.content if b["type"] == "tool_use"],
    )
