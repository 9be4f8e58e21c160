"""What runs on a rented machine, and what a machine needs to run it.

Worker settings (``FLEET_PROVER_*``), never model decisions. Pure pydantic, so
the guardrails and the search query can use it without loading anything else.

How the prover starts: vast.ai's ``ssh`` and ``jupyter`` runtypes replace the
image's ENTRYPOINT with vast.ai's own (it starts sshd/jupyter and then runs
``onstart``); the ``args`` runtype keeps the image's ENTRYPOINT and passes
``args`` to it in place of its CMD (docs: ``api-reference/creating-instances-with-api.mdx``,
"Entrypoint Behavior"). The default is ``args`` with no ``args``: the image
runs exactly as built. ``-p <port>:<port>`` in ``env`` asks for the prover's
status port to be mapped to a public port (the "Environment Variables and
Ports" section there), which only hosts with direct ports can do.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

from fleet_agent.fleet.load_time import DEFAULT_IMAGE_GB

__all__ = [
    "DRAIN_TOKEN_ENV",
    "ENTRYPOINT_RUNTYPES",
    "LOOPBACK_ENV",
    "RUNTYPES",
    "STATUS_PORT_ENV",
    "ProverSpec",
]

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


class ProverSpec(BaseModel):
    """The prover image, how it starts, and what it needs of a machine.

    The machine needs are pushed into the offer search and checked again on
    every offer before it is rented (fleet_agent/fleet/guardrails.py). Their
    defaults follow the capacity model (fleet_agent/fleet/capacity.py): a proof
    holds a ~47 GiB parameter set in host RAM, so 60 GiB per GPU lets every
    GPU we pay for prove; the parameters are downloaded after boot, which
    takes over half an hour under 200 Mb/s; the image is built for CUDA 12.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

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
    #: The port the prover serves its status on, mapped to a public port (None: none).
    status_port: Annotated[int, Field(ge=1, le=65535)] | None = 9100
    #: Whether a status may be read (and a drain sent) on a loopback address:
    #: only the simulator's provers listen there (the local stack and the
    #: tests turn it on). Other addresses that are not global (private,
    #: link-local, ...) are refused whatever this says
    #: (fleet_agent/fleet/prover_status.py, `status_url`).
    allow_loopback: bool = False

    min_host_ram_gib: Annotated[float, Field(ge=0)] = 60.0
    min_ram_per_gpu_gib: Annotated[float, Field(ge=0)] = 60.0
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

    def create_env(self, drain_token: str | None = None) -> dict[str, str]:
        """`env` plus the status port's mapping and the variable that names
        it, and the machine's drain token (fleet_agent/fleet/drain.py)."""
        env = dict(self.env)
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
