"""How LLM errors are classified (`fleet_agent.llm.anthropic_errors`), pure: HTTP
statuses, spend limits, transport and mid-stream failures, secrets redacted,
Retry-After; and their mapping to Temporal failures (`activities/llm_errors.py`)."""

from __future__ import annotations

import pickle
import time
from datetime import timedelta
from email.utils import formatdate
from typing import Any

import anthropic
import httpx2
import pytest

from activities.llm_errors import LLM_PERMANENT, LLM_RETRYABLE, to_application_error
from fleet_agent.llm.anthropic_errors import classify, classify_mid_stream, parse_retry_after
from fleet_agent.llm.base import LlmError, LlmPermanentError, LlmRetryableError


def _status_error(
    status: int,
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> anthropic.APIStatusError:
    request = httpx2.Request("POST", "https://api.anthropic.com/v1/messages")
    if body is None:
        body = {"type": "error", "error": {"type": "api_error", "message": "m"}}
    response = httpx2.Response(status, headers=headers or {}, json=body, request=request)
    classes: dict[int, type[anthropic.APIStatusError]] = {
        400: anthropic.BadRequestError,
        401: anthropic.AuthenticationError,
        429: anthropic.RateLimitError,
        529: anthropic.InternalServerError,
    }
    cls = classes.get(status, anthropic.APIStatusError)
    return cls(f"Error code: {status} - {body}", response=response, body=body)


@pytest.mark.parametrize(
    ("status", "retryable"),
    [
        (400, False),
        (401, False),
        (402, False),
        (403, False),
        (404, False),
        (408, True),
        (409, True),
        (413, False),
        (422, False),
        (429, True),
        (500, True),
        (502, True),
        (503, True),
        (504, True),
        (529, True),
    ],
)
def test_classify_status(status: int, retryable: bool) -> None:
    err = classify(_status_error(status))
    assert isinstance(err, LlmRetryableError if retryable else LlmPermanentError)
    assert err.status == status


def test_classify_spend_limit_body_from_spec() -> None:
    body = {
        "type": "error",
        "error": {"type": "rate_limit_error", "message": "You have exceeded your spend limit."},
    }
    assert isinstance(classify(_status_error(429, body)), LlmPermanentError)
    ramp = {
        "type": "error",
        "error": {
            "type": "rate_limit_error",
            "message": "Usage is growing too fast.",
            "details": {"error_code": "ramp_limit_exceeded"},
        },
    }
    err = classify(_status_error(429, ramp, {"retry-after": "3"}))
    assert isinstance(err, LlmRetryableError) and err.retry_after == 3


def test_classify_non_http_errors() -> None:
    request = httpx2.Request("POST", "https://api.anthropic.com/v1/messages")
    assert isinstance(classify(anthropic.APITimeoutError(request)), LlmRetryableError)
    assert isinstance(classify(anthropic.APIConnectionError(request=request)), LlmRetryableError)
    assert isinstance(classify(TimeoutError()), LlmRetryableError)
    assert isinstance(classify(ConnectionResetError("reset")), LlmRetryableError)
    no_auth = TypeError('"Could not resolve authentication method. Expected one of api_key"')
    assert isinstance(classify(no_auth), LlmPermanentError)
    assert isinstance(classify(ValueError("weird")), LlmPermanentError)
    original = LlmRetryableError("x", retry_after=2)
    assert classify(original) is original


def _raised_from(outer: BaseException, cause: BaseException) -> BaseException:
    try:
        raise outer from cause
    except BaseException as exc:
        return exc


@pytest.mark.parametrize("sdk", ["<=2.16 raw httpx2", ">=2.17 wrapped"])
def test_classify_mid_stream_names_a_stall_and_a_drop_for_either_sdk_release(sdk: str) -> None:
    # SDK 2.17 began wrapping errors raised while a stream's body is read; the
    # message must not depend on which release is installed.
    request = httpx2.Request("POST", "https://api.anthropic.com/v1/messages")
    stall: BaseException = httpx2.ReadTimeout("timed out", request=request)
    drop: BaseException = httpx2.RemoteProtocolError("peer closed connection key sk-ant-abc123")
    if sdk.startswith(">="):
        stall = _raised_from(anthropic.APITimeoutError(request), stall)
        drop = _raised_from(anthropic.APIConnectionError(request=request), drop)
    stalled = classify_mid_stream(stall, chars=20)
    dropped = classify_mid_stream(drop, chars=20, secrets=["sk-ant-abc123"])
    assert isinstance(stalled, LlmRetryableError) and isinstance(dropped, LlmRetryableError)
    assert "stream stalled after 20 characters" in stalled.message
    assert "while streaming, after 20 characters" in dropped.message
    assert "RemoteProtocolError" in dropped.message and "sk-ant-abc123" not in dropped.message
    # An SSE error event mid-stream keeps its status mapping.
    overloaded = classify_mid_stream(_status_error(529), chars=20)
    assert isinstance(overloaded, LlmRetryableError) and overloaded.status == 529


def test_classify_redacts_given_secrets() -> None:
    body = {"type": "error", "error": {"type": "api_error", "message": "token hunter2-secret"}}
    err = classify(_status_error(500, body), secrets=["hunter2-secret", None])
    assert "hunter2-secret" not in str(err) and "[REDACTED]" in str(err)


def test_classify_non_json_body() -> None:
    request = httpx2.Request("POST", "https://api.anthropic.com/v1/messages")
    response = httpx2.Response(502, text="<html>Bad Gateway</html>", request=request)
    exc = anthropic.InternalServerError("<html>Bad Gateway</html>", response=response, body="x")
    err = classify(exc)
    assert isinstance(err, LlmRetryableError) and "HTTP 502" in str(err)


def test_parse_retry_after() -> None:
    assert parse_retry_after({"retry-after": "7"}) == 7
    assert parse_retry_after({"Retry-After": "2.5"}) == 2.5
    assert parse_retry_after({"retry-after-ms": "250"}) == 0.25
    assert parse_retry_after({"retry-after": "0"}) is None
    assert parse_retry_after({"retry-after": "-3"}) is None
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None
    assert parse_retry_after(None) is None
    later = parse_retry_after({"retry-after": formatdate(time.time() + 30, usegmt=True)})
    assert later is not None and 25 < later <= 31


def test_to_application_error_retryable() -> None:
    app = to_application_error(LlmRetryableError("HTTP 429 slow down", status=429, retry_after=7))
    assert app.type == LLM_RETRYABLE == "LlmRetryable"
    assert app.non_retryable is False
    assert app.next_retry_delay == timedelta(seconds=7)
    assert app.message == "HTTP 429 slow down"
    assert app.details == ({"status": 429, "retry_after": 7},)
    plain = to_application_error(LlmRetryableError("HTTP 503", status=503))
    assert plain.next_retry_delay is None and plain.non_retryable is False


def test_to_application_error_permanent() -> None:
    app = to_application_error(LlmPermanentError("HTTP 401 bad key", status=401))
    assert app.type == LLM_PERMANENT == "LlmPermanent"
    assert app.non_retryable is True
    assert app.next_retry_delay is None
    assert "HTTP 401 bad key" in str(app)


def test_errors_pickle() -> None:
    err = pickle.loads(pickle.dumps(LlmRetryableError("m", status=429, retry_after=3.0)))
    assert isinstance(err, LlmRetryableError) and (err.status, err.retry_after) == (429, 3.0)
    perm = pickle.loads(pickle.dumps(LlmPermanentError("p", status=400)))
    assert isinstance(perm, LlmPermanentError) and perm.status == 400
    assert issubclass(LlmRetryableError, LlmError) and issubclass(LlmPermanentError, LlmError)
