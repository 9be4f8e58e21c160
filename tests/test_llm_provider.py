"""The Anthropic provider against the local fake API, error classification, and the fake."""

from __future__ import annotations

import asyncio
import pickle
import time
import typing
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from email.utils import formatdate
from typing import Any, Literal

import anthropic
import httpx
import httpx2
import pytest

from activities.llm_errors import LLM_PERMANENT, LLM_RETRYABLE, to_application_error
from fleet_agent.llm import anthropic_provider as provider_module
from fleet_agent.llm.anthropic_provider import AnthropicProvider, default_model
from fleet_agent.llm.base import (
    LlmError,
    LlmPermanentError,
    LlmProvider,
    LlmReply,
    LlmRetryableError,
)
from fleet_agent.llm.classify import classify, classify_mid_stream, parse_retry_after
from fleet_agent.llm.model_table import DEFAULT_MODEL
from fleet_agent.models import TokenUsage
from testkit.fakes import DEFAULT_TEXT, ErrorReply, FakeAnthropic, Reply, Request
from tests.helpers import eventually

KEY = "sk-ant-api03-TESTSECRET0123456789abcdef"
# The default model: it thinks (testkit/fakes/anthropic_models.py).
MODEL = DEFAULT_MODEL
SYSTEM = "You manage a GPU fleet."
TOOLS: list[dict[str, Any]] = [
    {
        "name": "list_instances",
        "description": "List rented instances.",
        "input_schema": {"type": "object", "properties": {}},
    },
    {
        "name": "destroy_instance",
        "description": "Destroy one instance.",
        "input_schema": {"type": "object", "properties": {"id": {"type": "string"}}},
    },
]
MESSAGES: list[dict[str, Any]] = [{"role": "user", "content": "Heartbeat. Anything to do?"}]


@pytest.fixture(scope="module")
def server() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as fake:
        yield fake


@pytest.fixture
def fake(server: FakeAnthropic) -> FakeAnthropic:
    server.clear()
    server.set_responder(None)
    server.latency = 0.0
    return server


@pytest.fixture
async def provider(fake: FakeAnthropic) -> AsyncIterator[AnthropicProvider]:
    p = AnthropicProvider(api_key=KEY, base_url=fake.base_url, model=MODEL, read_timeout=5.0)
    yield p
    await p.aclose()


async def call(provider: AnthropicProvider, **overrides: Any) -> LlmReply:
    kwargs: dict[str, Any] = {
        "system": SYSTEM,
        "messages": MESSAGES,
        "tools": TOOLS,
        "max_tokens": 1024,
    }
    kwargs.update(overrides)
    return await provider.complete(**kwargs)


def assert_clean(err: BaseException) -> None:
    """The key appears nowhere a log or a Temporal failure would show."""
    assert KEY not in str(err)
    assert KEY not in repr(err)
    cause = err.__cause__
    while cause is not None:
        assert KEY not in str(cause)
        cause = cause.__cause__


# ---------------------------------------------------------------- success


