"""Curio's provider-side answers as Curio writes them, byte for byte: the
web RPC's JSON-RPC envelope, ``PSListQueue`` rows and the ``curio_psvc_*``
metrics' exposition. Tests and the simulator build their fixtures here, so
no fixture invents a shape Curio never sends.

Sources (filecoin-project/curio):

- The envelope: go-jsonrpc's server (``response.MarshalJSON`` marshals a map,
  so the keys come sorted: ``{"id":1,"jsonrpc":"2.0","result":...}``;
  ``json.NewEncoder(w).Encode`` ends it with a newline; a method's error is
  ``{"error":{"code":1,"message":...},"id":1,"jsonrpc":"2.0"}`` with HTTP 200).
  Go escapes ``<``, ``>`` and ``&`` as ``\\u003c``, ``\\u003e``, ``\\u0026``.
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
  at ``/debug/metrics`` on the API port (cmd/curio/rpc/rpc.go). The help
  texts are Curio's own, the one of ``newly_added_total`` included, although
  the counter counts asks created at the market (task_request.go, after
  ``CreateWorkAsk``), not work inserted.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "LIST_QUEUE_LIMIT",
    "psvc_metrics",
    "queue_row",
    "rpc_error",
    "rpc_result",
]

#: PSListQueue's ``LIMIT``.
LIST_QUEUE_LIMIT = 15


def go_time(at: datetime) -> str:
    """A ``time.Time`` as Go's encoding/json writes it: RFC 3339 with the
    fraction's trailing zeros trimmed (here in UTC, ``Z``)."""
    text = at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")
    if at.microsecond:
        text += "." + f"{at.microsecond:06d}".rstrip("0")
    return text + "Z"


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


def _go_json(value: Any) -> bytes:
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return (text + "\n").encode()


def rpc_result(result: Any, request_id: Any = 1) -> bytes:
    """A method's answer, as go-jsonrpc writes it."""
    return _go_json({"id": request_id, "jsonrpc": "2.0", "result": result})


def rpc_error(message: str, request_id: Any = 1) -> bytes:
    """A method's error (the Go method returned one), as go-jsonrpc writes it: HTTP 200."""
    return _go_json({"error": {"code": 1, "message": message}, "id": request_id, "jsonrpc": "2.0"})


def psvc_metrics(*, queue_count: float, asks_created: int, extra: str = "") -> str:
    """The ``curio_psvc_proofshare_*`` series a provider node exports (the
    gauge and the counter the demand reading uses), with their HELP and
    TYPE lines, and `extra` exposition text around them."""
    return (
        extra + "# HELP curio_psvc_proofshare_newly_added_total Total number of new work "
        "requests inserted locally\n"
        "# TYPE curio_psvc_proofshare_newly_added_total counter\n"
        f"curio_psvc_proofshare_newly_added_total {asks_created}\n"
        "# HELP curio_psvc_proofshare_queue_count Current proofshare request queue count\n"
        "# TYPE curio_psvc_proofshare_queue_count gauge\n"
        f"curio_psvc_proofshare_queue_count {queue_count:g}\n" + extra
    )
