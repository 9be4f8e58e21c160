"""Which machine gets a job, and how long it may take: pure rules.

A job goes to a `serving` member that answers, lists the job's circuit
loaded, has room (`per_gpu_depth` jobs per counted GPU) and never had an
answer to this request id rejected; among those, one it was not sent to
before, least loaded first (jobs in flight per GPU), ties to the higher
measured rate, then the lower instance id (a stable order). An attempt
gets the expected proof time on its machine (`Member.expected_seconds`:
the agent's estimate for that machine, else the config's) times
`attempt_factor` (at least `min_attempt_s`), cut at the job's deadline.
"""

from __future__ import annotations

from collections.abc import Iterable

from .config import RouterConfig
from .jobs import Job
from .members import Member

__all__ = ["attempt_budget", "choose_member", "eligible"]


def eligible(member: Member, job: Job, cfg: RouterConfig) -> bool:
    """Whether `member` may take `job` now (its phase must be fresh)."""
    return (
        member.phase == "serving"
        and member.reachable
        and job.circuit in member.circuits
        and member.book.in_flight < member.capacity(cfg)
        and member.instance_id not in job.refused_by
    )


def choose_member(
    job: Job, members: Iterable[Member], now: float, cfg: RouterConfig
) -> Member | None:
    """The member `job` goes to now, or None: it waits at the router."""
    candidates = [m for m in members if eligible(m, job, cfg)]
    fresh = [m for m in candidates if m.instance_id not in job.tried] or candidates
    if not fresh:
        return None
    return min(fresh, key=lambda m: (m.load(), -(m.book.rate(now) or 0.0), m.instance_id))


def attempt_budget(
    job: Job,
    loop_now: float,
    cfg: RouterConfig,
    member: Member | None = None,
    speed: float = 1.0,
) -> tuple[float, bool] | None:
    """(seconds the attempt gets on `member`, whether the deadline cut it), or
    None: no time left. Without a member, the config's expected time.
    `speed`: a simulated fleet's (`Member.expected_seconds`)."""
    remaining = job.deadline - loop_now
    if remaining <= 0:
        return None
    expected = (
        cfg.expected(job.kind) if member is None else member.expected_seconds(job.kind, cfg, speed)
    )
    budget = max(cfg.min_attempt_s, expected * cfg.attempt_factor)
    if remaining < budget:
        return remaining, True
    return budget, False
