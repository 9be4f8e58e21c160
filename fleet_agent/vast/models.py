"""What vast.ai returns: offers and instances, typed where we rely on a field.

Both models keep every field the service sends (``extra="allow"``), so nothing
is lost when the service adds fields or when the simulator reports its own
extras such as ``proofs_per_hour``. Units are the service's: RAM in MB, prices
in $/hour, bandwidth in Mb/s, times in Unix seconds.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "BOOTING_STATUSES",
    "TERMINAL_STATUSES",
    "Instance",
    "Offer",
]

#: ``actual_status`` values from which an instance never returns to ``running``
#: for our purposes: the container died or the host lost contact. A manager
#: should destroy and replace such an instance, not wait for it.
TERMINAL_STATUSES: frozenset[str] = frozenset({"exited", "unknown", "offline"})

#: ``actual_status`` values of an instance on its way up (None = not yet scheduled).
BOOTING_STATUSES: frozenset[str | None] = frozenset({None, "created", "loading"})


class _VastRecord(BaseModel):
    """Keep unknown fields; accept numbers where the service sends them as ints."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    @property
    def extras(self) -> dict[str, Any]:
        """Fields the service sent that the model does not type."""
        return dict(self.__pydantic_extra__ or {})


class Offer(_VastRecord):
    """One rentable machine (an "ask") from ``POST /api/v0/bundles/``."""

    id: int
    gpu_name: str
    num_gpus: int
    gpu_ram: float = Field(description="Per-GPU memory in MB.")
    cpu_ram: float = Field(description="Host RAM of the offer in MB.")
    dph_total: float = Field(description="$/hour including the storage asked for.")
    reliability2: float | None = None
    reliability: float | None = None
    inet_down: float | None = Field(default=None, description="Download Mb/s.")
    inet_up: float | None = None
    geolocation: str | None = None
    rentable: bool | None = None
    verified: bool | None = None
    machine_id: int | None = None
    host_id: int | None = None
    disk_space: float | None = Field(default=None, description="GB available.")
    cpu_cores_effective: float | None = None
    min_bid: float | None = None
    cuda_max_good: float | None = None

    @property
    def cpu_ram_gib(self) -> float:
        """Host RAM in GiB (the service's MB are MiB)."""
        return self.cpu_ram / 1024.0


class Instance(_VastRecord):
    """One rented machine, from ``/api/v1/instances/`` or ``/api/v0/instances/{id}/``."""

    id: int
    actual_status: str | None = None
    intended_status: str | None = None
    cur_state: str | None = None
    next_state: str | None = None
    status_msg: str | None = None
    label: str | None = None
    machine_id: int | None = None
    host_id: int | None = None
    gpu_name: str | None = None
    num_gpus: int | None = None
    gpu_ram: float | None = None
    cpu_ram: float | None = None
    dph_total: float | None = None
    start_date: float | None = None
    image_uuid: str | None = None
    disk_space: float | None = None
    reliability2: float | None = None
    geolocation: str | None = None
    #: Simulator only: proving throughput of a running instance (0 otherwise).
    #: The real service has no such field, so it is None there.
    proofs_per_hour: float | None = None

    @property
    def is_running(self) -> bool:
        """The container runs (it may still be fetching proof parameters)."""
        return self.actual_status == "running"

    @property
    def is_terminal(self) -> bool:
        """Dead for good: ``exited``, ``unknown`` or ``offline``."""
        return self.actual_status in TERMINAL_STATUSES

    @property
    def is_booting(self) -> bool:
        """Not yet running and not dead: scheduled, loading, or no status yet."""
        return self.actual_status in BOOTING_STATUSES
