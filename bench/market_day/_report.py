"""The market day's figures from its truth (bench/market_day/day.py): the band,
$/h against the oracles, replacements, thrash; and the line across seeds."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bench import _common
from bench.market_day._causes import CAUSES, out_of_band_causes
from bench.market_day._failures import after_failures, failures_line
from bench.market_day._increases import after_increases, increases_line
from bench.market_day._replacements import replacements_of
from bench.market_day._truth import (
    SETTLE_S,
    TARGETS,
    THRASH_MINUTES,
    Day,
    Life,
    in_band,
)

__all__ = ["causes_line", "day_report", "minutes", "seeds_summary", "thrashed_of"]


def day_report(
    path: str,
    day: Day,
    counters: dict[str, Any],
    hours: float,
    wall: float,
    *,
    spare: bool = True,
) -> dict[str, Any]:
    changes = [h * 3600 for h, _ in TARGETS if h < hours]
    steady = [s for s in day.samples if all(not (c <= s[0] - 0 < c + SETTLE_S) for c in changes)]
    after_first = [s for s in day.samples if s[0] > SETTLE_S]

    def share(samples: list[tuple[float, float, float, float]]) -> float | None:
        if not samples:
            return None
        inside = sum(1 for _, target, cap, _ in samples if in_band(target, cap))
        return round(inside / len(samples), 4)

    step = day.step()
    proofs = sum(cap for _, _, cap, _ in day.samples) * step / 3600
    spend = sum(dph for *_, dph in day.samples) * step / 3600
    # The fleet's $/h once settled in each target period, against the oracle's.
    periods = []
    for k, entry in enumerate(day.oracle):
        start = entry["hour"] * 3600 + SETTLE_S
        end = day.oracle[k + 1]["hour"] * 3600 if k + 1 < len(day.oracle) else hours * 3600
        dphs = [dph for t, _, _, dph in day.samples if start < t <= end]
        mean = sum(dphs) / len(dphs) if dphs else None
        through = market_through(day, entry["hour"], end / 3600)
        periods.append(
            {
                **entry,
                "fleet_dph": round(mean, 4) if mean is not None else None,
                "ratio": round(mean / entry["oracle_dph"], 3)
                if mean and entry["oracle_dph"]
                else None,
                "ratio_on_estimates": round(mean / entry["oracle_on_estimates_dph"], 3)
                if mean and entry.get("oracle_on_estimates_dph")
                else None,
                "ratio_no_rebuild": round(mean / entry["no_rebuild_dph"], 3)
                if mean and entry.get("no_rebuild_dph")
                else None,
                "ratio_spared": round(mean / entry["spared_dph"], 3)
                if mean and entry.get("spared_dph")
                else None,
                **through,
                "ratio_market_mean": round(mean / through["market_mean_dph"], 3)
                if mean and through["market_mean_dph"]
                else None,
            }
        )
    failed = [life for life in day.lives.values() if life.failed_at is not None]
    replaced = [
        (life.destroyed_at - life.failed_at)
        for life in failed
        if life.destroyed_at is not None and life.failed_at is not None
    ]
    replacements = replacements_of(day, spare=spare)
    needed = [r for r in replacements if r["needed"]]
    # Boots that hang or fail: how long each held its place in the fleet.
    bad_boots = [
        life.destroyed_at - life.created
        for life in day.lives.values()
        if life.boot != "run" and life.destroyed_at is not None
    ]
    thrashed = thrashed_of(day)
    thrash = len(thrashed)
    ratios = [p["ratio"] for p in periods if p["ratio"] is not None]
    return {
        "path": path,
        "hours": hours,
        "wall_seconds": round(wall, 1),
        "within_5pct_after_first_hour": share(after_first),
        "within_5pct_settled": share(steady),
        # The minutes out of band after hour 1, by what the truth shows caused them.
        "minutes_out_of_band": out_of_band_causes(day, changes),
        # The hour after each rise of the target (bench/market_day/_increases.py).
        "after_increases": after_increases(day),
        # Each failure after hour 1 (bench/market_day/_failures.py).
        "after_failures": after_failures(day),
        "mean_capacity_after_first_hour": round(
            sum(s[2] for s in after_first) / max(1, len(after_first)), 1
        ),
        "worst_dph_vs_oracle": max(ratios) if ratios else None,
        # The yardstick before 2026-12-01: offers at their bare estimates.
        "worst_dph_vs_oracle_on_estimates": max(
            (p["ratio_on_estimates"] for p in periods if p["ratio_on_estimates"] is not None),
            default=None,
        ),
        "worst_dph_vs_no_rebuild": max(
            (p["ratio_no_rebuild"] for p in periods if p["ratio_no_rebuild"] is not None),
            default=None,
        ),
        # Against the cheapest fleet holding a spare too (None with the spare off).
        "worst_dph_vs_spared_oracle": max(
            (p["ratio_spared"] for p in periods if p["ratio_spared"] is not None),
            default=None,
        ),
        # Against the oracle's mean through each period, not its moment of change.
        "worst_dph_vs_market_mean": max(
            (p["ratio_market_mean"] for p in periods if p["ratio_market_mean"] is not None),
            default=None,
        ),
        "periods": periods,
        "usd_per_proof": round(spend / proofs, 4) if proofs else None,
        "proofs": round(proofs),
        "spend_usd": round(spend, 2),
        "creates": counters.get("creates"),
        "destroys": counters.get("destroys"),
        "machines_failed": len(failed),
        "failed_destroyed": len(replaced),
        "failure_to_destroy_p50_min": minutes(_common.percentile(replaced, 50)),
        "failure_to_destroy_max_min": minutes(max(replaced) if replaced else None),
        # Each failure, the first machine rented after it (its replacement, or
        # one rented for a target change at the same time) and when it proved.
        "replacements": replacements,
        "failure_to_replacement_max_min": minutes(
            max(
                (r["rented_after_s"] for r in replacements if r["rented_after_s"] is not None),
                default=None,
            )
        ),
        # The same, counted from when the failure could be told (a stall's window).
        "detectable_to_replacement_max_min": _detected_to_rented_max(replacements),
        # The same over the failures that left the fleet short of its level
        # (`_left_short`, bench/market_day/_replacements.py): the others took
        # nothing the fleet needed.
        "failures_needing_replacement": len(needed),
        "needed_unreplaced": sum(r["rented_after_s"] is None for r in needed),
        "needed_detectable_to_replacement_max_min": _detected_to_rented_max(needed),
        # Bridges rented beside a large gap's cover, and those that failed.
        "temporary_rented": sum(life.temporary for life in day.lives.values()),
        # Rentals by what they were for (the autopilot's reasons: swap.py, trade.py).
        "swaps": sum(life.reason.startswith("a swap") for life in day.lives.values()),
        "trades": sum(life.reason.startswith("a trade") for life in day.lives.values()),
        "temporary_failed": sum(life.temporary for life in failed),
        "bad_boots": len(bad_boots),
        "bad_boot_to_destroy_max_min": minutes(max(bad_boots) if bad_boots else None),
        "thrash": thrash,
        "thrashed": thrashed,
        "lives": [
            {"id": iid, **{k: getattr(life, k) for k in Life.__dataclass_fields__}}
            for iid, life in sorted(day.lives.items())
        ],
        # (seconds, target, proofs/h, $/h) every step: the figures above come from these.
        "samples": [[round(x, 3) for x in sample] for sample in day.samples],
    }


def thrashed_of(day: Day) -> list[dict[str, Any]]:
    """The healthy machines released younger than THRASH_MINUTES (issue 7:
    thrash), judged on the simulator's clock (`Life.lifetime_s`): between
    samples 2 minutes apart, a bridge rented 5 s into the day and released
    when it came of age 21.75 minutes later read as a life of exactly 20
    (five bridges on seeds 2, 3, 9 and 10 at bfa3b55)."""
    return [
        {
            "id": iid,
            "created": life.created,
            "destroyed": life.destroyed_at,
            "lifetime_s": life.lifetime_s(),
            "last": life.last,
        }
        for iid, life in day.lives.items()
        if life.destroyed_at is not None
        and life.healthy_at_destroy
        and life.boot == "run"  # a boot that hangs or fails is not healthy
        and (life.lifetime_s() or 0.0) < THRASH_MINUTES * 60
    ]


def _detected_to_rented_max(replacements: list[dict[str, Any]]) -> float | None:
    """Minutes, the longest from when a failure could be told to its rental."""
    return minutes(
        max(
            (
                r["rented_after_s"] - r["detection_s"]
                for r in replacements
                if r["rented_after_s"] is not None
            ),
            default=None,
        )
    )


def minutes(seconds: float | None) -> float | None:
    return round(seconds / 60, 1) if seconds is not None else None


def seeds_summary(results: list[dict[str, Any]]) -> None:
    """One line per path and fault level across seeds: a single day's figure
    moves by a point or two with the market's path, so judge a change here."""
    print(
        "\nacross seeds (mean, worst): within ±5 % after hour 1 | the same, an hour after "
        "each change | worst $/h ÷ oracle | ÷ keeping the fleet | ÷ the spared oracle | "
        "÷ the oracle's mean through the period | thrash"
    )
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in results:
        groups.setdefault((r["path"], r["faults"]), []).append(r)

    def low(rs: list[dict[str, Any]], key: str) -> str:
        xs = [float(r[key] or 0.0) for r in rs]
        return f"{100 * sum(xs) / len(xs):.1f} %, {100 * min(xs):.1f} %"

    def high(rs: list[dict[str, Any]], key: str) -> str:
        xs = [float(r[key] or 0.0) for r in rs]
        return f"{sum(xs) / len(xs):.3f}, {max(xs):.3f}"

    for (path, faults), rs in groups.items():
        print(
            f"  {path:<9} {faults:<9} seeds {','.join(str(r['seed']) for r in rs)}: "
            f"{low(rs, 'within_5pct_after_first_hour')} | {low(rs, 'within_5pct_settled')} | "
            f"{high(rs, 'worst_dph_vs_oracle')} | {high(rs, 'worst_dph_vs_no_rebuild')} | "
            f"{high(rs, 'worst_dph_vs_spared_oracle')} | {high(rs, 'worst_dph_vs_market_mean')} | "
            f"{sum(int(r['thrash']) for r in rs)}"
        )
        print(f"    minutes out of band a day (mean): {causes_line(rs)}")
        print(f"    after the increases: {increases_line(rs)}")
        print(f"    failures: {failures_line(rs)}")


