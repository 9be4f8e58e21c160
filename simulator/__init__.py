"""A local vast.ai simulator: same paths, payloads, units, pagination and errors.

`SimServer` runs it in a thread for tests (``with SimServer(speed=0) as sim``),
`serve` runs it in the foreground for ``fleet-agent sim``; `Market` is the
model behind both, with its own clock (`Market.advance`), seeded randomness,
fault switches (`Faults`, `SCENARIOS`), a work source with deadlines
(`DemandConfig`), vast.ai's rate limits, and a state
file that survives restarts. Each rented instance's prover serves its status
on a mapped port (`PROVER_STATUS_PORT`). See docs/SIMULATOR.md.
"""

from fleet_agent.fleet.capacity import proofs_per_hour, seconds_per_proof

from .api import RATE_LIMIT_TEXT, Reply, SimApi
from .clock import SimClock
from .demand import DemandConfig, demand_from_options
from .faults import SCENARIOS, Faults, scenario
from .market import DEFAULT_OFFERS, ApiError, Market, RentResult
from .persist import StateError
from .prover import PROVER_STATUS_PATH, PROVER_STATUS_PORT
from .server import DEFAULT_API_KEY, DEFAULT_STATE_PATH, SimServer, serve

__all__ = [
    "DEFAULT_API_KEY",
    "DEFAULT_OFFERS",
    "DEFAULT_STATE_PATH",
    "PROVER_STATUS_PATH",
    "PROVER_STATUS_PORT",
    "RATE_LIMIT_TEXT",
    "SCENARIOS",
    "ApiError",
    "DemandConfig",
    "Faults",
    "Market",
    "RentResult",
    "Reply",
    "SimApi",
    "SimClock",
    "SimServer",
    "StateError",
    "demand_from_options",
    "proofs_per_hour",
    "scenario",
    "seconds_per_proof",
    "serve",
]
