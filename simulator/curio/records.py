"""What the Curio stand-in records of each job, and the summary made from it.

A job is one sector's SNARK as Curio's harmony task sees it: it arrives,
waits for a task slot, is attempted (one `Prove` call each), and ends done
(a proof that verified locally), dropped (harmony gave up after
MaxFailures) or unfinished (still waiting when the run stopped). The
records are plain dataclasses (thousands of them are cheap); the summary
is a pydantic model. Nothing here touches the network.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict

__all__ = ["Attempt", "CurioSummary", "JobRecord", "JobState", "percentile", "summarize"]

#: ``waiting``: ready, no task slot yet; ``running``: an attempt in progress;
#: ``retry_wait``: failed, harmony's RetryWait before it is ready again;
#: ``done``: a proof verified and was stored; ``dropped``: MaxFailures reached.
JobState = Literal["waiting", "running", "retry_wait", "done", "dropped"]

#: How an attempt ended: ``ok`` (COMPLETED, verified, stored); ``bad_proof``
#: (COMPLETED, did not verify); ``empty`` (COMPLETED without proof bytes);
#: ``status:FAILED|CANCELLED|TIMEOUT|UNKNOWN`` (a non-COMPLETED result);
#: ``no_result`` (a response without a result); ``timeout`` (ProveTimeout
#: passed: DEADLINE_EXCEEDED); ``rpc:<CODE>`` (any other gRPC error);
#: ``store_failed`` (verified, but recording it failed: the task is retried).
Outcome = str


@dataclass(slots=True)
class Attempt:
    """One `Prove` call of a job (times in seconds since the stand-in started)."""

    started: float
    ended: float | None = None
    outcome: Outcome = ""
    #: The Prove call's own wall time (request out to answer in).
    rpc_s: float | None = None
    #: What the answer said of itself (AwaitProofResponse.total_ms / queue_wait_ms).
    cuzk_total_ms: int | None = None
    cuzk_queue_wait_ms: int | None = None
    #: Local verification's verdict on a COMPLETED answer's proof (None: none checked).
    verified: bool | None = None


@dataclass(slots=True)
class JobRecord:
    """One sector's proof as Curio's task saw it."""

    request_id: str
    sector: int
    submitted: float
    deadline: float
    state: JobState = "waiting"
    #: harmony_task.retries: failures so far that were retried.
    retries: int = 0
    attempts: list[Attempt] = field(default_factory=list)
    done_at: float | None = None

    @property
    def verified_answers(self) -> int:
        """Answers whose proof verified (more than one: proven twice)."""
        return sum(1 for a in self.attempts if a.verified)


class CurioSummary(BaseModel):
    """A run's figures, as the Curio node would count them (seconds are real
    seconds; multiply by `speed` for Curio's time)."""

    model_config = ConfigDict(frozen=True)

    speed: float
    arrived: int
    done: int
    done_on_time: int
    late: int
    #: Never done: dropped by harmony after MaxFailures, or unfinished at the end.
    lost: int
    dropped: int
    unfinished: int
    #: Request ids Curio received a verified proof for more than once.
    duplicates: int
    attempts: int
    retries: int
    failures: dict[str, int]
    on_time_pct: float | None
    latency_p50_s: float | None
    latency_p99_s: float | None
    latency_max_s: float | None
    #: Successful Prove calls: their wall time, the answer's own total_ms, and
    #: the difference (transfer, router, queueing outside cuzk).
    prove_rpc_p50_s: float | None
    prove_rpc_p99_s: float | None
    cuzk_total_p50_s: float | None
    cuzk_total_p99_s: float | None
    added_p50_s: float | None
    added_p99_s: float | None
    max_in_flight: int
    capacity_checks: int
    capacity_waits: int


def percentile(values: Sequence[float], pct: float) -> float | None:
    """Nearest-rank percentile (p50 of [1, 2, 3, 4] is 2); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


def summarize(
    jobs: Iterable[JobRecord],
    *,
    speed: float = 1.0,
    max_in_flight: int = 0,
    capacity_checks: int = 0,
    capacity_waits: int = 0,
) -> CurioSummary:
    """The summary of `jobs` (records of a run, finished or not)."""
    jobs = list(jobs)
    done = [j for j in jobs if j.state == "done" and j.done_at is not None]
    on_time = [j for j in done if j.done_at is not None and j.done_at <= j.deadline]
    dropped = sum(1 for j in jobs if j.state == "dropped")
    attempts = [a for j in jobs for a in j.attempts]
    failures = Counter(a.outcome for a in attempts if a.outcome and a.outcome != "ok")
    latencies = [j.done_at - j.submitted for j in done if j.done_at is not None]
    ok = [a for a in attempts if a.outcome == "ok" and a.rpc_s is not None]
    rpc = [a.rpc_s for a in ok if a.rpc_s is not None]
    total = [a.cuzk_total_ms / 1000 for a in ok if a.cuzk_total_ms is not None]
    added = [
        a.rpc_s - a.cuzk_total_ms / 1000
        for a in ok
        if a.rpc_s is not None and a.cuzk_total_ms is not None
    ]
    # A request id may belong to several records (two tasks of one sector):
    # count verified answers per id across them.
    verified: Counter[str] = Counter()
    for j in jobs:
        verified[j.request_id] += j.verified_answers
    return CurioSummary(
        speed=speed,
        arrived=len(jobs),
        done=len(done),
        done_on_time=len(on_time),
        late=len(done) - len(on_time),
        lost=len(jobs) - len(done),
        dropped=dropped,
        unfinished=len(jobs) - len(done) - dropped,
        duplicates=sum(1 for n in verified.values() if n > 1),
        attempts=len(attempts),
        retries=sum(j.retries for j in jobs),
        failures=dict(sorted(failures.items())),
        on_time_pct=100.0 * len(on_time) / len(jobs) if jobs else None,
        latency_p50_s=percentile(latencies, 50),
        latency_p99_s=percentile(latencies, 99),
        latency_max_s=max(latencies) if latencies else None,
        prove_rpc_p50_s=percentile(rpc, 50),
        prove_rpc_p99_s=percentile(rpc, 99),
        cuzk_total_p50_s=percentile(total, 50),
        cuzk_total_p99_s=percentile(total, 99),
        added_p50_s=percentile(added, 50),
        added_p99_s=percentile(added, 99),
        max_in_flight=max_in_flight,
        capacity_checks=capacity_checks,
        capacity_waits=capacity_waits,
    )
