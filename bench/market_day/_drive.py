"""The market day's clock: market time and workflow time moved together, the
oracle taken at each target change and through each period, and the day's
samples of the simulator's truth (bench/market_day/day.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from activities.fleet_results import offer_row
from bench.market_day._demand import share_at
from bench.market_day._truth import CONFIG, ORACLE_EVERY_S, Day, failed, observe, target_at
from fleet_agent.fleet.guardrails import offer_refusal
from fleet_agent.fleet.offer_cost import offer_dph
from fleet_agent.fleet.offer_query import allowed_gpu_names, offer_filters
from fleet_agent.fleet.oracle import Item, cheapest_cover, planning_unit
from fleet_agent.fleet.prover import ProverSpec
from fleet_agent.fleet.spare import cheapest_spared_cover
from fleet_agent.models import AgentConfig
from fleet_agent.vast.client import VastClient
from simulator.fate import MEAN_RATE_JITTER
from simulator.server import SimServer
from testkit.agents import status_or_none
from workflows import FleetAgentWorkflow

#: The steps in which the clocks move while the agent takes in a change:
#: longer than its P0 debounce (2 s), short beside the offers' life (2 h).
REACT_STEP_S = 5


async def allowed_rows(
    vast: VastClient, prover: ProverSpec, config: AgentConfig
) -> list[dict[str, Any]]:
    """The offers listed now that the agent's guardrails allow, as offer
    rows (estimated proofs/h, $/h, download speed): the book an oracle
    rents from (also bench/demand_day/)."""
    names = allowed_gpu_names(config.allowed_gpus, await vast.gpu_names())
    found = await vast.search_offers_paged(
        offer_filters(config, prover, names),
        page_size=500,
        max_pages=6,
        allocated_storage=prover.disk_gb,
    )
    allowed = [o for o in found.offers if offer_refusal(o, config, prover) is None]
    return [offer_row(o, prover) for o in allowed]


async def _oracle(
    vast: VastClient, prover: ProverSpec, config: AgentConfig, state: dict[str, Any]
) -> dict[str, Any]:
    """The cheapest fleet meeting the target: allowed offers plus our machines.
    Also the cheapest that keeps what the fleet has (`no_rebuild_dph`): all
    our machines plus the cheapest offers for the rest after an increase, the
    cheapest subset of ours after a decrease. The gap between the two is what
    only a rebuild could take (docs/decisions/load-time.md, "Load time").

    Our machines count at what they really prove (the simulator's truth);
    an offer, whose truth is drawn only when it is rented, at what it is
    expected to prove: the capacity model's estimate times the simulator's
    mean rate jitter (`MEAN_RATE_JITTER`, 0.985). Planned on the bare
    estimates (`oracle_on_estimates_dph`, the yardstick before 2026-12-01),
    the oracle's fleet falls short of the target in truth by 1.5 % on
    average, and favours offers over our own machines by as much."""
    rows = await allowed_rows(vast, prover, config)
    estimated = [
        Item(key=int(r["offer_id"]), cost=offer_dph(r), rate=r["est_proofs_per_hour"]) for r in rows
    ]
    items = [Item(key=i.key, cost=i.cost, rate=i.rate * MEAN_RATE_JITTER) for i in estimated]
    ours = [
        Item(
            key=-int(r["id"]), cost=float(r["dph_total"]), rate=float(r["expected_proofs_per_hour"])
        )
        for r in state["instances"]
        if r.get("cur_state") != "unloaded" and not failed(r)
    ]
    target = config.target_proofs_per_hour
    cover = cheapest_cover(items + ours, target, planning_unit(target))
    on_estimates = cheapest_cover(estimated + ours, target, planning_unit(target))
    own = sum(i.rate for i in ours)
    if own >= target:
        kept = cheapest_cover(ours, target, planning_unit(target)).cost
    else:
        rest = target - own
        kept = sum(i.cost for i in ours) + cheapest_cover(items, rest, planning_unit(rest)).cost
    # With the spare on, the cheapest fleet that holds the same kind of level.
    spared = cheapest_spared_cover(items + ours, target) if config.spare_one_machine else None
    return {
        "target": config.target_proofs_per_hour,
        "oracle_dph": round(cover.cost, 4),
        "oracle_on_estimates_dph": round(on_estimates.cost, 4),
        "no_rebuild_dph": round(kept, 4),
        "spared_dph": round(spared.cost, 4) if spared is not None and spared.met else None,
    }


async def until_acted(
    env: WorkflowEnvironment,
    sim: SimServer,
    handle: WorkflowHandle[FleetAgentWorkflow, None],
    before: int,
    budget: int,
    move: Callable[[int], Awaitable[None]] | None = None,
) -> int:
    """Move both clocks REACT_STEP_S at a time until a run after run
    `before` has finished (the agent has acted on a start or a change), at
    most `budget` seconds; the seconds moved. `move(seconds)` moves them
    (default: the market, then a sleep of the server by as much).

    One step of the day is two minutes. Moved at once, the market would
    move two minutes past the oracle before the agent's first search (its
    run starts after a debounce of seconds): offers the oracle priced are
    rented away by others in that time (seed 12's first period: the
    cheapest cover $4.215/h at the change, $4.496/h two minutes on), and
    whether the search came before or after the move was a race."""
    moved = 0
    while moved + REACT_STEP_S <= budget:
        if move is not None:
            await move(REACT_STEP_S)
        else:
            sim.market.advance(REACT_STEP_S)
            await env.sleep(REACT_STEP_S)
        moved += REACT_STEP_S
        st = await status_or_none(handle)
        if st and st.last_run and st.last_run.run > before and st.current_run is None:
            break
    return moved


async def drive(
    day: Day,
    env: WorkflowEnvironment,
    h: Any,
    sim: SimServer,
    vast: VastClient,
    prover: ProverSpec,
    hours: float,
    step: int,
    spare: bool,
    effort: str | None = None,
    shares: tuple[tuple[float, float], ...] = ((0.0, 1.0),),
) -> str:
    """Run the day: start the agent (`llm_effort` = `effort`, else the
    config's), change its target at TARGETS' hours and the work source's
    share at `shares`' hours (bench/market_day/_demand.py), and sample the
    truth after every step; the agent's workflow ID."""
    target = target_at(0)
    settings: dict[str, Any] = {**CONFIG, "spare_one_machine": spare}
    if effort is not None:
        settings["llm_effort"] = effort
    config = AgentConfig(target_proofs_per_hour=target, **settings)
    # The first period's oracle: the market before the agent exists.
    oracle = await _oracle(vast, prover, config, sim.market.state())
    day.oracle.append({"hour": 0.0, **oracle})
    day.market.append({"hour": 0.0, **oracle})
    handle = await h.start_agent(target_proofs_per_hour=target, **settings)
    t0 = sim.market.now()
    share = None
    for i in range(int(hours * 3600 // step)):
        hour = i * step / 3600
        if share != share_at(shares, hour):
            share = share_at(shares, hour)
            sim.market.set_faults(work_share=share)
        wanted = target_at(hour)
        moved = 0
        if i == 0:
            moved = await until_acted(env, sim, handle, 0, step)
        elif wanted != target:
            target = wanted
            config = config.model_copy(update={"target_proofs_per_hour": target})
            oracle = await _oracle(vast, prover, config, sim.market.state())
            day.oracle.append({"hour": hour, **oracle})
            day.market.append({"hour": hour, **oracle})
            st = await status_or_none(handle)
            before = st.run_count if st else 0
            await handle.execute_update(
                FleetAgentWorkflow.update_config, {"target_proofs_per_hour": target}
            )
            moved = await until_acted(env, sim, handle, before, step)
        elif (i * step) % ORACLE_EVERY_S == 0:
            oracle = await _oracle(vast, prover, config, sim.market.state())
            day.market.append({"hour": hour, **oracle})
        # Market time and workflow time move together, a step at a time.
        if step > moved:
            sim.market.advance(step - moved)
            await env.sleep(step - moved)
        state = sim.market.state()
        now = sim.market.now() - t0
        observe(day, state, now)
        day.samples.append((now, target, float(state["proofs_per_hour"]), state["spend_per_hour"]))
    return str(handle.id)
