"""Content ids for the market's requests and the node's settlement messages.

Touches nothing. Real-looking CIDv1 strings (multibase ``b``, lowercase
base32): a request is named by its upload's CID, raw codec and sha2-256
(curio tasks/proofshare/task_client_upload_porep.go; ``bafkrei...``); a
chain message by its dag-cbor blake2b-256 CID, as lotus names messages
(``bafy2bza...``). Each is a hash of a string the caller makes unique.
"""

from __future__ import annotations

import base64
import hashlib

__all__ = ["message_cid", "raw_cid"]

# CIDv1, codec raw (0x55), multihash sha2-256 (0x12), 32 bytes.
_RAW_SHA256 = bytes([0x01, 0x55, 0x12, 0x20])
# CIDv1, codec dag-cbor (0x71), multihash blake2b-256 (0xb220 as a varint), 32 bytes.
_CBOR_BLAKE2B = bytes([0x01, 0x71, 0xA0, 0xE4, 0x02, 0x20])


def _b32(data: bytes) -> str:
    return "b" + base64.b32encode(data).decode().lower().rstrip("=")


def raw_cid(name: str) -> str:
    """``bafkrei...``: the raw-codec CID of the bytes of `name`."""
    return _b32(_RAW_SHA256 + hashlib.sha256(name.encode()).digest())


def message_cid(name: str) -> str:
    """``bafy2bza...``: a message CID made from `name`."""
    return _b32(_CBOR_BLAKE2B + hashlib.blake2b(name.encode(), digest_size=32).digest())
