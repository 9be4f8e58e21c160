"""The demand day's foresight oracle: the cheapest schedule of rentals that
meets every deadline, as a MILP solved with HiGHS (`highspy`).

It knows every arrival in advance (drawn from the same seeded demand as the
simulator's, `arrivals_per_slot`, without running the market) and rents from
the offer book as listed when the demand starts, each offer type with its
rate, its price and its lead time (rental to first proof, `expected_lead_s`:
the simulator's own load-time model, simulator/fate.py).

The model, on slots of `slot_s` seconds (t = 0..T-1), per offer type k:

- ``n[k,t]`` (integer): machines of k paid for in slot t, at most `available`;
  ``s[k,t]``: machines of k rented at the start of slot t (whole at an
  optimum, since n is);
  ``n[k,t] <= n[k,t-1] + s[k,t]`` (a release is free, at any slot end);
  ``n[k,-1]`` = the `warm` machines the day starts with (proving, no lead);
- proving machines: ``n[k,t] - sum(s[k,t-lead_k+1..t])`` (a machine proves
  from `lead_k` slots after its rental; a minimum rental, if the market has
  one, is ``n[k,t] >= sum(s[k,t-m+1..t])``);
- work, fluid: ``x[t]`` proofs served in slot t, at most the proving rate
  times the slot; cumulative served at most cumulative arrivals (nothing is
  proved before it arrives), and at least the arrivals of slots up to
  ``t - (d - 1)`` by the end of slot t, d = deadline / slot (every proof done
  within its deadline, a slot early for the one that came late in its slot);
- objective: sum of ``n[k,t] x dph_k x slot hours``.

Simplifications: proofs are fluid (no proof is split in the simulator, and a
machine proves several at once); arrivals count as available from the start
of their slot; lead times are the expected ones, rounded up to whole slots;
the offer book is the one listed at the start, aggregated into types (a GPU
model, a lead-time band and a price band: mean rate, mean price, the
longest lead), with
no machine failing. So the oracle is a bound to measure against, not a plan.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import highspy

from fleet_agent.fleet.offer_cost import offer_dph
from simulator.demand import DemandConfig
from simulator.fate import IMAGE_GB, MEAN_RATE_JITTER, PARAMS_BYTES, PARAMS_SOURCE_MBPS

__all__ = [
    "OfferType",
    "OracleResult",
    "arrivals_per_slot",
    "expected_lead_s",
    "offer_types",
    "solve",
]

#: Lead-time bands (minutes) an offer type is split by, besides its GPU model.
LEAD_BANDS_MIN = (15.0, 30.0, 60.0)
#: Price bands: each 15 % wider in $ per proof than the one before.
PRICE_BAND = 1.15


@dataclass(frozen=True, slots=True)
class OfferType:
    """Machines the oracle can rent: each proves `proofs_per_hour`, costs
    `dph` $/h and proves `lead_s` after its rental; at most `available`."""

    name: str
    proofs_per_hour: float
    dph: float
    lead_s: float
    available: int


@dataclass(slots=True)
class OracleResult:
    feasible: bool
    message: str
    usd: float | None = None
    proofs: float = 0.0
    #: Per type: the most machines paid for at once, and machine-hours.
    rentals: dict[str, dict[str, float]] = field(default_factory=dict)
    #: Seconds HiGHS took.
    solve_s: float = 0.0

    @property
    def usd_per_proof(self) -> float | None:
        return self.usd / self.proofs if self.usd is not None and self.proofs else None


def expected_lead_s(inet_down_mbps: float) -> float:
    """Expected seconds from a rental to its first proof on the simulator
    (simulator/fate.py, `draw_fate`): provisioning U(5, 40) s, the image
    pull (15 s + the image at the listed speed + U(0, 60) s), the parameters
    at U(0.5, 0.9) of the listed speed (at most the source's cap), and the
    SRS load U(30, 90) s, at their means."""
    link = max(inet_down_mbps, 10.0)
    pull = 15.0 + IMAGE_GB * 8000.0 / link + 30.0
    fetch = PARAMS_BYTES * 8 / 1e6 / min(link * 0.7, PARAMS_SOURCE_MBPS)
    return 22.5 + pull + fetch + 60.0


def offer_types(rows: Iterable[Mapping[str, Any]], max_types: int = 20) -> list[OfferType]:
    """The book's offers (activities.fleet_results.offer_row rows: GPU,
    estimated proofs/h, $/h with the parameters' transfer, download speed)
    aggregated into types by GPU model, GPU count, lead band and price band
    (15 % wide in $ per proof, so a type's mean is near its offers' prices):
    mean rate (times the simulator's mean rate jitter), mean price, the
    longest lead. The `max_types` - 1 cheapest per proof are kept as they
    are, the rest merged into one (the longest lead of all)."""
    groups: dict[tuple[str, int, int, int], list[tuple[float, float, float]]] = defaultdict(list)
    for r in rows:
        rate = float(r.get("est_proofs_per_hour") or 0.0)
        dph = offer_dph(r)
        if rate <= 0 or dph <= 0:
            continue
        lead = expected_lead_s(float(r.get("inet_down_mbps") or 0.0))
        band = sum(lead > b * 60 for b in LEAD_BANDS_MIN)
        price = math.floor(math.log(dph / rate) / math.log(PRICE_BAND))
        key = (str(r.get("gpu")), int(r.get("num_gpus") or 1), band, price)
        groups[key].append((rate * MEAN_RATE_JITTER, dph, lead))
    named = [
        (f"{n}x{gpu}/lead{band}/p{price}", items) for (gpu, n, band, price), items in groups.items()
    ]
    named.sort(key=lambda g: sum(i[1] for i in g[1]) / sum(i[0] for i in g[1]))
    if len(named) > max_types:
        rest = [i for _, items in named[max_types - 1 :] for i in items]
        named = [*named[: max_types - 1], ("rest", rest)]
    return [
        OfferType(
            name=name,
            proofs_per_hour=sum(i[0] for i in items) / len(items),
            dph=sum(i[1] for i in items) / len(items),
            lead_s=max(i[2] for i in items),
            available=len(items),
        )
        for name, items in named
    ]


def arrivals_per_slot(
    config: DemandConfig, seed: int, start_minute: int, minutes: int, slot_s: float
) -> list[int]:
    """Arrivals of the simulator's demand from sim minute `start_minute` for
    `minutes`, counted per slot of `slot_s` seconds from that minute on."""
    per_slot = max(1, round(slot_s / 60))
    out = [0] * math.ceil(minutes / per_slot)
    for m in range(minutes):
        out[m // per_slot] += len(config.arrivals(start_minute + m, seed))
    return out


def solve(
    arrivals: list[int],
    types: list[OfferType],
    *,
    slot_s: float = 600.0,
    deadline_s: float = 1800.0,
    warm: Mapping[str, int] | None = None,
    min_rental_slots: int = 1,
    time_limit_s: float = 60.0,
    mip_gap: float = 0.01,
) -> OracleResult:
    """The cheapest schedule serving `arrivals` (per slot) within the
    deadline; the horizon runs on past the last arrival slot for the
    deadline. Not feasible (demand beyond the book) is a result, not an error."""
    if not types:
        return OracleResult(False, "no offer types to rent")
    d = max(1, int(deadline_s // slot_s))
    horizon = len(arrivals) + d
    cum_arr = [0.0]
    for t in range(horizon):
        cum_arr.append(cum_arr[-1] + (arrivals[t] if t < len(arrivals) else 0))
    h = highspy.Highs()  # type: ignore[no-untyped-call]
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", float(time_limit_s))
    h.setOptionValue("mip_rel_gap", mip_gap)
    inf = highspy.kHighsInf
    hours = slot_s / 3600
    warm = warm or {}
    n: dict[tuple[int, int], int] = {}
    s: dict[tuple[int, int], int] = {}
    for k, ty in enumerate(types):
        for t in range(horizon):
            n[k, t] = _var(h, ty.dph * hours, 0, ty.available, integer=True)
            # Continuous: an optimum rents no more than n rises by (a rental
            # only takes capacity and adds lead), so s is whole where n is.
            s[k, t] = _var(h, 0.0, 0, ty.available)
    x = [_var(h, 0.0, 0, inf) for _ in range(horizon)]
    for k, ty in enumerate(types):
        lead = math.ceil(ty.lead_s / slot_s)
        w = min(int(warm.get(ty.name, 0)), ty.available)
        for t in range(horizon):
            # n[k,t] - n[k,t-1] - s[k,t] <= 0 (n[k,-1] = the warm machines).
            terms = {n[k, t]: 1.0, s[k, t]: -1.0}
            if t:
                terms[n[k, t - 1]] = -1.0
            _row(h, terms, -inf, float(w) if t == 0 else 0.0)
            loading = [s[k, u] for u in range(max(0, t - lead + 1), t + 1)]
            if min_rental_slots > 1:
                recent = [s[k, u] for u in range(max(0, t - min_rental_slots + 1), t + 1)]
                _row(h, {n[k, t]: 1.0, **dict.fromkeys(recent, -1.0)}, 0.0, inf)
            # Proving machines are never negative: n >= what is still loading.
            _row(h, {n[k, t]: 1.0, **dict.fromkeys(loading, -1.0)}, 0.0, inf)
    for t in range(horizon):
        # x[t] <= proving capacity in slot t.
        terms = {x[t]: 1.0}
        for k, ty in enumerate(types):
            lead = math.ceil(ty.lead_s / slot_s)
            per = ty.proofs_per_hour * hours
            terms[n[k, t]] = terms.get(n[k, t], 0.0) - per
            for u in range(max(0, t - lead + 1), t + 1):
                terms[s[k, u]] = terms.get(s[k, u], 0.0) + per
        _row(h, terms, -inf, 0.0)
        # Served by the end of slot t: at most what came, at least what is due.
        due = cum_arr[max(0, t - d + 2)]
        _row(h, dict.fromkeys(x[: t + 1], 1.0), due, cum_arr[t + 1])
    started = time.monotonic()
    h.run()
    took = round(time.monotonic() - started, 2)
    status = h.getModelStatus()
    if status == highspy.HighsModelStatus.kInfeasible:
        return OracleResult(False, "infeasible: the book cannot meet every deadline", solve_s=took)
    solved = status == highspy.HighsModelStatus.kOptimal
    if not solved and h.getInfo().primal_solution_status != 2:
        return OracleResult(False, f"not solved: {h.modelStatusToString(status)}", solve_s=took)
    values = list(h.getSolution().col_value)
    rentals = {}
    for k, ty in enumerate(types):
        paid = [values[n[k, t]] for t in range(horizon)]
        if max(paid) > 0.5:
            rentals[ty.name] = {"max": round(max(paid)), "machine_hours": sum(paid) * hours}
    info = h.getInfo()
    usd = float(info.objective_function_value)
    # Stopped at the time limit: the best schedule found, and its gap to the bound.
    message = "optimal" if solved else f"time limit, gap {info.mip_gap:.3%}"
    return OracleResult(True, f"{message} (within {mip_gap:.1%})", usd, cum_arr[-1], rentals, took)


def _var(h: highspy.Highs, cost: float, lo: float, hi: float, *, integer: bool = False) -> int:
    h.addVar(lo, hi)
    i = int(h.getNumCol()) - 1
    if cost:
        h.changeColCost(i, cost)
    if integer:
        h.changeColIntegrality(i, highspy.HighsVarType.kInteger)
    return i


def _row(h: highspy.Highs, terms: Mapping[int, float], lo: float, hi: float) -> None:
    idx = [i for i, v in terms.items() if v]
    h.addRow(lo, hi, len(idx), idx, [terms[i] for i in idx])
