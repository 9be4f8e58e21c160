"""The simulator's HTTP surface as plain functions: request in, `Reply` out.

This module knows the service's paths, payloads, auth and error shapes; the
socket plumbing lives in `fleet_agent.sim.server`. Routes (trailing slash
optional, as on the service):

* public: ``GET /api/v0/gpu_names/unique/``, ``GET /api/v0/gpu_types/``
* ``GET /api/v0/users/current/`` (the vastai CLI asks it once per config dir)
* ``POST /api/v0/bundles/`` (and legacy ``GET ...?q=<json>``): search offers
* ``PUT /api/v0/asks/{id}/``: rent
* ``GET /api/v1/instances/``: paginated list; ``GET /api/v0/instances/`` is gone (410)
* ``GET /api/v0/instances/filters/``, ``GET|DELETE /api/v0/instances/{id}/``
* ``PUT /api/v0/instances/{id}/`` (stop, start, label), ``PUT /api/v0/instances/reboot/{id}/``
* control, no auth: ``GET /_sim/state``, ``POST /_sim/advance``, ``POST /_sim/speed``,
  ``POST /_sim/faults``, ``POST /_sim/kill/{id}``, ``POST /_sim/instances/{id}/{action}``,
  ``POST /_sim/prover/{id}``, ``POST /_sim/rate-limits``

Every authenticated request first passes the rate limiter (`_rate_limited`).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

from .catalogue import gpu_names, gpu_types
from .market import ApiError, Market

__all__ = ["RATE_LIMIT_TEXT", "Headers", "Reply", "SimApi"]

RATE_LIMIT_TEXT = "API requests too frequent"
INVALID_KEY = "Invalid user key"
# Routes that answer a missing or wrong key with a 404 (the search's openapi
# file documents 404 "Invalid user key"); the others answer 401 auth_error.
_AUTH_404_ROUTES = frozenset({"bundles"})


@dataclass(frozen=True, slots=True)
class Reply:
    """One answer: JSON `body`, or plain `text`; sent after `delay_s` real seconds."""

    status: int
    body: Any = None
    text: str | None = None
    delay_s: float = 0.0


@dataclass(frozen=True, slots=True)
class _Request:
    method: str
    path: str
    params: dict[str, str]
    body: Any
    match: re.Match[str]


_Handler = Callable[["SimApi", _Request], Reply]


class Headers(Protocol):
    """What the API reads from request headers (``http.client.HTTPMessage`` fits)."""

    def get(self, name: str, /) -> str | None:
        """The header's value, or None."""


def _sleep(seconds: float) -> bool:
    time.sleep(seconds)
    return False


def _json_param(params: Mapping[str, str], name: str, default: Any) -> Any:
    raw = params.get(name)
    if raw is None or raw == "":
        return default
    try:
        return json.loads(raw)
    except ValueError:
        raise ApiError(400, "invalid_args", f"{name} must be JSON") from None


