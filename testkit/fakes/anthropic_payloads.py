"""The fake Messages API's payloads: what it received (`Request`), what it
answers (`Reply`, `ErrorReply`), and the JSON bodies the server sends for them.

Pure: no sockets, no threads. The usage of a reply comes from its script or
from the prompt cache's accounting (anthropic_cache.py); its thinking blocks
and thinking tokens from a `ThinkingPlan` (anthropic_thinking.py).
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .anthropic_cache import CacheUsage, prompt_tokens
from .anthropic_sse import cut_json
from .anthropic_thinking import ThinkingPlan, answer_tokens

__all__ = [
    "DEFAULT_TEXT",
    "FAKE_API_KEY",
    "MID_STREAM_TEXT",
    "ErrorReply",
    "Reply",
    "Request",
    "Responder",
    "default_responder",
    "error_body",
    "message_body",
    "new_id",
]

MID_STREAM_TEXT = "This answer is interrupted by a server error before it ends."
"""What a stream carries before an `ErrorReply` with `after_events` interrupts it."""
DEFAULT_TEXT = 'Nothing to do.\n<verdict>{"action": false, "state_changed": false}</verdict>'
FAKE_API_KEY = "fake-anthropic-test-key"
"""Any non-empty key works; this one is what `FakeAnthropic.env()` hands out."""

_ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "request_too_large",
    422: "invalid_request_error",
    429: "rate_limit_error",
    500: "api_error",
    502: "api_error",
    503: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
_ERROR_MESSAGES: dict[int, str] = {
    400: "Invalid request.",
    401: "invalid x-api-key",
    402: "Your credit balance is too low to access the Anthropic API.",
    403: "Your API key does not have permission to use the specified resource.",
    404: "The requested resource could not be found.",
    408: "Request timed out.",
    413: "Request exceeds the maximum allowed number of bytes.",
    422: "Unprocessable entity.",
    429: "Number of request tokens has exceeded your per-minute rate limit.",
    500: "Internal server error",
    502: "Bad gateway",
    503: "Service unavailable",
    504: "Gateway timeout",
    529: "Overloaded",
}


# ---------------------------------------------------------------- payloads


def _block_text(block: Any) -> str:
    """The text a content block contributes to the prompt."""
    if isinstance(block, str):
        return block
    if not isinstance(block, dict):
        return ""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "tool_result":
        content = block.get("content", "")
        if isinstance(content, list):
            return "\n".join(_block_text(b) for b in content if _block_text(b))
        return str(content) if content is not None else ""
    if kind == "tool_use":
        return f"{block.get('name', '')} {json.dumps(block.get('input', {}), sort_keys=True)}"
    return ""


def _content_text(content: Any, *, with_tool_use: bool = True) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = []
    for block in content:
        if not with_tool_use and isinstance(block, dict) and block.get("type") == "tool_use":
            continue
        text = _block_text(block)
        if text:
            parts.append(text)
    return "\n".join(parts)


@dataclass
class Request:
    """One request the fake received. `headers` keys are lower-case."""

    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    path: str = "/v1/messages"
    received_at: float = field(default_factory=time.time)
    # The usage the fake answered with (None: answered with an error).
    usage: dict[str, Any] | None = None
    # The thinking tokens the reply billed (0: it did not think; None: an error).
    thinking_tokens: int | None = None
    # The content blocks of the reply as a whole (None: answered with an error).
    content: list[dict[str, Any]] | None = None

    @property
    def model(self) -> str:
        return str(self.body.get("model", ""))

    @property
    def messages(self) -> list[dict[str, Any]]:
        messages = self.body.get("messages")
        return [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []

    @property
    def plain_messages(self) -> list[dict[str, Any]]:
        """`messages` without prompt-cache markers, as a conversation reads: a
        content of one marked text block is its text again."""
        plain = []
        for message in self.messages:
            content = message.get("content")
            if isinstance(content, list):
                marked = any(isinstance(b, dict) and "cache_control" in b for b in content)
                content = [
                    {k: v for k, v in b.items() if k != "cache_control"}
                    if isinstance(b, dict)
                    else b
                    for b in content
                ]
                if marked and len(content) == 1 and content[0].get("type") == "text":
                    content = content[0].get("text", "")
            plain.append({**message, "content": content})
        return plain

    @property
    def tools(self) -> list[dict[str, Any]]:
        tools = self.body.get("tools")
        return [t for t in tools if isinstance(t, dict)] if isinstance(tools, list) else []

    @property
    def stream(self) -> bool:
        """True when the client asked for server-sent events."""
        return self.body.get("stream") is True

    @property
    def max_tokens(self) -> int | None:
        value = self.body.get("max_tokens")
        return value if isinstance(value, int) else None

    @property
    def thinking(self) -> dict[str, Any] | None:
        """The request's `thinking` config (None: the field is absent)."""
        value = self.body.get("thinking")
        return value if isinstance(value, dict) else None

    @property
    def effort(self) -> str | None:
        """The request's ``output_config.effort`` (None: not sent)."""
        config = self.body.get("output_config")
        value = config.get("effort") if isinstance(config, dict) else None
        return value if isinstance(value, str) else None

    def last_user_text(self) -> str:
        """Text of the last user message: its text blocks and tool_result contents."""
        for message in reversed(self.messages):
            if message.get("role") == "user":
                return _content_text(message.get("content"), with_tool_use=False)
        return ""

    def system_text(self) -> str:
        return _content_text(self.body.get("system", ""))

    def all_text(self) -> str:
        """System prompt plus every message's text, tool_use (name + JSON input) and
        tool_result content, in order. Tool definitions are not included."""
        parts = [self.system_text()]
        parts.extend(_content_text(m.get("content")) for m in self.messages)
        return "\n".join(p for p in parts if p)

    def tool_names(self) -> list[str]:
        return [str(t.get("name", "")) for t in self.tools]

    def tool_results(self) -> list[dict[str, Any]]:
        """The tool_result blocks of the last user message."""
        for message in reversed(self.messages):
            if message.get("role") == "user":
                content = message.get("content")
                if not isinstance(content, list):
                    return []
                return [
                    b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"
                ]
        return []


