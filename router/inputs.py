"""A proof's input as the router holds it: wire bytes, and a small header read from them.

A PoRep's vanilla proof is 50-200 MB. The router never parses it into a
message: gRPC hands SubmitProof and Prove their requests as the bytes it
received (``add_raw_input_servicer``), `read_prove` /
`read_submit` walk the protobuf wire format of those bytes and parse only
the small fields (request id, kind, sector size and number, miner,
priority) into a header message, skipping every other length-delimited
field without copying it; the header is all the router reads. A machine
is sent the ``ProveRequest`` bytes as they are (`ProvingEngineStub.ProveRaw`).

So a job in flight costs one copy of its input:

* Prove: the bytes gRPC received are a ``ProveRequest``; they are the job's
  payload, the same object (gRPC's handler frame holds it anyway for the
  whole call).
* SubmitProof: the bytes are a ``SubmitProofRequest``; the payload is them
  behind field 1's tag and length (``ProveRequest.submit``): one copy, made
  only when the request starts a job (`ProofInput.prove_bytes`), and gRPC
  drops the received bytes once SubmitProof returns.

The header parse follows protobuf's rules: it hands every field it keeps to
the real parser (``SubmitProofRequest.FromString``), so repeated scalars,
unknown fields, open enums and the request id's UTF-8 check are protobuf's
own; the skipped fields are all ``bytes`` (10, 11, 22, 30-32) or unknown,
which protobuf would not check either. A ``ProveRequest`` that is not one
``submit`` field (several, merged by protobuf, or other fields) is parsed
whole and written once canonically: Curio's Go client never sends one.
No I/O; no gRPC.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from google.protobuf.message import DecodeError

from fleet_agent.cuzk.service import pb

__all__ = ["MalformedInput", "ProofInput", "frame", "read_message", "read_prove", "read_submit"]

#: ``ProveRequest.submit`` is field 1, length-delimited: tag byte 0x0a.
_SUBMIT_TAG = b"\x0a"
#: ``SubmitProofRequest.request_id``: the one length-delimited field kept.
_REQUEST_ID = 1
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


class MalformedInput(Exception):
    """The bytes are not a request cuzk would take (the text says why, as cuzk's)."""


@dataclass(frozen=True, eq=False)
class ProofInput:
    """One request's input: its header and the bytes it came as."""

    #: The request without its length-delimited fields but the request id.
    header: pb.SubmitProofRequest
    #: Bytes of the ``SubmitProofRequest``: what the router's held bytes count.
    size: int
    #: The bytes received: a ``ProveRequest`` when `framed`, else a ``SubmitProofRequest``.
    data: bytes
    framed: bool

    def prove_bytes(self) -> bytes:
        """The ``ProveRequest`` bytes a machine is sent: the received bytes
        themselves (Prove), or one framed copy of them (SubmitProof)."""
        if self.framed:
            return self.data
        return b"".join((frame(len(self.data)), self.data))


def frame(size: int) -> bytes:
    """Field 1's tag and length: what makes `size` bytes of a
    ``SubmitProofRequest`` a ``ProveRequest`` (at most 11 bytes)."""
    return _SUBMIT_TAG + _encode_varint(size)


def read_prove(data: bytes) -> ProofInput:
    """The input of a Prove call's request bytes (MalformedInput if they are not one)."""
    fields = list(_fields(data, 0, len(data)))
    if len(fields) == 1 and fields[0][:2] == (1, _LEN):
        _, _, _, start, end = fields[0]
        return ProofInput(_header(data, start, end), end - start, data, True)
    # Not one submit field: protobuf's own parse decides; written once canonically.
    try:
        msg = pb.ProveRequest.FromString(data)
    except DecodeError as err:
        raise MalformedInput(f"malformed ProveRequest: {err}") from None
    if not msg.HasField("submit"):
        raise MalformedInput("missing submit field")
    submit = msg.submit.SerializeToString()
    canonical = frame(len(submit)) + submit
    return ProofInput(_header(submit, 0, len(submit)), len(submit), canonical, True)


def read_submit(data: bytes) -> ProofInput:
    """The input of a SubmitProof call's request bytes (MalformedInput if not one)."""
    return ProofInput(_header(data, 0, len(data)), len(data), data, False)


def read_message(req: pb.SubmitProofRequest) -> ProofInput:
    """The input of a request built in this process (tests, a stand-in)."""
    return read_submit(req.SerializeToString())


def _header(data: bytes, start: int, end: int) -> pb.SubmitProofRequest:
    """`data[start:end]` (a SubmitProofRequest) parsed without its big fields."""
    kept = [
        data[at:value_end]
        for number, wire, at, _, value_end in _fields(data, start, end)
        if wire != _LEN or number == _REQUEST_ID
    ]
    try:
        return pb.SubmitProofRequest.FromString(b"".join(kept))
    except DecodeError as err:
        raise MalformedInput(f"malformed SubmitProofRequest: {err}") from None


def _fields(data: bytes, start: int, end: int) -> Iterator[tuple[int, int, int, int, int]]:
    """Each field of the message in `data[start:end]`: (number, wire type,
    where its tag starts, where its value starts, where it ends)."""
    pos = start
    while pos < end:
        at = pos
        key, pos = _varint(data, pos, end)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise MalformedInput("malformed request: field number 0")
        if wire == _VARINT:
            _, value_end = _varint(data, pos, end)
        elif wire == _I64:
            value_end = pos + 8
        elif wire == _I32:
            value_end = pos + 4
        elif wire == _LEN:
            length, pos = _varint(data, pos, end)
            value_end = pos + length
        else:  # groups (3, 4) are not in cuzk's proto; 6 and 7 are no wire type
            raise MalformedInput(f"malformed request: wire type {wire}")
        if value_end > end:
            raise MalformedInput("malformed request: truncated field")
        yield number, wire, at, pos, value_end
        pos = value_end


def _varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """The varint at `pos` and where it ends."""
    value = shift = 0
    while pos < end and shift < 64:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
    raise MalformedInput("malformed request: bad varint")


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
