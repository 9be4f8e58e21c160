"""The simulator's HTTP surface as plain functions: request in, `Reply` out.

This module knows the service's paths, payloads, auth and error shapes; the
socket plumbing lives in `simulator.server`. Routes (trailing slash
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
from typing import Any
from urllib.parse import parse_qs, urlsplit

from .api_control import ControlRoutes, control_routes
from .catalogue import gpu_names, gpu_types
from .market import ApiError, Market
from .replies import Handler, Headers, Reply, Request, json_param

__all__ = ["RATE_LIMIT_TEXT", "Headers", "Reply", "SimApi"]

RATE_LIMIT_TEXT = "API requests too frequent"
INVALID_KEY = "Invalid user key"
# Routes that answer a missing or wrong key with a 404 (the search's openapi
# file documents 404 "Invalid user key"); the others answer 401 auth_error.
_AUTH_404_ROUTES = frozenset({"bundles"})


def _sleep(seconds: float) -> bool:
    time.sleep(seconds)
    return False


class SimApi(ControlRoutes):
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
        self._routes: list[tuple[str, re.Pattern[str], str, Handler, bool]] = [
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
            *control_routes(),
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
            return handler(self, Request(method, path, params, body, match))
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

    def _gpu_names(self, req: Request) -> Reply:
        return Reply(200, {"gpu_names": gpu_names()})

    def _gpu_types(self, req: Request) -> Reply:
        return Reply(200, {"gpu_types": gpu_types()})

    def _user(self, req: Request) -> Reply:
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

    def _search(self, req: Request) -> Reply:
        if not isinstance(req.body, dict):
            raise ApiError(400, "invalid_args", "search body must be a JSON object")
        return Reply(200, {"offers": self.market.search_offers(req.body)})

    def _search_get(self, req: Request) -> Reply:
        query = json_param(req.params, "q", {})
        if not isinstance(query, dict):
            raise ApiError(400, "invalid_args", "q must be a JSON object")
        return Reply(200, {"offers": self.market.search_offers(query)})

    # ---------------------------------------------------------- instances

    def _rent(self, req: Request) -> Reply:
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

    def _list(self, req: Request) -> Reply:
        if self.market.list_error():
            return Reply(
                200,
                {"success": False, "error": "server_error", "msg": "Error fetching instances."},
            )
        select_filters = json_param(req.params, "select_filters", {})
        order_by = json_param(req.params, "order_by", [{"col": "id", "dir": "asc"}])
        select_cols = json_param(req.params, "select_cols", None)
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

    def _list_v0(self, req: Request) -> Reply:
        raise ApiError(
            410,
            "deprecated_endpoint",
            "/api/v0/instances/ is deprecated. Use /api/v1/instances/ instead.",
        )

    def _filters(self, req: Request) -> Reply:
        return Reply(200, {"success": True, "filters": self.market.instance_filters()})

    def _show(self, req: Request) -> Reply:
        return Reply(200, {"instances": self.market.show_instance(int(req.match["id"]))})

    def _destroy(self, req: Request) -> Reply:
        try:
            self.market.destroy_instance(int(req.match["id"]))
        except ApiError as exc:
            if exc.status != 404:
                raise
            # The destroy endpoint's documented "not found" shape.
            return Reply(404, {"success": False, "error": "not_found", "msg": "Instance not found"})
        return Reply(200, {"success": True, "msg": "Instance destroyed successfully"})
