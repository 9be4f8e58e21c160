"""What the market does to its instances besides renting and listing them.

The renter's own actions (``PUT /api/v0/instances/{id}/`` stop/start/label,
``PUT /api/v0/instances/reboot/{id}/``), the control API's (kill, stop, start,
freeze, unfreeze, reboot, outbid, prover faults), the prover's status endpoint
and the state report. A mixin of `simulator.market.Market`: it raises
KeyError for an unknown instance and ValueError for a bad request, and the
API turns them into 404 and 400.
"""

from __future__ import annotations

import hmac
from typing import Any, Literal

from fleet_agent.fleet.capacity import concurrent_proofs
from fleet_agent.fleet.prover import DRAIN_TOKEN_ENV

from .base import MarketState
from .billing import billed_dph, charges
from .catalogue import gpu_names
from .instances import KILL_STATUSES, SimInstance
from .lifecycle import PROVER_FAULTS
from .prover import rental_ram_mb

__all__ = ["HOSTILE_DRAINS", "INSTANCE_ACTIONS", "DrainAnswer", "MarketControls", "ProverAnswer"]

#: Control API actions on an instance (``POST /_sim/instances/{id}/{action}``).
INSTANCE_ACTIONS = frozenset({"stop", "start", "freeze", "unfreeze", "reboot", "outbid", "blip"})

#: How the prover's port answers: a status, a container that holds the
#: connection without answering (frozen), or nothing listening.
ProverAnswer = tuple[Literal["ok", "hang", "closed"], dict[str, Any] | None]
#: How a hostile host answers ``POST /drain`` (`MarketControls.hostile_host`):
#: ``trickle`` a byte a second, ``flood`` 200 MB (simulator/prover_http.py).
HOSTILE_DRAINS = frozenset({"trickle", "flood"})
#: What ``POST /drain`` gets: its HTTP status, and "" or how a hostile host
#: sends the answer (one of HOSTILE_DRAINS).
DrainAnswer = tuple[int, str]


