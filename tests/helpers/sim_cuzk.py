"""Router-mode machines in the simulator, reached as the router reaches them.

A create carries exactly what the router path's creates carry
(fleet_agent/cuzk/credentials.py ``machine_env`` plus ``-p 9821:9821``); the
machine's front is found from its row (``ports["9821/tcp"][0]["HostPort"]``
at ``public_ipaddr``, as a client reads any mapped port) and called over
``machine_channel`` with the router's client credential from an `Authority`
(TLS, the machine's name checked). Requests are shaped as Curio builds them
(curio ``lib/ffi/cuzk_funcs.go``: ``porep-<miner>-<sector>``).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio

from fleet_agent.cuzk.channels import machine_channel
from fleet_agent.cuzk.credentials import Authority, ClientCredential, machine_env
from fleet_agent.cuzk.service import ProvingEngineStub, pb
from simulator import SimServer
from testkit.sim_helpers import PROVER_CREATE, advance_until, api, find_offer, rent, row
from tests.helpers import eventually

__all__ = [
    "CUZK_HOST",
    "DROPPED",
    "RouterMachine",
    "boot",
    "cuzk_truth",
    "front_address",
    "preload",
    "refused",
    "router_env",
    "start_proof",
]

#: A host the router image starts on: 128 GiB of RAM at least (prover_image/
#: entrypoint.py ``MIN_RAM_GIB``, within its 5 % slack), all of it rented.
CUZK_HOST: dict[str, Any] = {"cpu_ram": {"gte": 131_072}}
#: A refused call fails within this (grpc retries a refused connect after a
#: backoff under a second at first).
REFUSED_S = 2.0
#: The statuses a call sees when the machine's servers go away under it.
DROPPED = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED, grpc.StatusCode.INTERNAL)


def router_env(authority: Authority, label: str) -> dict[str, str]:
    """What a router-mode create's env carries: the machine's credentials,
    the CA, the front's port, and the front's port mapped."""
    env = machine_env(authority.machine_credential(label), authority.ca_pem)
    return {**env, "-p 9821:9821": "1"}


def cuzk_truth(sim: SimServer, instance_id: int) -> dict[str, Any]:
    """The control API's truth of the machine's cuzk (``GET /_sim/cuzk``)."""
    with api(sim) as c:
        resp = c.get("/_sim/cuzk")
    resp.raise_for_status()
    (found,) = (m for m in resp.json()["machines"] if m["id"] == instance_id)
    return dict(found)


@dataclass
class RouterMachine:
    """One rented router-mode machine and how to reach its front."""

    sim: SimServer
    instance_id: int
    label: str
    address: str
    client: ClientCredential
    offer: dict[str, Any]

    def channel(self, label: str | None = None) -> grpc.aio.Channel:
        """A channel to its front, as the router opens one (`label`: the
        machine the caller believes it is)."""
        return machine_channel(self.address, label or self.label, self.client)

    def act(self, action: str) -> None:
        """A control action on the instance (stop, start, freeze, ...)."""
        with api(self.sim) as c:
            c.post(f"/_sim/instances/{self.instance_id}/{action}").raise_for_status()

    def behave(self, behaviour: str, **params: Any) -> None:
        """Its host's cuzk behaves so from now (``POST /_sim/cuzk/{id}``)."""
        with api(self.sim) as c:
            resp = c.post(f"/_sim/cuzk/{self.instance_id}", json={"behaviour": behaviour, **params})
        resp.raise_for_status()


def front_address(shown: dict[str, Any]) -> str:
    """``host:port`` of the front, from the row's mapping of 9821/tcp."""
    mapped = shown["ports"]["9821/tcp"][0]["HostPort"]
    return f"{str(shown['public_ipaddr']).strip()}:{mapped}"


def boot(
    sim: SimServer,
    authority: Authority,
    label: str,
    *,
    env: dict[str, str] | None = None,
    serve: bool = True,
    **filters: Any,
) -> RouterMachine:
    """Rent a machine in router mode (`env`: the create's, router_env's by
    default) and advance the clock until its cuzk serves (`serve`) or its
    container runs."""
    offer = find_offer(sim, **{**CUZK_HOST, **filters})
    body = {**PROVER_CREATE, "env": env if env is not None else router_env(authority, label)}
    instance_id = rent(sim, offer["id"], label=label, **{k: v for k, v in body.items()})
    if serve:
        advance_until(sim, lambda: cuzk_truth(sim, instance_id)["serving"], step=300)
    else:
        advance_until(sim, lambda: row(sim, instance_id)["actual_status"] == "running", step=60)
    return RouterMachine(
        sim,
        instance_id,
        label,
        front_address(row(sim, instance_id)),
        authority.router_client(),
        offer,
    )


async def preload(sim: SimServer, stub: ProvingEngineStub) -> None:
    """Load the PoRep circuit (30-90 sim seconds) with the clock fast, then
    stop the clock: from here it moves only when a test says so."""
    sim.market.set_speed(20_000)
    await stub.PreloadSRS(pb.PreloadSrsRequest(circuit_id="porep-32g"), timeout=5)
    sim.market.set_speed(0)


async def start_proof(
    stub: ProvingEngineStub, req: pb.SubmitProofRequest, timeout: float = 10.0
) -> asyncio.Task[pb.ProveResponse]:
    """Prove `req` in a task, returned once a GPU works on it (GetStatus)."""
    task = asyncio.create_task(stub.Prove(pb.ProveRequest(submit=req), timeout=timeout))

    async def working() -> bool:
        status = await stub.GetStatus(pb.GetStatusRequest(), timeout=2)
        return any(g.current_job_id == req.request_id for g in status.gpus)

    await eventually(working, timeout=5)
    return task


async def refused(channel: grpc.aio.Channel) -> grpc.StatusCode:
    """The code a GetStatus over `channel` fails with (it must fail)."""
    async with channel:
        try:
            await ProvingEngineStub(channel).GetStatus(pb.GetStatusRequest(), timeout=REFUSED_S)
        except grpc.aio.AioRpcError as exc:
            return exc.code()
    raise AssertionError("the call was answered")
