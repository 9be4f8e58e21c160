"""Request validation of the fake Messages API: the 400s the real API gives for
malformed prompts (required fields, role alternation, tool_use/tool_result
pairing, tool definitions, thinking blocks, a final assistant message ending
in whitespace), for misused prompt-cache breakpoints (more than 4, a bad
`cache_control`, a 1-hour entry after a 5-minute one) and for settings the
request's model refuses (anthropic_settings.py).

Thinking blocks: a `thinking` block needs string `thinking` and `signature`
(SDK anthropic/types/thinking_block_param.py), a `redacted_thinking` block a
string `data` (redacted_thinking_block_param.py); both come only from the
assistant. "Thinking blocks cannot be explicitly marked with `cache_control`"
(https://platform.claude.com/docs/en/build-with-claude/prompt-caching#caching-with-thinking-blocks;
the SDK's block params have no `cache_control`): a marker on one is a 400.
Those wordings are the fake's. Signatures are checked by the server
(anthropic_signatures.py), which remembers what it issued.
"""

from __future__ import annotations

import re
from typing import Any

from .anthropic_cache import cache_markers
from .anthropic_settings import settings_problem

__all__ = ["validate_messages_request"]

_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
MAX_CACHE_BREAKPOINTS = 4


def _validate_content(i: int, message: dict[str, Any], is_last: bool) -> str | None:
    role = message["role"]
    content = message.get("content")
    empty_msg = (
        f"messages.{i}: all messages must have non-empty content except for the optional "
        "final assistant message"
    )
    if content is None:
        return f"messages.{i}.content: Field required"
    if is_last and role == "assistant" and _ends_with_whitespace(content):
        # A final assistant message is a prefill the reply continues from.
        return "messages: final assistant content cannot end with trailing whitespace"
    if isinstance(content, str):
        if not content and not (is_last and role == "assistant"):
            return empty_msg
        return None
    if not isinstance(content, list):
        return f"messages.{i}.content: Input should be a valid string or a list of content blocks"
    if not content and not (is_last and role == "assistant"):
        return empty_msg
    for j, block in enumerate(content):
        where = f"messages.{i}.content.{j}"
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            return f"{where}: Input should be a content block object with a 'type'"
        kind = block["type"]
        if kind == "text":
            if not isinstance(block.get("text"), str):
                return f"{where}.text: Input should be a valid string"
            if not block["text"]:
                return "messages: text content blocks must be non-empty"
        elif kind == "tool_use":
            if role != "assistant":
                return f"{where}: tool_use blocks can only appear in assistant messages"
            if not isinstance(block.get("id"), str) or not block["id"]:
                return f"{where}.id: Field required"
            if not isinstance(block.get("name"), str) or not block["name"]:
                return f"{where}.name: Field required"
            if not isinstance(block.get("input"), dict):
                return f"{where}.input: Input should be a valid dictionary"
        elif kind in ("thinking", "redacted_thinking"):
            if role != "assistant":
                return f"{where}: {kind} blocks can only appear in assistant messages"
            fields = ("thinking", "signature") if kind == "thinking" else ("data",)
            for name in fields:
                if not isinstance(block.get(name), str):
                    return f"{where}.{kind}.{name}: Field required (a string)"
            if "cache_control" in block:
                return f"{where}.{kind}.cache_control: {kind} blocks cannot carry cache_control"
        elif kind == "tool_result":
            if role != "user":
                return f"{where}: tool_result blocks can only appear in user messages"
            if not isinstance(block.get("tool_use_id"), str) or not block["tool_use_id"]:
                return f"{where}.tool_use_id: Field required"
            inner = block.get("content", "")
            if not isinstance(inner, str | list):
                return f"{where}.content: Input should be a valid string or list"
    return None


def _ends_with_whitespace(content: Any) -> bool:
    if isinstance(content, str):
        return content != content.rstrip()
    if isinstance(content, list) and content:
        last = content[-1]
        if isinstance(last, dict) and last.get("type") == "text":
            text = last.get("text")
            return isinstance(text, str) and text != text.rstrip()
    return False


def _ids(content: Any, kind: str, key: str) -> list[str]:
    if not isinstance(content, list):
        return []
    return [str(b.get(key)) for b in content if isinstance(b, dict) and b.get("type") == kind]


