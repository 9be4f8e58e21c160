"""go-jsonrpc's HTTP server, as Curio's web RPC runs it: a body in, (status, bytes) out.

Touches nothing but the methods it is given. The rules are
filecoin-project/go-jsonrpc's (v0.10.1; Curio pins v0.10.2), handler.go
``handleReader`` and ``handle``, server.go ``rpcError``, websocket.go
``normalizeID``:

- The body is read whole (over 100 MiB: -32700); trimmed; empty: -32600
  "Invalid request" (HTTP 400). A body that starts with ``[`` and ends
  with ``]`` is a batch: its answers are written between ``[`` and ``]``
  joined by ``,`` (a notification's empty answer too), HTTP 200.
- One JSON value is decoded (anything after it is ignored) into the
  request ``{jsonrpc, id, method, params, meta}``, keys matched as Go
  matches struct fields (case-insensitively); a value that is not such an
  object: -32700 "Parse error". An id must be a string, a number or null
  ("failed to parse ID: invalid id type"); a number is echoed as a float64.
- An unknown method: -32601 ``method 'X' not found``. ``params`` must be an
  array (or absent or null: no parameters), else -32700 "unmarshaling param
  array"; a wrong count: -32602 ``wrong param count (method 'X'): N != M``;
  each parameter is decoded into its Go type (``bool``, ``string``,
  ``int64``; JSON null leaves the zero value), else -32700 "unmarshaling
  params for 'X' (param: *T): json: cannot unmarshal ...".
- Protocol errors are HTTP 400 (-32600) or 500 (the others). A method's
  own error is code 1 with HTTP 200. A request without an id (or with a
  null one) is a notification: the method runs and nothing is written.

Only the ``params`` the methods take are modelled: ``meta`` (tracing) is read
and ignored.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .webrpc import rpc_error, rpc_result

__all__ = ["MAX_REQUEST_BYTES", "Method", "MethodError", "serve"]

#: go-jsonrpc DEFAULT_MAX_REQUEST_SIZE.
MAX_REQUEST_BYTES = 100 << 20
_INVALID_REQUEST, _PARSE, _NOT_FOUND, _INVALID_PARAMS = -32600, -32700, -32601, -32602
_FIELDS = ("jsonrpc", "id", "method", "params", "meta")
GoType = Literal["bool", "string", "int64"]
_ZERO: dict[GoType, Any] = {"bool": False, "string": "", "int64": 0}


class _Number(float):
    """A JSON number with a fraction or exponent, keeping its text (Go's
    errors quote the literal)."""

    literal: str

    def __new__(cls, text: str) -> _Number:
        out = super().__new__(cls, text)
        out.literal = text
        return out


def _loads(text: str) -> Any:
    """One JSON value from the start of `text` (what follows is ignored)."""
    return json.JSONDecoder(parse_float=_Number, parse_constant=_no_constant).raw_decode(text)[0]


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # Go accepts no NaN or Infinity


class MethodError(Exception):
    """A method's returned error (its message is the xerrors chain Curio writes)."""


@dataclass(frozen=True, slots=True)
class Method:
    """A registered method: its parameters' Go types (after ctx) and the call."""

    params: Sequence[GoType]
    call: Callable[..., Any]


