"""Test doubles shared by unit, workflow, end-to-end tests and benchmarks."""

from .anthropic_server import (
    DEFAULT_TEXT,
    FAKE_API_KEY,
    MID_STREAM_TEXT,
    ErrorReply,
    FakeAnthropic,
    Reply,
    Request,
    Responder,
    default_responder,
    validate_messages_request,
)

__all__ = [
    "DEFAULT_TEXT",
    "FAKE_API_KEY",
    "MID_STREAM_TEXT",
    "ErrorReply",
    "FakeAnthropic",
    "Reply",
    "Request",
    "Responder",
    "default_responder",
    "validate_messages_request",
]
