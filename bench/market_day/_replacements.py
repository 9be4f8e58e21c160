"""The market day's failures, each paired with the machine rented after it
(bench/market_day/day.py): when it was rented, when the failure could be told,
and whether the fleet needed it (`_left_short`)."""

from __future__ import annotations

from typing import Any

from bench.market_day._truth import CONFIG, Day, Life, target_at
from fleet_agent.fleet.provers import MIN_STALL_S, STALL_INTERVALS
from fleet_agent.fleet.spare import hold_level
from fleet_agent.models import AgentConfig
from fleet_agent.policy.band import TOP_MARGIN

__all__ = ["replacements_of"]


def replacements_of(day: Day, *, spare: bool = True) -> list[dict[str, Any]]:
    """Pairs each failure with the first machine rented after it was seen,
    and says whether it called for one (`needed`: `_left_short`). The
    failures that needed one are paired first: one that did not (a fleet
    over its level, a target about to fall) would otherwise take the next
    rental, hours later, from a failure after it that needed it (seed 7's
    day: a needed replacement rented at once read as 182 minutes late).
    A temporary bridge (fleet_agent/autopilot/bridges.py) is neither: it is no
    cover for the target, so its failure calls for no replacement (the cover
    it bridged is replaced when it fails), and a bridge rented after a
    failure does not replace it."""
    fresh = sorted(
        (life for life in day.lives.values() if not life.temporary), key=lambda life: life.created
    )
    failed = sorted(
        (life for life in day.lives.values() if life.failed_at is not None and not life.temporary),
        key=lambda life: life.failed_at or 0.0,
    )
    short = {id(life): _left_short(day, life, spare=spare) for life in failed}

    def needed(life: Life) -> bool:
        assert life.failed_at is not None
        return short[id(life)] > TOP_MARGIN * target_at(life.failed_at / 3600)

    used: set[int] = set()
    paired: dict[int, Life | None] = {}
    for life in [*filter(needed, failed), *(f for f in failed if not needed(f))]:
        new = next(
            (
                k
                for k, n in enumerate(fresh)
                if k not in used and n.created >= (life.failed_at or 0.0)
            ),
            None,
        )
        if new is not None:
            used.add(new)
        paired[id(life)] = fresh[new] if new is not None else None
    out = []
    for life in failed:
        assert life.failed_at is not None
        repl = paired[id(life)]
        out.append(
            {
                "failure": life.failure,
                "at_s": life.failed_at,
                "destroyed_after_s": (
                    life.destroyed_at - life.failed_at if life.destroyed_at is not None else None
                ),
                "rented_after_s": repl.created - life.failed_at if repl else None,
                "short_after": round(short[id(life)], 1),
                "needed": needed(life),
                # The time the rule needs to tell this failure from a slow proof.
                "detection_s": _detection_s(life),
                "replacement_load_s": (
                    repl.proving_at - repl.created
                    if repl is not None and repl.proving_at is not None
                    else None
                ),
            }
        )
    return out


def _left_short(day: Day, failed: Life, *, spare: bool) -> float:
    """Proofs/h the fleet was short of the level it holds (the target, or
    with the spare `hold_level`'s) just after `failed` failed, in truth: its
    other healthy machines, proving or loading, at their true rates (a boot
    that hangs or fails at none), bridges left out. A failure that leaves
    the fleet at its level within TOP_MARGIN of the target (the planning's
    own precision) took nothing it needed: seed 3's 19-proof top-up, rented
    for a fleet 1.7 short of its spare's level (808.2 of 809.7 at 800),
    that died while loading, or a machine of a fleet over the band. A
    replacement there would only take the fleet past it."""
    at = failed.failed_at
    assert at is not None
    rates = [
        life.true_rate if life.boot == "run" else 0.0
        for life in day.lives.values()
        if life is not failed
        and not life.temporary
        and life.created < at  # a machine rented when it was seen is its replacement
        and (life.destroyed_at is None or life.destroyed_at > at)
        and (life.failed_at is None or life.failed_at > at)
    ]
    target = target_at(at / 3600)
    return max(0.0, hold_level(target, rates, spare=spare) - sum(rates))


def _detection_s(life: Life) -> float:
    """How long the stall rule must wait before a stalled prover is one: no
    proof for `STALL_INTERVALS` of its proof intervals (at least
    `MIN_STALL_S`), at most the agent's `not_proving_minutes` (the issue's
    "has not proved for a configurable time"). Any other failure shows at once."""
    if life.failure != "prover stuck":
        return 0.0
    limit = AgentConfig(target_proofs_per_hour=1.0, **CONFIG).not_proving_minutes * 60
    if life.rate <= 0:
        return limit
    return min(limit, max(MIN_STALL_S, STALL_INTERVALS * 3600.0 / life.rate))
