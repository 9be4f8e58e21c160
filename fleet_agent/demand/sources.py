"""What the demand sources answer, read without I/O: Curio's queue and
metrics, and the check of the source's URL.

**Curio** (filecoin-project/curio), a node selling SNARK proofs on the
market, is read through two of its HTTP servers:

- its web GUI (off by default: ``[Subsystems] EnableWebGui``, or the
  built-in ``gui`` layer; ``GuiAddress`` default 0.0.0.0:4701,
  deps/config/types.go; no authentication, web/srv.go): JSON-RPC 2.0 at
  ``/api/webrpc/v0`` (web/srv.go mounts web/api/routes.go under ``/api``,
  which mounts web/api/webrpcporep/routes.go under ``/webrpc``, which
  serves web/api/webrpc/routes.go's ``/v0``), method
  ``CurioWeb.PSListQueue`` (web/api/webrpcporep/proofshare.go): rows of the
  ``proofshare_queue`` table (harmony/harmonydb/sql/20250115-proofshare.sql)
  with ``obtained_at``, ``compute_task_id``, ``compute_done``. A NULL task
  id comes as ``0`` (web/api/webrpctypes/nulljson.go), and the prove task
  gives a row a task id within seconds, before a machine takes it: a task
  id does not say the row is being proved. A row's deadline is
  ``obtained_at`` + 45 minutes ("Proofs must complete within 45 minutes":
  documentation/en/experimental-features/Snark-Market.md).
  **PSListQueue returns the 15 newest rows only** (``LIMIT 15``): on a
  node with more open rows the oldest, with the earliest deadlines, are
  not in the answer;
- its RPC server (``curio run --listen``, default port 12300:
  cmd/curio/run.go), which serves Prometheus text at ``/debug/metrics``
  (cmd/curio/rpc/rpc.go; namespace ``curio``, lib/metrics/exporter.go;
  tasks/proofshare/metrics.go): the gauge
  ``curio_psvc_proofshare_queue_count`` counts the rows waiting for a
  machine (not computed, and no task or an unowned one:
  tasks/proofshare/task_request.go), over the whole cluster and without
  the 15-row cap: it is **queued**, and the other open rows are in flight.
  The counter ``curio_psvc_proofshare_newly_added_total`` counts the asks
  the node created at the market (incremented after ``CreateWorkAsk``, in
  spite of its help text, "work requests inserted locally"): each ask
  becomes at most one assignment, so over an hour it is the arrivals the
  node asked for, an upper bound of those it got. The node asks for more
  work only while at most ``RequestQueueLowWaterMark`` = 5 rows wait, up to
  ``RequestQueueHighWaterMark`` = 8 (task_request.go): above 5 waiting it
  asks for none, so the reading is **saturated** (a lower bound) there.

Curio counts no proofs done or late in these interfaces: both are 0.

**The URL** (`FLEET_DEMAND_URL`) is the operator's: a Curio GUI sits on a
private network, so private and loopback addresses are allowed, but
link-local ones (169.254.0.0/16, fe80::/10: the clouds' metadata service),
multicast, unspecified and the metadata services' names are refused, and
so are credentials in the URL. So are the IPv6 forms that hide where they
lead (site-local, NAT64 for local use, and a NAT64, 6to4 or Teredo address
of an IPv4 address that is not global: fleet_agent/addresses.py, the rule
the prover status reader uses too). A bearer token (`FLEET_DEMAND_TOKEN`)
needs https unless the host is loopback or a private address.
"""

from __future__ import annotations

import ipaddress
import math
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from fleet_agent.addresses import v6_form_refusal

from .reading import MAX_COUNT, MAX_TOTAL, DemandReading, Refused, parse_count, parse_time

__all__ = [
    "CURIO_ARRIVALS",
    "CURIO_DEADLINE_MINUTES",
    "CURIO_HIGH_WATER_MARK",
    "CURIO_LOW_WATER_MARK",
    "CURIO_METRICS_PATH",
    "CURIO_METRICS_PORT",
    "CURIO_QUEUE_COUNT",
    "CURIO_RPC_PATH",
    "curio_metrics_origin",
    "curio_reading",
    "curio_request",
    "demand_url",
    "metric_sum",
]

CURIO_RPC_PATH = "/api/webrpc/v0"
CURIO_METRICS_PATH = "/debug/metrics"
CURIO_ARRIVALS = "curio_psvc_proofshare_newly_added_total"
CURIO_QUEUE_COUNT = "curio_psvc_proofshare_queue_count"
#: tasks/proofshare/task_request.go: the node requests work while at most
#: LOW rows wait, and then up to HIGH.
CURIO_LOW_WATER_MARK = 5
CURIO_HIGH_WATER_MARK = 8
CURIO_DEADLINE_MINUTES = 45
#: `curio run --listen`'s default port, where /debug/metrics is served.
CURIO_METRICS_PORT = 12300
#: PSListQueue's `LIMIT 15` (web/api/webrpcporep/proofshare.go): a list
#: this long may have been cut.
CURIO_LISTED_ROWS = 15
#: Rows read from one PSListQueue answer (Curio sends 15).
_MAX_ROWS = 1000
_METADATA_NAMES = frozenset(
    {"metadata", "metadata.google.internal", "metadata.goog", "instance-data"}
)


def curio_request(request_id: int = 1) -> dict[str, Any]:
    """The JSON-RPC 2.0 call of ``CurioWeb.PSListQueue`` (it takes no parameters)."""
    return {"jsonrpc": "2.0", "method": "CurioWeb.PSListQueue", "params": [], "id": request_id}


