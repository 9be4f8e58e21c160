"""Scripted models for the fake Messages API, shared by tests and benchmarks:
replies a test would otherwise write again each time."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from testkit.fakes.anthropic_server import Reply, Request

__all__ = ["DONE", "json_rows", "renter"]

#: A final answer with a verdict: acted, and the fleet changed.
DONE = 'Done.\n<verdict>{"action": true, "state_changed": true}</verdict>'


def json_rows(content: str) -> list[dict[str, Any]]:
    """The JSON list inside a fleet tool's result (search results, fleet status)."""
    rows: list[dict[str, Any]] = json.loads(content[content.index("[") : content.rindex("]") + 1])
    return rows


def renter(*, stop_on_refusal: bool = False) -> Callable[[Request], Reply]:
    """A model that rents the first offer once per run: search, create, then a
    final word. `stop_on_refusal`: a refused create ends the run rather than
    trying again (tests of refusals)."""

    def reply(req: Request) -> Reply:
        results = req.tool_results()
        if not results:
            return Reply(tool_calls=[("search_offers", {"limit": 3})])
        content = str(results[-1].get("content"))
        refused = stop_on_refusal and "Refused" in content
        if "offer_id" in content and "Rented" not in content and not refused:
            offer = json_rows(content)[0]["offer_id"]
            return Reply(tool_calls=[("create_instance", {"offer_id": offer, "reason": "target"})])
        return Reply(text=DONE)

    return reply