async def test_text_reply_and_request_shape(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.set_responder(lambda req: Reply(text="All quiet."))
    reply = await call(provider)
    # The model thought first: its block comes back with the text, as it came.
    assert reply.content == fake.requests[0].content
    thinking, text = reply.content
    assert thinking["type"] == "thinking" and thinking["signature"]
    assert text == {"type": "text", "text": "All quiet."}
    assert reply.stop_reason == "end_turn"
    assert reply.model == MODEL
    assert reply.text == "All quiet.", "thinking is not the answer"
    assert len(fake.requests) == 1
    body = fake.requests[0].body
    assert body["model"] == MODEL
    assert body["system"] == SYSTEM
    assert body["messages"] == MESSAGES
    assert body["tools"] == TOOLS
    assert body["max_tokens"] == 1024
    assert body["thinking"] == {"type": "adaptive", "display": "omitted"}
    assert "output_config" not in body, "no effort asked for: the model's default"
    assert body["stream"] is True, "one streamed request"
    assert fake.requests[0].stream


async def test_default_responder_gives_a_verdict(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    reply = await call(provider)
    assert reply.text == DEFAULT_TEXT
    assert reply.text.endswith('<verdict>{"action": false, "state_changed": false}</verdict>')


async def test_tool_use_reply_parsed_into_blocks(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.set_responder(
        lambda req: Reply(
            text="Let me look.",
            tool_calls=[("list_instances", {}), ("destroy_instance", {"id": "i-1", "why": None})],
            redacted=False,
        )
    )
    reply = await call(provider)
    assert reply.stop_reason == "tool_use"
    # Notes between two tool calls come back as a thinking block (Sonnet 5.5).
    kinds = ["thinking", "text", "tool_use", "thinking", "tool_use"]
    assert [b["type"] for b in reply.content] == kinds
    first, second = reply.tool_uses
    assert set(first) == {"type", "id", "name", "input"}
    assert first["name"] == "list_instances" and first["input"] == {}
    assert second["name"] == "destroy_instance"
    # a null inside the tool input is the model's, not to be dropped
    assert second["input"] == {"id": "i-1", "why": None}
    assert first["id"].startswith("toolu_") and first["id"] != second["id"]


async def test_reply_content_round_trips_as_the_next_assistant_turn(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.set_responder(lambda req: Reply(tool_calls=[("list_instances", {})]))
    first = await call(provider)
    tool_id = first.tool_uses[0]["id"]
    fake.set_responder(None)
    messages = [
        *MESSAGES,
        {"role": "assistant", "content": first.content},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": "none rented"}],
        },
    ]
    second = await call(provider, messages=messages)
    assert second.stop_reason == "end_turn"
    assert fake.requests[-1].last_user_text() == "none rented"


async def test_usage_mapped(fake: FakeAnthropic, provider: AnthropicProvider) -> None:
    fake.set_responder(
        lambda req: Reply(
            text="x", usage=(123, 45), cache_read_input_tokens=7, cache_creation_input_tokens=9
        )
    )
    reply = await call(provider)
    # The default model thinks; a scripted usage caps what it says of it.
    reported = fake.requests[-1].usage
    assert reported is not None
    thinking = reported["output_tokens_details"]["thinking_tokens"]
    assert thinking > 0
    assert reply.usage == TokenUsage(
        input_tokens=123,
        output_tokens=45,
        cache_read_input_tokens=7,
        cache_creation_input_tokens=9,
        thinking_tokens=thinking,
    )
    fake.set_responder(lambda req: Reply(text="x", usage=(5, 6), think=False))
    reply = await call(provider)  # no cache fields, no thinking
    assert reply.usage == TokenUsage(input_tokens=5, output_tokens=6)


async def test_empty_system_and_tools_are_omitted(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    await call(provider, system="", tools=[])
    body = fake.requests[0].body
    assert "system" not in body and "tools" not in body


# ---------------------------------------------------------------- errors via HTTP


@pytest.mark.parametrize(
    ("status", "error_type"),
    [
        (400, "invalid_request_error"),
        (401, "authentication_error"),
        (403, "permission_error"),
        (404, "not_found_error"),
        (413, "request_too_large"),
        (422, "invalid_request_error"),
    ],
)
async def test_client_errors_are_permanent(
    fake: FakeAnthropic, provider: AnthropicProvider, status: int, error_type: str
) -> None:
    fake.fail_next(status, message=f"boom {status}")
    with pytest.raises(LlmPermanentError) as info:
        await call(provider)
    err = info.value
    assert err.status == status
    assert str(status) in str(err) and error_type in str(err) and f"boom {status}" in str(err)
    assert "request-id req_" in str(err)
    assert len(fake.requests) == 1  # the SDK made exactly one attempt
    assert_clean(err)


@pytest.mark.parametrize("status", [500, 502, 503, 504, 529])
async def test_server_errors_are_retryable(
    fake: FakeAnthropic, provider: AnthropicProvider, status: int
) -> None:
    fake.fail_next(status, times=3)
    with pytest.raises(LlmRetryableError) as info:
        await call(provider)
    assert info.value.status == status
    assert info.value.retry_after is None
    assert len(fake.requests) == 1  # max_retries=0: no SDK retry
    assert fake.pending_failures == 2
    assert_clean(info.value)


async def test_overloaded_message_is_clear(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.fail_next(529)
    with pytest.raises(LlmRetryableError, match=r"HTTP 529 overloaded_error: Overloaded"):
        await call(provider)


async def test_rate_limit_with_retry_after(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.fail_next(429, headers={"retry-after": "7"})
    with pytest.raises(LlmRetryableError) as info:
        await call(provider)
    assert info.value.retry_after == 7
    assert info.value.status == 429
    assert "rate_limit_error" in str(info.value) and "retry after 7s" in str(info.value)
    assert len(fake.requests) == 1


async def test_rate_limit_with_retry_after_ms(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.fail_next(429, headers={"retry-after-ms": "1500", "retry-after": "2"})
    with pytest.raises(LlmRetryableError) as info:
        await call(provider)
    assert info.value.retry_after == 1.5


@pytest.mark.parametrize(
    ("message", "error_code"),
    [
        ("You have reached your spend limit for this month.", None),
        ("Your credit balance is too low to access the Anthropic API.", None),
        ("Please check your plan and billing details.", None),
        ("Request refused.", "enforced_spend_limit_reached"),
        ("Request refused.", "contract_spend_limit_reached"),
    ],
)
async def test_spend_limit_429_is_permanent(
    fake: FakeAnthropic, provider: AnthropicProvider, message: str, error_code: str | None
) -> None:
    fake.fail_next(429, message=message, error_code=error_code, headers={"retry-after": "60"})
    with pytest.raises(LlmPermanentError) as info:
        await call(provider)
    assert info.value.status == 429
    assert "spend/credit limit" in str(info.value)
    assert len(fake.requests) == 1


async def test_billing_error_type_is_permanent(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.fail_next(400, error_type="billing_error", message="Your credit balance is too low.")
    with pytest.raises(LlmPermanentError, match="billing_error"):
        await call(provider)


async def test_plain_429_without_retry_after(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.fail_next(429)
    with pytest.raises(LlmRetryableError) as info:
        await call(provider)
    assert info.value.retry_after is None


async def test_connection_refused_is_retryable() -> None:
    fake = FakeAnthropic().start()
    p = AnthropicProvider(api_key=KEY, base_url=fake.base_url, model=MODEL, read_timeout=5.0)
    try:
        await call(p)  # leaves a pooled keep-alive connection behind
        fake.stop()
        with pytest.raises(LlmRetryableError) as info:
            await call(p)
        assert info.value.status is None
        assert "connection error" in str(info.value).lower()
        assert_clean(info.value)
        # a fresh client: nothing listens at all
        fresh = AnthropicProvider(
            api_key=KEY, base_url=fake.base_url, model=MODEL, read_timeout=5.0
        )
        with pytest.raises(LlmRetryableError, match=r"(?i)connect"):
            await call(fresh)
        await fresh.aclose()
        # the fake can come back on the same port
        fake.start()
        assert (await call(p)).text == DEFAULT_TEXT
        assert len(fake.requests) == 2
    finally:
        fake.stop()
        await p.aclose()


async def test_slow_server_times_out_as_retryable(fake: FakeAnthropic) -> None:
    # The reply would come after a minute: a call that ends with a timeout
    # gave up long before, at its own read timeout, and did not retry.
    fake.latency = 60.0
    p = AnthropicProvider(api_key=KEY, base_url=fake.base_url, model=MODEL, read_timeout=0.4)
    try:
        started = time.monotonic()
        with pytest.raises(LlmRetryableError, match="timed out") as info:
            await call(p)
        elapsed = time.monotonic() - started
    finally:
        await p.aclose()
    assert elapsed < fake.latency, "the SDK waited for the reply (ignored the timeout)"
    assert len(fake.requests) == 1, "the SDK retried"
    assert info.value.retry_after is None

    # the fake notices the client hung up and stops counting the request as in flight
    async def hung_up() -> bool:
        return not fake.in_flight

    await eventually(hung_up, what="the fake to see the client hang up")


async def test_validation_error_from_fake_reaches_caller(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    bad = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    with pytest.raises(LlmPermanentError, match="roles must alternate"):
        await call(provider, messages=bad)


async def test_key_never_in_error_strings(fake: FakeAnthropic, provider: AnthropicProvider) -> None:
    # a (misbehaving) proxy echoes the key back in the error message
    fake.fail_next(401, message=f"invalid x-api-key: {KEY}")
    with pytest.raises(LlmPermanentError) as info:
        await call(provider)
    assert "[REDACTED]" in str(info.value)
    assert info.value.__cause__ is None  # the SDK error carrying the key is not chained
    assert_clean(info.value)
    app_err = to_application_error(info.value)
    assert KEY not in str(app_err)
    # the same for a retryable error, and a key-shaped string that is not our key
    other = "sk-ant-api03-SOMEONEELSESKEY999"
    fake.fail_next(500, message=f"upstream said {KEY} and {other}")
    with pytest.raises(LlmRetryableError) as info2:
        await call(provider)
    assert_clean(info2.value)
    assert other not in str(info2.value)


# ---------------------------------------------------------------- config


async def test_base_url_from_env_when_none(
    fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    p = AnthropicProvider(model="m")
    try:
        assert p.base_url.rstrip("/") == fake.base_url
        reply = await call(p)
    finally:
        await p.aclose()
    assert reply.text == DEFAULT_TEXT
    assert len(fake.requests) == 1
    headers = fake.requests[0].headers
    assert KEY in (headers.get("x-api-key", "") + headers.get("authorization", ""))


async def test_model_from_env_and_argument(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEET_LLM_MODEL", "claude-from-env")
    p = AnthropicProvider(api_key=KEY, base_url="http://127.0.0.1:9")
    assert p.model == "claude-from-env"
    q = AnthropicProvider(api_key=KEY, base_url="http://127.0.0.1:9", model="claude-arg")
    assert q.model == "claude-arg"
    monkeypatch.delenv("FLEET_LLM_MODEL")
    r = AnthropicProvider(api_key=KEY, base_url="http://127.0.0.1:9")
    assert r.model == default_model()
    for x in (p, q, r):
        await x.aclose()


def _sdk_model_names() -> list[str]:
    names: list[str] = []
    for arg in typing.get_args(anthropic.types.Model):
        if typing.get_origin(arg) is Literal:
            names += [n for n in typing.get_args(arg) if isinstance(n, str)]
    return names


def test_the_default_model_is_pinned_and_known_to_the_sdk() -> None:
    # A fixed, documented name (docs/DECISIONS.md): not whatever comes first
    # in the SDK's list.
    assert default_model() == "claude-sonnet-5-5" == provider_module.DEFAULT_MODEL
    assert default_model() in _sdk_model_names(), "a name the installed SDK knows"


def test_an_sdk_upgrade_does_not_change_the_default_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    newer = typing.Union[Literal["claude-sonnet-9-9", "claude-sonnet-5-5"], str]  # noqa: UP007
    monkeypatch.setattr(anthropic.types, "Model", newer)
    monkeypatch.delenv("FLEET_LLM_MODEL", raising=False)
    assert default_model() == "claude-sonnet-5-5"
    assert AnthropicProvider(api_key=KEY, base_url="http://127.0.0.1:9").model == (
        "claude-sonnet-5-5"
    )


def test_provider_satisfies_protocol() -> None:
    p = AnthropicProvider(api_key=KEY, base_url="http://127.0.0.1:9", model="m")
    assert isinstance(p, LlmProvider)
    assert p.name == "anthropic"
    assert p._client.max_retries == 0
    assert KEY not in repr(p)


# ---------------------------------------------------------------- classify (pure)


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


# ---------------------------------------------------------------- Temporal mapping


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


# ---------------------------------------------------------------- the fake itself


def _post(
    fake: FakeAnthropic, body: Any, *, auth: bool = True, path: str = "/v1/messages"
) -> httpx.Response:
    headers = {"x-api-key": "k"} if auth else {}
    return httpx.post(fake.base_url + path, json=body, headers=headers, timeout=5)


GOOD = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}


def test_fake_success_shape(fake: FakeAnthropic) -> None:
    fake.set_responder(lambda req: Reply(text="t", tool_calls=[("list_instances", {"a": 1})]))
    r = _post(fake, {**GOOD, "tools": TOOLS})
    assert r.status_code == 200
    assert r.headers["request-id"].startswith("req_")
    data = r.json()
    assert data["id"].startswith("msg_") and data["type"] == "message"
    assert data["role"] == "assistant" and data["model"] == "m"
    assert data["stop_reason"] == "tool_use" and data["stop_sequence"] is None
    assert data["content"][0] == {"type": "text", "text": "t"}
    assert data["content"][1]["id"].startswith("toolu_")
    assert set(data["usage"]) == {"input_tokens", "output_tokens"}


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"max_tokens": 10, "messages": GOOD["messages"]}, "model: Field required"),
        ({"model": "m", "max_tokens": 10}, "messages: Field required"),
        ({"model": "m", "messages": GOOD["messages"]}, "max_tokens: Field required"),
        ({**GOOD, "messages": []}, "at least one message"),
        ({**GOOD, "messages": [{"role": "assistant", "content": "x"}]}, "first message"),
        (
            {
                **GOOD,
                "messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
            },
            "roles must alternate",
        ),
        ({**GOOD, "messages": [{"role": "user", "content": ""}]}, "non-empty content"),
        (
            {**GOOD, "messages": [{"role": "user", "content": [{"type": "text", "text": ""}]}]},
            "non-empty",
        ),
        (
            {
                **GOOD,
                "messages": [
                    {"role": "user", "content": "go"},
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "t1", "name": "x", "input": {}}],
                    },
                    {"role": "user", "content": "where is my result?"},
                ],
            },
            "without `tool_result` blocks",
        ),
        (
            {
                **GOOD,
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": "nope", "content": "r"}],
                    }
                ],
            },
            "unexpected `tool_use_id`",
        ),
        ({**GOOD, "tools": [TOOLS[0], TOOLS[0]]}, "Tool names must be unique"),
        ({**GOOD, "max_tokens": 0}, "greater than or equal to 1"),
    ],
)
def test_fake_validates_like_the_api(
    fake: FakeAnthropic, body: dict[str, Any], fragment: str
) -> None:
    r = _post(fake, body)
    assert r.status_code == 400, r.text
    assert r.json()["type"] == "error"
    assert r.json()["error"]["type"] == "invalid_request_error"
    assert fragment in r.json()["error"]["message"]
    assert len(fake.requests) == 1


def test_fake_requires_auth_and_answers_count_tokens(fake: FakeAnthropic) -> None:
    r = _post(fake, GOOD, auth=False)
    assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
    counted = _post(
        fake, {"model": "m", "messages": GOOD["messages"]}, path="/v1/messages/count_tokens"
    )
    assert counted.status_code == 200 and counted.json()["input_tokens"] >= 1
    assert len(fake.requests) == 1 and len(fake.count_tokens_requests) == 1
    assert _post(fake, GOOD, path="/v1/nope").status_code == 404


def test_fake_fail_next_and_responder_errors(fake: FakeAnthropic) -> None:
    fake.fail_next(503, times=2, headers={"retry-after": "4"})
    first = _post(fake, GOOD)
    assert first.status_code == 503 and first.headers["retry-after"] == "4"
    assert first.json()["error"]["type"] == "api_error"
    assert _post(fake, GOOD).status_code == 503
    assert _post(fake, GOOD).status_code == 200

    def broken(req: Request) -> Reply:
        raise RuntimeError("responder bug")

    fake.set_responder(broken)
    r = _post(fake, GOOD)
    assert r.status_code == 500 and "responder bug" in r.json()["error"]["message"]
    assert len(fake.responder_errors) == 1
    fake.set_responder(lambda req: ErrorReply(429, message="slow", headers={"retry-after": "1"}))
    assert _post(fake, GOOD).status_code == 429
    assert len(fake.requests) == 5


def test_request_helpers() -> None:
    req = Request(
        body={
            "system": [{"type": "text", "text": "sys A"}, {"type": "text", "text": "sys B"}],
            "tools": TOOLS,
            "messages": [
                {"role": "user", "content": "first question"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "checking"},
                        {
                            "type": "tool_use",
                            "id": "t1",
                            "name": "list_instances",
                            "input": {"q": 1},
                        },
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "t1",
                            "content": [{"type": "text", "text": "2 up"}],
                        },
                        {"type": "text", "text": "and now?"},
                    ],
                },
            ],
        }
    )
    assert req.system_text() == "sys A\nsys B"
    assert req.last_user_text() == "2 up\nand now?"
    assert req.tool_names() == ["list_instances", "destroy_instance"]
    everything = req.all_text()
    for piece in (
        "sys A",
        "first question",
        "checking",
        "list_instances",
        '"q": 1',
        "2 up",
        "and now?",
    ):
        assert piece in everything
    assert req.tool_results()[0]["tool_use_id"] == "t1"


async def test_fake_tracks_concurrency(fake: FakeAnthropic, provider: AnthropicProvider) -> None:
    fake.latency = 0.3
    await asyncio.gather(*(call(provider) for _ in range(5)))
    assert len(fake.requests) == 5
    assert fake.max_concurrent == 5
    assert fake.in_flight == 0
