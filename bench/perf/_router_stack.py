"""router.py's stack: cuzk stand-ins and the router as processes, taps in front
of the machines whose treatment is measured, and their CPU and memory from /proc.

Each process is ``python -m <module> --listen 127.0.0.1:0 ...`` run from the
repository root with this interpreter; it prints ``listening <host>:<port>``
once serving (simulator/cuzk/__main__.py, router/__main__.py), its stderr
goes to a log file. A `Tap` is a gRPC pass-through in this process between
the router and one machine: it records every proof the router sends there
(Prove or SubmitProof: when, which request, how it ended), which is how the
benchmark sees when the router stopped sending a bad machine work without
reading the router's insides.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

from bench._common import ROOT
from bench.perf._cpu import process_cpu_s
from fleet_agent.cuzk.service import ProvingEngineStub, add_servicer, channel_options, pb

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
    """One proof the router sent to a tapped machine."""

    at: float
    request_id: str
    method: str
    #: "completed" (whatever the proof), "status:<STATUS>", "rpc:<CODE>" once
    #: it ended; "" while in flight.
    outcome: str = ""
    ended: float | None = None


_Ctx = grpc.aio.ServicerContext[Any, Any]
_Forward = Callable[[Any, _Ctx], Awaitable[Any]]


@dataclass
class Tap:
    """A pass-through ProvingEngine in front of one machine that records sends."""

    backend: str
    sends: list[Send] = field(default_factory=list)
    address: str = ""
    _server: grpc.aio.Server | None = None
    _channel: grpc.aio.Channel | None = None

    async def start(self) -> str:
        """Serve on a free local port; the router is told this address."""
        self._channel = grpc.aio.insecure_channel(self.backend, options=channel_options())
        stub = ProvingEngineStub(self._channel)
        self._server = grpc.aio.server(options=channel_options())
        add_servicer(self._server, _TapService(self, stub))  # type: ignore[arg-type]
        port = self._server.add_insecure_port("127.0.0.1:0")
        await self._server.start()
        self.address = f"127.0.0.1:{port}"
        return self.address

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(0)
        if self._channel is not None:
            await self._channel.close(None)


class _TapService:
    """Forwards each call with the caller's deadline; notes the proofs sent."""

    def __init__(self, tap: Tap, stub: ProvingEngineStub) -> None:
        self.tap = tap
        self.stub = stub
        for name in ("AwaitProof", "CancelProof", "GetStatus", "GetMetrics", "PreloadSRS"):
            setattr(self, name, self._forward(name))
        self.EvictSRS = self._forward("EvictSRS")

    def _forward(self, name: str, send: Send | None = None) -> _Forward:
        method = getattr(self.stub, name)

        async def call(request: Any, context: _Ctx) -> Any:
            left = context.time_remaining()
            timeout = left if left is not None and left < 1e6 else None
            try:
                reply = await method(request, timeout=timeout)
            except grpc.aio.AioRpcError as err:
                if send is not None:
                    send.outcome, send.ended = f"rpc:{err.code().name}", time.monotonic()
                await context.abort(err.code(), err.details() or "")
                raise
            if send is not None:
                status = reply.result.status if name == "Prove" else pb.AwaitProofResponse.COMPLETED
                send.outcome = (
                    "completed"
                    if status == pb.AwaitProofResponse.COMPLETED
                    else f"status:{pb.AwaitProofResponse.Status.Name(status)}"
                )
                send.ended = time.monotonic()
            return reply

        return call

    async def Prove(self, request: pb.ProveRequest, context: _Ctx) -> pb.ProveResponse:
        send = Send(time.monotonic(), request.submit.request_id, "Prove")
        self.tap.sends.append(send)
        reply: pb.ProveResponse = await self._forward("Prove", send)(request, context)
        return reply

    async def SubmitProof(
        self, request: pb.SubmitProofRequest, context: _Ctx
    ) -> pb.SubmitProofResponse:
        send = Send(time.monotonic(), request.request_id, "SubmitProof")
        self.tap.sends.append(send)
        reply: pb.SubmitProofResponse = await self._forward("SubmitProof", send)(request, context)
        return reply
