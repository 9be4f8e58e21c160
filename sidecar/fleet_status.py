"""The prover status a fleet-agent monitor reads, served on a rented machine.

Curio's proving daemon, cuzk, reports its own state at ``GET /status`` on its
``status_listen`` address (curio ``extern/cuzk/cuzk-core/src/status.rs``,
``StatusSnapshot``; ``cuzk.example.toml``: ``0.0.0.0:9821``). Curio itself
fetches the proof parameters into ``FIL_PROOFS_PARAMETER_CACHE`` and reports
no progress but the files (``lib/fastparamfetch/paramfetch.go``: aria2c
leaves a ``<file>.aria2`` control file while it downloads). Neither says when
its last proof finished or how long it had work: this sidecar watches both
and serves the contract the monitor reads (docs/operations/prover-image.md, "The prover
image"):

    phase, detail, proofs_completed, proofs_failed, proofs_in_flight,
    work_queued, busy_seconds, last_proof_busy_seconds, last_proof_at,
    started_at, time, params {bytes_total, bytes_fetched, ready}

Standard library only (Python 3.8+), one file: the image copies it and its
entrypoint starts it beside Curio (``python3 fleet_status.py &``). It serves
``GET /status`` and ``POST /drain`` on ``PROVER_STATUS_PORT`` (the create
sets it, default 9100). A drain must carry ``Authorization: Bearer`` and the
machine's ``FLEET_DRAIN_TOKEN`` (the create sets it; without one, drains are
refused): it runs ``FLEET_DRAIN_COMMAND`` once (default ``curio cli --machine
$FLEET_CURIO_MACHINE cordon``: the node takes no new tasks, curio
``cmd/curio/cordon.go``) and the status says ``draining``. The command's
stdin is closed: ``curio cli`` without ``--machine`` (or ``CURIO_API_INFO``)
lists the cluster's machines and asks ``Select:`` on stdin (curio
``cmd/curio/cli.go``, ``cliCmd.Before``), which would hold the drain until
its timeout; closed, it fails at once. Settings, from the environment:

- ``CUZK_STATUS_URL``: cuzk's status (default ``http://127.0.0.1:9821/status``).
  cuzk serves none unless its ``[daemon] status_listen`` is set (empty by
  default: curio ``extern/cuzk/cuzk-core/src/config.rs``): while that
  address refuses connections the phase is ``starting`` and says so;
- ``FLEET_CURIO_MACHINE``: the Curio node to cordon, host:port of its
  ``curio run --listen`` (default ``127.0.0.1:12300``, that flag's port:
  curio ``cmd/curio/run.go``);
- ``FIL_PROOFS_PARAMETER_CACHE``: the parameter directory
  (default ``/var/tmp/filecoin-proof-parameters``);
- ``FLEET_PARAMS_BYTES``: the parameters' total size (default 47 GiB, the
  32 GiB PoRep set);
- ``FLEET_SIDECAR_POLL_S``: how often cuzk is read (default 2 s);
- ``FLEET_CUZK_DOWN_S``: how long cuzk may stop answering, once it has
  answered, before the phase is ``error`` (default 60 s).

What cuzk says is read as untrusted: a field that is not the type it should
be counts as absent, and an answer that is not a JSON object as no answer.
"""

from __future__ import annotations

import errno
import hmac
import json
import os
import shlex
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_PARAMS_BYTES = 47 * 1024**3
#: cuzk's answer is a few KB; more is not a status.
MAX_CUZK_BODY = 1024 * 1024
#: The Curio node a drain cordons: ``curio run --listen``'s default port,
#: on this machine (curio ``cmd/curio/run.go``).
DEFAULT_CURIO_MACHINE = "127.0.0.1:12300"
#: What ``starting`` says while cuzk's status address refuses connections.
STATUS_OFF = (
    "cuzk's status server refuses connections at {url}: set [daemon] status_listen in "
    "cuzk.toml (it is off by default)"
)


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return None
    return int(value) if value >= 0 else None


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if value == value and abs(value) != float("inf") else None


def params_on_disk(directory: str) -> tuple[int, bool]:
    """(bytes on disk, whether a download is still under way) in the
    parameter directory: aria2c keeps ``<file>.aria2`` beside a file it is
    still fetching."""
    total, fetching = 0, False
    try:
        names = os.listdir(directory)
    except OSError:
        return 0, True
    for name in names:
        if name.endswith(".aria2"):
            fetching = True
            continue
        try:
            total += os.path.getsize(os.path.join(directory, name))
        except OSError:
            continue
    return total, fetching


