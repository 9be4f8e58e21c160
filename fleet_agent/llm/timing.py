"""How long one LLM attempt may take, derived from its output budget. Pure.

A streamed reply has no natural whole-call timeout: a 64k-token answer is
legitimately slow while a stalled stream is broken at once. So three bounds
work together:

- the provider's chunk *read* timeout bounds the gap between two chunks (and
  the wait for the first one): a stalled stream fails as a retryable timeout;
- the activity's heartbeat timeout bounds how long a dead worker goes
  unnoticed;
- the activity's start-to-close timeout, `llm_attempt_timeout`, only caps a
  stream that keeps producing, so it is sized for the slowest plausible
  generation of `max_output_tokens`: cutting a healthy reply short would pay
  for it twice.
"""

from __future__ import annotations

import math
from datetime import timedelta

__all__ = [
    "CHUNK_READ_TIMEOUT_SECONDS",
    "CONNECT_TIMEOUT_SECONDS",
    "LLM_HEARTBEAT_TIMEOUT",
    "POOL_TIMEOUT_SECONDS",
    "SLOWEST_OUTPUT_TOKENS_PER_SECOND",
    "STORE_ALLOWANCE_SECONDS",
    "WRITE_TIMEOUT_SECONDS",
    "llm_attempt_timeout",
]

CONNECT_TIMEOUT_SECONDS = 10.0
"""TCP + TLS to the API."""

WRITE_TIMEOUT_SECONDS = 60.0
"""Sending the request body; a prompt at the largest history budget is a few MB."""

POOL_TIMEOUT_SECONDS = 10.0
"""Waiting for a free connection in the client's pool."""

CHUNK_READ_TIMEOUT_SECONDS = 120.0
"""The longest silence allowed between two reads of the response, including the
wait for the first byte. The first event can follow prompt processing, which
takes tens of seconds on a prompt of a few hundred thousand tokens; after that
the API sends a delta every few tokens. Two minutes of silence is a stall."""

SLOWEST_OUTPUT_TOKENS_PER_SECOND = 20.0
"""A deliberately slow generation rate. The anthropic SDK itself assumes 128,000
output tokens per hour (about 36 tokens/s) as the worst case when it decides
that a request is too long to run without streaming
(`_calculate_nonstreaming_timeout`), and Anthropic's current models usually
stream several times faster than that. We take 20 tokens/s, well under the
SDK's worst case, because an attempt cut short by its start-to-close timeout
is paid for and then asked again."""

STORE_ALLOWANCE_SECONDS = 30.0
"""Reading the prompt from the store and writing the reply."""

LLM_HEARTBEAT_TIMEOUT = timedelta(seconds=30)
"""The LLM activity beats every few seconds from the start of its attempt (see
activities/heartbeat.py), so a worker killed mid-call is noticed, and the call
retried elsewhere, about 30 s later."""


def llm_attempt_timeout(max_output_tokens: int) -> timedelta:
    """Start-to-close timeout of one LLM attempt that may generate `max_output_tokens`.

    connect + upload + the wait for the first token (one chunk read timeout) +
    `max_output_tokens` at `SLOWEST_OUTPUT_TOKENS_PER_SECOND` + the store's
    share, rounded up to whole seconds. 4,096 tokens → 425 s; 64,000 → 3,420 s.
    """
    if max_output_tokens < 1:
        raise ValueError(f"max_output_tokens must be at least 1, not {max_output_tokens}")
    seconds = (
        CONNECT_TIMEOUT_SECONDS
        + WRITE_TIMEOUT_SECONDS
        + CHUNK_READ_TIMEOUT_SECONDS
        + max_output_tokens / SLOWEST_OUTPUT_TOKENS_PER_SECOND
        + STORE_ALLOWANCE_SECONDS
    )
    return timedelta(seconds=math.ceil(seconds))
