"""Serve and call ``cuzk.v1.ProvingEngine`` over grpc.aio, typed.

No generated grpc module: the eight methods are unary-unary, so a table of
(name, request type, response type) is the whole binding. A server
implements `ProvingEngineServicer`; a client holds a `ProvingEngineStub`.
Both the router and the simulator's cuzk stand-in use them, and tests drive
either with the same stub Curio's client would be to them.

Raw inputs: a PoRep's ``SubmitProof``/``Prove`` request is 50-200 MB. A
servicer registered with `add_raw_input_servicer` (`RawInputServicer`) gets those
two requests as the wire bytes gRPC received (an identity deserializer: no
parsed copy beside them), and `ProvingEngineStub.ProveRaw` sends wire bytes
as they are (an identity serializer: no message, no serialized copy). The
router holds a proof's input once that way (router/inputs.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import grpc
import grpc.aio

from . import proving_pb2 as pb

__all__ = [
    "MAX_MESSAGE_BYTES",
    "RAW_INPUT_METHODS",
    "SERVICE",
    "ProvingEngineServicer",
    "ProvingEngineStub",
    "RawInputServicer",
    "add_raw_input_servicer",
    "add_servicer",
    "channel_options",
    "pb",
]

#: The full service name on the wire.
SERVICE = "cuzk.v1.ProvingEngine"

#: Curio's client raises both message limits to 256 MiB (lib/cuzk/client.go):
#: a PoRep's vanilla proof is 50-200 MB.
MAX_MESSAGE_BYTES = 256 * 1024 * 1024

#: The methods whose request carries a proof's input (a vanilla proof):
#: a `RawInputServicer` gets their requests as wire bytes.
RAW_INPUT_METHODS = frozenset({"SubmitProof", "Prove"})

_METHODS: dict[str, tuple[type[Any], type[Any]]] = {
    "SubmitProof": (pb.SubmitProofRequest, pb.SubmitProofResponse),
    "AwaitProof": (pb.AwaitProofRequest, pb.AwaitProofResponse),
    "Prove": (pb.ProveRequest, pb.ProveResponse),
    "CancelProof": (pb.CancelProofRequest, pb.CancelProofResponse),
    "GetStatus": (pb.GetStatusRequest, pb.GetStatusResponse),
    "GetMetrics": (pb.GetMetricsRequest, pb.GetMetricsResponse),
    "PreloadSRS": (pb.PreloadSrsRequest, pb.PreloadSrsResponse),
    "EvictSRS": (pb.EvictSrsRequest, pb.EvictSrsResponse),
}


def channel_options(max_bytes: int = MAX_MESSAGE_BYTES) -> list[tuple[str, int]]:
    """Message limits for a channel or a server, Curio's by default."""
    return [
        ("grpc.max_send_message_length", max_bytes),
        ("grpc.max_receive_message_length", max_bytes),
    ]


