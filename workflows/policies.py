"""Timeouts and retry policies, named once so every call site reads the same.

Temporal owns retries: activities raise non-retryable ApplicationErrors for
permanent failures and everything else is retried here with backoff.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio.common import Priority, RetryPolicy

__all__ = [
    "COMPACT_HEARTBEAT_TIMEOUT",
    "COMPACT_RETRY",
    "COMPACT_TIMEOUT",
    "FLEET_HEARTBEAT_TIMEOUT",
    "FLEET_READ_TIMEOUT",
    "FLEET_RETRY",
    "FLEET_WRITE_TIMEOUT",
    "HANDOVER_HEARTBEAT_TIMEOUT",
    "LLM_RETRY",
    "MONITOR_PRIORITY",
    "STORE_RETRY",
    "STORE_TIMEOUT",
    "TASK_QUEUE",
    "UNLIMITED_RETRY",
    "VISIBILITY_RETRY",
    "VISIBILITY_TIMEOUT",
]

TASK_QUEUE = "fleet-agent"

# The monitor's tasks (its polls, its workflow tasks) wait behind everything
# else on the task queue when the worker falls behind: an operator's message
# and the run it starts go first (priority 3, the default, as agents and runs
# have). At 300 agents on one saturated worker this took the P0 p95 from
# 11.0 and 10.1 s to 8.3 and 7.3 s and the answer p50 from 13.7 and 11.3 s to
# 9.7 and 7.7 s (interleaved runs), while a monitor's task waited up to 22 s
# (p99) instead of 6.5. Inherited by the monitor's activities and across its
# continue-as-new. Servers without task queue priority ignore it.
MONITOR_PRIORITY = Priority(priority_key=4)

# A worker killed with SIGKILL is noticed when an attempt misses its
# heartbeat: every activity that waits on the network heartbeats (see
# activities/heartbeat.py), so a kill costs at most about this long.
FLEET_HEARTBEAT_TIMEOUT = timedelta(seconds=20)
HANDOVER_HEARTBEAT_TIMEOUT = timedelta(seconds=20)

# For waits that must outlast any outage: retried until they succeed.
UNLIMITED_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=0,
)

# The store is local or a nearby PostgreSQL: short calls, retried for a long
# while, because a run must not be lost to a database restart.
STORE_TIMEOUT = timedelta(seconds=30)
STORE_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=0,
)

# One LLM call streams its reply and heartbeats as it arrives (its
# start-to-close grows with the output it may write, its heartbeat timeout is
# LLM_HEARTBEAT_TIMEOUT: see fleet_agent/llm/timing.py). Overload
# (429/529/5xx) is retried with backoff, honouring retry-after through
# next_retry_delay.
LLM_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=2),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=60),
    maximum_attempts=8,
    non_retryable_error_types=["LlmPermanent"],
)

# vast.ai calls are paced per endpoint (fleet_agent/vast/pacing.py: ten
# searches a minute, a create every 4.5 s, 12 s after a 429), so a call may
# wait for its slot; the heartbeat timeout, not these, notices a dead worker.
FLEET_READ_TIMEOUT = timedelta(seconds=180)
FLEET_WRITE_TIMEOUT = timedelta(seconds=300)
FLEET_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=2),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=6,
    non_retryable_error_types=["FleetPermanent", "GuardrailRefused"],
)

# Compaction: the summariser's own timeout (activities/compact.py, 60 s) plus
# the digest and the store writes. A few attempts only: a run whose fold
# fails goes on within budget, and the next run folds those runs.
COMPACT_TIMEOUT = timedelta(seconds=120)
COMPACT_HEARTBEAT_TIMEOUT = timedelta(seconds=30)
COMPACT_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=5,
)

# Are our search attributes registered? A few tries, then the execution goes
# on without upserting them (an older worker in a rolling deploy may not
# have the activity; the next execution asks again).
VISIBILITY_TIMEOUT = timedelta(seconds=10)
VISIBILITY_RETRY = RetryPolicy(maximum_attempts=3, initial_interval=timedelta(seconds=1))

# Notifications: a few tries over about a minute and a half, then the failure
# is shown in status (workflows/agent_notify.py); a delivery never holds a run.
NOTIFY_TIMEOUT = timedelta(seconds=60)
NOTIFY_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=2),
    backoff_coefficient=3.0,
    maximum_interval=timedelta(seconds=60),
    maximum_attempts=4,
    non_retryable_error_types=[],
)
