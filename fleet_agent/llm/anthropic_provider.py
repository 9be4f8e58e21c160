"""`LlmProvider` over the Anthropic Messages API (the official `anthropic` SDK).

One `complete()` is one streamed HTTP attempt (`client.messages.stream`): the
SDK is built with ``max_retries=0`` because Temporal owns retries. Streaming
lets a long reply take as long as it needs while a stalled one fails fast: the
client's read timeout bounds the gap between two chunks, not the whole call
(see `fleet_agent.llm.timing`). Failures, before or inside the stream, are
turned into `LlmRetryableError` or `LlmPermanentError` by `classify`.

The request is built by fleet_agent/llm/request.py from the model's entry in
the model table; the reply keeps every thinking, redacted_thinking, text and
tool_use block, in order and unchanged, because a tool-use cycle must send
them back exactly as received
(https://platform.claude.com/docs/en/build-with-claude/thinking-tool-workflows).
"""

from __future__ import annotations

import os
from types import TracebackType
from typing import Any

import anthropic
from anthropic.types import Message

from fleet_agent.llm.model_table import DEFAULT_MODEL, ModelInfo, known_info
from fleet_agent.models import TokenUsage

from .anthropic_errors import classify, classify_mid_stream, parse_retry_after, redact
from .base import (
    LlmOptions,
    LlmPermanentError,
    LlmReply,
    LlmRetryableError,
    ProgressCallback,
    SystemPrompt,
)
from .request import PrefillRefused, build_request
from .timing import (
    CHUNK_READ_TIMEOUT_SECONDS,
    CONNECT_TIMEOUT_SECONDS,
    POOL_TIMEOUT_SECONDS,
    WRITE_TIMEOUT_SECONDS,
)

__all__ = [
    "DEFAULT_MODEL",
    "MODEL_ENV",
    "AnthropicProvider",
    "classify",
    "default_model",
    "parse_retry_after",
]

MODEL_ENV = "FLEET_LLM_MODEL"  # read directly only when the caller names no model


def default_model() -> str:
    """The pinned default model (`DEFAULT_MODEL`, fleet_agent/llm/model_table.py)."""
    return DEFAULT_MODEL


# ---------------------------------------------------------------- reply


def _to_block(block: Any) -> dict[str, Any] | None:
    """A content block of the reply as the conversation sends it back: every
    field of the four kinds the agent uses, values unchanged."""
    data = block.model_dump(mode="json") if hasattr(block, "model_dump") else dict(block)
    kind = data.get("type")
    if kind == "text":
        return {"type": "text", "text": str(data.get("text") or "")}
    if kind == "thinking":
        # The signature is checked by the API when the block comes back: both
        # strings go back byte for byte. A block cut off by max_tokens has no
        # signature yet ("" as the stream opened it).
        return {
            "type": "thinking",
            "thinking": str(data.get("thinking") or ""),
            "signature": str(data.get("signature") or ""),
        }
    if kind == "redacted_thinking":
        return {"type": "redacted_thinking", "data": str(data.get("data") or "")}
    if kind == "tool_use":
        # A reply cut by max_tokens inside a tool_use carries the part of the
        # input JSON that arrived, as the SDK parsed it (complete keys only).
        raw_input = data.get("input")
        return {
            "type": "tool_use",
            "id": str(data["id"]),
            "name": str(data["name"]),
            "input": raw_input if isinstance(raw_input, dict) else {},
        }
    return None  # server tools and the like: the agent asks for none


def _usage(usage: Any) -> TokenUsage:
    if usage is None:
        return TokenUsage()
    # The TTL breakdown of the cache writes, when the API gives one.
    by_ttl = getattr(usage, "cache_creation", None)
    details = getattr(usage, "output_tokens_details", None)
    return TokenUsage(
        input_tokens=getattr(usage, "input_tokens", None) or 0,
        output_tokens=getattr(usage, "output_tokens", None) or 0,
        cache_read_input_tokens=getattr(usage, "cache_read_input_tokens", None) or 0,
        cache_creation_input_tokens=getattr(usage, "cache_creation_input_tokens", None) or 0,
        cache_creation_1h_input_tokens=getattr(by_ttl, "ephemeral_1h_input_tokens", None) or 0,
        thinking_tokens=getattr(details, "thinking_tokens", None) or 0,
    )


class _ProgressFailed(Exception):
    """Carries an exception raised by the caller's progress callback past `classify`."""

    def __init__(self, original: Exception) -> None:
        super().__init__(str(original))
        self.original = original


class _MidStream(Exception):
    """Carries an exception raised while the body of a started stream was read.

    Which type the SDK raises then changed between releases (raw `httpx2` errors
    up to 2.16, `APITimeoutError`/`APIConnectionError` from 2.17); where it was
    raised does not, so the provider says so itself."""

    def __init__(self, original: Exception, chars: int) -> None:
        super().__init__(str(original))
        self.original = original
        self.chars = chars


# ---------------------------------------------------------------- provider