class MarketControls(MarketState):
    """Instance control and reports, on the state `MarketState` declares."""

    def _live(self, instance_id: int) -> SimInstance:
        """The instance, unless it is unknown or destroyed (KeyError)."""
        inst = self._instances.get(instance_id)
        if inst is None or inst.machine.destroyed_at is not None:
            raise KeyError(instance_id)
        return inst

    # ------------------------------------------------------ renter's API

    def manage_instance(self, instance_id: int, body: dict[str, Any]) -> None:
        """``PUT /api/v0/instances/{id}/``: ``{"state": "stopped"|"running"}``
        and/or ``{"label": "..."}``."""
        state, label = body.get("state"), body.get("label")
        if state is None and "label" not in body:
            raise ValueError("give a state or a label")
        if state is not None and state not in ("stopped", "running"):
            raise ValueError("state must be 'stopped' or 'running'")
        if label is not None and (not isinstance(label, str) or len(label) > 1024):
            raise ValueError("label must be a string of at most 1024 characters")
        with self.lock:
            self._sync()
            inst = self._live(instance_id)
            if "label" in body:
                inst.label = label
            if state is not None:
                self._act(inst, "stop" if state == "stopped" else "start")
        self._poke_cuzk()

    def reboot_instance(self, instance_id: int) -> bool:
        """``PUT /api/v0/instances/reboot/{id}/``: restart the container if it runs."""
        with self.lock:
            self._sync()
            applied = self._act(self._live(instance_id), "reboot")
        self._poke_cuzk()
        return applied

    # ------------------------------------------------------- control API

    def kill(self, instance_id: int, status: str = "exited", msg: str | None = None) -> None:
        """Make an instance die now with `status` (``exited``/``offline``/``unknown``)."""
        if status not in KILL_STATUSES:
            raise ValueError(f"status must be one of {sorted(KILL_STATUSES)}")
        with self.lock:
            self._sync()
            inst = self._live(instance_id)
            message = msg or f"killed by simulator ({status})"
            inst.machine.kill(self.clock.now(), status, message, self._env(inst))
        self._poke_cuzk()

    def set_instance_state(self, instance_id: int, action: str) -> bool:
        """Stop, start, freeze, unfreeze, reboot, outbid or blip (the host
        offline for the `offline_blip_s` fault, then back) an instance now.

        Returns whether it applied (a reboot of a machine that is not running
        does nothing)."""
        if action not in INSTANCE_ACTIONS:
            raise ValueError(f"action must be one of {sorted(INSTANCE_ACTIONS)}")
        with self.lock:
            self._sync()
            applied = self._act(self._live(instance_id), action)
        self._poke_cuzk()
        return applied

    def _act(self, inst: SimInstance, action: str) -> bool:
        m, now, env = inst.machine, self.clock.now(), self._env(inst)
        if action == "stop":
            m.stop(now, env)
            return m.status == "stopped"
        if action == "start":
            m.start(now, env)
            return m.status != "stopped"
        if action == "freeze":
            return m.freeze(now, env)
        if action == "unfreeze":
            return m.unfreeze(now, env)
        if action == "reboot":
            return m.reboot(now, env)
        if action == "blip":
            return m.blip(now, env)
        # outbid: the control API's preemption, bid or not.
        m.advance_to(now, env)
        if m.status != "running":
            return False
        m.outbid_at = now
        m.advance_to(now, env)
        return True

    def reprice_offer(self, offer_id: int, factor: float) -> bool:
        """The host changes its ask: the offer's GPU price times `factor`, for
        every search and rental from now on. False: the offer is not listed."""
        if not factor > 0:
            raise ValueError("factor must be > 0")
        with self.lock:
            self._sync()
            offer = self._offers.get(offer_id)
            if offer is None:
                return False
            offer.fields["dph_base"] = round(offer.fields["dph_base"] * factor, 6)
            return True

    def prover_fault(self, instance_id: int, kind: str) -> bool:
        """A CUDA error, an OOM kill or a stuck prover now; False unless proving."""
        if kind not in PROVER_FAULTS:
            raise ValueError(f"fault must be one of {sorted(PROVER_FAULTS)}")
        with self.lock:
            self._sync()
            inst = self._live(instance_id)
            applied = inst.machine.prover_fault(self.clock.now(), kind, self._env(inst))
        self._poke_cuzk()
        return applied

    def hostile_host(
        self,
        instance_id: int,
        status: dict[str, Any] | None = None,
        row: dict[str, Any] | None = None,
        drain: str | None = None,
    ) -> None:
        """The instance's host turns hostile: from now its prover's status
        answers `status`'s fields over its own (any JSON value, NaN and a
        megabyte of text included), its row shows `row`'s (``status_msg``,
        ``gpu_name``...; not ``id``), and a ``POST /drain`` gets 200 with an
        answer sent as `drain` says (HOSTILE_DRAINS), draining nothing. None
        leaves one as it is, {} (or "" for the drain) restores it."""
        if row is not None and "id" in row:
            raise ValueError("a row's id stays the instance's")
        if drain and drain not in HOSTILE_DRAINS:
            raise ValueError(f"drain must be one of {sorted(HOSTILE_DRAINS)} or empty")
        with self.lock:
            self._sync()
            inst = self._live(instance_id)
            if status is not None:
                inst.status_extra = dict(status)
            if row is not None:
                inst.extra = dict(row)
            if drain is not None:
                inst.drain_extra = drain

    def prover_endpoint(self, instance_id: int) -> ProverAnswer:
        """What the instance's prover status port answers right now."""
        with self.lock:
            self._sync()
            inst = self._instances.get(instance_id)
            if inst is None:
                return "closed", None
            self._current(inst)
            if inst.machine.status == "frozen":
                return "hang", None
            body = inst.prover_status(self.faults.work_share)
            return ("ok", self._demand_status(inst, body)) if body else ("closed", None)

    def drain_prover(self, instance_id: int, token: str) -> DrainAnswer:
        """``POST /drain`` on the instance's status port: the HTTP status it
        answers (200 draining, 401 without the token its create env gave,
        409 when its prover is not proving, 404 without a token at all), and
        how a hostile host sends it (`hostile_host`: 200, nothing drained)."""
        with self.lock:
            self._sync()
            inst = self._live(instance_id)
            if inst.drain_extra:
                return 200, inst.drain_extra
            wanted = inst.env.get(DRAIN_TOKEN_ENV)
            if not wanted:
                return 404, ""
            if not hmac.compare_digest(token, wanted):
                return 401, ""
            in_flight = concurrent_proofs(
                inst.offer["gpu_name"], int(inst.offer["num_gpus"]), rental_ram_mb(inst.offer)
            )
            drained = inst.machine.drain(self.clock.now(), self._env(inst), in_flight)
            return (200 if drained else 409), ""

    def hostile_drain_sent(self, sent: int, seconds: float) -> None:
        """Count a hostile drain answer that ended (the reader hung up, or it
        was all sent): its bytes and its wall seconds, in `counters`."""
        with self.lock:
            counters = self.counters
            counters["hostile_drains"] = counters.get("hostile_drains", 0) + 1
            counters["hostile_drain_bytes"] = counters.get("hostile_drain_bytes", 0) + sent
            counters["hostile_drain_seconds"] = counters.get("hostile_drain_seconds", 0) + round(
                seconds
            )

    # ------------------------------------------------------------ report

    def state(self) -> dict[str, Any]:
        """Everything a test or the demo may want to look at, as JSON-ready data."""
        with self.lock:
            self._sync()
            now = self.clock.now()
            by_gpu: dict[str, int] = dict.fromkeys(gpu_names(), 0)
            for offer in self._offers.values():
                name = offer.fields["gpu_name"]
                by_gpu[name] = by_gpu.get(name, 0) + 1
            instances = [
                {**i.view(), **i.truth()}
                for i in (self._current(x) for x in self._instances.values())
            ]
            return {
                "now": now,
                "speed": self.clock.speed,
                "seed": self.seed,
                "scenario": self.scenario,
                "faults": self.faults.to_dict(),
                "rate_limits": self.rate_limits,
                "offers": len(self._offers),
                "offers_by_gpu": by_gpu,
                "instances": instances,
                # The truth, which no API row carries: proofs being finished now.
                "proofs_per_hour": round(sum(v["proofs_per_hour"] for v in instances), 3),
                "proofs_completed": sum(v["proofs_completed"] for v in instances),
                # $/hour billed now (simulator/billing.py).
                "spend_per_hour": round(sum(billed_dph(i) for i in self._instances.values()), 4),
                "counters": dict(self.counters),
                # The work source's queue and counters (None: `work_share` rules).
                "demand": self.demand_state(),
            }

    def charges(self) -> dict[str, Any]:
        """What the account was billed so far, per instance, destroyed ones
        included, in sim time ($, 6 decimals; simulator/billing.py)."""
        with self.lock:
            self._sync()
            rows = dict(self._closed_charges)
            for inst in self._instances.values():
                rows[inst.id] = charges(self._current(inst))
            shown = [rows[i] for i in sorted(rows)]
            return {
                "now": self.clock.now(),
                "instances": shown,
                "time_usd": round(sum(r["time_usd"] for r in shown), 6),
                "bandwidth_usd": round(sum(r["bandwidth_usd"] for r in shown), 6),
                "total_usd": round(sum(r["total_usd"] for r in shown), 6),
            }
