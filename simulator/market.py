"""The simulated vast.ai account and market: offers, instances, faults.

`Market` is the model behind the HTTP server and the thing tests drive
directly (`advance`, `kill`, `set_faults`, `set_instance_state`). Every public
method takes the one `lock`, so the threaded server can call it from any
request thread.

Randomness comes from separate streams derived from the seed: the market's
arrivals, id assignment, fault rolls, one stream per offer and one per
instance. With ``speed=0`` and the same calls, two markets with one seed
behave identically. `to_json`/`load_json` save and restore all of it
(`simulator.persist` writes the file).
"""

from __future__ import annotations

import heapq
import random
import threading
from dataclasses import dataclass
from typing import Any, Literal

from .accounts import MarketInstances
from .admission import MarketAdmission, Refusal
from .base import CuzkGateway, PortAllocator, PortRelease
from .billing import charges
from .catalogue import offer_pricing
from .clock import SimClock
from .control import MarketControls
from .cuzk_market import MarketCuzk
from .demand_market import MarketDemand
from .errors import ApiError
from .faults import Faults, scenario
from .instances import InstanceEnv, SimInstance
from .lifecycle import Machine, draw_fate
from .offers import OfferBook, SimOffer
from .parsing import number, parse_rent_body, parse_search_order
from .prover import starts_prover
from .query import QueryError, matches, sort_records
from .ratelimit import RateLimiter

__all__ = ["DEFAULT_OFFERS", "ApiError", "Market", "Refusal", "RentResult"]

#: Offers listed at start, and kept by arrivals balancing departures: about
#: the size of vast.ai's market.
DEFAULT_OFFERS = 10_000
_DEFAULT_SEARCH_LIMIT = 64
_MAX_SEARCH_LIMIT = 1000
_SEARCH_TYPES = frozenset({"on-demand", "bid", "reserved"})
#: Offer fields that depend on the search (its storage and type): `offer_pricing`'s.
_PRICED_FIELDS = frozenset(
    {
        "dph_total",
        "storage_total_cost",
        "is_bid",
        "discounted_dph_total",
        "dlperf_per_dphtotal",
        "flops_per_dphtotal",
        "score",
    }
)
# Keys of a search body that are not field filters.
_SEARCH_CONTROL_KEYS = frozenset(
    {"order", "type", "limit", "allocated_storage", "q", "disable_bundling"}
)


@dataclass(frozen=True, slots=True)
class RentResult:
    """A successful rent, and how the server must answer it (a fault may lie)."""

    instance_id: int
    answer: Literal["ok", "server_error", "hang"]


