"""The market week's foresight oracle: the most profit (revenue less rental)
a fleet could make over the week on the work the market-only runs show it
could win, as a MILP solved with HiGHS (`highspy`); the modelling style is
bench/demand_day/_oracle.py's, whose offer types it rents.

**The work it may win** (`pool`). A request goes to the lowest-price open
ask at or under its price, and pays the market price at its arrival,
whoever proves it (docs/SIMULATOR.md, "The Snark Market"). At an ask price
q the node would have been first for every request that, in a market-only
run (bench/market_week/_market_only.py), went unserved or went to a
provider asking at least q, and it keeps those it won itself. So for each
ask price q of the sweep, and each step, the oracle may take the requests
of one run at q (every fleet size swept, and the market without the node)
that were so winnable: of the run whose winnable requests were worth most
in that step, at the prices they arrived at. The oracle is solved for each
q and the best kept. This is an upper bound of what the swept fixed fleets
earn (each is one of the runs the steps choose from), and of what any agent
could earn as long as what it does to the market's price stays within what
the sweep shows step by step: an agent's asks add supply and so lower the
price, and a price higher than the runs' could only come from asking above
q, which wins less of the work the pool counts. Requests clients refused
(the price above their most) are not in it: no run bought them.

**The model**, on steps of `step_s` seconds (t = 0..T-1), per offer type k
(`OfferType`: proofs/h, $/h with transfer, lead time, how many):

- ``n[k,t]`` (integer) machines paid for in step t, ``s[k,t]`` rented at
  its start, ``n[k,t] <= n[k,t-1] + s[k,t]`` (release is free); the week
  starts warm (up to every offer of the book already proving, as the
  fixed fleet does); a rented machine proves `lead_k` steps later;
- capacity: ``g[k,t]`` of the proving GPUs of type k prove paid work, the
  others challenge proofs; P proved in step t (paid ``w[t]``, challenge
  ``c[t]``) at most each part's GPUs x the type's P/h per GPU x the step;
- work, fluid: ``x[t,j]`` P taken of the step's segment j (its winnable
  requests split by price into `segments` bands of equal count, each with
  its P and its pay; taken whole at its pay, in part at its mean pay);
  cumulative paid P proved never ahead of the P taken, and the P taken in
  step t proved by the end of step t + d, d = ceil(45 min / step) (a
  request may have arrived at the step's end);
- slots: a slot holds one paid proof at a time, so the GPUs proving paid
  work are at most the slots (``sum g[k,t] <= slots[t]``); slots are the
  start's challenge proofs plus those proved in earlier steps, over 50
  (fractional: a slot's 50 challenge proofs earn its share at once);
- objective: pay of the P taken less the machines' $ per step.

Simplifications, each making the bound higher: proofs are fluid; work is
proved from the start of the step it arrives in; no queue holds a slot
(Curio keeps up to 8 rows waiting, each holding one); challenge proofs are
had for their proving time alone (the market gives one only to an ask
made without a free slot); within a step the best-paid work is taken
first; no machine fails or is late; lead times are the expected ones,
rounded up. And one that does not: the book is the one listed at the week's
start, aggregated into types (bench/demand_day/_oracle.py `offer_types`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import highspy

from bench.demand_day._oracle import OfferType
from simulator.snark_market import DEADLINE_S, SLOT_CHALLENGES

from ._market_only import MarketRun, Request

__all__ = ["Segment", "WeekOracle", "pool", "solve"]

NFIL_PER_FIL = 1e9


@dataclass(frozen=True, slots=True)
class Segment:
    """Requests of one step and one price band: their P, their count and
    their pay in nFIL."""

    p: float
    count: int
    pay_nfil: float


@dataclass(slots=True)
class WeekOracle:
    feasible: bool
    message: str
    ask_nfil: int = 0
    profit_usd: float | None = None
    #: HiGHS's bound on the profit (the best any schedule of the model makes).
    bound_usd: float | None = None
    #: Per day: revenue, rental, profit ($), proofs and P taken.
    days: list[dict[str, float]] = field(default_factory=list)
    #: Per type: the most machines paid for at once, and machine-hours.
    rentals: dict[str, dict[str, float]] = field(default_factory=dict)
    challenge_proofs: float = 0.0
    solve_s: float = 0.0


def winnable(req: Request, ask_nfil: int) -> bool:
    """Would the node have been first for `req` asking `ask_nfil` (module doc)?"""
    return req.ours or req.ask_nfil is None or req.ask_nfil >= ask_nfil


def pool(
    runs: Iterable[MarketRun],
    ask_nfil: int,
    steps: int,
    step_s: float,
    *,
    segments: int = 4,
) -> list[list[Segment]]:
    """Per step, the winnable requests of the run worth most in it (module
    doc), split into `segments` price bands, best paid first. `runs`: the
    runs at `ask_nfil` and the market without the node (any other is skipped)."""
    best: list[list[Request]] = [[] for _ in range(steps)]
    worth = [0.0] * steps
    for run in runs:
        if run.enabled and run.price_nfil != ask_nfil:
            continue
        by_step: list[list[Request]] = [[] for _ in range(steps)]
        for req in run.requests:
            t = int(req.at // step_s)
            if 0 <= t < steps and winnable(req, ask_nfil):
                by_step[t].append(req)
        for t, reqs in enumerate(by_step):
            value = sum(r.pay_nfil for r in reqs)
            if value > worth[t]:
                best[t], worth[t] = reqs, value
    out = []
    for reqs in best:
        ordered = sorted(reqs, key=lambda r: -r.price_nfil)
        bands = []
        for j in range(segments):
            part = ordered[j * len(ordered) // segments : (j + 1) * len(ordered) // segments]
            if part:
                bands.append(
                    Segment(sum(r.p for r in part), len(part), sum(r.pay_nfil for r in part))
                )
        out.append(bands)
    return out


def solve(
    work: Sequence[Sequence[Segment]],
    types: Sequence[OfferType],
    *,
    step_s: float = 900.0,
    fil_usd: float,
    start_challenges: int,
    gpus: Sequence[int] | None = None,
    ask_nfil: int = 0,
    time_limit_s: float = 60.0,
    mip_gap: float = 0.005,
    warm: bool = True,
    relax: bool = False,
) -> WeekOracle:
    """The most profitable schedule for `work` (per step, its segments) with
    `types` to rent (module doc). `gpus`: each type's GPUs a machine (default
    1: a slot's most then is the machine's rate); `start_challenges`: the
    node's balance at the start."""
    if not types:
        return WeekOracle(False, "no offer types to rent")
    steps = len(work)
    d = math.ceil(DEADLINE_S / step_s)
    horizon = steps + d
    hours = step_s / 3600
    h = highspy.Highs()  # type: ignore[no-untyped-call]
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", float(time_limit_s))
    h.setOptionValue("mip_rel_gap", mip_gap)
    h.changeObjectiveSense(highspy.ObjSense.kMaximize)
    inf = highspy.kHighsInf
    n: dict[tuple[int, int], int] = {}
    s: dict[tuple[int, int], int] = {}
    for k, ty in enumerate(types):
        for t in range(horizon):
            n[k, t] = _var(h, -ty.dph * hours, 0, ty.available, integer=not relax)
            s[k, t] = _var(h, 0.0, 0, ty.available)
    usd_per_nfil = fil_usd / NFIL_PER_FIL
    x = {
        (t, j): _var(h, seg.pay_nfil / seg.p * usd_per_nfil, 0, seg.p)
        for t, segs in enumerate(work)
        for j, seg in enumerate(segs)
    }
    w = [_var(h, 0.0, 0, inf) for _ in range(horizon)]
    c = [_var(h, 0.0, 0, inf) for _ in range(horizon)]
    # Cumulative: P taken (X), paid P proved (W), challenge proofs (C) by the end of t.
    cum_x = [_var(h, 0.0, 0, inf) for _ in range(horizon)]
    cum_w = [_var(h, 0.0, 0, inf) for _ in range(horizon)]
    cum_c = [_var(h, 0.0, 0, inf) for _ in range(horizon)]
    for k, ty in enumerate(types):
        lead = math.ceil(ty.lead_s / step_s)
        for t in range(horizon):
            # n[k,t] - n[k,t-1] - s[k,t] <= warm machines at t = 0, else 0.
            terms = {n[k, t]: 1.0, s[k, t]: -1.0}
            if t:
                terms[n[k, t - 1]] = -1.0
            _row(h, terms, -inf, float(ty.available if warm else 0) if t == 0 else 0.0)
            loading = [s[k, u] for u in range(max(0, t - lead + 1), t + 1)]
            _row(h, {n[k, t]: 1.0, **dict.fromkeys(loading, -1.0)}, 0.0, inf)
    counts = list(gpus) if gpus is not None else [1] * len(types)
    # GPUs of each type proving paid work in each step.
    g = {(k, t): _var(h, 0.0, 0, inf) for k in range(len(types)) for t in range(horizon)}
    for t in range(horizon):
        paid, challenge = {w[t]: 1.0}, {c[t]: 1.0}
        slots: dict[int, float] = {}
        for k, ty in enumerate(types):
            lead = math.ceil(ty.lead_s / step_s)
            per_gpu = ty.proofs_per_hour / counts[k] * hours
            starts = range(max(0, t - lead + 1), t + 1)
            # Proving GPUs: counts[k] x (n[k,t] - those still loading).
            proving = {n[k, t]: float(counts[k]), **{s[k, u]: -float(counts[k]) for u in starts}}
            # g[k,t] <= proving GPUs.
            _row(h, {g[k, t]: 1.0, **{v: -a for v, a in proving.items()}}, -inf, 0.0)
            # w <= sum per_gpu x g; c <= sum per_gpu x (proving - g).
            paid[g[k, t]] = -per_gpu
            challenge[g[k, t]] = per_gpu
            for v, a in proving.items():
                challenge[v] = challenge.get(v, 0.0) - per_gpu * a
            slots[g[k, t]] = 1.0
        _row(h, paid, -inf, 0.0)
        _row(h, challenge, -inf, 0.0)
        # GPUs on paid work within the slots: start + challenges before t / 50.
        if t:
            slots[cum_c[t - 1]] = -1.0 / SLOT_CHALLENGES
        _row(h, slots, -inf, float(start_challenges // SLOT_CHALLENGES))
        # The running sums: cum[t] - cum[t-1] - this step's = 0.
        taken = {x[t, j]: -1.0 for j in range(len(work[t]))} if t < steps else {}
        for cum, step in ((cum_x, taken), (cum_w, {w[t]: -1.0}), (cum_c, {c[t]: -1.0})):
            _row(h, {cum[t]: 1.0, **({cum[t - 1]: -1.0} if t else {}), **step}, 0.0, 0.0)
        # Proved by the end of t: at most what was taken, at least what is due.
        _row(h, {cum_w[t]: 1.0, cum_x[t]: -1.0}, -inf, 0.0)
        if t - d >= 0:
            _row(h, {cum_w[t]: 1.0, cum_x[t - d]: -1.0}, 0.0, inf)
    started = time.monotonic()
    h.run()
    took = round(time.monotonic() - started, 2)
    status = h.getModelStatus()
    solved = status == highspy.HighsModelStatus.kOptimal
    if not solved and h.getInfo().primal_solution_status != 2:
        return WeekOracle(False, f"not solved: {h.modelStatusToString(status)}", solve_s=took)
    values = list(h.getSolution().col_value)
    info = h.getInfo()
    out = WeekOracle(
        True,
        "optimal" if solved else f"time limit, gap {info.mip_gap:.3%}",
        ask_nfil,
        float(info.objective_function_value),
        float(info.objective_function_value if relax else info.mip_dual_bound),
        solve_s=took,
    )
    a_day = round(86_400 / step_s)
    for day in range(math.ceil(steps / a_day)):
        span = range(day * a_day, min(steps, (day + 1) * a_day))
        revenue = sum(
            values[x[t, j]] * seg.pay_nfil / seg.p * usd_per_nfil
            for t in span
            for j, seg in enumerate(work[t])
        )
        rental = sum(values[n[k, t]] * ty.dph * hours for k, ty in enumerate(types) for t in span)
        p = sum(values[x[t, j]] for t in span for j in range(len(work[t])))
        proofs = sum(
            values[x[t, j]] / seg.p * seg.count for t in span for j, seg in enumerate(work[t])
        )
        out.days.append(
            {
                "day": day + 1,
                "revenue_usd": revenue,
                "rental_usd": rental,
                "profit_usd": revenue - rental,
                "proofs": proofs,
                "p": p,
                "usd_per_proof": rental / proofs if proofs else math.nan,
            }
        )
    for k, ty in enumerate(types):
        held = [values[n[k, t]] for t in range(horizon)]
        if max(held) > 0.5:
            out.rentals[ty.name] = {"max": round(max(held)), "machine_hours": sum(held) * hours}
    out.challenge_proofs = sum(values[v] for v in c)
    return out


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
