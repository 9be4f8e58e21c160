"""The market's work source: a demand model and its queue, when configured.

A mixin of `simulator.market.Market`. Without a demand configured the work
source is `Faults.work_share` (a share of each prover's capacity, as
before). With one (`set_demand`), work items arrive along its curve
(simulator/demand.py), provers pull them from the queue
(simulator/work_queue.py), and each prover's status reports the work it
really holds: a prover with nothing to pull says ``work_queued`` 0 and
``proofs_in_flight`` 0, idle. ``GET /demand`` answers `demand_body`.
docs/SIMULATOR.md, "Demand: work with deadlines".

The other work source is the Snark Market's node proving on the fleet
(`set_fleet_work`; simulator/snark_market/fleet_prover.py): it reads the
machines through `machine_views` (the queue's own `MachineView`s), every
sync runs it up to the clock first (before a machine is looked at for
anything else, so it sees each machine at its own events' times), and it
decides the provers' work fields. One source at a time.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any, Protocol

from fleet_agent.fleet.capacity import concurrent_proofs

from .base import MarketState
from .demand import DemandConfig
from .instances import SimInstance
from .prover import rental_ram_mb
from .work_queue import MachineView, WorkQueue

__all__ = ["FleetWork", "MarketDemand", "rfc3339"]


def rfc3339(t: float) -> str:
    """Unix seconds as RFC 3339 UTC with milliseconds (``2026-01-01T14:00:00.000Z``)."""
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class FleetWork(Protocol):
    """A work source that proves on the machines: the Snark Market
    (simulator/snark_market/world.py ``SnarkMarket`` with a ``FleetProver``)."""

    def sync(self, until: float | None = None) -> float:
        """Run up to sim time `until`."""

    def prover_fields(self, machine_id: int, started_at: float | None) -> dict[str, Any]:
        """The status fields of the machine's prover that its work decides."""


class MarketDemand(MarketState):
    """Demand, its queue and its report, on the state `MarketState` declares."""

    #: The queue, once a demand is configured (None: `Faults.work_share` rules).
    _work: WorkQueue | None = None
    #: The Snark Market proving on the machines (None: not attached).
    _fleet_work: FleetWork | None = None

    def set_fleet_work(self, work: FleetWork | None) -> None:
        """Make `work` the machines' work source (None: detach it). Its lock
        must be this market's (it runs inside `_sync`)."""
        with self.lock:
            self._sync()
            if work is not None and self._work is not None:
                raise ValueError("the machines have one work source: a demand or the Snark Market")
            self._fleet_work = work

    def machine_views(self, t: float) -> list[MachineView]:
        """Every machine as the work sources see it at `t` (or when last
        looked at, if later). No sync: the Snark Market's events read it
        while `_sync` runs them."""
        with self.lock:
            return [self._view(inst, t) for inst in self._instances.values()]

    def set_demand(self, config: DemandConfig | None) -> dict[str, Any] | None:
        """Configure the demand from now on, replace its settings (the queue
        and counters stay), or with None stop it (they go). Returns the report."""
        with self.lock:
            self._sync()
            if config is not None and self._fleet_work is not None:
                raise ValueError("the machines have one work source: a demand or the Snark Market")
            if config is None:
                self._work = None
            elif self._work is None:
                # Arrivals start at the next whole sim minute.
                start = math.ceil(self.clock.now() / 60.0)
                self._work = WorkQueue(config, self.seed, start)
            else:
                self._work.config = config
            return self.demand_state()

    def demand_state(self) -> dict[str, Any] | None:
        """Settings, counters and queue of the demand (None: not configured)."""
        with self.lock:
            self._sync()
            work = self._work
            if work is None:
                return None
            now = self.clock.now()
            return {
                "config": work.config.to_dict(),
                "rate_now": round(work.config.rate(now, self.seed), 3),
                **work.report(),
            }

    def demand_body(self) -> dict[str, Any] | None:
        """``GET /demand``: the shape the agent's generic demand adapter reads
        (None: no demand configured)."""
        with self.lock:
            self._sync()
            work = self._work
            if work is None:
                return None
            report = work.report()
            return {
                # The queue is processed minute by minute: this is the minute
                # it stands at (at most a minute behind the sim clock).
                "as_of": rfc3339(report["processed_until"]),
                "queued": report["queued"],
                "in_flight": report["in_flight"],
                "arrived_total": report["arrived"],
                "done_total": report["done"],
                # Work finished late or given up as expired: missed either way.
                "late_total": report["late"] + report["expired"],
                "deadlines": [rfc3339(d) for d in work.deadlines()],
                "saturated": False,
            }

    def _demand_sync(self) -> None:
        """Run the Snark Market on the fleet up to the clock, or process every
        whole sim minute the clock has passed."""
        if self._fleet_work is not None:
            self._fleet_work.sync(self.clock.now())
        work = self._work
        if work is None:
            return
        for minute in work.due(self.clock.now()):
            start = minute * 60.0
            views = [self._view(inst, start) for inst in self._instances.values()]
            work.tick(minute, views)

    def _view(self, inst: SimInstance, t: float) -> MachineView:
        """The machine as the queue sees it at `t` (or when last looked at, if later)."""
        m, env = inst.machine, self._env(inst)
        m.advance_to(t, env)
        offer = inst.offer
        slots = concurrent_proofs(offer["gpu_name"], int(offer["num_gpus"]), rental_ram_mb(offer))
        rate = env.proof_rate()
        alive = m.destroyed_at is None and m.status == "running"
        holds = alive and m.phase == "proving"
        return MachineView(
            id=inst.id,
            holds=holds,
            pulls=holds and m.proving_now() and not m.draining and rate > 0 and slots > 0,
            stuck=m.stuck,
            slots=slots,
            seconds_per_proof=3600.0 * slots / rate if rate > 0 else math.inf,
            started_at=m.prover_started_at,
        )

    def _demand_status(self, inst: SimInstance, body: dict[str, Any]) -> dict[str, Any]:
        """A prover's status with the work fields the queue (or the Snark
        Market on the fleet) decides."""
        if self._fleet_work is not None:
            fields = self._fleet_work.prover_fields(inst.id, inst.machine.prover_started_at)
            return {**body, **fields, **inst.status_extra}
        if self._work is None:
            return body
        fields = self._work.prover_fields(inst.id, inst.machine.prover_started_at)
        return {**body, **fields, **inst.status_extra}
