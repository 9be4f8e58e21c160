"""Routes that change an instance's state, the control API, and the 429.

The renter's ``PUT /api/v0/instances/{id}/`` (stop, start, label) and
``PUT /api/v0/instances/reboot/{id}/``; the unauthenticated control API under
``/_sim/`` (router-mode machines' cuzk: ``GET /_sim/cuzk``,
``POST /_sim/cuzk/{id}``), and ``GET /demand`` (the work queue, for the agent's demand
adapter; unauthenticated like the control API); and the shape of a rate-limited answer. A mixin of
`simulator.api.SimApi`.
"""

from __future__ import annotations

import re

from .demand import DemandConfig
from .errors import ApiError
from .market import Market
from .replies import Handler, Reply, Request, no_such_instance

__all__ = ["ControlRoutes", "control_routes"]


class ControlRoutes:
    """Handlers of the routes `control_routes` lists."""

    market: Market

    def _sim_state(self, req: Request) -> Reply:
        return Reply(200, self.market.state())

    def _sim_charges(self, req: Request) -> Reply:
        return Reply(200, self.market.charges())

    def _sim_advance(self, req: Request) -> Reply:
        seconds = req.body.get("seconds") if isinstance(req.body, dict) else None
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
            raise ApiError(400, "invalid_args", 'body must be {"seconds": <number >= 0>}')
        return Reply(200, {"success": True, "now": self.market.advance(float(seconds))})

    def _sim_speed(self, req: Request) -> Reply:
        speed = req.body.get("speed") if isinstance(req.body, dict) else None
        if isinstance(speed, bool) or not isinstance(speed, int | float) or speed < 0:
            raise ApiError(400, "invalid_args", 'body must be {"speed": <number >= 0>}')
        self.market.set_speed(float(speed))
        return Reply(200, {"success": True, "speed": float(speed)})

    def _sim_faults(self, req: Request) -> Reply:
        changes = dict(req.body) if isinstance(req.body, dict) else None
        if changes is None:
            raise ApiError(400, "invalid_args", "body must be an object of fault switches")
        name = changes.pop("scenario", None)
        try:
            faults = self.market.set_faults(name, **changes)
        except ValueError as exc:
            raise ApiError(400, "invalid_args", str(exc)) from None
        return Reply(200, {"success": True, "faults": faults.to_dict()})

    def _sim_kill(self, req: Request) -> Reply:
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

    def _manage(self, req: Request) -> Reply:
        if not isinstance(req.body, dict):
            raise ApiError(400, "invalid_args", "body must be a JSON object")
        try:
            self.market.manage_instance(int(req.match["id"]), req.body)
        except KeyError:
            raise no_such_instance(req) from None
        except ValueError as exc:
            raise ApiError(400, "invalid_args", str(exc)) from None
        return Reply(200, {"success": True})

    def _reboot(self, req: Request) -> Reply:
        try:
            rebooted = self.market.reboot_instance(int(req.match["id"]))
        except KeyError:
            raise no_such_instance(req) from None
        if not rebooted:
            return Reply(200, {"success": False, "msg": "Instance is not running."})
        return Reply(200, {"success": True})

    def _sim_instance(self, req: Request) -> Reply:
        try:
            applied = self.market.set_instance_state(int(req.match["id"]), req.match["action"])
        except KeyError:
            raise no_such_instance(req) from None
        except ValueError as exc:
            raise ApiError(400, "invalid_args", str(exc)) from None
        return Reply(200, {"success": True, "applied": applied})

    def _sim_prover(self, req: Request) -> Reply:
        fault = req.body.get("fault") if isinstance(req.body, dict) else None
        try:
            applied = self.market.prover_fault(int(req.match["id"]), str(fault))
        except KeyError:
            raise no_such_instance(req) from None
        except ValueError as exc:
            raise ApiError(400, "invalid_args", str(exc)) from None
        return Reply(200, {"success": True, "applied": applied})

    def _sim_hostile(self, req: Request) -> Reply:
        body = req.body if isinstance(req.body, dict) else None
        status, row = (body or {}).get("status"), (body or {}).get("row")
        drain = (body or {}).get("drain")
        if (
            body is None
            or not all(x is None or isinstance(x, dict) for x in (status, row))
            or not (drain is None or isinstance(drain, str))
        ):
            raise ApiError(
                400,
                "invalid_args",
                'body must be {"status": {...}, "row": {...}, "drain": "trickle"|"flood"|""}',
            )
        try:
            self.market.hostile_host(int(req.match["id"]), status, row, drain)
        except KeyError:
            raise no_such_instance(req) from None
        except ValueError as exc:
            raise ApiError(400, "invalid_args", str(exc)) from None
        return Reply(200, {"success": True})

    def _sim_cuzk_report(self, req: Request) -> Reply:
        return Reply(200, self.market.cuzk_report())

    def _sim_cuzk(self, req: Request) -> Reply:
        body = req.body if isinstance(req.body, dict) else None
        if body is None:
            raise ApiError(
                400, "invalid_args", 'body must be {"behaviour": "honest"|"slow"|"dies"|...}'
            )
        try:
            spec = self.market.cuzk_behaviour(int(req.match["id"]), body)
        except KeyError:
            raise no_such_instance(req) from None
        except ValueError as exc:
            raise ApiError(400, "invalid_args", str(exc)) from None
        return Reply(200, {"success": True, "behaviour": spec})

    def _demand(self, req: Request) -> Reply:
        body = self.market.demand_body()
        if body is None:
            raise ApiError(404, "no_demand", "no demand is configured (POST /_sim/demand)")
        return Reply(200, body)

    def _sim_demand(self, req: Request) -> Reply:
        body = req.body if isinstance(req.body, dict) else None
        if body is None:
            raise ApiError(400, "invalid_args", "body must be an object of demand settings")
        settings = {k: v for k, v in body.items() if k != "enabled"}
        current = self.market.demand_state()
        if current is not None:  # change what the body names, keep the rest
            settings = {**current["config"], **settings}
        try:
            config = None if body.get("enabled") is False else DemandConfig.from_dict(settings)
        except ValueError as exc:
            raise ApiError(400, "invalid_args", str(exc)) from None
        return Reply(200, {"success": True, "demand": self.market.set_demand(config)})

    def _sim_rate_limits(self, req: Request) -> Reply:
        enabled = req.body.get("enabled") if isinstance(req.body, dict) else None
        if not isinstance(enabled, bool):
            raise ApiError(400, "invalid_args", 'body must be {"enabled": true|false}')
        self.market.set_rate_limits(enabled)
        return Reply(200, {"success": True, "enabled": enabled})


