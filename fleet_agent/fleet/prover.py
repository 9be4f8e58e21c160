"""What runs on a rented machine, and what a machine needs to run it.

Worker settings (``FLEET_PROVER_*``), never model decisions. Pure pydantic, so
the guardrails and the search query can use it without loading anything else.

Two ways to prove (`ProverSpec.mode`, ``FLEET_PROVER_MODE``; docs/operations/prover-image.md,
"The prover image"):

* ``router`` (the default): the machine runs cuzk behind a TLS front and
  nothing else; the operator's own Curio sends it SNARKs through our router
  (``fleet-agent router``, issue 52) and verifies each one. The create
  carries nothing of ours but the machine's own credential (its key and
  certificate, and the CA's certificate, which is public): a host that reads
  its environment learns only how to answer the router as itself.
* ``curio_on_host`` (the old path): Curio itself runs on the rented machine,
  which means the host is trusted with the cluster's credentials (Curio
  reaches harmonydb and Lotus with them). The create maps the sidecar's status port and
  carries the machine's drain token (sidecar/fleet_status.py).

How the prover starts: vast.ai's ``ssh`` and ``jupyter`` runtypes replace the
image's ENTRYPOINT with vast.ai's own (it starts sshd/jupyter and then runs
``onstart``); the ``args`` runtype keeps the image's ENTRYPOINT and passes
``args`` to it in place of its CMD (docs: ``api-reference/creating-instances-with-api.mdx``,
"Entrypoint Behavior"). The default is ``args`` with no ``args``: the image
runs exactly as built. ``-p <port>:<port>`` in ``env`` asks for the front's
(or the sidecar's status) port to be mapped to a public port (the "Environment Variables and
Ports" section there), which only hosts with direct ports can do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from fleet_agent.fleet.load_time import DEFAULT_IMAGE_GB

__all__ = [
    "CUZK_MIN_MACHINE_RAM_GIB",
    "DEFAULT_FRONT_PORT",
    "DRAIN_TOKEN_ENV",
    "ENTRYPOINT_RUNTYPES",
    "LOOPBACK_ENV",
    "MIN_RAM_ENV",
    "MODE_ENV",
    "RUNTYPES",
    "STATUS_PORT_ENV",
    "ProverMode",
    "ProverSpec",
]

#: How a rented machine proves (see the module's docstring).
ProverMode = Literal["router", "curio_on_host"]
#: The port the machine's TLS front listens on, mapped to a public port
#: (fleet_agent/cuzk/credentials.py, `machine_env`: ``FLEET_FRONT_PORT``, default 9821).
DEFAULT_FRONT_PORT = 9821
#: cuzk's minimum: "Sufficient system RAM for SRS residency (minimum 128 GiB,
#: recommended 256+ GiB)" (curio
#: ``documentation/en/experimental-features/cuzk-proving-daemon.md``,
#: "Requirements"); one daemon per machine whatever its GPUs, so it is the
#: machine's floor, not a per-GPU one. A machine fitted with 128 GiB lists
#: and reads a little less (its MemTotal is ~125 GiB), so the floor asked of
#: an offer is 95 % of it, the same slack the image's entrypoint allows
#: (prover_image/entrypoint.py, ``RAM_SLACK``): the search refuses no
#: machine the image would run on.
CUZK_MIN_MACHINE_RAM_GIB = 128.0 * 0.95

#: The runtype strings a create may send, as the vastai CLI builds them
#: (vast-cli ``vastai/cli/commands/instances.py``, ``get_runtype``): ``args``
#: and ``ssh``, and the launch modes it joins with spaces (``ssh_proxy``,
#: ``ssh_direc ssh_proxy``, ``jupyter_proxy ssh_proxy``,
#: ``jupyter_direc ssh_direc ssh_proxy``; "direc", not "direct"); ``jupyter``
#: is named in its API helper (``vastai/api/offers.py``, ``create_instance``).
RUNTYPES = frozenset(
    {
        "args",
        "ssh",
        "ssh_proxy",
        "ssh_direc ssh_proxy",
        "jupyter",
        "jupyter_proxy ssh_proxy",
        "jupyter_direc ssh_direc ssh_proxy",
    }
)
#: Runtypes that keep the image's own ENTRYPOINT.
ENTRYPOINT_RUNTYPES = frozenset({"args"})
#: The container learns its status port from this variable...
STATUS_PORT_ENV = "PROVER_STATUS_PORT"
#: ...and the token a drain of it must carry from this one (fleet_agent/fleet/drain.py).
DRAIN_TOKEN_ENV = "FLEET_DRAIN_TOKEN"
#: The worker setting `ProverSpec.allow_loopback` is read from.
LOOPBACK_ENV = "FLEET_PROVER_ALLOW_LOOPBACK"
#: ...and `ProverSpec.mode`, and `ProverSpec.min_host_ram_gib`.
MODE_ENV = "FLEET_PROVER_MODE"
MIN_RAM_ENV = "FLEET_PROVER_MIN_RAM_GIB"


class ProverSpec(BaseModel):
    """The prover image, how it starts, and what it needs of a machine.

    The machine needs are pushed into the offer search and checked again on
    every offer before it is rented (fleet_agent/fleet/guardrails.py). Both
    modes run cuzk, so their defaults are cuzk's: at least 128 GiB of the
    rental's RAM for its one daemon (`CUZK_MIN_MACHINE_RAM_GIB`), a CUDA new
    enough for the image (12) and for the GPU's architecture
    (fleet_agent/fleet/capacity.py, `min_cuda`), and 200 Mb/s down: the
    ~47 GiB of parameters are downloaded after boot (over half an hour
    under it), and in router mode each proof's inputs (50-200 MB of
    vanilla proofs) come over the network too.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: ``router`` sends nothing of ours but the machine's own credential;
    #: ``curio_on_host`` trusts the host with the cluster's credentials
    #: (Curio runs there with harmonydb and Lotus credentials).
    mode: ProverMode = "router"
    #: router mode: the port of the machine's TLS front (``FLEET_FRONT_PORT``),
    #: mapped to a public port; the router dials it.
    front_port: Annotated[int, Field(ge=1, le=65535)] = DEFAULT_FRONT_PORT

    image: str = "ghcr.io/fleet-agent/snark-prover:latest"
    #: Disk rented with the machine, GB; priced into ``dph_total`` (vast.ai's minimum is 8).
    disk_gb: Annotated[float, Field(ge=8)] = 64.0
    #: The image's size as pulled, GB: how long a boot may load before the
    #: machine counts as stuck (fleet_agent/fleet/load_time.py).
    image_gb: Annotated[float, Field(gt=0, le=1_000)] = DEFAULT_IMAGE_GB
    runtype: str = "args"
    #: ``args`` runtype: the arguments that replace the image's CMD (None: its own CMD).
    args: list[str] | None = None
    #: ``ssh``/``jupyter`` runtypes: the command that starts the prover (required there).
    #: With ``args`` the service runs it in place of the image's ENTRYPOINT.
    onstart: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    #: curio_on_host mode: the port the sidecar serves its status on, mapped
    #: to a public port (None: none). Router mode has none: the router
    #: witnesses each machine (left unset, it is None there).
    status_port: Annotated[int, Field(ge=1, le=65535)] | None = 9100
    #: Whether a status may be read (and a drain sent) on a loopback address:
    #: only the simulator's provers listen there (the local stack and the
    #: tests turn it on). Other addresses that are not global (private,
    #: link-local, ...) are refused whatever this says
    #: (fleet_agent/fleet/prover_status.py, `status_url`).
    allow_loopback: bool = False

    #: The rental's RAM (its share of the host's) a machine needs, GiB.
    min_host_ram_gib: Annotated[float, Field(ge=0)] = CUZK_MIN_MACHINE_RAM_GIB
    #: ...and per GPU (0: none; cuzk's daemon is one per machine).
    min_ram_per_gpu_gib: Annotated[float, Field(ge=0)] = 0.0
    max_gpus: Annotated[int, Field(ge=1, le=64)] = 8
    min_inet_down_mbps: Annotated[float, Field(ge=0)] = 200.0
    min_cuda: Annotated[float, Field(ge=0)] = 12.0
    verified_only: bool = True
    #: How long a rental is planned to last, hours: a host must offer a
    #: contract at least this long (offer ``duration``), and a machine's one
    #: download of the proof parameters is spread over it when offers are
    #: ranked by cost per proof (fleet_agent/fleet/offer_cost.py).
    rental_hours: Annotated[float, Field(gt=0, le=24 * 365)] = 24.0
    #: What a machine downloads for each proof, MB: the inputs the work
    #: source hands out, billed at the host's ``inet_down_cost``.
    proof_input_mb: Annotated[float, Field(ge=0, le=100_000)] = 50.0

    @model_validator(mode="before")
    @classmethod
    def _no_status_port_for_the_router(cls, data: Any) -> Any:
        """Router mode maps no status port: left unset, it is None there."""
        if isinstance(data, Mapping) and data.get("mode", "router") == "router":
            return {"status_port": None, **data}
        return data

    @field_validator("status_port")
    @classmethod
    def _status_port_is_the_sidecars(cls, port: int | None, info: ValidationInfo) -> int | None:
        """A port given in router mode is a mistake, said so (its sidecar is
        the old path's)."""
        if port is not None and info.data.get("mode") == "router":
            raise ValueError(
                "FLEET_PROVER_STATUS_PORT is for FLEET_PROVER_MODE=curio_on_host (its sidecar); "
                "router mode maps no status port"
            )
        return port

    @model_validator(mode="after")
    def _starts(self) -> ProverSpec:
        if self.runtype not in RUNTYPES:
            raise ValueError(f"runtype must be one of {sorted(RUNTYPES)}, not {self.runtype!r}")
        if self.runtype not in ENTRYPOINT_RUNTYPES and not self.onstart:
            raise ValueError(
                f"runtype {self.runtype!r} replaces the image's ENTRYPOINT: give onstart, "
                "the command that starts the prover, or use runtype 'args'"
            )
        if self.args is not None and self.runtype not in ENTRYPOINT_RUNTYPES:
            raise ValueError("args are only passed with runtype 'args'")
        return self

    @property
    def public_port(self) -> int | None:
        """The container port the create asks vast.ai to map (the router's
        front, or the sidecar's status port), or None."""
        return self.front_port if self.mode == "router" else self.status_port

    def create_env(
        self,
        drain_token: str | None = None,
        *,
        machine_env: Mapping[str, str] | None = None,
    ) -> dict[str, str]:
        """What the create's ``env`` carries.

        Router mode: `env`, the front port's mapping and `machine_env`, the
        machine's own credential (fleet_agent/cuzk/credentials.py,
        `machine_env`); nothing else, no drain token. Without a credential
        it raises: a machine the router cannot reach is never rented.
        curio_on_host: `env` plus the status port's mapping and the
        variable that names it, and the machine's drain token
        (fleet_agent/fleet/drain.py)."""
        env = dict(self.env)
        if self.mode == "router":
            if not machine_env:
                raise ValueError("router mode: a create needs the machine's credential")
            env[f"-p {self.front_port}:{self.front_port}"] = "1"
            env.update(machine_env)
            return env
        if self.status_port is not None:
            env[f"-p {self.status_port}:{self.status_port}"] = "1"
            env[STATUS_PORT_ENV] = str(self.status_port)
            if drain_token is not None:
                env[DRAIN_TOKEN_ENV] = drain_token
        return env

    def min_host_ram_mb(self, num_gpus: int = 1) -> float:
        """Host RAM a machine with `num_gpus` GPUs needs, in the service's MB (MiB)."""
        gib = max(self.min_host_ram_gib, self.min_ram_per_gpu_gib * max(1, num_gpus))
        return gib * 1024.0
