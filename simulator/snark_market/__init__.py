"""The Snark Market (Curio's "proofshare") around the operator's node, seeded.

`SnarkMarket` (world.py) puts together the clients (clients.py), the other
providers (providers.py), the market service with its slots, penalties,
price and vouchers (service.py, price.py) and the operator's Curio node's
proofshare tasks (node.py), proving through a `Prover` (prover.py: its own
GPUs; fleet_prover.py: the vast simulator's rented machines), all on one
deterministic event queue (events.py); public.py is its public price and
FIL in dollars. The web RPC and metrics Curio
serves of it are simulator/curio/proofshare_rpc.py and web.py.
docs/SIMULATOR.md, "The Snark Market".
"""

from __future__ import annotations

from .config import (
    DEADLINE_S,
    DECI_COST,
    PENALTY_CHALLENGES,
    SLOT_CHALLENGES,
    WITHDRAW_CHALLENGES,
    MarketConfig,
    NodeConfig,
    ProviderSpec,
)
from .fleet_prover import FleetProver
from .prover import AsyncProver, ProofJob, Prover, SimulatedProver
from .world import SnarkMarket

__all__ = [
    "DEADLINE_S",
    "DECI_COST",
    "PENALTY_CHALLENGES",
    "SLOT_CHALLENGES",
    "WITHDRAW_CHALLENGES",
    "AsyncProver",
    "FleetProver",
    "MarketConfig",
    "NodeConfig",
    "ProofJob",
    "Prover",
    "ProviderSpec",
    "SimulatedProver",
    "SnarkMarket",
]
