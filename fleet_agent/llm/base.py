"""The provider-neutral LLM interface: one reply model, one protocol, three errors.

Activities talk to an `LlmProvider`; they never see a vendor SDK type. A provider
makes exactly one HTTP attempt per `complete()` call and reports failure as an
`LlmRetryableError` (Temporal should try again, maybe after `retry_after`
seconds) or an `LlmPermanentError` (trying again cannot help: bad request, bad
key, no credit). Temporal owns retries, so providers never retry by themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from fleet_agent.models import Effort, ThinkingDisplay, TokenUsage

__all__ = [
    "LlmError",
    "LlmOptions",
    "LlmPermanentError",
    "LlmProvider",
    "LlmReply",
    "LlmRetryableError",
    "ProgressCallback",
    "SystemPrompt",
    "TokenCounter",
]

ProgressCallback = Callable[[int], None]
"""Told, as a reply streams in, how many output characters arrived so far."""

SystemPrompt = str | list[dict[str, Any]]
"""A system prompt: plain text, or Anthropic-style text blocks (which may carry
`cache_control` breakpoints)."""


class LlmOptions(BaseModel):
    """How the model should think, for a provider whose models do. A provider
    sends each only to a model that takes it (fleet_agent/llm/request.py)."""

    effort: Effort | None = None
    thinking_display: ThinkingDisplay = "omitted"


class LlmReply(BaseModel):
    """One assistant message, as plain JSON.

    `content` holds Anthropic-style content blocks as dicts, in the order the
    model wrote them: ``{"type": "text", "text": ...}``,
    ``{"type": "tool_use", "id": ..., "name": ..., "input": {...}}``,
    ``{"type": "thinking", "thinking": ..., "signature": ...}`` and
    ``{"type": "redacted_thinking", "data": ...}``. They are appended to the
    conversation as the assistant turn unchanged: a tool-use cycle must send
    its thinking blocks back exactly as received.
    """

    content: list[dict[str, Any]] = Field(default_factory=list)
    stop_reason: str
    usage: TokenUsage = Field(default_factory=TokenUsage)
    model: str

    @property
    def text(self) -> str:
        """All text blocks joined by newlines (tool_use blocks ignored)."""
        return "\n".join(
            str(block.get("text", "")) for block in self.content if block.get("type") == "text"
        )

    @property
    def tool_uses(self) -> list[dict[str, Any]]:
        """The tool_use blocks, in order."""
        return [block for block in self.content if block.get("type") == "tool_use"]


@runtime_checkable
class LlmProvider(Protocol):
    """Something that turns a prompt into one assistant message, with one attempt."""

    name: str

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
        """Send one request; raise `LlmRetryableError` or `LlmPermanentError` on failure.

        `stop_reason` of the reply is the API's, unchanged (`end_turn`, `tool_use`,
        `max_tokens`, `stop_sequence`, `pause_turn`, `refusal` or a newer value).
        `on_progress`, when given, is called as the reply arrives with the number
        of output characters received so far (text plus tool-input JSON; never
        decreasing), so the caller can show liveness. A provider that does not
        stream may call it once or not at all. What it raises propagates unchanged.
        `cache_control` markers in `system` and `messages` are the caller's
        prompt-caching breakpoints; a provider without prompt caching ignores them.
        `max_tokens` bounds thinking and answer together; `options` says how
        a model that thinks should (None: the defaults of `LlmOptions`).
        """
        ...


@runtime_checkable
class TokenCounter(Protocol):
    """A provider that can count a request's input tokens as its model does."""

    async def count_tokens(
        self,
        *,
        system: SystemPrompt,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
    ) -> int:
        """The request's input tokens; raises `LlmError` when counting fails."""
        ...


class LlmError(Exception):
    """A failed LLM call. `str(err)` says what happened and never contains a secret."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status

    def __reduce__(self) -> tuple[Any, ...]:
        # keyword-only fields survive pickling (the default would call cls(*args))
        return (self.__class__, (self.message,), dict(self.__dict__))


class LlmRetryableError(LlmError):
    """Transient: rate limit, overload, 5xx, connection error, timeout.

    `retry_after` is the server's requested wait in seconds, when it gave one.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, status=status)
        self.retry_after = retry_after

    def __repr__(self) -> str:
        return (
            f"LlmRetryableError({self.message!r}, status={self.status!r}, "
            f"retry_after={self.retry_after!r})"
        )


class LlmPermanentError(LlmError):
    """Retrying cannot help: bad request, bad key, no permission, out of credit."""

    def __repr__(self) -> str:
        return f"LlmPermanentError({self.message!r}, status={self.status!r})"
