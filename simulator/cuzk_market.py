"""What the market knows of its router-mode machines' cuzk (simulator/cuzk_hosts.py serves it).

A mixin of `simulator.market.Market`: the views the hosts' loop reads
(`cuzk_views`), the count of each finished proof (`cuzk_proved`), a ``dies``
cuzk taking its machine down (`cuzk_died`), a hostile host's cuzk behaviour
(`cuzk_behaviour`, the control API's ``POST /_sim/cuzk/{id}``) and the truth
a bench compares the router's measurements with (`cuzk_report`,
``GET /_sim/cuzk``). Raises KeyError for an unknown instance and ValueError
for a bad request, as `MarketControls` does.
"""

from __future__ import annotations

from typing import Any

from fleet_agent.cuzk.kinds import KIND_NAMES

from .base import MarketState
from .cuzk_machine import CuzkView, behaviour_spec, cuzk_view, front_context, front_port
from .instances import SimInstance
from .prover import rental_ram_mb

__all__ = ["CUZK_DEATH_MSG", "MarketCuzk"]

#: The row's message when a ``dies`` cuzk takes its machine down: the image's
#: entrypoint exits when cuzk does (prover_image/entrypoint.py ``run``).
CUZK_DEATH_MSG = "container exited: cuzk died mid-proof, and the entrypoint with it"


class MarketCuzk(MarketState):
    """Router-mode machines' cuzk: ports, views, counts, behaviours, truth."""

    def _poke_cuzk(self) -> None:
        """The hosts' loop looks again now (a machine or the clock changed)."""
        if self.cuzk_hosts is not None:
            self.cuzk_hosts.poke()

    def _map_cuzk_port(self, inst: SimInstance, name: str, preferred: int | None) -> int | None:
        """A real host port for the front's container port `name` of a
        router-mode create (None: not one, or no hosts to serve it); the
        image's own checks of the create decide whether anything will listen."""
        port = front_port(inst.env)
        if self.cuzk_hosts is None or port is None or name != f"{port}/tcp":
            return None
        context, inst.cuzk_refusal = front_context(inst.env, rental_ram_mb(inst.offer))
        return self.cuzk_hosts.reserve(inst.id, preferred, context)

    def cuzk_views(self) -> dict[int, CuzkView]:
        """Every router-mode machine's cuzk now (the hosts' loop reads it)."""
        with self.lock:
            self._sync()
            out: dict[int, CuzkView] = {}
            for inst in self._instances.values():
                if inst.cuzk_port() is None:
                    continue
                self._current(inst)
                env = self._env(inst)
                out[inst.id] = cuzk_view(
                    inst.machine,
                    inst.offer,
                    rate=env.proof_rate(),
                    refusal=inst.cuzk_refusal,
                    blocker=env.prover_blocker(),
                    spec=inst.cuzk_behaviour,
                    rev=inst.cuzk_rev,
                )
            return out

    def cuzk_proved(self, instance_id: int, kind: int, bad: bool) -> None:
        """Count a proof `instance_id`'s cuzk answered COMPLETED (`bad`: its
        bytes would not verify)."""
        with self.lock:
            inst = self._instances.get(instance_id)
            if inst is None:
                return
            name = KIND_NAMES.get(kind, str(kind))
            inst.cuzk_proofs[name] = inst.cuzk_proofs.get(name, 0) + 1
            if bad:
                inst.cuzk_bad += 1

    def cuzk_died(self, instance_id: int) -> None:
        """A ``dies`` cuzk died: its container exits with it."""
        with self.lock:
            self._sync()
            inst = self._instances.get(instance_id)
            if inst is None or inst.machine.destroyed_at is not None:
                return
            inst.machine.kill(self.clock.now(), "exited", CUZK_DEATH_MSG, self._env(inst))
            self.counters["cuzk_deaths"] = self.counters.get("cuzk_deaths", 0) + 1
        self._poke_cuzk()

    def cuzk_behaviour(self, instance_id: int, body: dict[str, Any]) -> dict[str, Any]:
        """The instance's host turns its cuzk hostile (or honest again), now:
        ``{"behaviour": "honest"|"slow"|"dies"|"lies"|"bad"|"trickle", ...}``
        (cuzk_machine.py ``behaviour_spec``). Returns the behaviour it set."""
        spec = behaviour_spec(body)
        with self.lock:
            self._sync()
            inst = self._live(instance_id)
            if inst.cuzk_port() is None:
                raise ValueError(f"instance {instance_id} was not created in router mode")
            inst.cuzk_behaviour, inst.cuzk_rev = spec, inst.cuzk_rev + 1
            rev = inst.cuzk_rev
        if self.cuzk_hosts is not None:
            # At once, on a running cuzk too: the next proof or answer behaves so.
            self.cuzk_hosts.set_behaviour(instance_id, spec, rev)
        return spec

    def cuzk_report(self) -> dict[str, Any]:
        """The truth of every router-mode machine's cuzk, for a bench:
        ``{"now", "speed", "machines": [{"id", "label", **truth}]}``, rates
        per sim hour (the clock's `speed` turns them into real hours)."""
        with self.lock:
            self._sync()
            machines = []
            for inst in self._instances.values():
                truth = self._current(inst).cuzk_truth()
                if truth is not None:
                    machines.append({"id": inst.id, "label": inst.label, **truth})
            return {"now": self.clock.now(), "speed": self.clock.speed, "machines": machines}