class Watch:
    """What the sidecar knows, updated by `observe` (cuzk's answer or None)."""

    def __init__(self, params_dir: str, params_bytes: int, down_s: float) -> None:
        self.params_dir = params_dir
        self.params_bytes = params_bytes
        self.down_s = down_s
        self.lock = threading.Lock()
        self.answered_at: float | None = None  # last good answer from cuzk
        self.uptime: float | None = None
        self.started_at: float | None = None
        self.completed = 0
        self.failed = 0
        self.in_flight = 0
        self.queued = 0
        self.busy = 0.0
        self.last_proof_at: float | None = None
        self.last_proof_busy: float | None = None
        self.seen_at: float | None = None  # the previous observation
        self.refused = ""  # cuzk's status address refused the last read: its URL
        self.draining = False
        self.drain_lock = threading.Lock()

    def observe(self, body: Any, now: float, refused: str = "") -> None:
        """Fold one read of cuzk's status (None: no answer) taken at `now`;
        `refused`: the URL that refused the connection, if it did."""
        with self.lock:
            previous, self.seen_at = self.seen_at, now
            self.refused = refused
            if not isinstance(body, dict):
                return
            raw = body.get("counters")
            counters: dict[str, Any] = raw if isinstance(raw, dict) else {}
            uptime = _float(body.get("uptime_secs"))
            completed = _int(counters.get("total_completed"))
            if uptime is None or completed is None:
                return
            if self.uptime is not None and (uptime < self.uptime or completed < self.completed):
                # A new cuzk process: its counters began again at 0.
                self.busy, self.last_proof_at, self.last_proof_busy = 0.0, None, None
                self.completed = 0
            if self.started_at is None or self.uptime is None or uptime < self.uptime:
                self.started_at = now - uptime
            if previous is not None and self.answered_at is not None and self.in_flight > 0:
                self.busy += max(0.0, now - previous)
            if completed > self.completed:
                self.last_proof_at, self.last_proof_busy = now, self.busy
            pipelines = body.get("pipelines")
            self.in_flight = len(pipelines) if isinstance(pipelines, list) else 0
            self.queued = _int(counters.get("queue_depth")) or 0
            self.completed = completed
            self.failed = _int(counters.get("total_failed")) or 0
            self.uptime = uptime
            self.answered_at = now

    def status(self, now: float) -> dict[str, Any]:
        """The contract's JSON at `now`."""
        fetched, fetching = params_on_disk(self.params_dir)
        ready = not fetching and fetched >= self.params_bytes
        with self.lock:
            if not ready:
                phase = "fetching_params"
                detail = f"parameters {fetched / max(1, self.params_bytes):.0%} on disk"
            elif self.answered_at is None:
                phase = "starting"
                detail = (
                    STATUS_OFF.format(url=self.refused)
                    if self.refused
                    else "waiting for the cuzk daemon to answer"
                )
            elif now - self.answered_at > self.down_s:
                phase = "error"
                detail = f"cuzk daemon not answering for {now - self.answered_at:.0f} s"
            else:
                phase = "proving"
                detail = f"{self.in_flight} in flight, {self.queued} queued"
            return {
                "phase": phase,
                "detail": detail,
                "proofs_completed": self.completed,
                "proofs_failed": self.failed,
                "draining": self.draining,
                "proofs_in_flight": self.in_flight if phase == "proving" else 0,
                "work_queued": self.queued if phase == "proving" else 0,
                "busy_seconds": round(self.busy, 3),
                "last_proof_busy_seconds": (
                    round(self.last_proof_busy, 3) if self.last_proof_busy is not None else None
                ),
                "last_proof_at": self.last_proof_at,
                "started_at": self.started_at,
                "time": now,
                "params": {
                    "bytes_total": self.params_bytes,
                    "bytes_fetched": fetched,
                    "ready": ready,
                },
            }


def read_cuzk(url: str, timeout: float) -> Any:
    """cuzk's status, or None when it does not answer with JSON."""
    return probe_cuzk(url, timeout)[0]


