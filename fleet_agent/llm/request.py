"""The one place a Messages API request is built: what each model is sent.

Pure. `build_request` turns a prompt and the caller's `LlmOptions` into the
keyword arguments of `messages.create` / `messages.stream`, taking from the
model table (fleet_agent/llm/model_table.py) what the model accepts:

- an adaptive-thinking model (Sonnet 5.5 thinks when a request has no
  `thinking` field) gets ``thinking: {"type": "adaptive", "display": ...}``,
  so the operator's display choice holds; another model gets no `thinking`;
- a model that takes effort gets ``output_config: {"effort": ...}``, at the
  highest level it accepts that is not above the one asked for; another
  model gets no `output_config`.

It can produce nothing Sonnet 5.5 answers with a 400 (its migration guide,
https://platform.claude.com/docs/en/models/sonnet-5-5/migration-guide: "thinking
budgets, sampling parameters, assistant prefill, forced tool choice, and
thinking: {"type": "disabled"}"): there is no parameter for any of them, and
a conversation that ends with an assistant message is refused here
(`PrefillRefused`) rather than sent — fleet_agent/llm/transcript.py continues a
paused or cut-off turn with a user message instead, on every model.

`max_tokens` bounds thinking and answer together ("the tokens Claude spends
reasoning are billed as output tokens ... and they count toward max_tokens",
https://platform.claude.com/docs/en/build-with-claude/thinking), so a
thinking model's request gets room to think on top of the answer's
(`reply_budget`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fleet_agent.llm.model_table import EFFORTS, ModelInfo
from fleet_agent.models import Effort, ThinkingDisplay

from .base import LlmOptions, SystemPrompt

__all__ = [
    "FORBIDDEN_FIELDS",
    "THINKING_ROOM",
    "PrefillRefused",
    "build_request",
    "effective_effort",
    "longest_reply",
    "reply_budget",
]

THINKING_ROOM: Mapping[Effort, int] = {
    "low": 2_048,
    "medium": 4_096,
    "high": 8_192,
    "xhigh": 16_384,
    "max": 32_768,
}
"""Output tokens a thinking model gets for its thinking, on top of the room
for its answer, by effort. Adaptive thinking decides how much to think; these
are ceilings, not what is spent (the run log shows what was), sized so that a
reply is cut off only when the model thinks far longer than a fleet decision
needs. docs/DECISIONS.md, "Effort"."""

FORBIDDEN_FIELDS = frozenset(
    {"temperature", "top_p", "top_k", "tool_choice", "stop_sequences", "metadata"}
)
"""Fields `build_request` never sets. Sampling parameters and a forced tool
choice are refused by Sonnet 5.5; stop sequences and metadata are not
needed and kept out so that the request is exactly what this module says."""


class PrefillRefused(ValueError):
    """The conversation ends with an assistant message: a prefill, which Sonnet
    5.5 refuses ("This model does not support assistant message prefill")."""


def effective_effort(info: ModelInfo, effort: Effort | None) -> Effort | None:
    """The effort level to send: `effort` if the model accepts it, else the
    highest accepted level below it, else the lowest it accepts; None when
    the model takes no effort (or none is asked for)."""
    if effort is None or not info.efforts:
        return None
    if effort in info.efforts:
        return effort
    rank = EFFORTS.index(effort)
    below = [e for e in info.efforts if EFFORTS.index(e) < rank]
    if below:
        return max(below, key=EFFORTS.index)
    return min(info.efforts, key=EFFORTS.index)


def reply_budget(info: ModelInfo | None, answer_tokens: int, effort: Effort | None) -> int:
    """`max_tokens` of a request whose answer needs up to `answer_tokens`, for
    the model `info` describes: with room to think by effort when it thinks
    adaptively, within its maximum output. None (a provider with no model
    table entry, the autopilot): the answer's room alone."""
    if info is None:
        return answer_tokens
    room = THINKING_ROOM[effort or "high"] if info.adaptive_thinking else 0
    return max(1, min(answer_tokens + room, info.max_output_tokens))


def longest_reply(answer_tokens: int, effort: Effort | None) -> int:
    """The most a reply may write at this effort on any model: what the
    workflow sizes an LLM round's time limit by (it does not know the model)."""
    return answer_tokens + THINKING_ROOM[effort or "high"]


def build_request(
    model: str,
    info: ModelInfo,
    *,
    system: SystemPrompt,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    max_tokens: int,
    options: LlmOptions,
) -> dict[str, Any]:
    """The keyword arguments of one Messages API call (without `stream`).

    Raises `PrefillRefused` when `messages` ends with an assistant message."""
    if messages and messages[-1].get("role") == "assistant":
        raise PrefillRefused(
            "the conversation ends with an assistant message (a prefill), which the model "
            "refuses; continue a turn with a user message"
        )
    request: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "messages": messages}
    if system:
        request["system"] = system
    if tools:
        request["tools"] = tools
    if info.adaptive_thinking:
        display: ThinkingDisplay = options.thinking_display
        request["thinking"] = {"type": "adaptive", "display": display}
    effort = effective_effort(info, options.effort)
    if effort is not None:
        request["output_config"] = {"effort": effort}
    return request