def _validate_tools(tools: Any) -> str | None:
    if not isinstance(tools, list):
        return "tools: Input should be a valid list"
    seen: set[str] = set()
    for k, tool in enumerate(tools):
        if not isinstance(tool, dict):
            return f"tools.{k}: Input should be a valid dictionary"
        name = tool.get("name")
        if not isinstance(name, str) or not _TOOL_NAME.match(name):
            return f"tools.{k}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'"
        if name in seen:
            return "tools: Tool names must be unique."
        seen.add(name)
        if tool.get("type") in (None, "custom"):
            schema = tool.get("input_schema")
            if not isinstance(schema, dict):
                return f"tools.{k}.custom.input_schema: Field required"
            if schema.get("type") != "object":
                return f"tools.{k}.custom.input_schema.type: Input should be 'object'"
    return None


def _validate_cache_control(body: dict[str, Any]) -> str | None:
    markers = cache_markers(body)
    for marker in markers:
        if marker.get("type") != "ephemeral":
            return "cache_control.type: Input should be 'ephemeral'"
        if marker.get("ttl", "5m") not in ("5m", "1h"):
            return "cache_control.ttl: Input should be '5m' or '1h'"
    if len(markers) > MAX_CACHE_BREAKPOINTS:
        # The real API's wording.
        return (
            f"A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {len(markers)}."
        )
    ttls = [m.get("ttl", "5m") for m in markers]
    if "5m" in ttls and "1h" in ttls[ttls.index("5m") :]:
        # The rule is documented ("1-hour entries must appear before 5-minute
        # ones"); this wording is the fake's.
        return (
            "cache_control: a block with ttl='1h' cannot come after a block with ttl='5m' "
            "(order: tools, system, messages)"
        )
    return None


def validate_messages_request(body: Any, *, generation: bool = True) -> str | None:
    """The first problem the real API would report as a 400, or None if acceptable.

    `generation` False (count_tokens): the request is only counted, so the
    model's generation settings (sampling, thinking type, effort, tool
    choice, prefill, limits: anthropic_settings.py) are not checked — the
    fake's leniency, no page says how count_tokens treats them."""
    if not isinstance(body, dict):
        return "request body must be a JSON object"
    for name in ("model", "messages", "max_tokens"):
        if name not in body:
            return f"{name}: Field required"
    if not isinstance(body["model"], str) or not body["model"]:
        return "model: Input should be a non-empty string"
    max_tokens = body["max_tokens"]
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
        return "max_tokens: Input should be a valid integer"
    if max_tokens < 1:
        return "max_tokens: Input should be greater than or equal to 1"
    if "stream" in body and not isinstance(body["stream"], bool):
        return "stream: Input should be a valid boolean"
    system = body.get("system")
    system_ok = system is None or isinstance(system, str)
    if not system_ok and isinstance(system, list):
        system_ok = all(
            isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
            for b in system
        )
    if not system_ok:
        return "system: Input should be a valid string or a list of text blocks"
    if "tools" in body and (problem := _validate_tools(body["tools"])) is not None:
        return problem
    messages = body["messages"]
    if not isinstance(messages, list):
        return "messages: Input should be a valid list"
    if not messages:
        return "messages: at least one message is required"
    previous: dict[str, Any] | None = None
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            return f"messages.{i}: Input should be a valid dictionary"
        role = message.get("role")
        if role not in ("user", "assistant"):
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        if i == 0 and role != "user":
            return 'messages: first message must use the "user" role'
        if previous is not None and previous["role"] == role:
            return (
                'messages: roles must alternate between "user" and "assistant", '
                f'but found multiple "{role}" roles in a row'
            )
        problem = _validate_content(i, message, is_last=i == len(messages) - 1)
        if problem is not None:
            return problem
        content = message.get("content")
        if role == "user":
            results = _ids(content, "tool_result", "tool_use_id")
            uses = _ids(previous.get("content") if previous else None, "tool_use", "id")
            missing = [u for u in uses if u not in results]
            if missing:
                return (
                    f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(missing)}. Each `tool_use` block must have "
                    "a corresponding `tool_result` block in the next message."
                )
            for j, result_id in enumerate(results):
                if result_id not in uses:
                    return (
                        f"messages.{i}.content.{j}: unexpected `tool_use_id` found in "
                        f"`tool_result` blocks: {result_id}. Each `tool_result` block must have "
                        "a corresponding `tool_use` block in the previous message."
                    )
            if uses and isinstance(content, list):
                kinds = [b.get("type") for b in content if isinstance(b, dict)]
                if kinds[: len(results)] != ["tool_result"] * len(results):
                    return (
                        f"messages.{i}: Did not find {len(uses)} `tool_result` block(s) at the "
                        "beginning of this message. Messages following `tool_use` blocks must "
                        "begin with a matching number of `tool_result` blocks."
                    )
        previous = message
    if (problem := _validate_cache_control(body)) is not None:
        return problem
    return settings_problem(body) if generation else None
