"""Releasing a machine mid-proof: drain it first, destroy it once its work is done.

A destroy kills the proofs in flight with the machine, and with them the
work Curio handed it (a snark-market proof has 45 minutes to be delivered:
curio ``documentation/en/experimental-features/Snark-Market.md``). So the
destroy tool drains a healthy machine that has work in flight instead: its
prover's sidecar takes no new work (``POST /drain``, sidecar/fleet_status.py
runs ``curio cli cordon``, which sets the node unschedulable: curio
``cmd/curio/cordon.go``), and the monitor's poll destroys it once nothing is
in flight, or after `DRAIN_LIMIT_S` whatever it holds. A machine that
failed, or holds no work, goes at once.

A drain needs the machine's token: ``FLEET_DRAIN_TOKEN`` in its create env,
an HMAC of its label under a worker secret (`drain_token`), so a stranger
who finds the status port cannot stop a fleet's work. The token reaches only
the machine (its row's ``extra_env`` as vast.ai lists it), never history,
the store or a prompt.
"""

from __future__ import annotations

import hashlib
import hmac

from fleet_agent.fleet.prover import DRAIN_TOKEN_ENV

from .provers import ProverTrack

__all__ = ["DRAIN_KEY_PURPOSE", "DRAIN_LIMIT_S", "DRAIN_TOKEN_ENV", "drain_done", "drain_token"]

#: What the drain key is derived for from the worker's vast.ai key
#: (`VastClient.derived_key`): no secret of its own to set, rotated with it
#: (a machine rented under the old key then cannot be drained: it is
#: destroyed at once, as without a sidecar).
DRAIN_KEY_PURPOSE = "fleet-agent prover drain"

#: The longest a drain waits for the work in flight: a 32 GiB PoRep takes
#: 1-5 minutes on the GPUs we rent (docs/SIMULATOR.md, "Proving capacity");
#: a machine still busy after this is destroyed with what it holds.
DRAIN_LIMIT_S = 15 * 60.0


def drain_token(key: bytes, label: str) -> str:
    """The token that lets a monitor drain the machine labelled `label`."""
    return hmac.new(key, f"fleet-agent drain {label}".encode(), hashlib.sha256).hexdigest()[:40]


def drain_done(track: ProverTrack, now: float) -> str | None:
    """Why a draining machine goes now (its work is done, the drain took too
    long, or its host turned suspect: provers.py), or None while it finishes
    its work."""
    if track.draining_since is None:
        return None
    if track.suspect:
        return "suspect: its figure is not believed; destroyed with its work in flight"
    if track.phase != "proving" or (not track.in_flight and not track.queued):
        return "drained: no work in flight"
    waited = now - track.draining_since
    if waited >= DRAIN_LIMIT_S:
        return f"drain took {waited / 60:.0f} min; destroyed with its work in flight"
    return None
