"""The simulated vast.ai account and market: offers, instances, faults.

`Market` is the model behind the HTTP server and the thing tests drive
directly (`advance`, `kill`, `set_faults`, `set_instance_state`). Every public
method takes the one `lock`, so the threaded server can call it from any
request thread.

Randomness comes from separate streams derived from the seed: the market's
arrivals, id assignment, fault rolls, one stream per offer and one per
instance. With ``speed=0`` and the same calls, two markets with one seed
behave identically. `to_json`/`load_json` save and restore all of it
(`fleet_agent.sim.persist` writes the file).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from .catalogue import offer_pricing
from .clock import SimClock
from .control import MarketControls
from .faults import Faults, scenario
from .instances import InstanceEnv, SimInstance, container_ports
from .lifecycle import Machine, draw_fate
from .offers import OfferBook, SimOffer
from .prover import starts_prover, status_port
from .query import QueryError, after_token, decode_token, encode_token, matches, sort_records
from .ratelimit import Limit, RateLimiter

__all__ = ["DEFAULT_OFFERS", "ApiError", "Market", "RentResult"]

#: Offers listed at start, and kept by arrivals balancing departures: about
#: the size of vast.ai's market.
DEFAULT_OFFERS = 10_000
_DEFAULT_SEARCH_LIMIT = 64
_MAX_SEARCH_LIMIT = 1000
_SEARCH_TYPES = frozenset({"on-demand", "bid", "reserved"})
# Keys of a search body that are not field filters.
_SEARCH_CONTROL_KEYS = frozenset(
    {"order", "type", "limit", "allocated_storage", "q", "disable_bundling"}
)
#: The 429 text of the `rate_limit` fault (a generic burst, as the docs word it).
_BURST_429_TEXT = "API requests too frequent"

#: Allocates a host port for an instance's prover status endpoint (the server's
#: gateway; the preferred port when restoring a saved state), and releases it
#: when the instance is gone.
PortAllocator = Callable[[int, int | None], int]
PortRelease = Callable[[int], None]


class ApiError(Exception):
    """An error answer: status, and a JSON ``{success, error, msg}`` body unless `text`."""

    def __init__(self, status: int, error: str, msg: str, *, text: bool = False) -> None:
        super().__init__(msg)
        self.status = status
        self.error = error
        self.msg = msg
        self.text = text

    def body(self) -> dict[str, Any]:
        """The JSON body the service sends with this error."""
        return {"success": False, "error": self.error, "msg": self.msg}


@dataclass(frozen=True, slots=True)
class RentResult:
    """A successful rent, and how the server must answer it (a fault may lie)."""

    instance_id: int
    answer: Literal["ok", "server_error", "hang"]


@dataclass(frozen=True, slots=True)
class Refusal:
    """A 429: the message, and whether the endpoint answers it as JSON."""

    msg: str
    json_body: bool = False


class Market(MarketControls):
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
        self._limiter = RateLimiter()
        self._market_rng = random.Random(f"{seed}:market")
        self._ids_rng = random.Random(f"{seed}:ids")
        self._fault_rng = random.Random(f"{seed}:faults")
        self._book = OfferBook(seed, offer_count, self._market_rng, self._ids_rng)
        self._offers: dict[int, SimOffer] = self._book.offers
        self._instances: dict[int, SimInstance] = {}
        self._envs: dict[int, InstanceEnv] = {}
        self._next_instance_id = 20_000_000 + self._ids_rng.randrange(1_000_000)
        self._last_call: dict[tuple[str, str], float] = {}
        self._rentals: list[tuple[int, str]] = []  # (instance, label), never pruned
        self.counters: dict[str, int] = {
            "requests": 0,
            "rate_limited": 0,
            "creates": 0,
            "offers_taken": 0,
            "create_errors": 0,
            "create_hangs": 0,
            "create_delays": 0,
            "destroys": 0,
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
            return now

    def set_speed(self, speed: float) -> None:
        """Sim seconds per real second from now on."""
        with self.lock:
            self._sync()
            self.clock.set_speed(speed)

    # ------------------------------------------------------------ faults

    def set_faults(self, scenario_name: str | None = None, **changes: Any) -> Faults:
        """Switch to a scenario's faults, then apply `changes`; returns the result."""
        with self.lock:
            self._sync()
            base = scenario(scenario_name) if scenario_name else self.faults
            was_churning = self.faults.offer_churn
            self.faults = base.updated(changes)
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

    def _fault(self, name: str) -> bool:
        """Spend one ``<name>_next`` or roll ``<name>_rate``. Caller holds the lock."""
        counter = f"{name}_next"
        left = getattr(self.faults, counter, 0)
        if left > 0:
            setattr(self.faults, counter, left - 1)
            return True
        rate = float(getattr(self.faults, f"{name}_rate", 0.0))
        return rate > 0 and self._fault_rng.random() < rate

    def admit(self, route: str, identity: str) -> bool:
        """Whether an API request gets through the fault limiter (False = 429).

        `route` is ``"<METHOD> <name>"``; see `admit_request` for the real limits."""
        method, _, name = route.partition(" ")
        return self.admit_request(method, name, identity) is None

    def admit_request(self, method: str, route: str, identity: str) -> Refusal | None:
        """None if an API request gets through, else why it is refused (429).

        Faults first (a `rate_limit` burst, `min_interval_s`), then vast.ai's
        documented per-endpoint limits (`fleet_agent.sim.ratelimit`) when on.
        Identity is whatever the client presented (its key, or its address)."""
        with self.lock:
            self.counters["requests"] += 1
            refusal: Refusal | None = None
            if self._fault("rate_limit"):
                refusal = Refusal(_BURST_429_TEXT)
            interval = self.faults.min_interval_s
            if refusal is None and interval > 0:
                key = (f"{method} {route}", identity)
                real_now = time.monotonic()
                last = self._last_call.get(key)
                if last is not None and real_now - last < interval:
                    refusal = Refusal(_BURST_429_TEXT)
                else:
                    self._last_call[key] = real_now
            if refusal is None and self.rate_limits:
                limit = self._limiter.check(method, route, identity)
                if limit is not None:
                    refusal = _refusal(limit)
            if refusal is not None:
                self.counters["rate_limited"] += 1
            return refusal

    def create_delay(self) -> float:
        """Real seconds a rent request waits before it is processed (0: none)."""
        with self.lock:
            if not self._fault("create_delay"):
                return 0.0
            self.counters["create_delays"] += 1
            return self.faults.create_delay_seconds

    def list_error(self) -> bool:
        """Whether this v1 list answers ``success: false``."""
        with self.lock:
            return self._fault("list_error")

    # ------------------------------------------------------------ offers

    def _sync(self) -> None:
        """Bring the market up to the clock: offers arrive and leave; destroyed
        instances past their linger time are dropped."""
        now = self.clock.now()
        self._book.sync(now, churn=self.faults.offer_churn)
        linger = self.faults.destroy_linger_s
        for inst in list(self._instances.values()):
            gone = inst.machine.destroyed_at
            if gone is not None and now >= gone + linger:
                self._drop(inst.id)

    def _drop(self, instance_id: int) -> None:
        self._instances.pop(instance_id, None)
        self._envs.pop(instance_id, None)
        if self.port_release is not None:
            self.port_release(instance_id)

    def search_offers(self, query: dict[str, Any]) -> list[dict[str, Any]]:
        """``POST /api/v0/bundles/``: the offers matching `query`, priced and ordered."""
        with self.lock:
            self._sync()
            offer_type = query.get("type", "on-demand")
            if offer_type == "interruptible":
                offer_type = "bid"
            if offer_type not in _SEARCH_TYPES:
                raise ApiError(400, "invalid_args", f"unknown offer type {offer_type!r}")
            storage = _number(query.get("allocated_storage", 5.0), "allocated_storage")
            limit = int(_number(query.get("limit", _DEFAULT_SEARCH_LIMIT), "limit"))
            limit = max(1, min(limit, _MAX_SEARCH_LIMIT))
            filters = {k: v for k, v in query.items() if k not in _SEARCH_CONTROL_KEYS}
            order = _parse_search_order(query.get("order", [["score", "desc"]]))
            rows: list[dict[str, Any]] = []
            bid = offer_type == "bid"
            for offer in self._offers.values():
                row = dict(offer.fields)
                row.update(offer_pricing(row, allocated_storage_gb=storage, bid=bid))
                try:
                    if matches(row, filters):
                        rows.append(row)
                except QueryError as exc:
                    raise ApiError(400, "invalid_args", str(exc)) from None
            known = frozenset(rows[0]) if rows else frozenset()
            for name, _ in order:
                if known and name not in known:
                    raise ApiError(400, "invalid_args", f"cannot order by unknown field {name!r}")
            order_keys = [*order, ("id", False)]
            return sort_records(rows, order_keys)[:limit]

    # --------------------------------------------------------- instances

    def rent(self, offer_id: int, body: dict[str, Any]) -> RentResult:
        """``PUT /api/v0/asks/{offer_id}/``: rent the offer, or raise `ApiError`."""
        request = _parse_rent_body(body)
        with self.lock:
            self._sync()
            self.counters["creates"] += 1
            offer = self._offers.get(offer_id)
            offer = offer if offer is not None and _rentable(offer.fields) else None
            if offer is not None and self._fault("offer_taken"):
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
            self._next_instance_id += self._ids_rng.randint(1, 60)
            rng = random.Random(f"{self.seed}:instance:{instance_id}")
            reliability = float(fields["reliability2"])
            flaky = (1.0 - reliability) if self.faults.reliability_failures else 0.0
            stuck = self._fault("stuck_loading")
            boot_fail = not stuck and (self._fault("boot_fail") or rng.random() < flaky)
            die_after = self.faults.die_after_s if self._fault("die") else None
            outbid_after = None
            if price is not None and self._fault("outbid"):
                outbid_after = self.faults.outbid_after_s
            prover_fault = next(
                (k for k in ("cuda_error", "oom", "prover_stuck") if self._fault(k)), None
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
            inst = SimInstance(
                id=instance_id,
                offer=dict(fields),
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
            if self._fault("create_error"):
                answer = "server_error"
                self.counters["create_errors"] += 1
            elif self._fault("create_hang"):
                answer = "hang"
                self.counters["create_hangs"] += 1
            return RentResult(instance_id, answer)

    def _map_ports(self, inst: SimInstance) -> None:
        """Host ports for the container's ports, if the host has direct ports.

        The prover's status port is a real listener when the server runs a
        gateway (`port_allocator`); the others are numbers nobody answers on."""
        wanted = container_ports(inst.machine.runtype, inst.env)
        if int(inst.offer.get("direct_port_count") or 0) < len(wanted):
            return  # no open ports: only vast.ai's SSH proxy reaches it
        prover = f"{status_port(inst.env)}/tcp"
        ports: dict[str, int] = {}
        for n, name in enumerate(wanted):
            if name == prover and self.port_allocator is not None:
                ports[name] = self.port_allocator(inst.id, None)
            else:
                ports[name] = 20_000 + (inst.id * 7 + n * 131) % 40_000
        inst.host_ports = ports
        inst.public_ip = self.public_host or ""

    def _remap_prover_port(self, inst: SimInstance) -> None:
        """After a restore: listen again for the prover, on its old port if free."""
        name = f"{status_port(inst.env)}/tcp"
        if name in inst.host_ports and self.port_allocator is not None:
            inst.host_ports[name] = self.port_allocator(inst.id, inst.host_ports[name])
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

    def destroy_instance(self, instance_id: int) -> None:
        """``DELETE /api/v0/instances/{id}/``: released now; listed with
        ``cur_state: unloaded`` for the `destroy_linger_s` fault, then gone."""
        with self.lock:
            self._sync()
            inst = self._instances.get(instance_id)
            if inst is None or inst.machine.destroyed_at is not None:
                raise ApiError(404, "no_such_instance", f"Instance {instance_id} not found.")
            inst.machine.destroy(self.clock.now(), self._env(inst))
            self.counters["destroys"] += 1
            if self.faults.destroy_linger_s <= 0:
                self._drop(instance_id)

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
            order = _parse_v1_order(order_by)
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

    def instance_ids(self) -> list[int]:
        """Ids of the account's instances listed right now (destroyed ones
        still lingering included)."""
        with self.lock:
            self._sync()
            return sorted(self._instances)


def _refusal(limit: Limit) -> Refusal:
    msg = f"API requests too frequent endpoint threshold={limit.threshold}"
    return Refusal(msg, limit.json_body)


def _rentable(fields: dict[str, Any]) -> bool:
    """Listed offers can still be out of reach: rented, or not rentable."""
    return bool(fields.get("rentable", True)) and not fields.get("rented", False)


# ------------------------------------------------------------------ parsing


def _number(value: Any, name: str) -> float:
    try:
        if isinstance(value, bool):
            raise TypeError
        return float(value)
    except (TypeError, ValueError):
        raise ApiError(400, "invalid_args", f"{name} must be a number") from None


def _parse_search_order(raw: Any) -> list[tuple[str, bool]]:
    if not isinstance(raw, list):
        raise ApiError(400, "invalid_args", "order must be a list of [field, direction]")
    order: list[tuple[str, bool]] = []
    for item in raw:
        if (
            not isinstance(item, list | tuple)
            or len(item) != 2
            or not isinstance(item[0], str)
            or item[1] not in ("asc", "desc")
        ):
            raise ApiError(400, "invalid_args", f"bad order item {item!r}")
        order.append((item[0], item[1] == "desc"))
    return order


def _parse_v1_order(raw: list[dict[str, Any]]) -> list[tuple[str, bool]]:
    order: list[tuple[str, bool]] = []
    for item in raw:
        if not isinstance(item, dict) or not isinstance(item.get("col"), str):
            raise ApiError(400, "invalid_args", f"bad order_by item {item!r}")
        direction = str(item.get("dir", "asc")).lower()
        if direction not in ("asc", "desc"):
            raise ApiError(400, "invalid_args", f"bad order_by direction {direction!r}")
        order.append((item["col"], direction == "desc"))
    if not any(col == "id" for col, _ in order):
        order.append(("id", False))  # a total order, so the cursor is exact
    return order


def _parse_rent_body(body: dict[str, Any]) -> dict[str, Any]:
    image = body.get("image")
    if not body.get("template_hash_id") and (not isinstance(image, str) or not image.strip()):
        raise ApiError(400, "invalid_args", "image is required")
    disk = _number(body.get("disk", 8.0), "disk")
    if disk <= 0:
        raise ApiError(400, "invalid_args", "disk must be > 0")
    label = body.get("label")
    if label is not None and not isinstance(label, str):
        raise ApiError(400, "invalid_args", "label must be a string")
    onstart = body.get("onstart")
    if onstart is not None and not isinstance(onstart, str):
        raise ApiError(400, "invalid_args", "onstart must be a string")
    env = body.get("env") or {}
    if not isinstance(env, dict):
        raise ApiError(400, "invalid_args", "env must be an object")
    runtype = body.get("runtype")
    price = body.get("price")
    return {
        "image": image if isinstance(image, str) else f"template:{body.get('template_hash_id')}",
        "disk": disk,
        "label": label,
        "onstart": onstart,
        "env": {str(k): str(v) for k, v in env.items()},
        "runtype": runtype if isinstance(runtype, str) else None,
        "price": None if price is None else _number(price, "price"),
    }