class AnthropicProvider:
    """`LlmProvider` on `anthropic.AsyncAnthropic`, one streamed HTTP attempt per call.

    - `api_key` None → the SDK reads `ANTHROPIC_API_KEY` (or its other sources);
    - `base_url` None → the SDK reads `ANTHROPIC_BASE_URL`, else api.anthropic.com;
    - `model` None → `$FLEET_LLM_MODEL`, else `default_model()`;
    - `info` None → the model table's entry of the model (`known_info`): what
      its requests may carry (thinking, effort) and its output limit;
    - `read_timeout` → the longest silence between two chunks of the reply (and
      before the first); `connect_timeout` → TCP/TLS. There is no whole-call
      timeout here: the activity's start-to-close bounds the total.
    """

    name: str = "anthropic"

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        model: str | None = None,
        read_timeout: float = CHUNK_READ_TIMEOUT_SECONDS,
        connect_timeout: float = CONNECT_TIMEOUT_SECONDS,
        info: ModelInfo | None = None,
    ) -> None:
        self.model: str = model or os.environ.get(MODEL_ENV, "").strip() or default_model()
        self.info: ModelInfo = info or known_info(self.model)
        self.timeout = anthropic.Timeout(
            connect=connect_timeout,
            read=read_timeout,
            write=WRITE_TIMEOUT_SECONDS,
            pool=POOL_TIMEOUT_SECONDS,
        )
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=base_url,
            timeout=self.timeout,
            max_retries=0,  # Temporal owns retries: the SDK must never retry.
        )

    @property
    def base_url(self) -> str:
        return str(self._client.base_url)

    def _secrets(self) -> list[str | None]:
        return [self._client.api_key, self._client.auth_token]

    async def complete(
        self,
        *,
        system: SystemPrompt,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        max_tokens: int,
        on_progress: ProgressCallback | None = None,
        options: LlmOptions | None = None,
    ) -> LlmReply:
        """One streamed request. `on_progress(n)` is called once when the response
        starts and after every event with `n`, the characters of thinking, text
        and tool input JSON received so far. The reply's `stop_reason` is the
        API's, as is."""
        request = self._request(system, messages, tools, max_tokens, options)
        try:
            message = await self._stream(request, on_progress)
        except _ProgressFailed as failed:
            raise failed.original from None
        except Exception as caught:
            secrets = self._secrets()
            exc: Exception = caught
            if isinstance(caught, _MidStream):
                exc = caught.original
                err = classify_mid_stream(exc, chars=caught.chars, secrets=secrets)
            else:
                err = classify(exc, secrets=secrets)
            if redact(str(exc), secrets) != str(exc):
                # The SDK's own message carries a secret: do not chain it, or it
                # would reach logs and Temporal failure causes.
                raise err from None
            raise err from exc
        if message is None or message.stop_reason is None:
            # The connection ended cleanly but early (a proxy, a server restart):
            # what arrived is not the whole reply.
            raise LlmRetryableError(
                "Anthropic API stream ended before message_stop: the reply is incomplete"
            )

        content = [b for b in (_to_block(block) for block in message.content) if b is not None]
        return LlmReply(
            content=content,
            stop_reason=str(message.stop_reason),
            usage=_usage(message.usage),
            model=message.model or self.model,
        )

    async def count_tokens(
        self,
        *,
        system: SystemPrompt,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        options: LlmOptions | None = None,
    ) -> int:
        """The request's input tokens from the Messages API's count_tokens
        endpoint (free, one short HTTP call); `LlmError` when it fails."""
        request = self._request(system, messages, tools, 1, options)
        del request["max_tokens"]  # count_tokens takes none
        try:
            counted = await self._client.messages.count_tokens(**request)
        except Exception as exc:
            raise classify(exc, secrets=self._secrets()) from None
        return int(counted.input_tokens)

    def _request(
        self,
        system: SystemPrompt,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        max_tokens: int,
        options: LlmOptions | None,
    ) -> dict[str, Any]:
        """The request's arguments for this model; a prefill is refused here,
        as permanent, and never sent."""
        try:
            return build_request(
                self.model,
                self.info,
                system=system,
                messages=messages,
                tools=tools,
                max_tokens=max_tokens,
                options=options or LlmOptions(),
            )
        except PrefillRefused as refused:
            raise LlmPermanentError(f"not sent: {refused}") from None

    async def _stream(
        self, request: dict[str, Any], on_progress: ProgressCallback | None
    ) -> Message | None:
        """The final message, or None if the stream ended before `message_stop`."""

        def report(chars: int) -> None:
            if on_progress is not None:
                try:
                    on_progress(chars)
                except Exception as exc:
                    raise _ProgressFailed(exc) from exc

        chars = 0
        finished = False
        async with self._client.messages.stream(**request) as stream:
            report(chars)
            try:
                async for event in stream:
                    if event.type == "content_block_delta":
                        delta = event.delta
                        if delta.type == "text_delta":
                            chars += len(delta.text)
                        elif delta.type == "input_json_delta":
                            chars += len(delta.partial_json)
                        elif delta.type == "thinking_delta":
                            chars += len(delta.thinking)
                    elif event.type == "message_stop":
                        finished = True
                    report(chars)
                message = await stream.get_final_message()
            except _ProgressFailed:
                raise
            except Exception as exc:
                raise _MidStream(exc, chars) from exc
        return message if finished else None

    async def aclose(self) -> None:
        await self._client.close()

    async def __aenter__(self) -> AnthropicProvider:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"AnthropicProvider(model={self.model!r}, base_url={self.base_url!r})"