def control_routes() -> list[tuple[str, re.Pattern[str], str, Handler, bool]]:
    """(method, path, route name for the limiter, handler, needs auth) of this module."""
    return [
        ("GET", re.compile(r"/_sim/state/"), "_sim", ControlRoutes._sim_state, False),
        ("GET", re.compile(r"/_sim/charges/"), "_sim", ControlRoutes._sim_charges, False),
        ("POST", re.compile(r"/_sim/advance/"), "_sim", ControlRoutes._sim_advance, False),
        ("POST", re.compile(r"/_sim/speed/"), "_sim", ControlRoutes._sim_speed, False),
        ("POST", re.compile(r"/_sim/faults/"), "_sim", ControlRoutes._sim_faults, False),
        ("POST", re.compile(r"/_sim/kill/(?P<id>\d+)/"), "_sim", ControlRoutes._sim_kill, False),
        (
            "PUT",
            re.compile(r"/api/v0/instances/(?P<id>\d+)/"),
            "instance",
            ControlRoutes._manage,
            True,
        ),
        (
            "PUT",
            re.compile(r"/api/v0/instances/reboot/(?P<id>\d+)/"),
            "reboot",
            ControlRoutes._reboot,
            True,
        ),
        (
            "POST",
            re.compile(r"/_sim/instances/(?P<id>\d+)/(?P<action>[a-z_]+)/"),
            "_sim",
            ControlRoutes._sim_instance,
            False,
        ),
        (
            "POST",
            re.compile(r"/_sim/prover/(?P<id>\d+)/"),
            "_sim",
            ControlRoutes._sim_prover,
            False,
        ),
        (
            "POST",
            re.compile(r"/_sim/hostile/(?P<id>\d+)/"),
            "_sim",
            ControlRoutes._sim_hostile,
            False,
        ),
        ("GET", re.compile(r"/_sim/cuzk/"), "_sim", ControlRoutes._sim_cuzk_report, False),
        (
            "POST",
            re.compile(r"/_sim/cuzk/(?P<id>\d+)/"),
            "_sim",
            ControlRoutes._sim_cuzk,
            False,
        ),
        ("POST", re.compile(r"/_sim/rate-limits/"), "_sim", ControlRoutes._sim_rate_limits, False),
        ("GET", re.compile(r"/demand/"), "_sim", ControlRoutes._demand, False),
        ("POST", re.compile(r"/_sim/demand/"), "_sim", ControlRoutes._sim_demand, False),
    ]