class Market(MarketAdmission, MarketInstances, MarketControls, MarketDemand, MarketCuzk):
    """The model: thread-safe, seeded, on its own clock."""

    def __init__(
        self,
        *,
        seed: int = 0,
        speed: float = 1.0,
        scenario_name: str = "realistic",
        start_epoch: float | None = None,
        page_size: int = 25,
        offer_count: int = DEFAULT_OFFERS,
        rate_limits: bool = True,
        public_host: str | None = None,
        port_allocator: PortAllocator | None = None,
        port_release: PortRelease | None = None,
        cuzk_hosts: CuzkGateway | None = None,
    ) -> None:
        self.lock = threading.RLock()
        self.seed = seed
        self.clock = SimClock(speed=speed, start_epoch=start_epoch)
        self.scenario = scenario_name
        self.faults: Faults = scenario(scenario_name)
        self.page_size = page_size
        #: vast.ai's documented per-endpoint limits; off only for tests that
        #: are not about pacing.
        self.rate_limits = rate_limits
        self.public_host = public_host
        self.port_allocator = port_allocator
        self.port_release = port_release
        self.cuzk_hosts = cuzk_hosts
        self._limiter = RateLimiter()
        self._market_rng = random.Random(f"{seed}:market")
        self._ids_rng = random.Random(f"{seed}:ids")
        self._fault_rng = random.Random(f"{seed}:faults")
        self._book = OfferBook(seed, offer_count, self._market_rng, self._ids_rng)
        self._offers: dict[int, SimOffer] = self._book.offers
        self._instances: dict[int, SimInstance] = {}
        self._envs: dict[int, InstanceEnv] = {}
        # The first id from the book's stream (a seed's market starts as it
        # always did), the ones after it from a stream of their own: drawn
        # from the book's, each rental changed the ids, and so the machines,
        # of every offer listed after it.
        self._next_instance_id = 20_000_000 + self._ids_rng.randrange(1_000_000)
        self._instance_ids_rng = random.Random(f"{seed}:instance-ids")
        self._last_call: dict[tuple[str, str], float] = {}
        self._rentals: list[tuple[int, str]] = []  # (instance, label), never pruned
        self._closed_charges: dict[int, dict[str, Any]] = {}
        self.counters: dict[str, int] = {
            "requests": 0,
            "rate_limited": 0,
            "creates": 0,
            "offers_taken": 0,
            "create_errors": 0,
            "create_hangs": 0,
            "create_delays": 0,
            "price_rises": 0,
            "transfer_price_rises": 0,
            "destroys": 0,
            "destroys_mid_proof": 0,
            "proofs_lost_to_destroys": 0,
        }
        self._book.fill(self.clock.now())

    # ------------------------------------------------------------- clock

    def now(self) -> float:
        """Current sim time."""
        return self.clock.now()

    def advance(self, seconds: float) -> float:
        """Move the clock forward by `seconds` of sim time; returns the new time."""
        with self.lock:
            now = self.clock.advance(seconds)
            self._sync()
        self._poke_cuzk()  # proofs on router-mode machines move with the clock
        return now

    def set_speed(self, speed: float) -> None:
        """Sim seconds per real second from now on."""
        with self.lock:
            self._sync()
            self.clock.set_speed(speed)
        self._poke_cuzk()

    # ------------------------------------------------------------ faults

    def set_faults(self, scenario_name: str | None = None, **changes: Any) -> Faults:
        """Switch to a scenario's faults, then apply `changes`; returns the result."""
        with self.lock:
            self._sync()
            base = scenario(scenario_name) if scenario_name else self.faults
            was_churning = self.faults.offer_churn
            new = base.updated(changes)
            if new.work_share != self.faults.work_share:
                # Every prover has proved at the old share up to now.
                now = self.clock.now()
                for inst in self._instances.values():
                    inst.machine.advance_to(now, self._env(inst))
            self.faults = new
            if scenario_name:
                self.scenario = scenario_name
            if self.faults.offer_churn and not was_churning:
                # Restart arrivals from now instead of replaying the paused time.
                self._book.restart_arrivals(self.clock.now())
            return self.faults

    def set_rate_limits(self, enabled: bool) -> None:
        """Switch vast.ai's documented rate limits on or off."""
        with self.lock:
            self.rate_limits = enabled

    # ------------------------------------------------------------ offers

    def _sync(self) -> None:
        """Bring the market up to the clock: offers arrive and leave, work
        arrives and is proved; destroyed instances past their linger time go."""
        now = self.clock.now()
        self._book.sync(now, churn=self.faults.offer_churn)
        self._demand_sync()  # before the drops: a dropped machine's work returns
        linger = self.faults.destroy_linger_s
        for inst in list(self._instances.values()):
            gone = inst.machine.destroyed_at
            if gone is not None and now >= gone + linger:
                self._drop(inst.id)

    def _drop(self, instance_id: int) -> None:
        inst = self._instances.pop(instance_id, None)
        if inst is not None:
            # Destroyed: its bill is final, and stays reported (GET /_sim/charges).
            self._closed_charges[instance_id] = charges(inst)
        self._envs.pop(instance_id, None)
        if self.port_release is not None:
            self.port_release(instance_id)
        if self.cuzk_hosts is not None:
            self.cuzk_hosts.release(instance_id)

    def search_offers(self, query: dict[str, Any]) -> list[dict[str, Any]]:
        """``POST /api/v0/bundles/``: the offers matching `query`, priced and ordered."""
        with self.lock:
            self._sync()
            offer_type = query.get("type", "on-demand")
            if offer_type == "interruptible":
                offer_type = "bid"
            if offer_type not in _SEARCH_TYPES:
                raise ApiError(400, "invalid_args", f"unknown offer type {offer_type!r}")
            storage = number(query.get("allocated_storage", 5.0), "allocated_storage")
            limit = int(number(query.get("limit", _DEFAULT_SEARCH_LIMIT), "limit"))
            limit = max(1, min(limit, _MAX_SEARCH_LIMIT))
            filters = {k: v for k, v in query.items() if k not in _SEARCH_CONTROL_KEYS}
            order = parse_search_order(query.get("order", [["score", "desc"]]))
            rows: list[dict[str, Any]] = []
            bid = offer_type == "bid"
            # Filters on the offer's own fields first, on the raw record: most
            # offers fail one, and then they are never copied or priced.
            # Long `in` lists last: a clause is only tested if the ones before held.
            static = dict(
                sorted(
                    ((k, v) for k, v in filters.items() if k not in _PRICED_FIELDS),
                    key=lambda kv: _clause_cost(kv[1]),
                )
            )
            priced = {k: v for k, v in filters.items() if k in _PRICED_FIELDS}
            known: frozenset[str] | None = None
            for offer in self._offers.values():
                if known is None:  # every offer has the same fields
                    known = frozenset(offer.fields) | _PRICED_FIELDS
                try:
                    if not matches(offer.fields, static, known_fields=known):
                        continue
                    row = dict(offer.fields)
                    row.update(offer_pricing(row, allocated_storage_gb=storage, bid=bid))
                    if matches(row, priced, known_fields=known):
                        rows.append(row)
                except QueryError as exc:
                    raise ApiError(400, "invalid_args", str(exc)) from None
            known = frozenset(rows[0]) if rows else frozenset()
            for name, _ in order:
                if known and name not in known:
                    raise ApiError(400, "invalid_args", f"cannot order by unknown field {name!r}")
            order_keys = [*order, ("id", False)]
            return _first(rows, order_keys, limit)

    # --------------------------------------------------------- instances

    def rent(self, offer_id: int, body: dict[str, Any]) -> RentResult:
        """``PUT /api/v0/asks/{offer_id}/``: rent the offer, or raise `ApiError`."""
        request = parse_rent_body(body)
        with self.lock:
            self._sync()
            self.counters["creates"] += 1
            offer = self._offers.get(offer_id)
            offer = offer if offer is not None and _rentable(offer.fields) else None
            # A rental's faults are rolled on a stream of its own, keyed by the
            # offer (rented once at most): on the market's stream, which every
            # request's rate-limit roll draws from, one listing more or less
            # anywhere changed the fate of every later rental.
            rolls = random.Random(f"{self.seed}:rent:{offer_id}")
            if offer is not None and self._fault("offer_taken", rolls):
                # Someone else rented it between our search and this request.
                del self._offers[offer_id]
                self.counters["offers_taken"] += 1
                offer = None
            if offer is None:
                raise ApiError(
                    404, "no_such_ask", f"Instance type by id {offer_id} is not available."
                )
            fields = offer.fields
            if request["disk"] > fields["disk_space"]:
                raise ApiError(
                    400,
                    "invalid_args",
                    f"disk {request['disk']} GB exceeds the {fields['disk_space']} GB available",
                )
            price = request["price"]
            if price is not None and price < fields["min_bid"]:
                raise ApiError(
                    400, "invalid_args", f"bid {price} is below the minimum {fields['min_bid']}"
                )
            now = self.clock.now()
            instance_id = self._next_instance_id
            self._next_instance_id += self._instance_ids_rng.randint(1, 60)
            rng = random.Random(f"{self.seed}:instance:{instance_id}")
            reliability = float(fields["reliability2"])
            flaky = (1.0 - reliability) if self.faults.reliability_failures else 0.0
            stuck = self._fault("stuck_loading", rolls)
            boot_fail = not stuck and (self._fault("boot_fail", rolls) or rng.random() < flaky)
            die_after = self.faults.die_after_s if self._fault("die", rolls) else None
            outbid_after = None
            if price is not None and self._fault("outbid", rolls):
                outbid_after = self.faults.outbid_after_s
            prover_fault = next(
                (k for k in ("cuda_error", "oom", "prover_stuck") if self._fault(k, rolls)), None
            )
            fate = draw_fate(
                rng,
                inet_down=float(fields["inet_down"]),
                stuck=stuck,
                boot_fail=boot_fail,
                die_after_s=die_after,
                outbid_after_s=outbid_after,
                prover_fault="stuck" if prover_fault == "prover_stuck" else prover_fault,
                prover_fault_after_s=self.faults.prover_fault_after_s,
            )
            machine = Machine.rent(
                fate,
                rng,
                now=now,
                image=request["image"],
                runtype=request["runtype"],
                disk_gb=request["disk"],
                starts_prover=starts_prover(request["runtype"], request["onstart"]),
            )
            billed = dict(fields)
            if self._fault("price_rise", rolls):
                billed["dph_base"] = round(fields["dph_base"] * self.faults.price_rise_factor, 6)
                self.counters["price_rises"] += 1
            if self._fault("transfer_price_rise", rolls):
                factor = self.faults.transfer_price_rise_factor
                billed["inet_down_cost"] = round(fields["inet_down_cost"] * factor, 6)
                self.counters["transfer_price_rises"] += 1
            inst = SimInstance(
                id=instance_id,
                offer=billed,
                machine=machine,
                label=request["label"],
                onstart=request["onstart"],
                env=request["env"],
                bid_price=price,
                ssh_port=10_000 + instance_id % 50_000,
            )
            self._map_ports(inst)
            self._instances[instance_id] = inst
            del self._offers[offer_id]
            self._rentals.append((instance_id, request["label"] or ""))
            answer: Literal["ok", "server_error", "hang"] = "ok"
            if self._fault("create_error", rolls):
                answer = "server_error"
                self.counters["create_errors"] += 1
            elif self._fault("create_hang", rolls):
                answer = "hang"
                self.counters["create_hangs"] += 1
            return RentResult(instance_id, answer)

    def listed_offers(self) -> list[dict[str, Any]]:
        """Every offer listed right now, unpriced, whatever its fields (for tests)."""
        with self.lock:
            self._sync()
            return [dict(o.fields) for o in self._offers.values()]

    def offer_ids(self) -> list[int]:
        """Ids of the offers listed right now."""
        with self.lock:
            self._sync()
            return sorted(self._offers)


