"""A stand-in for the operator's Curio node, the client of ``[Cuzk] Address``.

`CurioStandIn` (node.py) sends PoRep SNARKs to a cuzk or the router as
Curio's cuzk client and harmony tasks do, and records each job
(records.py); ``python -m simulator.curio`` runs it against an address.
"""

from __future__ import annotations

from .node import (
    POREP_32G_PROOF,
    SECTOR_32G,
    CurioConfig,
    CurioStandIn,
    arrival_times,
    porep_c2,
    porep_request_id,
    sample_porep,
    vanilla_input,
)
from .records import Attempt, CurioSummary, JobRecord, percentile, summarize

__all__ = [
    "POREP_32G_PROOF",
    "SECTOR_32G",
    "Attempt",
    "CurioConfig",
    "CurioStandIn",
    "CurioSummary",
    "JobRecord",
    "arrival_times",
    "percentile",
    "porep_c2",
    "porep_request_id",
    "sample_porep",
    "summarize",
    "vanilla_input",
]
