"""`LlmProvider` over the Anthropic Messages API (the official `anthropic` SDK).

One `complete()` is one HTTP attempt: the SDK is built with ``max_retries=0``
because Temporal owns retries. SDK failures are turned into `LlmRetryableError`
or `LlmPermanentError` by `classify`, a pure function.
"""

from __future__ import annotations

import email.utils
import os
import re
import time
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import TracebackType
from typing import Any, Literal, cast

import anthropic
from anthropic.types import MessageParam, ToolUnionParam

from fleet_agent.models import TokenUsage

from .base import LlmError, LlmPermanentError, LlmReply, LlmRetryableError

__all__ = [
    "FALLBACK_MODEL",
    "MODEL_ENV",
    "AnthropicProvider",
    "classify",
    "default_model",
    "parse_retry_after",
]

MODEL_ENV = "FLEET_LLM_MODEL"
FALLBACK_MODEL = "claude-sonnet-4-5"
"""Used only when the installed SDK's `anthropic.types.Model` lists no Sonnet."""

_RETRYABLE_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
# error.details.error_code values (see anthropic/_error_classes.py) that mean
# "out of money": waiting a few seconds will not fix them.
_SPEND_ERROR_CODES = frozenset(
    {
        "contract_spend_limit_reached",
        "enforced_spend_limit_reached",
        "linked_organization_spend_limit_reached",
        "linked_organization_billing_unavailable",
    }
)
_SPEND_WORDS = re.compile(
    r"spend(?:ing)?[ _-]limit|credit[ _-]balance|billing|usage[ _-]limits?\b|"
    r"out of credits?|insufficient (?:credit|funds|balance)|payment",
    re.IGNORECASE,
)
_KEY_LIKE = re.compile(r"sk-ant-[A-Za-z0-9_\-]{6,}")
_MAX_DETAIL = 1_000


# ---------------------------------------------------------------- model


def _literal_names(tp: object) -> Iterator[str]:
    """Every string in the Literal(s) inside a (possibly nested) Union type."""
    origin = typing.get_origin(tp)
    if origin is Literal:
        for arg in typing.get_args(tp):
            if isinstance(arg, str):
                yield arg
    elif origin is typing.Union:
        for arg in typing.get_args(tp):
            yield from _literal_names(arg)


def default_model() -> str:
    """The newest Sonnet the installed SDK knows (its Model Literal lists newest first)."""
    for name in _literal_names(anthropic.types.Model):
        if "sonnet" in name:
            return name
    return FALLBACK_MODEL