class SimApi:
    """Routes requests to the `Market`, checking the key and the rate limiter."""

    def __init__(
        self,
        market: Market,
        api_key: str,
        *,
        wait: Callable[[float], bool] | None = None,
    ) -> None:
        """`wait(seconds)` sleeps in a request thread and returns True if the
        server is stopping meanwhile (default: a plain sleep)."""
        if not api_key:
            raise ValueError("the simulator needs an API key to check")
        self.market = market
        self._api_key = api_key
        self._wait = wait or _sleep
        # (method, compiled path, route name for the limiter, handler, needs auth)
        self._routes: list[tuple[str, re.Pattern[str], str, _Handler, bool]] = [
            ("GET", re.compile(r"/api/v0/gpu_names/unique/"), "gpus", SimApi._gpu_names, False),
            ("GET", re.compile(r"/api/v0/gpu_types/"), "gpu_types", SimApi._gpu_types, False),
            ("GET", re.compile(r"/api/v0/users/current/"), "user", SimApi._user, True),
            ("POST", re.compile(r"/api/v0/bundles/"), "bundles", SimApi._search, True),
            ("GET", re.compile(r"/api/v0/bundles/"), "bundles", SimApi._search_get, True),
            ("PUT", re.compile(r"/api/v0/asks/(?P<id>\d+)/"), "asks", SimApi._rent, True),
            ("GET", re.compile(r"/api/v1/instances/"), "instances_v1", SimApi._list, True),
            ("GET", re.compile(r"/api/v0/instances/"), "instances_v0", SimApi._list_v0, True),
            ("GET", re.compile(r"/api/v0/instances/filters/"), "filters", SimApi._filters, True),
            ("GET", re.compile(r"/api/v0/instances/(?P<id>\d+)/"), "instance", SimApi._show, True),
            (
                "DELETE",
                re.compile(r"/api/v0/instances/(?P<id>\d+)/"),
                "instance",
                SimApi._destroy,
                True,
            ),
            ("GET", re.compile(r"/_sim/state/"), "_sim", SimApi._sim_state, False),
            ("POST", re.compile(r"/_sim/advance/"), "_sim", SimApi._sim_advance, False),
            ("POST", re.compile(r"/_sim/speed/"), "_sim", SimApi._sim_speed, False),
            ("POST", re.compile(r"/_sim/faults/"), "_sim", SimApi._sim_faults, False),
            ("POST", re.compile(r"/_sim/kill/(?P<id>\d+)/"), "_sim", SimApi._sim_kill, False),
            *self._instance_routes(),
        ]

    # ----------------------------------------------------------- dispatch

    def handle(
        self, method: str, target: str, headers: Headers, raw_body: bytes, client: str
    ) -> Reply:
        """Answer one HTTP request (`target` is the request line's path and query)."""
        parts = urlsplit(target)
        path = parts.path if parts.path.endswith("/") else parts.path + "/"
        params = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        route = None
        path_known = False
        for r_method, pattern, name, handler, auth in self._routes:
            m = pattern.fullmatch(path)
            if m is None:
                continue
            path_known = True
            if r_method == method:
                route = (name, handler, auth, m)
                break
        if route is None:
            # Like a web framework's defaults: plain text, not the API's JSON.
            return (
                Reply(405, text="Method Not Allowed")
                if path_known
                else Reply(404, text="Not Found")
            )
        name, handler, auth, match = route
        try:
            if auth:
                key = self._presented_key(headers, params)
                # The limiter runs before auth: it keys on whatever was presented.
                limited = self._rate_limited(method, name, key or client)
                if limited is not None:
                    return limited
                if key != self._api_key and name in _AUTH_404_ROUTES:
                    # Only a msg, no error code: the documented minimum.
                    return Reply(404, {"success": False, "msg": INVALID_KEY})
                if not key:
                    raise ApiError(401, "auth_error", "Please log in or sign up")
                if key != self._api_key:
                    raise ApiError(401, "auth_error", INVALID_KEY)
            body = self._decode_body(method, raw_body)
            return handler(self, _Request(method, path, params, body, match))
        except ApiError as exc:
            if exc.text:
                return Reply(exc.status, text=exc.msg)
            return Reply(exc.status, body=exc.body())

    @staticmethod
    def _presented_key(headers: Headers, params: Mapping[str, str]) -> str | None:
        auth = headers.get("Authorization") or ""
        scheme, _, token = auth.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
        legacy = params.get("api_key")  # the old ?api_key= form still works
        return legacy or None

    @staticmethod
    def _decode_body(method: str, raw: bytes) -> Any:
        if method in ("GET", "HEAD") or not raw.strip():
            return None
        try:
            return json.loads(raw)
        except ValueError:
            raise ApiError(400, "invalid_args", "request body is not valid JSON") from None

    # ------------------------------------------------------------- public

    def _gpu_names(self, req: _Request) -> Reply:
        return Reply(200, {"gpu_names": gpu_names()})

    def _gpu_types(self, req: _Request) -> Reply:
        return Reply(200, {"gpu_types": gpu_types()})

    def _user(self, req: _Request) -> Reply:
        return Reply(
            200,
            {
                "id": 4242,
                "username": "sim-user",
                "email": "sim-user@example.invalid",
                "fullname": "Simulated User",
                "balance": 0.0,
                "credit": 500.0,
                "can_pay": True,
                "has_billing": True,
                "email_verified": True,
                "host_agreement_accepted": False,
            },
        )

    # ------------------------------------------------------------- offers

    def _search(self, req: _Request) -> Reply:
        if not isinstance(req.body, dict):
            raise ApiError(400, "invalid_args", "search body must be a JSON object")
        return Reply(200, {"offers": self.market.search_offers(req.body)})

    def _search_get(self, req: _Request) -> Reply:
        query = _json_param(req.params, "q", {})
        if not isinstance(query, dict):
            raise ApiError(400, "invalid_args", "q must be a JSON object")
        return Reply(200, {"offers": self.market.search_offers(query)})

    # ---------------------------------------------------------- instances

    def _rent(self, req: _Request) -> Reply:
        if not isinstance(req.body, dict):
            raise ApiError(400, "invalid_args", "create body must be a JSON object")
        delay = self.market.create_delay()
        # The "create_delay" fault: slow before anything happens. The request
        # thread does not watch the client, so a client that gave up meanwhile
        # still gets its machine rented (a zombie create).
        if delay > 0 and self._wait(delay):
            return Reply(503, text="Service Unavailable")
        offer_id = int(req.match["id"])
        try:
            result = self.market.rent(offer_id, req.body)
        except ApiError as exc:
            if exc.error != "no_such_ask":
                raise
            # An offer rented, expired or taken meanwhile: 410, as documented
            # ("Offer no longer available"). The documented 404 form (error
            # invalid_args, "no_such_ask" in msg) is not served: the market
            # forgets an offer once it leaves, so it cannot tell them apart.
            return Reply(
                410,
                {
                    "success": False,
                    "error": "no_such_ask",
                    "msg": f"error 410/3907: no_such_ask Instance type {offer_id} is no "
                    "longer available.",
                    "ask_id": offer_id,
                },
            )
        if result.answer == "server_error":
            # The machine is rented, but the answer is lost in a server error.
            status = self.market.faults.create_error_status
            return Reply(status, text="Internal Server Error" if status == 500 else "Bad Gateway")
        ok = {"success": True, "new_contract": result.instance_id}
        if result.answer == "hang":
            return Reply(200, ok, delay_s=self.market.faults.hang_seconds)
        return Reply(200, ok)

    def _list(self, req: _Request) -> Reply:
        if self.market.list_error():
            return Reply(
                200,
                {"success": False, "error": "server_error", "msg": "Error fetching instances."},
            )
        select_filters = _json_param(req.params, "select_filters", {})
        order_by = _json_param(req.params, "order_by", [{"col": "id", "dir": "asc"}])
        select_cols = _json_param(req.params, "select_cols", None)
        if not isinstance(select_filters, dict) or not isinstance(order_by, list):
            raise ApiError(400, "invalid_args", "select_filters must be an object, order_by a list")
        if select_cols is not None and not isinstance(select_cols, list):
            raise ApiError(400, "invalid_args", "select_cols must be a list")
        limit_raw = req.params.get("limit")
        try:
            limit = int(limit_raw) if limit_raw else None
        except ValueError:
            raise ApiError(400, "invalid_args", "limit must be an integer") from None
        if limit is not None and limit < 1:
            raise ApiError(400, "invalid_args", "limit must be >= 1")
        page = self.market.list_instances(
            select_filters=select_filters,
            order_by=order_by,
            limit=limit,
            after=req.params.get("after_token") or None,
            select_cols=[str(c) for c in select_cols] if select_cols else None,
        )
        return Reply(200, page)

    def _list_v0(self, req: _Request) -> Reply:
        raise ApiError(
            410,
            "deprecated_endpoint",
            "/api/v0/instances/ is deprecated. Use /api/v1/instances/ instead.",
        )

    def _filters(self, req: _Request) -> Reply:
        return Reply(200, {"success": True, "filters": self.market.instance_filters()})

    def _show(self, req: _Request) -> Reply:
        return Reply(200, {"instances": self.market.show_instance(int(req.match["id"]))})

    def _destroy(self, req: _Request) -> Reply:
        try:
            self.market.destroy_instance(int(req.match["id"]))
        except ApiError as exc:
            if exc.status != 404:
                raise
            # The destroy endpoint's documented "not found" shape.
            return Reply(404, {"success": False, "error": "not_found", "msg": "Instance not found"})
        return Reply(200, {"success": True, "msg": "Instance destroyed successfully"})

    # ------------------------------------------------------------ control

    def _sim_state(self, req: _Request) -> Reply:
        return Reply(200, self.market.state())

    def _sim_advance(self, req: _Request) -> Reply:
        seconds = req.body.get("seconds") if isinstance(req.body, dict) else None
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
            raise ApiError(400, "invalid_args", 'body must be {"seconds": <number >= 0>}')
        return Reply(200, {"success": True, "now": self.market.advance(float(seconds))})

    def _sim_speed(self, req: _Request) -> Reply:
        speed = req.body.get("speed") if isinstance(req.body, dict) else None
        if isinstance(speed, bool) or not isinstance(speed, int | float) or speed < 0:
            raise ApiError(400, "invalid_args", 'body must be {"speed": <number >= 0>}')
        self.market.set_speed(float(speed))
        return Reply(200, {"success": True, "speed": float(speed)})

    def _sim_faults(self, req: _Request) -> Reply:
        changes = dict(req.body) if isinstance(req.body, dict) else None
        if changes is None:
            raise ApiError(400, "invalid_args", "body must be an object of fault switches")
        name = changes.pop("scenario", None)
        try:
            faults = self.market.set_faults(name, **changes)
        except ValueError as exc:
            raise ApiError(400, "invalid_args", str(exc)) from None
        return Reply(200, {"success": True, "faults": faults.to_dict()})

    def _sim_kill(self, req: _Request) -> Reply:
        body = req.body if isinstance(req.body, dict) else {}
        status = str(body.get("status", "exited"))
        msg = body.get("msg")
        try:
            self.market.kill(int(req.match["id"]), status, str(msg) if msg else None)
        except KeyError:
            msg = f"Instance {req.match['id']} not found."
            raise ApiError(404, "no_such_instance", msg) from None
        except ValueError as exc:
            raise ApiError(400, "invalid_args", str(exc)) from None
        return Reply(200, {"success": True})

    # ------------------------------------------- rate limits, instance state

    def _rate_limited(self, method: str, route: str, identity: str) -> Reply | None:
        """The 429 for a request the limiter refuses, shaped as the service's:
        plain text, or for destroy JSON ``{success, error, msg}``; no Retry-After."""
        refusal = self.market.admit_request(method, route, identity)
        if refusal is None:
            return None
        if refusal.json_body:
            body = {"success": False, "error": "rate_limit_exceeded", "msg": refusal.msg}
            return Reply(429, body)
        return Reply(429, text=refusal.msg)

    def _instance_routes(self) -> list[tuple[str, re.Pattern[str], str, _Handler, bool]]:
        return [
            (
                "PUT",
                re.compile(r"/api/v0/instances/(?P<id>\d+)/"),
                "instance",
                SimApi._manage,
                True,
            ),
            (
                "PUT",
                re.compile(r"/api/v0/instances/reboot/(?P<id>\d+)/"),
                "reboot",
                SimApi._reboot,
                True,
            ),
            (
                "POST",
                re.compile(r"/_sim/instances/(?P<id>\d+)/(?P<action>[a-z_]+)/"),
                "_sim",
                SimApi._sim_instance,
                False,
            ),
            ("POST", re.compile(r"/_sim/prover/(?P<id>\d+)/"), "_sim", SimApi._sim_prover, False),
            ("POST", re.compile(r"/_sim/rate-limits/"), "_sim", SimApi._sim_rate_limits, False),
        ]

    def _manage(self, req: _Request) -> Reply:
        if not isinstance(req.body, dict):
            raise ApiError(400, "invalid_args", "body must be a JSON object")
        try:
            self.market.manage_instance(int(req.match["id"]), req.body)
        except KeyError:
            raise _no_such_instance(req) from None
        except ValueError as exc:
            raise ApiError(400, "invalid_args", str(exc)) from None
        return Reply(200, {"success": True})

    def _reboot(self, req: _Request) -> Reply:
        try:
            rebooted = self.market.reboot_instance(int(req.match["id"]))
        except KeyError:
            raise _no_such_instance(req) from None
        if not rebooted:
            return Reply(200, {"success": False, "msg": "Instance is not running."})
        return Reply(200, {"success": True})

    def _sim_instance(self, req: _Request) -> Reply:
        try:
            applied = self.market.set_instance_state(int(req.match["id"]), req.match["action"])
        except KeyError:
            raise _no_such_instance(req) from None
        except ValueError as exc:
            raise ApiError(400, "invalid_args", str(exc)) from None
        return Reply(200, {"success": True, "applied": applied})

    def _sim_prover(self, req: _Request) -> Reply:
        fault = req.body.get("fault") if isinstance(req.body, dict) else None
        try:
            applied = self.market.prover_fault(int(req.match["id"]), str(fault))
        except KeyError:
            raise _no_such_instance(req) from None
        except ValueError as exc:
            raise ApiError(400, "invalid_args", str(exc)) from None
        return Reply(200, {"success": True, "applied": applied})

    def _sim_rate_limits(self, req: _Request) -> Reply:
        enabled = req.body.get("enabled") if isinstance(req.body, dict) else None
        if not isinstance(enabled, bool):
            raise ApiError(400, "invalid_args", 'body must be {"enabled": true|false}')
        self.market.set_rate_limits(enabled)
        return Reply(200, {"success": True, "enabled": enabled})


def _no_such_instance(req: _Request) -> ApiError:
    return ApiError(404, "no_such_instance", f"Instance {req.match['id']} not found.")
