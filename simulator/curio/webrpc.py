"""Curio's provider-side answers as Curio writes them, byte for byte: the
web RPC's JSON-RPC envelope, ``PSListQueue`` rows and the ``curio_psvc_*``
metrics' exposition. The simulator's Curio stand-in (simulator/curio/web.py)
and the tests' fixtures are built here, so no fixture invents a shape Curio
never sends. Touches nothing: pure functions.

Sources (filecoin-project/curio, and the libraries it pins):

- The envelope: go-jsonrpc's server (response.go ``MarshalJSON`` marshals a
  map, so the keys come sorted: ``{"id":1,"jsonrpc":"2.0","result":...}``;
  handler.go writes it with ``json.NewEncoder(w).Encode``, which ends it
  with a newline; a method's error is ``{"error":{"code":1,"message":...},
  "id":1,"jsonrpc":"2.0"}`` with HTTP 200; server.go ``rpcError`` writes a
  protocol error the same way, with HTTP 400 for -32600 and 500 for the
  rest). Go's encoding/json escapes ``<``, ``>``, ``&``, U+2028 and U+2029,
  writes other text raw, and a float64 id (every JSON number id) in its
  shortest form (``1``, ``1.5``, ``1e+21``, ``1e-7``).
- Times: a ``time.Time`` is RFC 3339 with the fraction's trailing zeros
  trimmed (here in UTC, ``Z``; pgx gives timestamptz in the process's zone,
  a UTC container's).
- A queue row: web/api/webrpcporep/proofshare.go ``ProofShareQueueItem``,
  fields in struct order; ``service_id`` is the row's ``request_cid`` (the
  query selects ``request_cid as service_id``); NULL task ids are ``0``
  (web/api/webrpctypes/nulljson.go ``NullInt64.MarshalJSON``); the task id
  goes back to NULL once its step is done (tasks/proofshare/task_prove.go,
  task_submit.go); ``payment_amount`` is ``""`` until submitted or for a
  challenge proof. ``PSListQueue`` answers the 15 newest rows, newest first
  (``ORDER BY obtained_at DESC LIMIT 15``), ``[]`` when there are none.
- The metrics: tasks/proofshare/metrics.go, exported by the OpenCensus
  Prometheus exporter under namespace ``curio`` (lib/metrics/exporter.go)
  at ``/debug/metrics`` on the API port (cmd/curio/rpc/rpc.go), through
  client_golang's registry: families sorted by name, each with its HELP and
  TYPE lines, samples sorted by label value, values as Go's ``%g``
  shortest form (prometheus/common expfmt ``writeFloat``). The help texts
  are Curio's own, the one of ``newly_added_total`` included, although the
  counter counts asks created at the market (task_request.go, after
  ``CreateWorkAsk``), not work inserted.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

__all__ = [
    "LIST_QUEUE_LIMIT",
    "METRICS_CONTENT_TYPE",
    "PSVC_METRICS",
    "Family",
    "exposition",
    "go_float",
    "go_json",
    "go_time",
    "psvc_metrics",
    "queue_row",
    "rpc_error",
    "rpc_result",
]

#: PSListQueue's ``LIMIT``.
LIST_QUEUE_LIMIT = 15
#: What promhttp answers a scrape without an Accept header (prometheus/common
#: expfmt ``Negotiate``: FmtText with the default underscore escaping).
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"

_PSVC = "curio_psvc_proofshare_"
#: tasks/proofshare/metrics.go: name -> (type, help).
PSVC_METRICS: dict[str, tuple[str, str]] = {
    _PSVC + "adder_commits_total": (
        "counter",
        "Total number of successful task additions scheduled by Adder",
    ),
    _PSVC + "adder_hold_decisions_total": (
        "counter",
        "Total number of hold decisions made by Adder",
    ),
    _PSVC + "need_asks": ("gauge", "Number of asks still needed in current Do loop iteration"),
    _PSVC + "newly_added_total": ("counter", "Total number of new work requests inserted locally"),
    _PSVC + "queue_count": ("gauge", "Current proofshare request queue count"),
    _PSVC + "to_request_remaining": ("gauge", "Remaining requests to fulfill for high-water mark"),
}


def go_time(at: datetime) -> str:
    """A ``time.Time`` as Go's encoding/json writes it: RFC 3339 with the
    fraction's trailing zeros trimmed (here in UTC, ``Z``)."""
    text = at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")
    if at.microsecond:
        text += "." + f"{at.microsecond:06d}".rstrip("0")
    return text + "Z"


