"""The account's instances as the API serves them: show, destroy, list, filters.

A mixin of `simulator.market.Market`, next to `MarketControls`; both
work on the state `MarketState` declares.
"""

from __future__ import annotations

from typing import Any

from .base import MarketState
from .errors import ApiError
from .instances import InstanceEnv, SimInstance, container_ports
from .parsing import parse_v1_order
from .prover import status_port
from .query import QueryError, after_token, decode_token, encode_token, matches, sort_records

__all__ = ["MarketInstances"]


class MarketInstances(MarketState):
    """Instance rows, their ports and their lifecycle's environment."""

    def _map_ports(self, inst: SimInstance) -> None:
        """Host ports for the container's ports, if the host has direct ports.

        The prover's status port is a real listener when the server runs a
        gateway (`port_allocator`), and so is a router-mode create's front
        port when it runs cuzk hosts (`cuzk_hosts`, simulator/cuzk_market.py);
        the others are numbers nobody answers on."""
        wanted = container_ports(inst.machine.runtype, inst.env)
        if int(inst.offer.get("direct_port_count") or 0) < len(wanted):
            return  # no open ports: only vast.ai's SSH proxy reaches it
        prover = f"{status_port(inst.env)}/tcp"
        ports: dict[str, int] = {}
        for n, name in enumerate(wanted):
            cuzk = self._map_cuzk_port(inst, name, None)
            if cuzk is not None:
                ports[name] = cuzk
            elif name == prover and self.port_allocator is not None:
                ports[name] = self.port_allocator(inst.id, None)
            else:
                ports[name] = 20_000 + (inst.id * 7 + n * 131) % 40_000
        inst.host_ports = ports
        inst.public_ip = self.public_host or ""

    def _remap_prover_port(self, inst: SimInstance) -> None:
        """After a restore: listen again for the prover, and a router-mode
        machine's front, on their old ports if free."""
        name = f"{status_port(inst.env)}/tcp"
        if name in inst.host_ports and self.port_allocator is not None:
            inst.host_ports[name] = self.port_allocator(inst.id, inst.host_ports[name])
            inst.public_ip = self.public_host or inst.public_ip
        for name, port in list(inst.host_ports.items()):
            cuzk = self._map_cuzk_port(inst, name, port)
            if cuzk is not None:
                inst.host_ports[name] = cuzk
                inst.public_ip = self.public_host or inst.public_ip

    def _env(self, inst: SimInstance) -> InstanceEnv:
        env = self._envs.get(inst.id)
        if env is None:
            env = InstanceEnv(
                inst.offer,
                lambda: self.faults,
                jitter=inst.machine.fate.rate_jitter,
                bid_price=inst.bid_price,
            )
            self._envs[inst.id] = env
        return env

    def _current(self, inst: SimInstance) -> SimInstance:
        """`inst` with its machine advanced to now. Caller holds the lock."""
        inst.machine.advance_to(self.clock.now(), self._env(inst))
        return inst

    def _views(self) -> list[dict[str, Any]]:
        return [self._current(i).view() for i in self._instances.values()]

    def show_instance(self, instance_id: int) -> dict[str, Any] | None:
        """``GET /api/v0/instances/{id}/``: the instance, or None once it is gone."""
        with self.lock:
            self._sync()
            inst = self._instances.get(instance_id)
            return self._current(inst).view() if inst is not None else None

    def _in_flight(self, inst: SimInstance) -> int:
        """Proofs the instance's prover holds right now and would finish: 0
        unless it proves (a stuck prover's work is lost to its fault)."""
        current = self._current(inst)
        if current.machine.stuck:
            return 0
        body = current.prover_status(self.faults.work_share)
        return int(body["proofs_in_flight"]) if body and body["phase"] == "proving" else 0

    def destroy_instance(self, instance_id: int) -> None:
        """``DELETE /api/v0/instances/{id}/``: released now; listed with
        ``cur_state: unloaded`` for the `destroy_linger_s` fault, then gone."""
        with self.lock:
            self._sync()
            inst = self._instances.get(instance_id)
            if inst is None or inst.machine.destroyed_at is not None:
                raise ApiError(404, "no_such_instance", f"Instance {instance_id} not found.")
            lost = self._in_flight(inst)
            if lost:
                # Work handed to its prover dies with it (a bench's count of
                # what draining saves: fleet_agent/fleet/drain.py).
                self.counters["destroys_mid_proof"] = self.counters.get("destroys_mid_proof", 0) + 1
                self.counters["proofs_lost_to_destroys"] = (
                    self.counters.get("proofs_lost_to_destroys", 0) + lost
                )
            inst.machine.destroy(self.clock.now(), self._env(inst))
            self.counters["destroys"] += 1
            if self.faults.destroy_linger_s <= 0:
                self._drop(instance_id)
        self._poke_cuzk()

    def list_instances(
        self,
        *,
        select_filters: dict[str, Any],
        order_by: list[dict[str, Any]],
        limit: int | None,
        after: str | None,
        select_cols: list[str] | None,
    ) -> dict[str, Any]:
        """``GET /api/v1/instances/``: one page, keyset-paginated like the service."""
        with self.lock:
            self._sync()
            views = self._views()
            order = parse_v1_order(order_by)
            try:
                known = frozenset(views[0]) if views else None
                rows = [v for v in views if matches(v, select_filters, known_fields=known)]
                rows = sort_records(rows, order)
                if after:
                    rows = after_token(rows, order, decode_token(after, order))
            except QueryError as exc:
                raise ApiError(400, "invalid_args", str(exc)) from None
            total = len(views)
            size = max(1, min(int(limit or self.page_size), self.page_size))
            page, more = rows[:size], len(rows) > size
            label_counts: dict[str, int] = {}
            for view in views:
                label = view.get("label") or ""
                label_counts[label] = label_counts.get(label, 0) + 1
            if select_cols and "*" not in select_cols:
                wanted = [*dict.fromkeys(["id", *select_cols])]
                page_out = [{c: row.get(c) for c in wanted} for row in page]
            else:
                page_out = page
            return {
                "success": True,
                "instances_found": len(page_out),
                "total_instances": total,
                "label_counts": label_counts,
                "next_token": encode_token(page[-1], order) if more else None,
                "instances": page_out,
            }

    def instance_filters(self) -> list[dict[str, Any]]:
        """``GET /api/v0/instances/filters/``: distinct filterable combinations."""
        with self.lock:
            self._sync()
            combos = {(v["actual_status"], v["verification"], v["gpu_name"]) for v in self._views()}
            return [
                {"actual_status": s, "verification": ver, "gpu_name": g}
                for s, ver, g in sorted(combos, key=str)
            ]

    def rentals_by_label(self) -> dict[str, list[int]]:
        """Every rental since the start, destroyed ones included: label → instance ids.

        A label with two ids is a duplicate rental, even if one was destroyed
        since (what the chaos suite counts)."""
        with self.lock:
            by_label: dict[str, list[int]] = {}
            for instance_id, label in self._rentals:
                by_label.setdefault(label, []).append(instance_id)
            return by_label

    def instance_ids(self) -> list[int]:
        """Ids of the account's instances listed right now (destroyed ones
        still lingering included)."""
        with self.lock:
            self._sync()
            return sorted(self._instances)
