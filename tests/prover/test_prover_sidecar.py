"""The sidecar on a rented machine (sidecar/fleet_status.py), run as the image
runs it, against a stand-in for cuzk's ``GET /status`` that answers the
shape cuzk serialises (curio ``extern/cuzk/cuzk-core/src/status.rs``,
``StatusSnapshot``) and a parameter directory filled as aria2c fills it
(curio ``lib/fastparamfetch/paramfetch.go``). What it serves is read by the
monitor's own parser (fleet_agent/fleet/prover_status.py)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from fleet_agent.fleet.prover_status import parse_status
from fleet_agent.fleet.provers import ProverRead
from tests.helpers import eventually
from tests.helpers.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
PARAMS_BYTES = 1000


class FakeCuzk:
    """cuzk's status endpoint: `body` as it answers now, or down (HTTP 503)."""

    def __init__(self) -> None:
        self.body: Any = None
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if fake.body is None:
                    self.send_error(503)
                    return
                raw = json.dumps(fake.body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/status"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, *, uptime: float, completed: int, jobs: int, queued: int) -> None:
        """A snapshot with `jobs` pipelines in flight, as cuzk's StatusSnapshot."""
        self.body = {
            "uptime_secs": uptime,
            "memory": {"total_bytes": 1, "used_bytes": 0, "available_bytes": 1},
            "synthesis": {"max_concurrent": 2, "active": min(jobs, 2)},
            "pipelines": [
                {
                    "job_id": f"job-{k}",
                    "proof_kind": "porep-c2",
                    "started_secs_ago": 3.0,
                    "total_partitions": 10,
                    "partitions_done": 4,
                    "partitions": [],
                }
                for k in range(jobs)
            ],
            "gpu_workers": [
                {
                    "worker_id": 0,
                    "gpu_ordinal": 0,
                    "state": "proving" if jobs else "idle",
                    "current_job": None,
                    "current_partition": None,
                    "busy_secs": None,
                }
            ],
            "allocations": {"srs": [], "pce": []},
            "counters": {
                "total_completed": completed,
                "total_failed": 0,
                "completed_by_kind": {"porep-c2": completed},
                "failed_by_kind": {},
                "queue_depth": queued,
            },
            "buffers": {
                "synth_in_flight": 0,
                "provers_in_flight": jobs,
                "aux_in_flight": 0,
                "shells_in_flight": 0,
                "pending_handles": 0,
            },
        }


@pytest.fixture
def cuzk() -> Iterator[FakeCuzk]:
    fake = FakeCuzk()
    yield fake
    fake.server.shutdown()


@pytest.fixture
def sidecar(cuzk: FakeCuzk, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The sidecar as a process of its own; (its status URL, the parameter dir)."""
    port = free_port()
    params = tmp_path / "params"
    params.mkdir()
    env = {
        **os.environ,
        "PROVER_STATUS_PORT": str(port),
        "CUZK_STATUS_URL": cuzk.url,
        "FIL_PROOFS_PARAMETER_CACHE": str(params),
        "FLEET_PARAMS_BYTES": str(PARAMS_BYTES),
        "FLEET_SIDECAR_POLL_S": "0.05",
        "FLEET_CUZK_DOWN_S": "1",
        "FLEET_DRAIN_TOKEN": "t0ken",
        # Stands in for `curio cli cordon`: leaves a mark to count the runs.
        "FLEET_DRAIN_COMMAND": f"sh -c 'echo x >> {tmp_path / 'cordoned'}'",
    }
    with (tmp_path / "sidecar.err").open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "sidecar" / "fleet_status.py")], env=env, stderr=err
        )
    try:
        yield f"http://127.0.0.1:{port}/status", params
    finally:
        proc.kill()
        proc.wait()


async def _read(url: str) -> dict[str, Any] | None:
    try:
        async with httpx.AsyncClient(timeout=2) as http:
            resp = await http.get(url)
    except httpx.HTTPError:
        return None
    return dict(resp.json()) if resp.status_code == 200 else None


async def _until(url: str, check: Any, what: str) -> ProverRead:
    """The first status the monitor's parser reads that passes `check`."""

    async def probe() -> ProverRead | None:
        body = await _read(url)
        read = parse_status(body) if body is not None else None
        return read if read is not None and read.ok and check(read, body) else None

    found = await eventually(probe, timeout=15, what=what)
    assert found is not None
    return found


async def test_the_sidecar_follows_a_machine_from_download_to_idle_to_a_dead_daemon(
    cuzk: FakeCuzk, sidecar: tuple[str, Path]
) -> None:
    url, params = sidecar
    (params / "v28-stacked-proof.params").write_bytes(b"x" * 400)
    (params / "v28-stacked-proof.params.aria2").write_bytes(b"c")
    fetching = await _until(url, lambda r, b: r.phase == "fetching_params", "a download")
    assert fetching.bytes_fetched == 400
    # The download ends (aria2c removes its control file); cuzk is not up yet.
    (params / "v28-stacked-proof.params").write_bytes(b"x" * PARAMS_BYTES)
    (params / "v28-stacked-proof.params.aria2").unlink()
    await _until(url, lambda r, b: r.phase == "starting" and b["params"]["ready"], "starting")
    # cuzk answers with a proof in flight and two waiting.
    cuzk.answer(uptime=5.0, completed=0, jobs=1, queued=2)
    busy = await _until(
        url, lambda r, b: r.phase == "proving" and (r.busy_seconds or 0) > 0.3, "busy time"
    )
    assert (busy.proofs_in_flight, busy.work_queued, busy.proofs_completed) == (1, 2, 0)
    started = busy.started_at
    cuzk.answer(uptime=9.0, completed=1, jobs=1, queued=0)
    done = await _until(url, lambda r, b: r.proofs_completed == 1, "a finished proof")
    assert done.last_proof_at is not None and done.last_proof_busy_seconds is not None
    assert 0 < done.last_proof_busy_seconds <= (done.busy_seconds or 0)
    assert done.started_at == pytest.approx(started or 0, abs=1.0)
    # No work at all: idle, its busy clock stands still.
    cuzk.answer(uptime=12.0, completed=1, jobs=0, queued=0)
    idle = await _until(url, lambda r, b: r.idle, "an idle prover")
    again = await _until(url, lambda r, b: r.idle and r.time != idle.time, "a later read")
    assert again.busy_seconds == idle.busy_seconds
    # The daemon stops answering: an error once FLEET_CUZK_DOWN_S has passed.
    cuzk.body = None
    dead = await _until(url, lambda r, b: r.phase == "error", "a dead daemon")
    assert "not answering" in dead.detail


async def test_a_restarted_daemon_starts_the_counters_again(
    cuzk: FakeCuzk, sidecar: tuple[str, Path]
) -> None:
    url, params = sidecar
    (params / "p.params").write_bytes(b"x" * PARAMS_BYTES)
    cuzk.answer(uptime=500.0, completed=7, jobs=1, queued=0)
    first = await _until(url, lambda r, b: r.proofs_completed == 7, "the first process")
    cuzk.answer(uptime=2.0, completed=0, jobs=0, queued=0)
    second = await _until(url, lambda r, b: r.proofs_completed == 0, "the second process")
    assert (second.started_at or 0) > (first.started_at or 0) + 100
    assert second.last_proof_at is None


@pytest.mark.parametrize("body", [[1, 2], {"uptime_secs": "soon"}, {"counters": {}}, "x" * 10])
async def test_what_cuzk_says_is_untrusted(
    cuzk: FakeCuzk, sidecar: tuple[str, Path], body: Any
) -> None:
    url, params = sidecar
    (params / "p.params").write_bytes(b"x" * PARAMS_BYTES)
    cuzk.body = body
    read = await _until(url, lambda r, b: True, "a status")
    assert read.phase == "starting" and read.proofs_completed == 0


async def test_a_drain_needs_the_machines_token_and_cordons_once(
    cuzk: FakeCuzk, sidecar: tuple[str, Path]
) -> None:
    url, params = sidecar
    (params / "p.params").write_bytes(b"x" * PARAMS_BYTES)
    cuzk.answer(uptime=5.0, completed=1, jobs=1, queued=0)
    await _until(url, lambda r, b: r.phase == "proving", "proving")
    drain = url.replace("/status", "/drain")
    cordoned = params.parent / "cordoned"
    async with httpx.AsyncClient(timeout=5) as http:
        assert (await http.post(drain)).status_code == 401
        wrong = {"Authorization": "Bearer t0kem"}
        assert (await http.post(drain, headers=wrong)).status_code == 401
        assert not cordoned.exists()
        right = {"Authorization": "Bearer t0ken"}
        first = await http.post(drain, headers=right)
        assert first.status_code == 200 and first.json() == {"draining": True}
        assert (await http.post(drain, headers=right)).status_code == 200
    assert cordoned.read_text() == "x\n", "the command ran once"
    read = await _until(url, lambda r, b: r.draining, "draining")
    assert read.phase == "proving"


def _raw_post(url: str, authorization: bytes) -> bytes:
    """POST /drain with `authorization` sent as these bytes (an HTTP client
    would refuse or re-encode them); the whole answer, b"" if the server
    dropped the connection."""
    port = int(url.split(":")[2].split("/")[0])
    request = (
        b"POST /drain HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: " + authorization
    ) + b"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(request)
        answer = b""
        while chunk := conn.recv(4096):
            answer += chunk
    return answer


@pytest.mark.parametrize(
    "authorization",
    [
        "Bearer t0kén".encode(),  # UTF-8
        "Bearer t0kén".encode("latin-1"),  # one byte over 0x7f
        b"Bearer \xff\xfe",
        "Bearer t0ken\u2028".encode(),
    ],
    ids=["utf-8", "latin-1", "bytes", "separator"],
)
async def test_a_drain_with_a_token_that_is_not_ascii_is_refused_cleanly(
    cuzk: FakeCuzk, sidecar: tuple[str, Path], authorization: bytes
) -> None:
    """Compared as text, a non-ASCII value raised in the handler: a traceback
    and a dropped connection instead of an answer."""
    url, params = sidecar
    (params / "p.params").write_bytes(b"x" * PARAMS_BYTES)
    await _until(url, lambda r, b: True, "a status")
    answer = await asyncio.to_thread(_raw_post, url.replace("/status", "/drain"), authorization)
    assert answer.startswith(b"HTTP/1.0 401 "), answer[:80]
    assert not (params.parent / "cordoned").exists()
    # The sidecar goes on: it still serves, still drains with the right token.
    async with httpx.AsyncClient(timeout=5) as http:
        right = await http.post(
            url.replace("/status", "/drain"), headers={"Authorization": "Bearer t0ken"}
        )
    assert right.status_code == 200
    assert "Traceback" not in (params.parent / "sidecar.err").read_text()


# ------------------------------------------------- the drain's curio, cuzk's status port

#: A stand-in for the ``curio`` binary: ``curio cli`` without ``--machine``
#: (nor ``CURIO_API_INFO``) prints the cluster's machines and reads a choice
#: from stdin, failing on EOF ("reading selection: EOF"), as curio
#: ``cmd/curio/cli.go`` (``cliCmd.Before``) does; with one, it records its
#: arguments and succeeds, as a cordon that reached the node.
FAKE_CURIO = """\
import os, sys
args = sys.argv[1:]
if args[:1] == ["cli"] and "--machine" not in args and not os.environ.get("CURIO_API_INFO"):
    print("Available machines:")
    print("1. 10.0.0.7:12300 healthy")
    print("Select: ", end="", flush=True)
    if not sys.stdin.readline():
        print("reading selection: EOF", file=sys.stderr)
        sys.exit(1)
with open(os.environ["FAKE_CURIO_LOG"], "a") as log:
    log.write(" ".join(args) + "\\n")
"""


def _fake_curio(directory: Path) -> Path:
    """A ``curio`` on a PATH of its own in `directory`; its log's path."""
    bin_dir = directory / "bin"
    bin_dir.mkdir()
    curio = bin_dir / "curio"
    curio.write_text(f"#!{sys.executable}\n{FAKE_CURIO}")
    curio.chmod(0o755)
    return directory / "curio.log"


def _start_sidecar(
    tmp_path: Path, cuzk_url: str, **env: str
) -> tuple[subprocess.Popen[bytes], str]:
    """The sidecar with its stdin open and never written, as a container's
    may be, the fake curio first on its PATH; (the process, its status URL)."""
    port = free_port()
    params = tmp_path / "params"
    params.mkdir(exist_ok=True)
    (params / "p.params").write_bytes(b"x" * PARAMS_BYTES)
    full = {
        **os.environ,
        "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "FAKE_CURIO_LOG": str(tmp_path / "curio.log"),
        "PROVER_STATUS_PORT": str(port),
        "CUZK_STATUS_URL": cuzk_url,
        "FIL_PROOFS_PARAMETER_CACHE": str(params),
        "FLEET_PARAMS_BYTES": str(PARAMS_BYTES),
        "FLEET_SIDECAR_POLL_S": "0.05",
        "FLEET_DRAIN_TOKEN": "t0ken",
        **env,
    }
    if "FLEET_DRAIN_COMMAND" not in env:
        full.pop("FLEET_DRAIN_COMMAND", None)  # the sidecar's default command
    with (tmp_path / "sidecar.err").open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "sidecar" / "fleet_status.py")],
            env=full,
            stdin=subprocess.PIPE,
            stderr=err,
        )
    return proc, f"http://127.0.0.1:{port}/status"


