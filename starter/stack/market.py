"""The local stack's Snark Market (`fleet-agent up --sim-demand CURVE`, off router mode).

Touches: the in-process simulator's Snark Market (docs/SIMULATOR.md, "The
Snark Market"), its node set up at start as an operator sets up theirs, and
the worker's variables, exported while the stack runs and restored
afterwards (starter/stack/exported_env.py):

- the market: the curve's rates are its clients' requests per hour, and the
  node proves on the machines the agent rents from the simulator
  (``MarketConfig(prover="fleet")``); the simulator's own ``/demand`` queue
  is off (the machines have one work source);
- the node, through the simulator's Python API (what the GUI's
  ``PSSetMeta`` and the market's dashboard would do): its wallet
  (`STACK_WALLET`) set, requests off (the agent turns them on once a
  machine proves), its ask price `STACK_PRICE_FIL`
  FIL per P, and `STACK_CHALLENGES` completed challenge proofs credited
  (10 work slots), so a fresh agent can earn;
- FLEET_DEMAND_SOURCE=curio with FLEET_DEMAND_URL and
  FLEET_DEMAND_METRICS_URL at the Curio stand-in's origin (unless the
  operator named a demand source), and FLEET_MARKET_SOURCE=curio,
  FLEET_MARKET_PRICE_URL (the origin's ``/v0/proofs/client/current-price``)
  and FLEET_FIL_USD_URL (its CoinGecko ``/api/v3/simple/price``) unless the
  operator named a market source (environment or .env).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from pydantic import Field

from fleet_agent.env.env_settings import EnvModel, SettingsError
from fleet_agent.models import ConfigPatch
from starter.stack.demand import (
    METRICS_URL_ENV,
    SOURCE_ENV,
    URL_ENV,
    DemandWiring,
    operator_source,
    suggested_max_target,
)
from starter.stack.exported_env import exported_env

if TYPE_CHECKING:
    from simulator import DemandConfig, SimServer
    from simulator.snark_market import MarketConfig

__all__ = [
    "FIL_USD_URL_ENV",
    "MARKET_PRICE_URL_ENV",
    "MARKET_SOURCE_ENV",
    "STACK_CHALLENGES",
    "STACK_PRICE_FIL",
    "STACK_WALLET_SEED",
    "market_config",
    "market_env",
    "market_line",
    "market_stack_config",
    "set_up_node",
]

MARKET_SOURCE_ENV = "FLEET_MARKET_SOURCE"
MARKET_PRICE_URL_ENV = "FLEET_MARKET_PRICE_URL"
FIL_USD_URL_ENV = "FLEET_FIL_USD_URL"
#: The node's ask price, FIL per P (the doc's price "for testing", the
#: market's start price).
STACK_PRICE_FIL = "0.005"
#: Completed challenge proofs the node's wallet starts with: 10 work slots.
STACK_CHALLENGES = 500
#: A fresh agent's least target, proofs/h: one simulated machine.
STACK_MIN_TARGET = 30.0
#: The ask price range a fresh agent may set, nFIL per P (0.002 to 0.02 FIL).
STACK_PRICE_RANGE_NFIL = (2_000_000, 20_000_000)
#: The node's wallet is the key address made from this name.
STACK_WALLET_SEED = "fleet-agent-stack"
#: Paths on the Curio stand-in's origin (simulator/curio/web.py).
_PRICE_PATH = "/v0/proofs/client/current-price"
_FIL_USD_QUERY = "/api/v3/simple/price?ids=filecoin&vs_currencies=usd"


class _MarketSourceEnv(EnvModel):
    """Whether the operator named a market source (the worker's own
    settings read the rest: fleet_agent/market/)."""

    source: str | None = Field(None, alias=MARKET_SOURCE_ENV)


def _operator_market() -> bool:
    try:
        return _MarketSourceEnv.read().source is not None
    except SettingsError:
        return True


def market_config(demand: DemandConfig) -> MarketConfig:
    """The stack's market: `demand`'s curve as its clients' requests per
    hour, the node proving on the fleet, its wallet credited with
    `STACK_CHALLENGES` when it is first seen."""
    from simulator.snark_market import MarketConfig

    return MarketConfig(demand=demand, prover="fleet", node_challenges=STACK_CHALLENGES)


def set_up_node(sim: SimServer) -> str:
    """Set the node up as an operator does (module doc); its wallet."""
    from simulator.curio.address import key_address
    from simulator.curio.fil import parse_fil

    market = sim.snark_market
    if market is None:
        raise ValueError("the simulator runs no Snark Market")
    wallet = key_address(STACK_WALLET_SEED)
    # Requests off: the agent turns them on once a machine proves (work taken
    # while the first machine boots would pass its 45 minutes).
    market.set_meta(False, wallet, parse_fil(STACK_PRICE_FIL))
    return wallet


@contextlib.contextmanager
def market_env(curio_url: str) -> Iterator[DemandWiring]:
    """Export the demand and market variables for the Snark Market at
    `curio_url` (module doc), each group unless the operator named its
    source; restore them afterwards."""
    values: dict[str, str] = {}
    demand = not operator_source()
    if demand:
        values |= {SOURCE_ENV: "curio", URL_ENV: curio_url, METRICS_URL_ENV: curio_url}
    market = not _operator_market()
    if market:
        values |= {
            MARKET_SOURCE_ENV: "curio",
            MARKET_PRICE_URL_ENV: curio_url + _PRICE_PATH,
            FIL_USD_URL_ENV: curio_url + _FIL_USD_QUERY,
        }
    with exported_env(values):
        yield DemandWiring(curio_url, exported=demand, source="curio", market=market)


def market_line(wiring: DemandWiring) -> str:
    """The banner's market line."""
    where = f"  market:     Snark Market at {wiring.url}: node wallet set, requests off, "
    where += f"{STACK_PRICE_FIL} FIL/P, {STACK_CHALLENGES} challenge proofs"
    if wiring.market:
        exported = f"{MARKET_SOURCE_ENV}=curio, {MARKET_PRICE_URL_ENV}, {FIL_USD_URL_ENV}"
        return where + f" ({exported} exported)"
    return where + f" (your {MARKET_SOURCE_ENV} wins: the worker does not read it)"


def market_stack_config(curve: DemandConfig, wiring: DemandWiring) -> ConfigPatch | None:
    """A fresh agent's config on the market stack: demand mode up to
    `suggested_max_target` when it reads the market's demand, the market's
    business (``market_mode="snark"``, the challenge balance the node starts
    with) when it reads the market; None when it reads neither."""
    changes: dict[str, object] = {}
    if wiring.exported:
        changes |= {"target_mode": "demand", "max_target": suggested_max_target(curve)}
        # One machine's worth held: its first proof lets the agent ask for work.
        changes |= {"min_target": STACK_MIN_TARGET}
    if wiring.market:
        changes |= {
            "market_mode": "snark",
            "market_challenges": STACK_CHALLENGES,
            "market_min_price_nfil": STACK_PRICE_RANGE_NFIL[0],
            "market_max_price_nfil": STACK_PRICE_RANGE_NFIL[1],
        }
    return ConfigPatch(**changes) if changes else None