@dataclass
class Reply:
    """A successful assistant message.

    `usage` None → estimated: the prompt is its JSON length / 4 (counted as
    anthropic_cache.py says), of which the fake's prompt cache says how much
    was read and written (when the request has breakpoints); the output is
    its content's JSON length / 4. A given
    `usage` (input, output) is reported as is, with `cache_read_input_tokens`
    and `cache_creation_input_tokens` from here. Cache token fields appear in
    the response when the request has breakpoints or they are non-zero.
    `delay` adds seconds of latency to this reply only (before anything is sent).

    `stop_reason` None → ``tool_use`` with tool calls, else ``end_turn``; any
    other string is sent as is (``refusal``, ``pause_turn``, a future value).
    ``max_tokens`` with tool calls cuts the last call's input JSON after
    `cut_json_at` characters (None → half way): the stream carries the cut JSON,
    a non-streaming body the keys complete before the cut.

    Streaming only: text and tool JSON go out in deltas of `chunk_chars`
    characters, `chunk_delay` seconds before each event after the first, and
    `stall_after` N stops sending after N events, holding the connection open
    until the client gives up (or the fake stops); `end_after` N ends the
    response cleanly after N events, without the rest of the message.

    Thinking (when the request thinks: anthropic_models.py says when; the
    blocks are laid out as anthropic_thinking.py says): `think` False → this
    reply does not think ("Claude decides when and how much to think", SDK
    anthropic/types/thinking_config_param.py), True → it thinks even where
    the request would not (a script's choice; on a model name the fake does
    not know it thinks adaptively at high effort, summarized), None → it
    thinks whenever the request does. `thinking` replaces the generated
    summary of the first thinking block (sent only with display
    "summarized"), `thinking_tokens` the thinking tokens of the effort, and
    `redacted` the server's `redacted_every` rule for a redacted_thinking block.
    """

    text: str = ""
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    stop_reason: str | None = None
    usage: tuple[int, int] | None = None
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    model: str | None = None
    delay: float = 0.0
    cut_json_at: int | None = None
    chunk_chars: int = 12
    chunk_delay: float = 0.0
    stall_after: int | None = None
    end_after: int | None = None
    think: bool | None = None
    thinking: str | None = None
    thinking_tokens: int | None = None
    redacted: bool | None = None


