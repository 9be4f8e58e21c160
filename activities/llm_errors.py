"""Turn an `LlmError` into the Temporal `ApplicationError` an activity should raise.

Retryable errors keep Temporal's retry policy in charge, but honour the server's
`retry-after` through `next_retry_delay`; permanent errors stop retrying at once.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio.exceptions import ApplicationError

from fleet_agent.llm.base import LlmError, LlmRetryableError

__all__ = ["LLM_PERMANENT", "LLM_RETRYABLE", "to_application_error"]

LLM_RETRYABLE = "LlmRetryable"
LLM_PERMANENT = "LlmPermanent"


def to_application_error(err: LlmError) -> ApplicationError:
    """`LlmRetryableError` → retryable `LlmRetryable`; anything else → non-retryable `LlmPermanent`.

    The details carry ``{"status": int | None, "retry_after": float | None}``.
    """
    message = str(err)
    if isinstance(err, LlmRetryableError):
        delay = err.retry_after
        return ApplicationError(
            message,
            {"status": err.status, "retry_after": delay},
            type=LLM_RETRYABLE,
            next_retry_delay=timedelta(seconds=delay) if delay else None,
        )
    return ApplicationError(
        message,
        {"status": err.status, "retry_after": None},
        type=LLM_PERMANENT,
        non_retryable=True,
    )