def _refused(exc: BaseException) -> bool:
    """Whether `exc` (urllib wraps it in a URLError) is a refused connection."""
    reason = getattr(exc, "reason", exc)
    return isinstance(reason, ConnectionRefusedError) or (
        isinstance(reason, OSError) and reason.errno == errno.ECONNREFUSED
    )


def probe_cuzk(url: str, timeout: float) -> tuple[Any, bool]:
    """(cuzk's status or None, whether its address refused the connection)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            raw = resp.read(MAX_CUZK_BODY + 1)
    except (OSError, ValueError) as exc:
        return None, _refused(exc)
    return _parsed(raw), False


def _parsed(raw: bytes) -> Any:
    if len(raw) > MAX_CUZK_BODY:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def drain_command(env: Any) -> list[str]:
    """The drain's command: ``FLEET_DRAIN_COMMAND`` as a shell would split
    it, else ``curio cli --machine <FLEET_CURIO_MACHINE> cordon`` (the node
    named, so that curio asks nothing on stdin: curio ``cmd/curio/cli.go``)."""
    given = env.get("FLEET_DRAIN_COMMAND", "")
    if given.strip():
        return shlex.split(given)
    machine = env.get("FLEET_CURIO_MACHINE", "").strip() or DEFAULT_CURIO_MACHINE
    return ["curio", "cli", "--machine", machine, "cordon"]


def drain(watch: Watch, command: list[str]) -> int:
    """Take no new work: run `command` once (later drains only say so); the
    HTTP status to answer."""
    with watch.drain_lock:  # not the status lock: a read must not wait for the command
        if watch.draining:
            return 200
        try:
            # stdin closed: a command that asks (curio cli's "Select:") fails
            # at once instead of holding the drain for its timeout.
            done = subprocess.run(
                command,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=60,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            print(f"fleet_status: drain command failed: {exc}", file=sys.stderr)
            return 502
        if done.returncode != 0:
            print(f"fleet_status: drain command exited {done.returncode}", file=sys.stderr)
            return 502
        with watch.lock:
            watch.draining = True
        return 200


def authorized(given: str, token: str) -> bool:
    """Whether the ``Authorization`` value `given` is ``Bearer <token>``, in
    constant time. Compared as bytes: ``hmac.compare_digest`` raises on a str
    that is not ASCII, and http.server hands over each header as the bytes
    that came, decoded as ISO-8859-1 (``http.client.parse_headers``), so
    encoding it back the same way restores them exactly and never fails. No
    token set: no drain is allowed."""
    if not token:
        return False
    expected = b"Bearer " + token.encode("utf-8", "surrogateescape")
    return hmac.compare_digest(given.encode("iso-8859-1", "replace"), expected)


def _handler(watch: Watch, token: str, command: list[str]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            if self.path.split("?", 1)[0] != "/drain":
                self.send_error(404)
                return
            if not authorized(self.headers.get("Authorization", ""), token):
                self.send_error(401)
                return
            code = drain(watch, command)
            body = json.dumps({"draining": code == 200}).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] != "/status":
                self.send_error(404)
                return
            body = json.dumps(watch.status(time.time())).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return  # a monitor reads every 30 s: no log line each time

    return Handler


def main() -> int:
    env = os.environ
    port = int(env.get("PROVER_STATUS_PORT", "9100"))
    url = env.get("CUZK_STATUS_URL", "http://127.0.0.1:9821/status")
    poll = float(env.get("FLEET_SIDECAR_POLL_S", "2"))
    watch = Watch(
        env.get("FIL_PROOFS_PARAMETER_CACHE", "/var/tmp/filecoin-proof-parameters"),
        int(env.get("FLEET_PARAMS_BYTES", str(DEFAULT_PARAMS_BYTES))),
        float(env.get("FLEET_CUZK_DOWN_S", "60")),
    )

    def follow() -> None:
        while True:
            body, refused = probe_cuzk(url, timeout=max(0.5, poll))
            watch.observe(body, time.time(), url if refused else "")
            time.sleep(poll)

    threading.Thread(target=follow, name="cuzk", daemon=True).start()
    token = env.get("FLEET_DRAIN_TOKEN", "")
    command = drain_command(env)
    server = ThreadingHTTPServer(("0.0.0.0", port), _handler(watch, token, command))
    print(f"fleet_status: serving /status on :{port}, reading {url}", file=sys.stderr)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
