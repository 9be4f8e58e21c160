"""router.py's stack: cuzk stand-ins and the router as processes, taps in front
of the machines whose treatment is measured, and their CPU and memory from /proc.

Each process is ``python -m <module> --listen 127.0.0.1:0 ...`` run from the
repository root with this interpreter; it prints ``listening <host>:<port>``
once serving (simulator/cuzk/__main__.py, router/__main__.py), its stderr
goes to a log file. A `Tap` is a TCP pass-through in this process between
the router and one machine that counts the bytes the router sends there: a
proof's worth of them is a proof sent. That is how the benchmark sees when
the router stopped sending a bad machine work without reading the router's
insides (a gRPC relay would see the request ids, but holds each 50 MB
message twice over while it passes).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench._common import ROOT
from bench.perf._cpu import process_cpu_s

__all__ = ["Proc", "Send", "Tap", "peak_rss_bytes", "start_proc", "stop_all", "write_members"]


@dataclass
class Proc:
    """One process of the stack and what was last read of it."""

    name: str
    proc: asyncio.subprocess.Process
    address: str
    log: Path
    #: CPU seconds when last read (kept once the process is gone).
    cpu_s: float = 0.0
    peak_rss: int = 0
    killed_at: float | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def sample(self) -> None:
        """Read its CPU seconds and peak RSS now (keeps the last on a dead one)."""
        with contextlib.suppress(OSError, ValueError, IndexError):
            self.cpu_s = process_cpu_s(self.pid)
            self.peak_rss = max(self.peak_rss, peak_rss_bytes(self.pid))

    def kill(self) -> None:
        """SIGKILL: a machine gone mid-proof, no goodbye."""
        self.sample()
        self.killed_at = time.monotonic()
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGKILL)


def peak_rss_bytes(pid: int) -> int:
    """VmHWM (the process's peak resident set) from /proc/<pid>/status."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise ValueError("no VmHWM")


async def start_proc(
    name: str, module: str, args: Sequence[str], logs: Path, env: dict[str, str] | None = None
) -> Proc:
    """Start ``python -m module args`` and wait (60 s) for its ``listening`` line."""
    log = logs / f"{name}.log"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        module,
        *args,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=log.open("wb"),
        env={**os.environ, **(env or {})},
    )
    assert proc.stdout is not None
    try:
        async with asyncio.timeout(60):
            while True:
                line = (await proc.stdout.readline()).decode()
                if not line:
                    raise RuntimeError(f"{name} exited before listening; see {log}")
                if line.startswith("listening "):
                    address = line.split()[1]
                    break
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        raise
    # Nothing else is read from stdout: let it drain so the process never blocks on it.
    stdout = proc.stdout
    asyncio.get_running_loop().create_task(_drain(stdout))
    return Proc(name, proc, address, log)


async def _drain(stream: asyncio.StreamReader) -> None:
    while await stream.read(65536):
        pass


async def stop_all(procs: Sequence[Proc]) -> None:
    """SIGINT each (Ctrl-C: they stop cleanly), SIGKILL what is left after 5 s."""
    for p in procs:
        if p.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                p.proc.send_signal(signal.SIGINT)
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(5):
            await asyncio.gather(*(p.proc.wait() for p in procs))
    for p in procs:
        if p.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                p.proc.kill()
            await p.proc.wait()


def write_members(path: Path, addresses: Sequence[str]) -> None:
    """The router's members file: one serving MemberSpec per address
    (fleet_agent/cuzk/witness.py: instance_id, label, address, want)."""
    specs = [
        {"instance_id": i + 1, "label": f"bench-{i + 1}", "address": a, "want": "serve"}
        for i, a in enumerate(addresses)
    ]
    path.write_text(json.dumps(specs, indent=1) + "\n")


@dataclass
class Send:
    """A proof's worth of bytes the router sent a tapped machine, and when."""

    at: float


@dataclass
class Tap:
    """A TCP pass-through in front of one machine that counts what the router
    sends it: each time the bytes towards the machine pass another input's
    size (half-way: a proof's message is its input plus a few hundred bytes of
    fields and HTTP/2 framing; GetStatus polls are tens of bytes), a proof was
    sent. Bytes are copied through in 64 KiB pieces, never held, so a tap
    costs no memory however many 50 MB proofs pass."""

    backend: str
    input_bytes: int
    sends: list[Send] = field(default_factory=list)
    address: str = ""
    upstream_bytes: int = 0
    _server: asyncio.Server | None = None
    _pipes: set[asyncio.Task[None]] = field(default_factory=set)

    async def start(self) -> str:
        """Listen on a free local port; the router is told this address."""
        self._server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.address = f"127.0.0.1:{port}"
        return self.address

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for pipe in list(self._pipes):
            pipe.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        host, port = self.backend.rsplit(":", 1)
        try:
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
        except OSError:
            writer.close()  # the machine is gone: the router sees the connection drop
            return
        pipes = [
            asyncio.create_task(self._pipe(reader, up_writer, count=True)),
            asyncio.create_task(self._pipe(up_reader, writer, count=False)),
        ]
        self._pipes.update(pipes)
        await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
        for pipe in pipes:
            pipe.cancel()
            self._pipes.discard(pipe)
        for w in (writer, up_writer):
            w.close()

    async def _pipe(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, count: bool
    ) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while chunk := await reader.read(65536):
                writer.write(chunk)
                await writer.drain()
                if count:
                    before = self.upstream_bytes
                    self.upstream_bytes += len(chunk)
                    half = self.input_bytes // 2
                    crossed = (self.upstream_bytes + half) // self.input_bytes - (
                        before + half
                    ) // self.input_bytes
                    self.sends += [Send(time.monotonic()) for _ in range(crossed)]
