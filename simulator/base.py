"""What `Market` and its mixins share: its state, declared once for the type checker."""

from __future__ import annotations

import random
import ssl
import threading
from collections.abc import Callable
from typing import Any, Protocol

from .clock import SimClock
from .faults import Faults
from .instances import InstanceEnv, SimInstance
from .offers import OfferBook, SimOffer

__all__ = ["CuzkGateway", "MarketState", "PortAllocator", "PortRelease"]

#: Allocates a host port for an instance's prover status endpoint (the server's
#: gateway; the preferred port when restoring a saved state), and releases it
#: when the instance is gone.
PortAllocator = Callable[[int, int | None], int]
PortRelease = Callable[[int], None]


class CuzkGateway(Protocol):
    """What serves router-mode machines' cuzk (simulator/cuzk_hosts.py
    ``CuzkHosts``); every call returns at once, from any thread."""

    def reserve(
        self, instance_id: int, preferred: int | None, context: ssl.SSLContext | None
    ) -> int:
        """A host port for the machine's front; `context` None: nothing will listen."""

    def release(self, instance_id: int) -> None:
        """The machine is gone: stop its servers, free its port."""

    def set_behaviour(self, instance_id: int, spec: dict[str, Any], rev: int) -> None:
        """Its cuzk behaves as `spec` says from now."""

    def poke(self) -> None:
        """A machine or the clock changed: look again now."""


class MarketState:
    """The market's attributes; `simulator.market.Market` sets them."""

    lock: threading.RLock
    seed: int
    clock: SimClock
    scenario: str
    faults: Faults
    page_size: int
    rate_limits: bool
    public_host: str | None
    port_allocator: PortAllocator | None
    port_release: PortRelease | None
    #: Serves router-mode machines' cuzk (None: their front ports are numbers only).
    cuzk_hosts: CuzkGateway | None
    counters: dict[str, int]
    _market_rng: random.Random
    _ids_rng: random.Random
    _instance_ids_rng: random.Random
    _fault_rng: random.Random
    _book: OfferBook
    _offers: dict[int, SimOffer]
    _instances: dict[int, SimInstance]
    _envs: dict[int, InstanceEnv]
    _next_instance_id: int
    _rentals: list[tuple[int, str]]
    #: Final charges of instances no longer listed (`simulator.billing.charges`).
    _closed_charges: dict[int, dict[str, Any]]

    def _sync(self) -> None:
        raise NotImplementedError

    def _drop(self, instance_id: int) -> None:
        raise NotImplementedError

    def _env(self, inst: SimInstance) -> InstanceEnv:
        raise NotImplementedError

    def _live(self, instance_id: int) -> SimInstance:
        raise NotImplementedError

    def _poke_cuzk(self) -> None:
        raise NotImplementedError

    def _map_cuzk_port(self, inst: SimInstance, name: str, preferred: int | None) -> int | None:
        raise NotImplementedError

    def _current(self, inst: SimInstance) -> SimInstance:
        raise NotImplementedError

    def demand_state(self) -> dict[str, Any] | None:
        raise NotImplementedError

    def _demand_status(self, inst: SimInstance, body: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError
