"""What a simulated SNARK is, so the Curio stand-in can verify what cuzk returns.

A real Groth16 proof is checked against public inputs (curio
``lib/ffi/cuzk_funcs.go``: ``ffi.VerifySeal`` after ``Prove``). Here the
proof is a digest of the request's public parts: an honest cuzk stand-in
computes it, a bad one returns other bytes of the same length (192 bytes,
a Groth16 proof's size per partition is 192; PoRep 32 GiB has 10
partitions: 1,920 bytes), and the Curio stand-in recomputes it to verify.
"""

from __future__ import annotations

import hashlib

from fleet_agent.cuzk.service import pb

__all__ = ["PROOF_BYTES", "prove", "verify"]

#: A 32 GiB PoRep's proof: 10 partitions of 192 bytes.
PROOF_BYTES = 1920


def _digest(req: pb.SubmitProofRequest) -> bytes:
    h = hashlib.sha256()
    h.update(b"fleet-agent simulated snark\0")
    h.update(req.request_id.encode())
    h.update(req.proof_kind.to_bytes(4, "big"))
    h.update(req.sector_number.to_bytes(8, "big"))
    h.update(req.miner_id.to_bytes(8, "big"))
    h.update(hashlib.sha256(req.vanilla_proof).digest())
    return h.digest()


def prove(req: pb.SubmitProofRequest) -> bytes:
    """The proof an honest prover returns for `req`."""
    seed = _digest(req)
    out = bytearray()
    counter = 0
    while len(out) < PROOF_BYTES:
        out += hashlib.sha256(seed + counter.to_bytes(4, "big")).digest()
        counter += 1
    return bytes(out[:PROOF_BYTES])


def verify(req: pb.SubmitProofRequest, proof: bytes) -> bool:
    """Whether `proof` is `req`'s proof (what Curio's local verification says)."""
    return proof == prove(req)
