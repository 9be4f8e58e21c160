"""The offline `autopilot` provider: a deterministic policy behind the LLM interface.

Used when no Anthropic key is set (the local demo, CI). It speaks the same
content-block protocol as the real model — tool calls, final text, verdict — so
the whole loop, store and prompt machinery run unchanged without a network.
"""

from __future__ import annotations

import json
import re
from typing import Any

from fleet_agent.llm.base import LlmReply
from fleet_agent.models import TokenUsage

__all__ = ["AutopilotProvider"]

# The first line of each operator message in the trigger block (see prompt.py).
_MESSAGE = re.compile(r"^Message from (?P<author>.+?) at \S+ \S+Z:\n(?P<text>.*)$", re.M)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(
        str(b.get("text") or b.get("content") or "") for b in content if isinstance(b, dict)
    )


def _verdict(action: bool, state_changed: bool) -> str:
    return f"<verdict>{json.dumps({'action': action, 'state_changed': state_changed})}</verdict>"


class AutopilotProvider:
    """Answers operator messages and reports; fleet decisions come with the fleet tools."""

    name = "autopilot"
    model = "autopilot-1"

    async def complete(
        self,
        *,
        system: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        max_tokens: int,
    ) -> LlmReply:
        context = _text_of(messages[-1]["content"]) if messages else ""
        humans = _MESSAGE.findall(context)
        if humans:
            lines = [f"{author}: noted — “{text.strip()[:200]}”." for author, text in humans]
            text = "\n".join(lines) + "\nThe autopilot holds the target; nothing else to do."
            final = f"{text}\n{_verdict(True, False)}"
        else:
            final = f"No action needed.\n{_verdict(False, False)}"
        return LlmReply(
            content=[{"type": "text", "text": final}],
            stop_reason="end_turn",
            usage=TokenUsage(input_tokens=len(context) // 4, output_tokens=len(final) // 4),
            model=self.model,
        )