# ---------------------------------------------------------------- errors


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait from `retry-after-ms` or `retry-after` (seconds or HTTP date).

    None when absent, unparseable or not positive.
    """
    if not headers:
        return None
    lower = {k.lower(): v for k, v in headers.items()}
    value: float | None = None
    ms = lower.get("retry-after-ms")
    if ms is not None:
        try:
            value = float(ms) / 1000.0
        except ValueError:
            value = None
    if value is None and (raw := lower.get("retry-after")) is not None:
        try:
            value = float(raw)
        except ValueError:
            parsed = email.utils.parsedate_tz(raw)
            if parsed is not None:
                value = float(email.utils.mktime_tz(parsed) - time.time())
    if value is None or value != value or value <= 0:  # value != value: NaN
        return None
    return value


def _redact(text: str, secrets: Iterable[str | None]) -> str:
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "[REDACTED]")
    return _KEY_LIKE.sub("sk-ant-[REDACTED]", text)


def _squash(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_DETAIL else text[:_MAX_DETAIL] + "…"


def _body_error(body: object) -> dict[str, Any]:
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict):
            return cast(dict[str, Any], err)
    return {}


def _classify_status(exc: anthropic.APIStatusError, clean: Callable[[str], str]) -> LlmError:
    status = exc.status_code
    err = _body_error(exc.body)
    err_type = str(exc.type or err.get("type") or "unknown_error")
    api_message = exc.api_message or err.get("message")
    if not api_message:
        api_message = exc.body if isinstance(exc.body, str) and exc.body else "(no message)"
    api_message = clean(str(api_message))
    error_code = exc.error_code
    headers = exc.response.headers
    retry_after = parse_retry_after(dict(headers.items()))

    text = f"Anthropic API returned HTTP {status} {err_type}"
    if error_code:
        text += f" ({error_code})"
    text += f": {api_message}"
    if exc.request_id:
        text += f" [request-id {exc.request_id}]"

    out_of_money = (
        err_type == "billing_error"
        or error_code in _SPEND_ERROR_CODES
        or (status in (402, 429) and _SPEND_WORDS.search(api_message) is not None)
    )
    if out_of_money:
        return LlmPermanentError(
            text + " — a spend/credit limit: retrying will not help until it is raised",
            status=status,
        )
    if status in _RETRYABLE_STATUSES or status >= 500:
        if retry_after is not None:
            text += f"; server asked to retry after {retry_after:g}s"
        return LlmRetryableError(text, status=status, retry_after=retry_after)
    return LlmPermanentError(text, status=status)


def classify(exc: BaseException, *, secrets: Iterable[str | None] = ()) -> LlmError:
    """Map an exception from the Anthropic SDK to a retryable or permanent `LlmError`.

    Pure: looks only at `exc`. Every string in `secrets` (the API key) and anything
    shaped like an Anthropic key is redacted from the message.

    - 408, 409, 429, 5xx (incl. 529 overloaded), connection errors, timeouts and
      malformed responses → `LlmRetryableError` (with `retry_after` from
      `retry-after-ms` / `retry-after` when present);
    - other 4xx (400, 401, 403, 404, 413, 422, …) → `LlmPermanentError`;
    - spend/credit limits (402, `billing_error`, spend-limit error codes, or a
      429 whose message mentions spend limits, credit balance or billing) →
      `LlmPermanentError`;
    - anything else (no credentials, unexpected exceptions) → `LlmPermanentError`.
    """
    secrets = list(secrets)

    def clean(text: str) -> str:
        return _squash(_redact(text, secrets))

    result: LlmError
    if isinstance(exc, LlmError):
        result = exc
    elif isinstance(exc, anthropic.APITimeoutError):
        result = LlmRetryableError(
            "Anthropic API request timed out: no complete response within the client timeout"
        )
    elif isinstance(exc, anthropic.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        detail = f"{type(cause).__name__}: {cause}" if cause is not None else exc.message
        result = LlmRetryableError(f"Anthropic API connection error: {clean(detail)}")
    elif isinstance(exc, anthropic.APIStatusError):
        result = _classify_status(exc, clean)
    elif isinstance(exc, anthropic.APIResponseValidationError):
        result = LlmRetryableError(
            f"Anthropic API returned HTTP {exc.status_code} with a body that is not a valid "
            f"Messages API response: {clean(exc.message)}",
            status=exc.status_code,
        )
    elif isinstance(exc, TimeoutError):
        result = LlmRetryableError(f"Anthropic API call timed out: {type(exc).__name__}")
    elif isinstance(exc, ConnectionError):
        result = LlmRetryableError(
            f"Anthropic API connection error: {type(exc).__name__}: {clean(str(exc))}"
        )
    elif isinstance(exc, TypeError) and "authentication method" in str(exc):
        result = LlmPermanentError(
            "no Anthropic credentials: pass api_key or set ANTHROPIC_API_KEY"
        )
    elif isinstance(exc, anthropic.AnthropicError):
        result = LlmPermanentError(f"Anthropic SDK error {type(exc).__name__}: {clean(str(exc))}")
    else:
        result = LlmPermanentError(
            f"unexpected error calling the Anthropic API: {type(exc).__name__}: {clean(str(exc))}"
        )
    redacted = _redact(result.message, secrets)
    if redacted != result.message:
        result = _with_message(result, redacted)
    return result


def _with_message(err: LlmError, message: str) -> LlmError:
    if isinstance(err, LlmRetryableError):
        return LlmRetryableError(message, status=err.status, retry_after=err.retry_after)
    if isinstance(err, LlmPermanentError):
        return LlmPermanentError(message, status=err.status)
    return LlmError(message, status=err.status)


# ---------------------------------------------------------------- provider


def _to_block(block: Any) -> dict[str, Any] | None:
    data = block.model_dump(mode="json") if hasattr(block, "model_dump") else dict(block)
    kind = data.get("type")
    if kind == "text":
        return {"type": "text", "text": str(data.get("text") or "")}
    if kind == "tool_use":
        raw_input = data.get("input")
        return {
            "type": "tool_use",
            "id": str(data["id"]),
            "name": str(data["name"]),
            "input": raw_input if isinstance(raw_input, dict) else {},
        }
    return None  # thinking, server tools, …: not part of this provider's contract


def _usage(usage: Any) -> TokenUsage:
    if usage is None:
        return TokenUsage()
    return TokenUsage(
        input_tokens=getattr(usage, "input_tokens", None) or 0,
        output_tokens=getattr(usage, "output_tokens", None) or 0,
        cache_read_input_tokens=getattr(usage, "cache_read_input_tokens", None) or 0,
        cache_creation_input_tokens=getattr(usage, "cache_creation_input_tokens", None) or 0,
    )


class AnthropicProvider:
    """`LlmProvider` on `anthropic.AsyncAnthropic`, one HTTP attempt per call.

    - `api_key` None → the SDK reads `ANTHROPIC_API_KEY` (or its other sources);
    - `base_url` None → the SDK reads `ANTHROPIC_BASE_URL`, else api.anthropic.com;
    - `model` None → `$FLEET_LLM_MODEL`, else `default_model()`;
    - `timeout` → seconds for the whole attempt (connect, write, read).
    """

    name: str = "anthropic"

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        model: str | None = None,
        timeout: float = 120.0,
    ) -> None:
        self.model: str = model or os.environ.get(MODEL_ENV, "").strip() or default_model()
        self.timeout = timeout
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=base_url,
            timeout=timeout,
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
        system: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        max_tokens: int,
    ) -> LlmReply:
        try:
            response = await self._client.messages.create(
                model=self.model,
                max_tokens=max_tokens,
                messages=cast("list[MessageParam]", messages),
                system=system if system else anthropic.omit,
                tools=cast("list[ToolUnionParam]", tools) if tools else anthropic.omit,
            )
        except Exception as exc:
            secrets = self._secrets()
            err = classify(exc, secrets=secrets)
            if _redact(str(exc), secrets) != str(exc):
                # The SDK's own message carries a secret: do not chain it, or it
                # would reach logs and Temporal failure causes.
                raise err from None
            raise err from exc

        content = [b for b in (_to_block(block) for block in response.content) if b is not None]
        stop_reason = response.stop_reason or (
            "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
        )
        return LlmReply(
            content=content,
            stop_reason=str(stop_reason),
            usage=_usage(response.usage),
            model=response.model or self.model,
        )

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
