"""A stand-in for Curio's cuzk proving daemon, speaking ``cuzk.v1.ProvingEngine``.

For the router's tests and bench: N GPUs, a proof time per kind (scaled by
`speed`), loaded circuits, a queue, real gRPC on loopback, and a behaviour
(honest, slow, dies, lies, bad, trickle; config.py). Shapes follow curio
``extern/cuzk/cuzk-server/src/service.rs`` and ``cuzk-core`` (cited per module).
"""

from .config import DEFAULT_PROOF_SECONDS, Behaviour, Mode, StandInConfig
from .engine import StandInEngine
from .server import CuzkStandIn
from .service import StandInService

__all__ = [
    "DEFAULT_PROOF_SECONDS",
    "Behaviour",
    "CuzkStandIn",
    "Mode",
    "StandInConfig",
    "StandInEngine",
    "StandInService",
]