class _Protocol(Exception):
    def __init__(self, code: int, message: str, request_id: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.request_id = code, message, request_id

    def answer(self) -> tuple[int, bytes]:
        status = 400 if self.code == _INVALID_REQUEST else 500
        return status, rpc_error(self.message, self.request_id, self.code)


def serve(body: bytes, methods: Mapping[str, Method]) -> tuple[int, bytes]:
    """The HTTP status and body go-jsonrpc answers `body` with."""
    if len(body) > MAX_REQUEST_BYTES:
        return _Protocol(
            _PARSE, f"request bigger than maximum {MAX_REQUEST_BYTES} allowed"
        ).answer()
    text = body.strip(b" \t\r\n\v\f")
    if not text:
        return _Protocol(_INVALID_REQUEST, "Invalid request").answer()
    if text.startswith(b"[") and text.endswith(b"]"):
        return _batch(text, methods)
    try:
        return 200, _one(_request(text), methods)
    except _Protocol as exc:
        return exc.answer()


def _batch(text: bytes, methods: Mapping[str, Method]) -> tuple[int, bytes]:
    try:
        items = _loads(text.decode("utf-8", "replace"))
        if not isinstance(items, list):
            raise ValueError
        reqs = [_fields(item) for item in items]
    except (ValueError, _Protocol):
        return _Protocol(_PARSE, "Parse error").answer()
    if not reqs:
        return _Protocol(_INVALID_REQUEST, "Invalid request").answer()
    # "[" is written first: HTTP 200 is sent, whatever comes after.
    parts = []
    for req in reqs:
        try:
            parts.append(_one(req, methods))
        except _Protocol as exc:
            parts.append(exc.answer()[1])
    return 200, b"[" + b",".join(parts) + b"]"


def _request(text: bytes) -> dict[str, Any]:
    try:
        value = _loads(text.decode("utf-8", "replace"))
    except ValueError:
        raise _Protocol(_PARSE, "Parse error") from None
    return _fields(value)


def _fields(value: Any) -> dict[str, Any]:
    """The request struct's fields from a decoded value (Go's matching)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _Protocol(_PARSE, "Parse error")
    req: dict[str, Any] = {}
    for key, item in value.items():
        name = key if key in _FIELDS else key.lower()
        if name in _FIELDS:
            req[name] = item
    if not isinstance(req.get("method", ""), str) or not isinstance(req.get("jsonrpc", ""), str):
        raise _Protocol(_PARSE, "Parse error")
    request_id = req.get("id")
    if request_id is not None and (
        isinstance(request_id, bool) or not isinstance(request_id, str | int | float)
    ):
        kind = "[]interface {}" if isinstance(request_id, list) else "map[string]interface {}"
        if isinstance(request_id, bool):
            kind = "bool"
        raise _Protocol(_PARSE, f"failed to parse ID: invalid id type: {kind}", request_id)
    return req


def _one(req: dict[str, Any], methods: Mapping[str, Method]) -> bytes:
    """One request's answer (b"" for a notification); `_Protocol` for its error."""
    name, request_id = req.get("method", ""), req.get("id")
    method = methods.get(name)
    if method is None:
        raise _Protocol(_NOT_FOUND, f"method '{name}' not found", request_id)
    raw = req.get("params")
    if raw is None:
        raw = []
    if not isinstance(raw, list):
        found = "object" if isinstance(raw, dict) else _json_kind(raw)
        raise _Protocol(
            _PARSE,
            "unmarshaling param array: json: cannot unmarshal "
            f"{found} into Go value of type []jsonrpc.param",
            request_id,
        )
    if len(raw) != len(method.params):
        raise _Protocol(
            _INVALID_PARAMS,
            f"wrong param count (method '{name}'): {len(raw)} != {len(method.params)}",
            request_id,
        )
    args = [
        _decode(value, kind, name, request_id)
        for value, kind in zip(raw, method.params, strict=True)
    ]
    try:
        result = method.call(*args)
    except MethodError as exc:
        return b"" if request_id is None else rpc_error(str(exc), request_id)
    return b"" if request_id is None else rpc_result(result, request_id)


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, str):
        return "string"
    if isinstance(value, int | float):
        return "number"
    return "array" if isinstance(value, list) else "object"


def _decode(value: Any, kind: GoType, method: str, request_id: Any) -> Any:
    """`value` decoded into Go type `kind` as encoding/json would."""
    if value is None:
        return _ZERO[kind]
    found = _json_kind(value)
    if kind == "bool" and found == "bool":
        return value
    if kind == "string" and found == "string":
        return value
    if kind == "int64" and found == "number":
        if isinstance(value, int) and -(2**63) <= value < 2**63:
            return value
        found = f"number {getattr(value, 'literal', value)}"
    raise _Protocol(
        _PARSE,
        f"unmarshaling params for '{method}' (param: *{kind}): "
        f"json: cannot unmarshal {found} into Go value of type {kind}",
        request_id,
    )