@dataclass
class ErrorReply:
    """An API error in the real shape: ``{"type": "error", "error": {type, message}}``.

    `error_type`/`message` None → the API's usual ones for `status`. `error_code`
    adds ``error.details.error_code`` (e.g. "enforced_spend_limit_reached").

    `after_events` N, for a streaming request: the response starts as a
    normal HTTP 200 stream (of `MID_STREAM_TEXT`) and the error comes as an SSE
    ``error`` event after N events, as the API reports errors that happen once
    a stream has begun. A non-streaming request gets the plain HTTP error.
    """

    status: int
    error_type: str | None = None
    message: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    error_code: str | None = None
    delay: float = 0.0
    after_events: int | None = None


Responder = Callable[[Request], "Reply | ErrorReply | str"]


def default_responder(request: Request) -> Reply:
    return Reply(text=DEFAULT_TEXT)


# ---------------------------------------------------------------- bodies


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


def error_body(reply: ErrorReply) -> dict[str, Any]:
    error: dict[str, Any] = {
        "type": reply.error_type or _ERROR_TYPES.get(reply.status, "api_error"),
        "message": reply.message
        if reply.message is not None
        else _ERROR_MESSAGES.get(reply.status, "Error"),
    }
    if reply.error_code:
        error["details"] = {"error_code": reply.error_code}
    return {"type": "error", "error": error, "request_id": new_id("req")}


def _usage(
    reply: Reply, output_tokens: int, cache: CacheUsage, plan: ThinkingPlan | None
) -> dict[str, Any]:
    if reply.usage is not None:
        usage: dict[str, Any] = {"input_tokens": reply.usage[0], "output_tokens": reply.usage[1]}
        read, written, written_1h = (
            reply.cache_read_input_tokens,
            reply.cache_creation_input_tokens,
            0,
        )
    else:
        read, written, written_1h = cache.read, cache.written, cache.written_1h
        uncached = cache.prompt - read - written
        usage = {"input_tokens": max(0, uncached), "output_tokens": output_tokens}
    if cache.used or read or written:
        usage["cache_creation_input_tokens"] = written
        usage["cache_read_input_tokens"] = read
        usage["cache_creation"] = {
            "ephemeral_5m_input_tokens": written - written_1h,
            "ephemeral_1h_input_tokens": written_1h,
        }
    if plan is not None:
        # "`output_tokens` remains the inclusive, authoritative total";
        # thinking_tokens is "Always ≤ `output_tokens`" (SDK
        # anthropic/types/output_tokens_details.py, anthropic/types/usage.py).
        thinking = min(plan.tokens, usage["output_tokens"])
        usage["output_tokens_details"] = {"thinking_tokens": thinking}
    return usage


def message_body(
    request: Request,
    reply: Reply,
    cache: CacheUsage | None = None,
    plan: ThinkingPlan | None = None,
) -> tuple[dict[str, Any], dict[int, str]]:
    """The response body, and the cut tool input JSON by content index (if any).

    With a `plan` (the request thinks), its blocks lead the content and sit
    between tool calls; the output tokens are the answer's plus the plan's
    thinking tokens, or `max_tokens` when the thinking was cut there."""
    content: list[dict[str, Any]] = []
    tool_json: dict[int, str] = {}
    stop_reason = reply.stop_reason or ("tool_use" if reply.tool_calls else "end_turn")
    if plan is not None and plan.cut:
        content = list(plan.lead)
        stop_reason = "max_tokens"
        output_tokens = plan.tokens
    else:
        if plan is not None:
            content.extend(plan.lead)
        if plan is not None and plan.narration:
            content.extend(plan.narration)  # the text, in a thinking block
        elif reply.text:
            content.append({"type": "text", "text": reply.text})
        for k, (name, tool_input) in enumerate(reply.tool_calls):
            if plan is not None and 0 < k <= len(plan.between):
                content.extend(plan.between[k - 1])
            if reply.stop_reason == "max_tokens" and k == len(reply.tool_calls) - 1:
                tool_json[len(content)], tool_input = cut_json(tool_input, reply.cut_json_at)
            content.append(
                {"type": "tool_use", "id": new_id("toolu"), "name": name, "input": tool_input}
            )
        output_tokens = answer_tokens(content) + (plan.tokens if plan is not None else 0)
    usage = _usage(
        reply, output_tokens, cache or CacheUsage(prompt=prompt_tokens(request.body)), plan
    )
    body = {
        "id": new_id("msg"),
        "type": "message",
        "role": "assistant",
        "model": reply.model or request.model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage,
    }
    return body, tool_json
