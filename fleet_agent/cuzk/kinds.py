"""Curio's names for proof kinds and circuits, shared by the router and the stand-in.

Pure tables, no I/O. Each name is cuzk's own, so what the router reports in
``GetStatus`` reads as a cuzk daemon's answer to Curio:

* `KIND_NAMES`: ``ProofKind``'s ``Display`` (curio
  ``extern/cuzk/cuzk-core/src/types.rs``): what ``QueueStatus.proof_kind`` and
  ``GPUStatus.current_proof_kind`` carry (``extern/cuzk/cuzk-server/src/service.rs``).
* `METRIC_LABELS`: ``ProofKind::metric_label`` (same file), the Prometheus label.
* `circuit_id`: ``ProofKind::circuit_id`` with the engine's sector-size rule
  (``extern/cuzk/cuzk-core/src/engine.rs``: GiB of ``sector_size``, 32 when 0);
  the ids ``SRSStatus.circuit_id`` carries (``srs_manager.rs`` ``from_str_id``).
* `default_priority`: ``Priority::default_for`` when a request says 0.
"""

from __future__ import annotations

import re

from .service import pb

__all__ = [
    "CIRCUIT_PATTERN",
    "KIND_NAMES",
    "KNOWN_CIRCUITS",
    "METRIC_LABELS",
    "circuit_id",
    "default_priority",
    "kind_name",
]

#: proto ProofKind value -> cuzk's Display string.
KIND_NAMES: dict[int, str] = {
    pb.POREP_SEAL_COMMIT: "porep-c2",
    pb.SNAP_DEALS_UPDATE: "snap-update",
    pb.WINDOW_POST_PARTITION: "window-post",
    pb.WINNING_POST: "winning-post",
}

#: proto ProofKind value -> cuzk's Prometheus label value.
METRIC_LABELS: dict[int, str] = {
    pb.POREP_SEAL_COMMIT: "porep_c2",
    pb.SNAP_DEALS_UPDATE: "snap_update",
    pb.WINDOW_POST_PARTITION: "window_post",
    pb.WINNING_POST: "winning_post",
}

_CIRCUIT_PREFIX: dict[int, str] = {
    pb.POREP_SEAL_COMMIT: "porep",
    pb.SNAP_DEALS_UPDATE: "snap",
    pb.WINDOW_POST_PARTITION: "wpost",
    pb.WINNING_POST: "winning",
}

#: The circuit ids cuzk's SRS manager knows (``CircuitId::from_str_id``);
#: PreloadSRS of any other id fails there.
KNOWN_CIRCUITS = frozenset(
    {"porep-32g", "porep-64g", "wpost-32g", "winning-32g", "snap-32g", "snap-64g"}
)

#: What a circuit id looks like: a host's report is kept only if it matches
#: (a hostile host could otherwise put anything in our witness rows).
CIRCUIT_PATTERN = re.compile(r"^[a-z]{1,16}-[0-9]{1,4}g$")

_GIB = 1024 * 1024 * 1024


def kind_name(kind: int) -> str:
    """cuzk's Display string for proto kind `kind` (KeyError if not a kind)."""
    return KIND_NAMES[kind]


def circuit_id(kind: int, sector_size: int) -> str:
    """The SRS circuit a proof of `kind` for sectors of `sector_size` bytes needs."""
    gib = sector_size // _GIB
    return f"{_CIRCUIT_PREFIX[kind]}-{gib if gib > 0 else 32}g"


def default_priority(kind: int) -> int:
    """cuzk's priority for a request that gives none (proto Priority values)."""
    if kind == pb.WINNING_POST:
        return pb.CRITICAL
    if kind == pb.WINDOW_POST_PARTITION:
        return pb.HIGH
    return pb.NORMAL
