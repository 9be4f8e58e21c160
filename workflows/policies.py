"""Timeouts and retry policies, named once so every call site reads the same.

Temporal owns retries: activities raise non-retryable ApplicationErrors for
permanent failures and everything else is retried here with backoff.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio.common import RetryPolicy

__all__ = [
    "FLEET_READ_TIMEOUT",
    "FLEET_RETRY",
    "FLEET_WRITE_TIMEOUT",
    "LLM_RETRY",
    "LLM_TIMEOUT",
    "STORE_RETRY",
    "STORE_TIMEOUT",
    "TASK_QUEUE",
]

TASK_QUEUE = "fleet-agent"

# The store is local or a nearby PostgreSQL: short calls, retried for a long
# while, because a run must not be lost to a database restart.
STORE_TIMEOUT = timedelta(seconds=30)
STORE_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=0,
)

# One LLM call may take minutes on a long prompt; overload (429/529/5xx) is
# retried with backoff, honouring retry-after through next_retry_delay.
LLM_TIMEOUT = timedelta(seconds=180)
LLM_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=2),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=60),
    maximum_attempts=8,
    non_retryable_error_types=["LlmPermanent"],
)

FLEET_READ_TIMEOUT = timedelta(seconds=60)
FLEET_WRITE_TIMEOUT = timedelta(seconds=120)
FLEET_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=2),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=6,
    non_retryable_error_types=["FleetPermanent", "GuardrailRefused"],
)