def metric_sum(lines: list[str], name: str) -> float | None:
    """The sum of `name`'s samples (every label set) in Prometheus text
    lines; None when there is none. Values that are not finite and
    non-negative make it None too: a counter is neither."""
    total, seen = 0.0, False
    for line in lines:
        if not line.startswith(name) or line.startswith("#"):
            continue
        rest = line[len(name) :]
        if rest[:1] == "{":
            close = rest.rfind("}")
            if close < 0:
                continue
            rest = rest[close + 1 :]
        elif rest[:1] not in (" ", "\t"):
            continue  # another metric whose name starts with this one
        fields = rest.split()
        if not fields:
            continue
        try:
            value = float(fields[0])
        except ValueError:
            return None
        if not (math.isfinite(value) and value >= 0):
            return None
        total, seen = total + value, True
    return total if seen else None


def _rows(answer: Any) -> list[Any]:
    if not isinstance(answer, dict) or answer.get("jsonrpc") != "2.0":
        raise Refused("PSListQueue: not a JSON-RPC 2.0 answer")
    if answer.get("error") is not None:
        raise Refused("PSListQueue answered an error")
    rows = answer.get("result")
    if rows is None:
        return []  # Go's nil slice: an empty queue
    if not isinstance(rows, list):
        raise Refused("PSListQueue: result is not a list")
    if len(rows) > _MAX_ROWS:
        raise Refused(f"PSListQueue: more than {_MAX_ROWS} rows")
    return rows


def curio_reading(answer: Any, metric_lines: list[str], now: datetime) -> DemandReading | str:
    """The reading in a PSListQueue answer and the metrics' lines (only
    those of the two metrics are needed), taken at `now`; or why there is
    none, in one line."""
    try:
        open_rows = without_task = 0
        deadlines: list[datetime] = []
        rows = _rows(answer)
        whole = len(rows) < CURIO_LISTED_ROWS
        for row in rows:
            if not isinstance(row, dict):
                raise Refused("PSListQueue: a row is not an object")
            done = row.get("compute_done")
            if not isinstance(done, bool):
                raise Refused("PSListQueue: compute_done is not true or false")
            # Curio sends a NULL task id as 0; None is read the same.
            task = parse_count(row, "compute_task_id", 2**63 - 1, required=False)
            if done:
                continue
            obtained = parse_time(row.get("obtained_at"), "obtained_at")
            deadlines.append(obtained + timedelta(minutes=CURIO_DEADLINE_MINUTES))
            open_rows += 1
            without_task += task == 0
        arrived = metric_sum(metric_lines, CURIO_ARRIVALS)
        count = metric_sum(metric_lines, CURIO_QUEUE_COUNT)
        values = {"arrivals": arrived or 0.0, "queue": count if count is not None else 0.0}
        # The same bounds as a generic answer's fields.
        parse_count(values, "arrivals", MAX_TOTAL)
        waiting = parse_count({"queue": math.floor(values["queue"])}, "queue", MAX_COUNT)
        if count is None:
            # Without the gauge, a row with a task id counts as in flight:
            # some of those still wait for a machine.
            waiting = without_task
        elif whole:
            # The gauge is set only when the Adder runs (task_request.go):
            # while a request task loops it is stale, and may count rows
            # already taken. A whole list bounds it.
            waiting = min(waiting, open_rows)
        deadlines.sort()
        return DemandReading(
            as_of=now,
            queued=waiting,
            in_flight=max(0, open_rows - waiting),
            arrived_total=int(values["arrivals"]),
            deadlines=deadlines,
            saturated=waiting > CURIO_LOW_WATER_MARK,
            whole=whole,
            source="curio",
        )
    except Refused as exc:
        return str(exc)


def curio_metrics_origin(gui_origin: str) -> str:
    """The node's RPC origin that serves /debug/metrics, by default: the
    GUI's host on `CURIO_METRICS_PORT`."""
    parts = urlsplit(gui_origin)
    host = parts.hostname or ""
    literal = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{literal}:{CURIO_METRICS_PORT}"


def _host_refusal(host: str) -> str | None:
    if host.lower().rstrip(".") in _METADATA_NAMES:
        return "a cloud metadata service"
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None  # a name: the operator's resolver answers for it
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        elif (form := v6_form_refusal(ip)) is not None:
            return form
    if ip.is_link_local:
        return "link-local (the clouds' metadata service lives there)"
    if ip.is_multicast or ip.is_unspecified:
        return "not an address to read from"
    if ip == ipaddress.ip_address("fd00:ec2::254"):
        return "a cloud metadata service"
    return None


def _is_near(host: str) -> bool:
    """Loopback, `localhost` or a private address: a token may go in the clear."""
    if host.lower() == "localhost":
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_loopback or ip.is_private


def demand_url(raw: str, name: str, *, token: bool = False) -> str:
    """`raw` stripped of a trailing slash, checked (see the module doc);
    `ValueError` starting with `name` (one line) when it is refused."""
    url = raw.strip().rstrip("/")
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        parts.port  # noqa: B018 - raises on a port that is no port
    except ValueError:
        raise ValueError(f"{name} is not a URL, not {raw!r}") from None
    if parts.scheme not in ("http", "https") or not host:
        raise ValueError(f"{name} must be http(s)://host[:port][/path], not {raw!r}")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"{name} must not carry credentials (use FLEET_DEMAND_TOKEN)")
    if parts.fragment:
        raise ValueError(f"{name} must not carry a fragment, not {raw!r}")
    refusal = _host_refusal(host)
    if refusal is not None:
        raise ValueError(f"{name} refused: {host} is {refusal}")
    if token and parts.scheme == "http" and not _is_near(host):
        raise ValueError(
            f"{name} must be https when FLEET_DEMAND_TOKEN is set, unless it points at "
            f"loopback or a private address: plain http would send the token in the clear"
        )
    return url
