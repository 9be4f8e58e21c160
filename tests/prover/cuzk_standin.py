"""A stand-in for cuzk that the prover image's entrypoint can start as ``CUZK_BIN``.

Run as ``python tests/prover/cuzk_standin.py --config <file>`` (curio
``extern/cuzk/cuzk-daemon/src/main.rs``: ``-c/--config``). It reads the TOML
it is given, serves ``cuzk.v1.ProvingEngine`` over real gRPC on
``[daemon] listen`` (fleet_agent/cuzk/service.py), answers ``GetStatus``
with the shape cuzk's ``get_status`` builds (curio
``extern/cuzk/cuzk-server/src/service.rs``: queues per proof kind by its
Display string, ``extern/cuzk/cuzk-core/src/types.rs``; loaded SRS HOT with
size 0) and ``Prove`` with an honest proof (simulator/snark.py). It writes its
pid to ``$CUZK_STANDIN_PID`` when set, so a test can kill it (and
``<that>.sigterm`` when a SIGTERM stops it), and the names
of its environment's variables to ``$CUZK_STANDIN_ENV``. Not the
simulator's stand-in (simulator/cuzk.py): only enough for the front's tests.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import tomllib
from pathlib import Path
from typing import Any, cast

import grpc
import grpc.aio

from fleet_agent.cuzk.service import ProvingEngineServicer, add_servicer, channel_options, pb
from simulator.snark import prove


class StandIn:
    """GetStatus and Prove; the other methods answer UNIMPLEMENTED."""

    def __init__(self) -> None:
        self.completed = 0

    async def GetStatus(
        self, request: pb.GetStatusRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.GetStatusResponse:
        return pb.GetStatusResponse(
            loaded_srs=[pb.SRSStatus(circuit_id="porep-32g", tier=pb.SRSStatus.HOT)],
            queues=[pb.QueueStatus(proof_kind="porep-c2", pending=0, in_progress=0)],
            gpus=[pb.GPUStatus(ordinal=0, name="stand-in")],
            total_proofs_completed=self.completed,
        )

    async def Prove(
        self, request: pb.ProveRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.ProveResponse:
        self.completed += 1
        return pb.ProveResponse(
            result=pb.AwaitProofResponse(
                job_id=request.submit.request_id,
                status=pb.AwaitProofResponse.COMPLETED,
                proof=prove(request.submit),
            )
        )


async def serve(listen: str) -> None:
    server = grpc.aio.server(options=channel_options())
    # It serves two methods; add_servicer answers UNIMPLEMENTED for the rest.
    add_servicer(server, cast(ProvingEngineServicer, StandIn()))
    if server.add_insecure_port(listen) == 0:
        sys.exit(f"cuzk stand-in: cannot listen on {listen}")
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    # Written once it serves and a SIGTERM would be seen: a test that waits
    # for the file may then stop or kill it.
    _mark("CUZK_STANDIN_PID", str(os.getpid()))
    await stop.wait()
    await server.stop(0.5)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-c", "--config", type=Path, required=True)
    args = parser.parse_args()
    config = tomllib.loads(args.config.read_text())
    _mark("CUZK_STANDIN_ENV", "\n".join(sorted(os.environ)))
    asyncio.run(serve(config["daemon"]["listen"]))  # returns on SIGTERM only
    if pid_file := os.environ.get("CUZK_STANDIN_PID"):
        Path(pid_file + ".sigterm").write_text("stopped by SIGTERM")


def _mark(variable: str, text: str) -> None:
    """Write `text` to the file $`variable` names, whole or not at all."""
    if path := os.environ.get(variable):
        Path(path + ".tmp").write_text(text)
        os.replace(path + ".tmp", path)


if __name__ == "__main__":
    main()