def _first(
    rows: list[dict[str, Any]], order: list[tuple[str, bool]], limit: int
) -> list[dict[str, Any]]:
    """The first `limit` rows in `order`, as `sort_records` orders them.

    Numbers (and None, which sorts first ascending) get a plain key and a
    partial sort, which is what keeps a search of 10,000 offers fast; any
    other value falls back to `sort_records`. `order` ends with the id, so
    the order is total and both give the same rows."""
    fields = [name for name, _ in order]
    for row in rows:
        for name in fields:
            value = row.get(name)
            if value is not None and not isinstance(value, int | float):
                return sort_records(rows, order)[:limit]

    def key(row: dict[str, Any]) -> tuple[tuple[int, float], ...]:
        parts = []
        for name, desc in order:
            value = row.get(name)
            if value is None:
                parts.append((1, 0.0) if desc else (0, 0.0))
            else:
                parts.append((0, -float(value)) if desc else (1, float(value)))
        return tuple(parts)

    return heapq.nsmallest(limit, rows, key=key)


def _clause_cost(clause: Any) -> int:
    """How many values a filter clause compares with (its lists' lengths)."""
    if not isinstance(clause, dict):
        return 0
    return sum(len(v) if isinstance(v, list) else 1 for v in clause.values())


def _rentable(fields: dict[str, Any]) -> bool:
    """Listed offers can still be out of reach: rented, or not rentable."""
    return bool(fields.get("rentable", True)) and not fields.get("rented", False)
