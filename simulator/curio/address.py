"""Filecoin addresses as go-address parses them, and key addresses made from a seed.

Touches nothing: pure functions. A wallet the operator gives ``PSSetMeta``
goes through ``address.NewFromString`` (filecoin-project/go-address
address.go ``decode``): a network letter ``f``/``t``, a protocol digit
(0 ID, 1 secp256k1, 2 actor, 3 BLS), then for 0 a decimal actor id and for
the others the payload and a 4-byte blake2b checksum of protocol byte +
payload in unpadded lowercase base32; secp256k1 and actor payloads are 20
bytes. The errors are go-address's (``ErrInvalidLength``,
``ErrUnknownNetwork``, ``ErrUnknownProtocol``, ``ErrInvalidPayload``,
``ErrInvalidChecksum``). The empty string is go-address's undefined
address, not an error (Curio's chain call refuses it next).

`key_address` makes valid secp256k1 addresses for the simulated providers
and tests; `actor_id` is the simulated chain's actor id of a key address
(a stable hash, at least 10,000: ids below are builtin and genesis actors).
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass

__all__ = ["Address", "AddressError", "actor_id", "key_address", "parse_address"]

_MAX_LENGTH = 86  # go-address MaxAddressStringLength: 2 + 84 (BLS)
_CHECKSUM_BYTES = 4
_ALPHABET = frozenset("abcdefghijklmnopqrstuvwxyz234567")


class AddressError(ValueError):
    """A string go-address refuses; the message is go-address's."""


@dataclass(frozen=True, slots=True)
class Address:
    """A parsed address: its protocol and, for an ID address, the id."""

    text: str
    protocol: int
    id: int | None = None


def _checksum(protocol: int, payload: bytes) -> bytes:
    return hashlib.blake2b(bytes([protocol]) + payload, digest_size=_CHECKSUM_BYTES).digest()


def _b32(data: bytes) -> str:
    return base64.b32encode(data).decode().lower().rstrip("=")


def key_address(seed: str) -> str:
    """A valid mainnet secp256k1 address (``f1...``) derived from `seed`."""
    payload = hashlib.blake2b(seed.encode(), digest_size=20).digest()
    return "f1" + _b32(payload + _checksum(1, payload))


def actor_id(key: str) -> int:
    """The simulated chain's actor id of key address `key` (stable, >= 10,000)."""
    digest = hashlib.sha256(key.encode()).digest()
    return 10_000 + int.from_bytes(digest[:4], "big") % 90_000_000


def parse_address(text: str) -> Address | None:
    """``address.NewFromString(text)``; None for the undefined address ``""``."""
    if text in ("", "<empty>"):
        return None
    if not 3 <= len(text) <= _MAX_LENGTH:
        raise AddressError("invalid address length")
    if text[0] not in "ft":
        raise AddressError("unknown address network")
    if text[1] not in "0123":
        raise AddressError("unknown address protocol")
    protocol, raw = int(text[1]), text[2:]
    if protocol == 0:
        if len(raw) > 20:
            raise AddressError("invalid address length")
        if not raw.isascii() or not raw.isdigit() or int(raw) >= 2**64:
            raise AddressError("invalid address payload")
        return Address(text, 0, int(raw))
    bad = next((i for i, c in enumerate(raw) if c not in _ALPHABET), None)
    try:
        if bad is not None:
            raise ValueError
        data = base64.b32decode(raw.upper() + "=" * (-len(raw) % 8))
    except ValueError:
        raise AddressError(f"illegal base32 data at input byte {bad or 0}") from None
    if len(data) <= _CHECKSUM_BYTES:
        raise AddressError("invalid address payload")
    payload, checksum = data[:-_CHECKSUM_BYTES], data[-_CHECKSUM_BYTES:]
    if protocol in (1, 2) and len(payload) != 20:
        raise AddressError("invalid address payload")
    if _checksum(protocol, payload) != checksum:
        raise AddressError("invalid address checksum")
    return Address(text, protocol)
