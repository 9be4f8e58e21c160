"""The simulated vast.ai account and market: offers, instances, faults.

`Market` is the model behind the HTTP server and the thing tests drive
directly (`advance`, `kill`, `set_faults`). Every public method takes the one
`lock`, so the threaded server can call it from any request thread.

Randomness comes from separate streams derived from the seed: the market's
arrivals, id assignment, fault rolls, and one stream per instance. With
``speed=0`` and the same calls, two markets with one seed behave identically.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass
from typing import Any, Literal

from .catalogue import gpu_names, make_offer, offer_pricing
from .clock import SimClock
from .faults import Faults, scenario
from .instances import KILL_STATUSES, SimInstance, draw_fate
from .query import QueryError, after_token, decode_token, encode_token, matches, sort_records

__all__ = ["ApiError", "Market", "RentResult"]

#: Offers listed at start, and roughly kept by arrivals balancing departures.
INITIAL_OFFERS = 80
_MEAN_OFFER_LIFETIME_S = 2 * 3600.0
_MEAN_ARRIVAL_S = _MEAN_OFFER_LIFETIME_S / INITIAL_OFFERS
_DEFAULT_SEARCH_LIMIT = 64
_MAX_SEARCH_LIMIT = 1000
_SEARCH_TYPES = frozenset({"on-demand", "bid", "reserved"})
# Keys of a search body that are not field filters.
_SEARCH_CONTROL_KEYS = frozenset(
    {"order", "type", "limit", "allocated_storage", "q", "disable_bundling"}
)


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


@dataclass(slots=True)
class _Offer:
    fields: dict[str, Any]
    expires_at: float


class Market:
    """The model: thread-safe, seeded, on its own clock."""

    def __init__(
        self,
        *,
        seed: int = 0,
        speed: float = 1.0,
        scenario_name: str = "realistic",
        start_epoch: float | None = None,
        page_size: int = 25,
    ) -> None:
        self.lock = threading.RLock()
        self.seed = seed
        self.clock = SimClock(speed=speed, start_epoch=start_epoch)
        self.scenario = scenario_name
        self.faults: Faults = scenario(scenario_name)
        self.page_size = page_size
        self._market_rng = random.Random(f"{seed}:market")
        self._ids_rng = random.Random(f"{seed}:ids")
        self._fault_rng = random.Random(f"{seed}:faults")
        self._offers: dict[int, _Offer] = {}
        self._instances: dict[int, SimInstance] = {}
        self._next_offer_id = 8_000_000 + self._ids_rng.randrange(1_000_000)
        self._next_machine_id = 10_000 + self._ids_rng.randrange(20_000)
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
        now = self.clock.now()
        for _ in range(INITIAL_OFFERS):
            self._list_offer(now)
        self._next_arrival_at = now + self._market_rng.expovariate(1.0 / _MEAN_ARRIVAL_S)

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
                now = self.clock.now()
                self._next_arrival_at = now + self._market_rng.expovariate(1.0 / _MEAN_ARRIVAL_S)
            return self.faults

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
        """Whether an API request gets through the rate limiter (False = 429)."""
        with self.lock:
            self.counters["requests"] += 1
            limited = self._fault("rate_limit")
            interval = self.faults.min_interval_s
            if not limited and interval > 0:
                key = (route, identity)
                real_now = time.monotonic()
                last = self._last_call.get(key)
                limited = last is not None and real_now - last < interval
                if not limited:
                    self._last_call[key] = real_now
            if limited:
                self.counters["rate_limited"] += 1
            return not limited

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

    def _list_offer(self, now: float) -> None:
        offer_id = self._next_offer_id
        self._next_offer_id += self._ids_rng.randint(1, 40)
        machine_id = self._next_machine_id
        self._next_machine_id += self._ids_rng.randint(1, 9)
        fields = make_offer(self._market_rng, offer_id, machine_id, now)
        lifetime = self._market_rng.expovariate(1.0 / _MEAN_OFFER_LIFETIME_S)
        self._offers[offer_id] = _Offer(fields, now + lifetime)

    def _sync(self) -> None:
        """Bring the market up to the clock: new offers in, rented-away offers out."""
        now = self.clock.now()
        if not self.faults.offer_churn:
            return
        while self._next_arrival_at <= now:
            at = self._next_arrival_at
            self._list_offer(at)
            self._next_arrival_at = at + self._market_rng.expovariate(1.0 / _MEAN_ARRIVAL_S)
        for offer_id in [i for i, o in self._offers.items() if o.expires_at <= now]:
            del self._offers[offer_id]

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
            die_after: float | None = None
            if self._fault("die"):
                die_after = self.faults.die_after_s
            else:
                # A 0.97-reliable host loses about one rental in 70 days of its own.
                hazard = self.faults.death_rate_per_hour + 0.05 * flaky
                if hazard > 0:
                    die_after = rng.expovariate(hazard / 3600.0)
            fate = draw_fate(
                rng,
                inet_down=float(fields["inet_down"]),
                stuck=stuck,
                boot_fail=boot_fail,
                die_after_s=die_after,
            )
            self._instances[instance_id] = SimInstance(
                id=instance_id,
                offer=dict(fields),
                created_at=now,
                fate=fate,
                image=request["image"],
                disk=request["disk"],
                label=request["label"],
                onstart=request["onstart"],
                env=request["env"],
                runtype=request["runtype"],
                bid_price=price,
                ssh_port=10_000 + instance_id % 50_000,
            )
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

    def show_instance(self, instance_id: int) -> dict[str, Any] | None:
        """``GET /api/v0/instances/{id}/``: the instance, or None once destroyed."""
        with self.lock:
            self._sync()
            inst = self._instances.get(instance_id)
            return inst.view(self.clock.now()) if inst is not None else None

    def destroy_instance(self, instance_id: int) -> None:
        """``DELETE /api/v0/instances/{id}/``: it is gone at once."""
        with self.lock:
            self._sync()
            if self._instances.pop(instance_id, None) is None:
                raise ApiError(404, "no_such_instance", f"Instance {instance_id} not found.")
            self.counters["destroys"] += 1

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
            now = self.clock.now()
            views = [inst.view(now) for inst in self._instances.values()]
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
            now = self.clock.now()
            combos = {
                (v["actual_status"], v["verification"], v["gpu_name"])
                for v in (i.view(now) for i in self._instances.values())
            }
            return [
                {"actual_status": s, "verification": ver, "gpu_name": g}
                for s, ver, g in sorted(combos, key=str)
            ]

    # ----------------------------------------------------------- control

    def kill(self, instance_id: int, status: str = "exited", msg: str | None = None) -> None:
        """Make an instance die now with `status` (``exited``/``offline``/``unknown``)."""
        if status not in KILL_STATUSES:
            raise ValueError(f"status must be one of {sorted(KILL_STATUSES)}")
        with self.lock:
            self._sync()
            inst = self._instances.get(instance_id)
            if inst is None:
                raise KeyError(instance_id)
            inst.kill(self.clock.now(), status, msg or f"killed by simulator ({status})")

    def rentals_by_label(self) -> dict[str, list[int]]:
        """Every rental since the start, destroyed ones included: label → instance ids.

        A label with two ids is a duplicate rental, even if one was destroyed
        since (what the chaos suite counts)."""
        with self.lock:
            by_label: dict[str, list[int]] = {}
            for instance_id, label in self._rentals:
                by_label.setdefault(label, []).append(instance_id)
            return by_label

    def offer_ids(self) -> list[int]:
        """Ids of the offers listed right now."""
        with self.lock:
            self._sync()
            return sorted(self._offers)

    def instance_ids(self) -> list[int]:
        """Ids of the account's instances right now."""
        with self.lock:
            self._sync()
            return sorted(self._instances)

    def state(self) -> dict[str, Any]:
        """Everything a test or the demo may want to look at, as JSON-ready data."""
        with self.lock:
            self._sync()
            now = self.clock.now()
            by_gpu: dict[str, int] = dict.fromkeys(gpu_names(), 0)
            for offer in self._offers.values():
                name = offer.fields["gpu_name"]
                by_gpu[name] = by_gpu.get(name, 0) + 1
            instances = [i.view(now) for i in self._instances.values()]
            return {
                "now": now,
                "speed": self.clock.speed,
                "seed": self.seed,
                "scenario": self.scenario,
                "faults": self.faults.to_dict(),
                "offers": len(self._offers),
                "offers_by_gpu": by_gpu,
                "instances": instances,
                "proofs_per_hour": round(sum(v["proofs_per_hour"] for v in instances), 3),
                # GPU charges run only while running; storage from creation on.
                "spend_per_hour": round(sum(_spend(v) for v in instances), 4),
                "counters": dict(self.counters),
            }


# ------------------------------------------------------------------ parsing


def _spend(view: dict[str, Any]) -> float:
    """$/hour an instance costs now: GPU only while running, storage always."""
    if view["actual_status"] == "running":
        return float(view["dph_total"])
    return float(view["storage_total_cost"])


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