def go_float(value: float, *, json_form: bool = False) -> str:
    """A float64 as Go writes it: strconv's shortest ``%g`` (the
    exposition's values: ``%e`` from 1e+06 and below 1e-04), or with
    `json_form` encoding/json's (``%f`` from 1e-6 to 1e21, else ``%e`` with
    the exponent unpadded)."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if json_form and str(value).startswith("-") else "0"
    digits = Decimal(repr(float(value))).normalize()
    if json_form:
        # Decimal's %e never pads the exponent: Go's after its "e-09 to e-9" clean-up.
        return format(digits, "f" if 1e-6 <= abs(value) < 1e21 else "e")
    # %g with the shortest precision: %e when the exponent is < -4 or >= 6.
    _, coeffs, exp = digits.as_tuple()
    assert isinstance(exp, int)
    e = len(coeffs) + exp - 1
    if -4 <= e < 6:
        return format(digits, "f")
    mantissa = "".join(map(str, coeffs))
    if len(mantissa) > 1:
        mantissa = mantissa[0] + "." + mantissa[1:]
    return f"{'-' if value < 0 else ''}{mantissa}e{'-' if e < 0 else '+'}{abs(e):02d}"


def go_json(value: Any) -> str:
    """`value` as Go's json.Marshal writes it (compact; no floats expected)."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    for raw, escaped in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(raw, escaped)
    return text


def _id(request_id: Any) -> str:
    # go-jsonrpc normalizeID: a JSON number is a float64, written in Go's form.
    if isinstance(request_id, float) or (
        isinstance(request_id, int) and not isinstance(request_id, bool)
    ):
        return go_float(float(request_id), json_form=True)
    return go_json(request_id)


def rpc_result(result: Any, request_id: Any = 1) -> bytes:
    """A method's answer, as go-jsonrpc writes it."""
    return f'{{"id":{_id(request_id)},"jsonrpc":"2.0","result":{go_json(result)}}}\n'.encode()


def rpc_error(message: str, request_id: Any = 1, code: int = 1) -> bytes:
    """An error answer, as go-jsonrpc writes it: a method's own (code 1,
    HTTP 200) or a protocol error (the JSON-RPC codes; HTTP 400 or 500)."""
    error = go_json({"code": code, "message": message})
    return f'{{"error":{error},"id":{_id(request_id)},"jsonrpc":"2.0"}}\n'.encode()


def queue_row(
    request_cid: str,
    obtained_at: datetime,
    *,
    compute_task_id: int | None = None,
    compute_done: bool = False,
    submit_task_id: int | None = None,
    submit_done: bool = False,
    was_pow: bool = False,
    payment_amount: str = "",
) -> dict[str, Any]:
    """One ``ProofShareQueueItem`` as PSListQueue sends it (a None task id
    is the NULL column, sent as 0)."""
    return {
        "service_id": request_cid,
        "obtained_at": go_time(obtained_at),
        "compute_task_id": compute_task_id or 0,
        "compute_done": compute_done,
        "submit_task_id": submit_task_id or 0,
        "submit_done": submit_done,
        "was_pow": was_pow,
        "payment_amount": payment_amount,
    }


@dataclass(frozen=True, slots=True)
class Family:
    """One metric family's samples: ``((label, value) pairs, number)``."""

    name: str
    samples: Sequence[tuple[Sequence[tuple[str, str]], float]]


def exposition(families: Iterable[Family]) -> str:
    """The text format client_golang writes for `families` (the psvc
    families' HELP and TYPE from `PSVC_METRICS`; a family without samples
    is left out, as the registry leaves it out)."""
    out = []
    for family in sorted(families, key=lambda f: f.name):
        if not family.samples:
            continue
        kind, help_text = PSVC_METRICS[family.name]
        out.append(f"# HELP {family.name} {help_text}\n# TYPE {family.name} {kind}\n")
        for labels, value in sorted(family.samples, key=lambda s: [v for _, v in s[0]]):
            label_text = ",".join(f'{k}="{v}"' for k, v in labels)
            braces = f"{{{label_text}}}" if labels else ""
            out.append(f"{family.name}{braces} {go_float(value)}\n")
    return "".join(out)


def psvc_metrics(
    *,
    queue_count: float,
    asks_created: int,
    extra: str = "",
    others: Mapping[str, float] | None = None,
) -> str:
    """The ``curio_psvc_proofshare_*`` series a provider node exports: the
    gauge and the counter the demand reading uses, any `others` by their
    short name (``need_asks``: value), with `extra` exposition text around them."""
    values = {"newly_added_total": float(asks_created), "queue_count": queue_count}
    values.update(others or {})
    return (
        extra
        + exposition(Family(_PSVC + name, [((), value)]) for name, value in values.items())
        + extra
    )