class _Servicer(Protocol):
    """The methods every ProvingEngine server implements the same way (each may abort)."""

    async def AwaitProof(
        self, request: pb.AwaitProofRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.AwaitProofResponse: ...

    async def CancelProof(
        self, request: pb.CancelProofRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.CancelProofResponse: ...

    async def GetStatus(
        self, request: pb.GetStatusRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.GetStatusResponse: ...

    async def GetMetrics(
        self, request: pb.GetMetricsRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.GetMetricsResponse: ...

    async def PreloadSRS(
        self, request: pb.PreloadSrsRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.PreloadSrsResponse: ...

    async def EvictSRS(
        self, request: pb.EvictSrsRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.EvictSrsResponse: ...


class ProvingEngineServicer(_Servicer, Protocol):
    """What a ProvingEngine server implements (each method may abort)."""

    async def SubmitProof(
        self, request: pb.SubmitProofRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.SubmitProofResponse: ...

    async def Prove(
        self, request: pb.ProveRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.ProveResponse: ...


class RawInputServicer(_Servicer, Protocol):
    """A ProvingEngine server that reads SubmitProof's and Prove's requests itself:
    each gets the wire bytes of a ``SubmitProofRequest`` / ``ProveRequest``."""

    async def SubmitProof(
        self, request: bytes, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.SubmitProofResponse: ...

    async def Prove(
        self, request: bytes, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.ProveResponse: ...


def add_servicer(server: grpc.aio.Server, servicer: ProvingEngineServicer) -> None:
    """Serve `servicer`'s methods on `server`; one it lacks answers UNIMPLEMENTED,
    as a cuzk build without it would."""
    _register(server, servicer, frozenset())


def add_raw_input_servicer(server: grpc.aio.Server, servicer: RawInputServicer) -> None:
    """As `add_servicer`, but SubmitProof and Prove get their requests' wire
    bytes (`RawInputServicer`): gRPC parses nothing of a 50-200 MB input."""
    _register(server, servicer, RAW_INPUT_METHODS)


def _register(server: grpc.aio.Server, servicer: object, raw: frozenset[str]) -> None:
    handlers = {
        name: grpc.unary_unary_rpc_method_handler(
            getattr(servicer, name, _unimplemented),
            # None: gRPC hands over the bytes it received, no parsed copy.
            request_deserializer=None if name in raw else req.FromString,
            response_serializer=resp.SerializeToString,
        )
        for name, (req, resp) in _METHODS.items()
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))


async def _unimplemented(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
    await context.abort(grpc.StatusCode.UNIMPLEMENTED, "method not implemented")


_Call = Callable[..., Awaitable[Any]]


class ProvingEngineStub:
    """A client of the service on one channel; each method is an awaitable call.

    Calls take grpc's keyword arguments (``timeout=``, ``metadata=``)."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        def bind(name: str) -> _Call:
            req, resp = _METHODS[name]
            return channel.unary_unary(
                f"/{SERVICE}/{name}",
                request_serializer=req.SerializeToString,
                response_deserializer=resp.FromString,
            )

        self._calls = {name: bind(name) for name in _METHODS}
        # Identity serializer: the bytes are sent as given, no message or
        # serialized copy made. A one-message client stream, not a unary call:
        # grpc.aio sends a unary request and awaits its answer in one batch,
        # so gRPC core's copy of the request lives until the answer (a whole
        # proof); a stream's write frees it once written. On the wire both are
        # one length-prefixed message and END_STREAM: cuzk's unary Prove
        # serves it the same.
        self._prove_raw = channel.stream_unary(
            f"/{SERVICE}/Prove",
            request_serializer=None,
            response_deserializer=pb.ProveResponse.FromString,
        )

    async def SubmitProof(
        self, request: pb.SubmitProofRequest, **kw: Any
    ) -> pb.SubmitProofResponse:
        return await self._calls["SubmitProof"](request, **kw)  # type: ignore[no-any-return]

    async def AwaitProof(self, request: pb.AwaitProofRequest, **kw: Any) -> pb.AwaitProofResponse:
        return await self._calls["AwaitProof"](request, **kw)  # type: ignore[no-any-return]

    async def Prove(self, request: pb.ProveRequest, **kw: Any) -> pb.ProveResponse:
        return await self._calls["Prove"](request, **kw)  # type: ignore[no-any-return]

    async def ProveRaw(self, request: bytes, **kw: Any) -> pb.ProveResponse:
        """Prove with a ``ProveRequest`` already on the wire: `request` is sent as
        is, and gRPC's own copy of it is freed once written (see __init__)."""
        return await self._prove_raw(iter((request,)), **kw)  # type: ignore[no-any-return]

    async def CancelProof(
        self, request: pb.CancelProofRequest, **kw: Any
    ) -> pb.CancelProofResponse:
        return await self._calls["CancelProof"](request, **kw)  # type: ignore[no-any-return]

    async def GetStatus(self, request: pb.GetStatusRequest, **kw: Any) -> pb.GetStatusResponse:
        return await self._calls["GetStatus"](request, **kw)  # type: ignore[no-any-return]

    async def GetMetrics(self, request: pb.GetMetricsRequest, **kw: Any) -> pb.GetMetricsResponse:
        return await self._calls["GetMetrics"](request, **kw)  # type: ignore[no-any-return]

    async def PreloadSRS(self, request: pb.PreloadSrsRequest, **kw: Any) -> pb.PreloadSrsResponse:
        return await self._calls["PreloadSRS"](request, **kw)  # type: ignore[no-any-return]

    async def EvictSRS(self, request: pb.EvictSrsRequest, **kw: Any) -> pb.EvictSrsResponse:
        return await self._calls["EvictSRS"](request, **kw)  # type: ignore[no-any-return]
