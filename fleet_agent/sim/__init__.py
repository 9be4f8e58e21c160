"""A local vast.ai simulator: same paths, payloads, units, pagination and errors.

`SimServer` runs it in a thread for tests (``with SimServer(speed=0) as sim``),
`serve` runs it in the foreground for ``fleet-agent sim``; `Market` is the
model behind both, with its own clock (`Market.advance`), seeded randomness and
fault switches (`Faults`, `SCENARIOS`). See docs/SIMULATOR.md.
"""

from fleet_agent.capacity import proofs_per_hour, seconds_per_proof

from .api import RATE_LIMIT_TEXT, Reply, SimApi
from .clock import SimClock
from .faults import SCENARIOS, Faults, scenario
from .market import ApiError, Market, RentResult
from .server import DEFAULT_API_KEY, SimServer, serve

__all__ = [
    "DEFAULT_API_KEY",
    "RATE_LIMIT_TEXT",
    "SCENARIOS",
    "ApiError",
    "Faults",
    "Market",
    "RentResult",
    "Reply",
    "SimApi",
    "SimClock",
    "SimServer",
    "proofs_per_hour",
    "scenario",
    "seconds_per_proof",
    "serve",
]
