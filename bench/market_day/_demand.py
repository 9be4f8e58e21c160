"""The market day with less work than the fleet can prove (issue 41).

Curio's provers pull work; when the proving node has less than the fleet can
do, machines sit idle. ``--work-share "0:1,6:0.3,12:0,15:1"`` sets the
simulator's work source (Faults.work_share) at those hours, and
``--blips-per-hour R`` makes hosts lose contact for a minute at that hazard
(Faults.offline_blip_rate_per_hour). `demand_report` judges the day on
what such a day must not do:

- healthy machines destroyed as if they had failed (the destroy's reason
  names a failure, the simulator's truth says none happened);
- hosts remembered as failed whose machine never failed;
- machines destroyed with work in flight (their proofs in flight are lost;
  at a work share of 0 nothing is in flight);
- the cost per proof actually finished.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from bench.market_day._truth import Day, parse_schedule
from fleet_agent.store import FailedHosts, Store

__all__ = ["demand_report", "parse_shares", "share_at"]

#: Words of a destroy's reason that say the machine failed (the autopilot's
#: triage reasons, fleet_agent/fleet/triage.py).
_FAILURE_WORDS = ("not proving", "instance is", "stuck", "prover error", "replacing it")
#: A failed-host reason that quotes the status vast.ai listed (activities/fleet_provers.py).
_WENT_DEAD = re.compile(r"^instance \d+ went (exited|offline|unknown)\b")


def parse_shares(text: str | None) -> tuple[tuple[float, float], ...]:
    """ "0:1,6:0.3" → ((0, 1.0), (6, 0.3)); shares in [0, 1]."""
    if not text:
        return ((0.0, 1.0),)
    shares = parse_schedule(text, "--work-share", "HOUR:SHARE")
    for _, share in shares:
        if not 0 <= share <= 1:
            raise ValueError(f"--work-share: a share is in [0, 1], not {share}")
    return shares


def share_at(shares: tuple[tuple[float, float], ...], hour: float) -> float:
    return [s for h, s in shares if h <= hour][-1]


def demand_report(
    day: Day,
    store: Store,
    agent_id: str,
    shares: tuple[tuple[float, float], ...],
    spend: float,
    counters: dict[str, Any],
) -> dict[str, Any]:
    """The day's figures on what a day with idle provers must not do."""
    healthy_as_failed = [
        iid
        for iid, life in day.lives.items()
        if life.destroyed_at is not None
        and life.healthy_at_destroy
        and life.boot == "run"
        and any(w in life.why for w in _FAILURE_WORDS)
    ]
    failed_machines = {
        life.machine_id
        for life in day.lives.values()
        if life.machine_id is not None and (life.failed_at is not None or life.boot != "run")
    }
    banned = FailedHosts(store).active(agent_id, datetime(1970, 1, 2, tzinfo=UTC))
    # A ban for a status vast.ai gave ("went exited: ...") is the truth of
    # that moment, even for a machine no sample saw (it died between two);
    # a ban the monitor judged (stuck, not proving) is checked on the truth.
    judged = [b for b in banned if not _WENT_DEAD.search(b.reason)]
    wrongly_banned = sorted({b.machine_id for b in judged} - failed_machines)
    why_banned = [b.reason[:160] for b in judged if b.machine_id in wrongly_banned]
    done = sum(life.done for life in day.lives.values())
    return {
        "work_shares": [list(s) for s in shares],
        "healthy_destroyed_as_failed": len(healthy_as_failed),
        "hosts_banned_not_failed": len(wrongly_banned),
        "hosts_banned_not_failed_why": why_banned,
        "hosts_banned": len({b.machine_id for b in banned}),
        # The simulator counts them at the destroy (sim/accounts.py).
        "destroyed_with_work_in_flight": int(counters.get("destroys_mid_proof", 0)),
        "proofs_lost_to_destroys": int(counters.get("proofs_lost_to_destroys", 0)),
        "proofs_done": done,
        "usd_per_proof_done": round(spend / done, 4) if done else None,
    }