async def _drain(url: str) -> int:
    async with httpx.AsyncClient(timeout=5) as http:
        resp = await http.post(
            url.replace("/status", "/drain"), headers={"Authorization": "Bearer t0ken"}
        )
    return resp.status_code


async def test_the_drain_cordons_the_node_it_names_without_asking(
    cuzk: FakeCuzk, tmp_path: Path
) -> None:
    """The default drain names the node (`--machine`, FLEET_CURIO_MACHINE):
    curio then asks nothing; without it curio's picker would read stdin."""
    log = _fake_curio(tmp_path)
    cuzk.answer(uptime=5.0, completed=1, jobs=1, queued=0)
    proc, url = _start_sidecar(tmp_path, cuzk.url, FLEET_CURIO_MACHINE="10.0.0.7:12300")
    try:
        await _until(url, lambda r, b: r.phase == "proving", "proving")
        assert await _drain(url) == 200
    finally:
        proc.kill()
        proc.wait()
    assert log.read_text() == "cli --machine 10.0.0.7:12300 cordon\n"


async def test_the_drain_never_waits_on_stdin(cuzk: FakeCuzk, tmp_path: Path) -> None:
    """An operator's command that asks (curio cli without --machine) reads a
    closed stdin: it fails at once (502) instead of holding the drain for
    its 60 s timeout while the sidecar's own stdin stays open."""
    log = _fake_curio(tmp_path)
    cuzk.answer(uptime=5.0, completed=1, jobs=1, queued=0)
    proc, url = _start_sidecar(tmp_path, cuzk.url, FLEET_DRAIN_COMMAND="curio cli cordon")
    try:
        await _until(url, lambda r, b: r.phase == "proving", "proving")
        assert await _drain(url) == 502
    finally:
        proc.kill()
        proc.wait()
    assert not log.exists()


async def test_starting_says_when_cuzk_serves_no_status(tmp_path: Path) -> None:
    """cuzk's status server is off unless `[daemon] status_listen` is set
    (curio extern/cuzk/cuzk-core/src/config.rs: empty by default): a refused
    connection is named in `starting`'s detail."""
    closed = f"http://127.0.0.1:{free_port()}/status"
    proc, url = _start_sidecar(tmp_path, closed)
    try:
        read = await _until(url, lambda r, b: "status_listen" in r.detail, "the hint")
    finally:
        proc.kill()
        proc.wait()
    assert read.phase == "starting" and closed in read.detail
