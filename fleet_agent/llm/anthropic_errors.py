"""Turn what the Anthropic SDK raises into `LlmRetryableError` or `LlmPermanentError`.

Pure: `classify` looks only at the exception. It covers errors before the
response (HTTP status), errors the API sends inside a stream after its 200
(an SSE `error` event), and transport failures while the stream is read
(a stall past the read timeout, a dropped connection). The SDK raised those
as raw `httpx2` exceptions up to 2.16 and as its own `APITimeoutError` /
`APIConnectionError` from 2.17, so the provider, which knows the stream had
started, passes them to `classify_mid_stream`.
"""

from __future__ import annotations

import email.utils
import re
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast

import anthropic
import httpx2

from .base import LlmError, LlmPermanentError, LlmRetryableError

__all__ = ["classify", "classify_mid_stream", "parse_retry_after", "redact"]

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


# The status each error type has when it comes before the stream starts, from
# the API's error reference. Inside a stream (after the HTTP 200) the API sends
# the same errors as an SSE `error` event, e.g. an `overloaded_error` that "would
# normally correspond to an HTTP 529 in a non-streaming context": we classify
# it by that status.
_STATUS_OF_ERROR_TYPE: dict[str, int] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


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


def redact(text: str, secrets: Iterable[str | None]) -> str:
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

    if status < 400:
        # An SSE `error` event after the 200: classify it by the status the
        # same error has before a stream starts (unknown types as server errors).
        status = _STATUS_OF_ERROR_TYPE.get(err_type, 500)
        text = f"Anthropic API stream failed mid-way with {err_type}"
    else:
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
    - an SSE `error` event inside a stream → as the HTTP status of its error type
      (`overloaded_error` as 529, `api_error` as 500, `invalid_request_error` as
      400, …; an unknown type as 500);
    - a stream that stalls past the read timeout, or whose connection drops →
      `LlmRetryableError`;
    - other 4xx (400, 401, 403, 404, 413, 422, …) → `LlmPermanentError`;
    - spend/credit limits (402, `billing_error`, spend-limit error codes, or a
      429 whose message mentions spend limits, credit balance or billing) →
      `LlmPermanentError`;
    - anything else (no credentials, unexpected exceptions) → `LlmPermanentError`.
    """
    secrets = list(secrets)

    def clean(text: str) -> str:
        return _squash(redact(text, secrets))

    result: LlmError
    if isinstance(exc, LlmError):
        result = exc
    elif isinstance(exc, anthropic.APITimeoutError):
        result = LlmRetryableError(
            "Anthropic API request timed out: no response within the client's timeout"
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
    elif isinstance(exc, httpx2.TimeoutException):
        # The SDK maps transport errors of the request to its own types, but not
        # those raised while the body of a stream is read.
        result = LlmRetryableError(
            f"Anthropic API stream stalled: no data within the client's read timeout "
            f"({type(exc).__name__})"
        )
    elif isinstance(exc, httpx2.TransportError):
        result = LlmRetryableError(
            f"Anthropic API connection failed while streaming: {type(exc).__name__}: "
            f"{clean(str(exc))}"
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
    redacted = redact(result.message, secrets)
    if redacted != result.message:
        result = _with_message(result, redacted)
    return result


def classify_mid_stream(
    exc: BaseException, *, chars: int, secrets: Iterable[str | None] = ()
) -> LlmError:
    """As `classify`, for an exception raised after the stream's 200, while its
    events were read (`chars` of text and tool input had arrived).

    A timeout there is a stall between two events, not "no response"; a
    transport error is a connection dropped mid-reply. Both are retryable
    whatever type the SDK release wraps them in. Anything else (an SSE `error`
    event, a malformed event) is classified as `classify` does."""
    secrets = list(secrets)
    timeout = (anthropic.APITimeoutError, httpx2.TimeoutException, TimeoutError)
    dropped = (anthropic.APIConnectionError, httpx2.TransportError, ConnectionError)
    if isinstance(exc, timeout):
        return LlmRetryableError(
            f"Anthropic API stream stalled after {chars} characters: no data within the "
            f"client's read timeout ({type(exc).__name__})"
        )
    if isinstance(exc, dropped):
        cause = exc.__cause__ or exc.__context__
        detail = f"{type(cause).__name__}: {cause}" if cause is not None else str(exc)
        text = _squash(redact(detail, secrets))
        return LlmRetryableError(
            f"Anthropic API connection failed while streaming, after {chars} characters: "
            f"{type(exc).__name__}: {text}"
        )
    return classify(exc, secrets=secrets)


def _with_message(err: LlmError, message: str) -> LlmError:
    if isinstance(err, LlmRetryableError):
        return LlmRetryableError(message, status=err.status, retry_after=err.retry_after)
    if isinstance(err, LlmPermanentError):
        return LlmPermanentError(message, status=err.status)
    return LlmError(message, status=err.status)