def market_through(day: Day, start_h: float, end_h: float) -> dict[str, float | None]:
    """The oracle's $/h taken through a period (`Day.market`, from its change
    to its end): mean, lowest and highest. The period's oracle is the market
    at the change, before the fleet has rented anything; offers in it may
    be rented away by others before the agent's first search, minutes
    later, and others listed after. The mean is what the cheapest fleet
    cost on the mean while the fleet was measured."""
    xs = [float(m["oracle_dph"]) for m in day.market if start_h <= m["hour"] < end_h - 1e-9]
    if not xs:
        return {"market_mean_dph": None, "market_low_dph": None, "market_high_dph": None}
    return {
        "market_mean_dph": round(sum(xs) / len(xs), 4),
        "market_low_dph": round(min(xs), 4),
        "market_high_dph": round(max(xs), 4),
    }


def causes_line(results: Sequence[dict[str, Any]], digits: int = 0) -> str:
    """The mean minutes a day out of band by cause (`minutes_out_of_band`),
    the causes that took any, largest first ("none" when none did), each
    to `digits` decimals."""
    mean = {
        c: sum(float(r["minutes_out_of_band"][c]) for r in results) / len(results) for c in CAUSES
    }
    line = ", ".join(
        f"{c.replace('_', ' ')} {m:.{digits}f}"
        for c, m in sorted(mean.items(), key=lambda kv: -kv[1])
        if m > 0
    )
    return line or "none"
