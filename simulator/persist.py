"""The simulator's state file: offers, instances, clock, counters, faults, RNGs.

One JSON document, written atomically (a temporary file, then a rename) so a
crash never leaves half a file. Offers are stored as the four numbers they are
rebuilt from (`simulator.catalogue.make_offer`), so 10,000 offers take a
few hundred KB. The clock goes on from the saved time plus the time the
simulator was down times its speed: the market kept running meanwhile, as the
real one would have.

A file written by another format version, or that cannot be read, is not
loaded: the caller starts a fresh market and says why.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import tempfile
import time
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .faults import Faults
from .instances import SimInstance

if TYPE_CHECKING:
    from .market import Market

__all__ = ["FORMAT", "StateError", "load_state", "market_from_json", "market_to_json", "save_state"]

#: Version of the file's layout; a file of another version is not loaded.
FORMAT = 1


class StateError(Exception):
    """The state file cannot be used (unreadable, another format, another market)."""


def _rng_state(rng: random.Random) -> list[Any]:
    version, internal, gauss = rng.getstate()
    return [version, list(internal), gauss]


def _set_rng(rng: random.Random, state: list[Any]) -> None:
    rng.setstate((state[0], tuple(state[1]), state[2]))


def market_to_json(market: Market) -> dict[str, Any]:
    """Everything needed to go on with this market later (takes its lock)."""
    with market.lock:
        market._sync()
        return {
            "format": FORMAT,
            "saved_at_wall": time.time(),
            "now": market.clock.now(),
            "speed": market.clock.speed,
            "seed": market.seed,
            "scenario": market.scenario,
            "faults": market.faults.to_dict(),
            "counters": dict(market.counters),
            "next_instance_id": market._next_instance_id,
            "rngs": {
                "market": _rng_state(market._market_rng),
                "ids": _rng_state(market._ids_rng),
                "instance_ids": _rng_state(market._instance_ids_rng),
                "faults": _rng_state(market._fault_rng),
            },
            "offers": market._book.to_json(),
            "instances": [i.to_json() for i in market._instances.values()],
            "rentals": [list(r) for r in market._rentals],
            "charges": list(market._closed_charges.values()),
        }


def market_from_json(market: Market, data: dict[str, Any], *, wall_now: float) -> None:
    """Replace `market`'s state with `data` (a fresh market of the same seed)."""
    if data.get("format") != FORMAT:
        raise StateError(f"state file format {data.get('format')!r}, expected {FORMAT}")
    if data.get("seed") != market.seed:
        raise StateError(f"state file is of seed {data.get('seed')!r}, not {market.seed}")
    known = {f.name for f in fields(Faults)}
    downtime = max(0.0, wall_now - float(data["saved_at_wall"]))
    with market.lock:
        market.scenario = str(data["scenario"])
        market.faults = Faults(**{k: v for k, v in data["faults"].items() if k in known})
        market.counters.update({k: int(v) for k, v in data["counters"].items()})
        market._next_instance_id = int(data["next_instance_id"])
        _set_rng(market._market_rng, data["rngs"]["market"])
        _set_rng(market._ids_rng, data["rngs"]["ids"])
        if "instance_ids" in data["rngs"]:  # not in a state saved before 2026-12-03
            _set_rng(market._instance_ids_rng, data["rngs"]["instance_ids"])
        _set_rng(market._fault_rng, data["rngs"]["faults"])
        market._book.load(data["offers"])
        market._instances.clear()
        market._envs.clear()
        for raw in data["instances"]:
            inst = SimInstance.from_json(raw)
            market._instances[inst.id] = inst
            market._remap_prover_port(inst)
        market._rentals = [(int(i), str(label)) for i, label in data["rentals"]]
        # Files written before the simulator kept charges have none.
        market._closed_charges = {int(c["id"]): dict(c) for c in data.get("charges", [])}
        # The running simulator's speed wins over the saved one.
        speed = market.clock.speed
        market.clock.restore(float(data["now"]) + downtime * speed, speed)
        market._sync()


def save_state(market: Market, path: Path) -> None:
    """Write the market's state to `path` atomically."""
    data = market_to_json(market)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out, separators=(",", ":"))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def load_state(market: Market, path: Path) -> bool:
    """Restore `market` from `path`; False if there is no file. StateError if unusable."""
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise StateError(f"cannot read {path}: {exc}") from None
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise StateError(f"{path} is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise StateError(f"{path} does not hold a simulator state")
    try:
        market_from_json(market, data, wall_now=time.time())
    except (KeyError, TypeError, ValueError) as exc:
        raise StateError(f"{path} does not hold a usable simulator state: {exc!r}") from None
    return True
