"""What vast.ai returns: offers and instances, typed where we rely on a field.

Both models keep every field the service sends (``extra="allow"``), so nothing
is lost when the service adds fields. A row is untrusted input: every string
is stripped (the `vastai` CLI strips each string of an instance row,
vastai/api/instances.py `show_instances`; a ``public_ipaddr`` of
``"1.2.3.4\n"`` makes no URL), and a number that is not
finite (the JSON parser takes ``NaN`` and ``Infinity``) is no number: a
required one fails the row, an optional one reads as absent. An offer's price
must be there and not negative: it is never read as $0. Neither the service nor the simulator
reports proving figures: those come from each prover's status port
(fleet_agent/fleet/prover_status.py). Units are the service's: RAM in MB, prices
in $/hour, bandwidth in Mb/s, times in Unix seconds.

Text a row shows the agent (states, ``status_msg``, ``label``, ``gpu_name``...)
is made one clean line within a limit of its own (`_VastRecord.TEXT_LIMITS`):
a host's error text may be a megabyte of escape codes.

An instance's costs (``dph_total``, ``storage_total_cost``, ``inet_*_cost``)
and traffic counters (``inet_*_billed``) are never negative: a negative one
reads as absent (`Instance.COST_FIELDS`), so no row credits the spend ledger,
and an absent price fails closed wherever it is counted (a cap counts it at
the cap). A row that does not parse at all but carries a label is kept as an
*unreadable* machine (`Instance.unreadable_row`, state `UNREADABLE`): a
label of an agent's own still bills, so the fleet layer counts it against
every cap at the cap's value (fleet_agent/fleet/guardrails.py).

An instance's state is spread over four fields (docs: ``cli/reference/show-instance.mdx``):
``actual_status`` (the container: null, loading, running, stopped, frozen,
exited, rebooting, unknown, offline), ``intended_status`` (what the renter
asked: running, stopped, frozen), ``cur_state`` (the machine contract: running,
stopped, or unloaded once released on destroy) and ``next_state``.
`Instance.state` folds them into one word and `phase_of` into what a fleet
manager does with it (`InstancePhase`).
"""

from __future__ import annotations

import hashlib
import math
from typing import Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from fleet_agent.untrusted import single_line, without_surrogates

__all__ = [
    "BOOTING_STATUSES",
    "GONE_STATES",
    "IDLE_STATUSES",
    "TERMINAL_STATUSES",
    "UNREADABLE",
    "Instance",
    "InstancePhase",
    "Offer",
    "phase_of",
    "slice_ram_mb",
]

#: ``actual_status`` values from which an instance never returns to ``running``
#: for our purposes: the container died or the host lost contact. A manager
#: should destroy and replace such an instance, not wait for it.
TERMINAL_STATUSES: frozenset[str] = frozenset({"exited", "unknown", "offline"})

#: Halted but kept, and billed: ``stopped`` (disk charges go on) or ``frozen``
#: (paused with its memory; GPU charges go on). Neither proves: not capacity.
IDLE_STATUSES: frozenset[str] = frozenset({"stopped", "frozen"})

#: ``actual_status`` values of an instance on its way up (None = not yet
#: scheduled); ``rebooting`` is a transient restart.
BOOTING_STATUSES: frozenset[str | None] = frozenset({None, "created", "loading", "rebooting"})

#: Words in any of the four state fields that mean the machine was destroyed
#: and released (``cur_state: unloaded``). Such a row is no fleet member.
GONE_STATES: frozenset[str] = frozenset({"destroyed", "terminated", "deleted", "unloaded"})

#: What a fleet manager makes of a state: ``running`` is capacity; ``booting``
#: will be; ``idle`` (stopped, frozen) and ``dead`` are not and must be
#: replaced or released; ``gone`` is not in the fleet at all; ``unrecognized``
#: is a status this code does not know (not capacity, not destroyed for it).
InstancePhase = Literal["running", "booting", "idle", "dead", "gone", "unrecognized"]

_BOOTING_STATES = frozenset({"scheduling", "created", "loading", "rebooting"})

#: The state of a machine whose row does not parse (`Instance.unreadable_row`):
#: its phase is ``unrecognized`` (not capacity, not destroyed on a guess).
UNREADABLE = "unreadable"


def phase_of(state: str) -> InstancePhase:
    """The phase of an `Instance.state` word."""
    if state == "running":
        return "running"
    if state in _BOOTING_STATES:
        return "booting"
    if state in IDLE_STATUSES:
        return "idle"
    if state in TERMINAL_STATUSES:
        return "dead"
    if state in GONE_STATES:
        return "gone"
    return "unrecognized"


def slice_ram_mb(cpu_ram: float | None, gpu_frac: float | None) -> float:
    """RAM a rental gets, MB: the host's ``cpu_ram`` times its share of the
    host's GPUs (``gpu_frac``).

    vast.ai lists the host's RAM on every offer and instance row ("system RAM",
    vast-cli ``vastai/cli/commands/offers.py``, field list of ``search
    offers``), and ``gpu_frac`` is the "ratio of GPUs in the offer to gpus in
    the system" (same list). An instance "gets a fraction [of the system RAM]
    proportional to its share of attached GPUs" (docs.vast.ai, "Docker
    Execution Environment", RAM, checked 2026-12-06); using more risks the OOM
    killer. A row without a usable ``gpu_frac`` is read as the whole host.
    """
    ram = cpu_ram or 0.0
    if gpu_frac is not None and 0.0 < gpu_frac < 1.0:
        return ram * gpu_frac
    return ram


def _frac(value: Any) -> float | None:
    """A ``gpu_frac`` as we trust it: a number in (0, 1], else absent."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if 0.0 < value <= 1.0 else None


def _negative(value: Any) -> bool:
    """A number below zero (a bool is no number)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and value < 0


def _usable_id(value: Any) -> int | None:
    """A row's id as vast.ai gives it (a positive integer, or its digits), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.isascii() and value.isdigit():
        value = int(value)
    return value if isinstance(value, int) and value > 0 else None


def _clean(value: Any) -> Any:
    """A field of a row as we read it: strings stripped, inside objects and
    lists too (as the CLI's `_strip_strings`, vastai/api/instances.py), lone
    surrogates gone (no payload holding one can be encoded), and non-finite
    numbers gone."""
    if isinstance(value, str):
        return without_surrogates(value.strip())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _clean(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_clean(item) for item in value]
    return value


class _VastRecord(BaseModel):
    """Keep unknown fields; accept numbers where the service sends them as ints."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    #: Text fields shown to the agent, the monitor's signals and the prompt,
    #: and the most characters each keeps: made one clean line and cut when
    #: read (fleet_agent/untrusted.py), so no row can fail a payload's limit
    #: downstream (`StateChanged`: 200 for a state, 2,000 for a detail). An
    #: empty state word is no state (None): a state is never "".
    TEXT_LIMITS: ClassVar[dict[str, int]] = {
        "gpu_name": 64,
        "geolocation": 100,
        "verification": 32,
        "public_ipaddr": 64,
    }
    STATE_FIELDS: ClassVar[frozenset[str]] = frozenset()
    #: Costs and counters that are never negative: a negative one reads as
    #: absent (an offer's own are bounded by its fields instead: the row fails).
    COST_FIELDS: ClassVar[frozenset[str]] = frozenset()

    @model_validator(mode="before")
    @classmethod
    def _untrusted(cls, data: Any) -> Any:
        """Every top-level field cleaned before it is typed (`_clean`), text
        fields made one line within `TEXT_LIMITS`, negative `COST_FIELDS`
        absent."""
        if isinstance(data, dict):
            clean = {key: _clean(value) for key, value in data.items()}
            for key in cls.COST_FIELDS:
                if _negative(clean.get(key)):
                    clean[key] = None
            for key, limit in cls.TEXT_LIMITS.items():
                if isinstance(clean.get(key), str):
                    clean[key] = single_line(clean[key], limit)
                    if key in cls.STATE_FIELDS and not clean[key]:
                        clean[key] = None
            if "gpu_frac" in clean:
                # Out of range is no share at all: the row is kept (an
                # instance of ours must stay visible), read as a whole host.
                clean["gpu_frac"] = _frac(clean["gpu_frac"])
            return clean
        return data

    @property
    def extras(self) -> dict[str, Any]:
        """Fields the service sent that the model does not type."""
        return dict(self.__pydantic_extra__ or {})


class Offer(_VastRecord):
    """One rentable machine (an "ask") from ``POST /api/v0/bundles/``."""

    id: int
    gpu_name: str = Field(min_length=1)
    num_gpus: int = Field(ge=1)
    gpu_ram: float = Field(ge=0, description="Per-GPU memory in MB.")
    cpu_ram: float = Field(
        ge=0, description="RAM of the whole host in MB (`ram_mb`: the rental's)."
    )
    gpu_frac: float | None = Field(
        default=None, description="The offer's share of the host's GPUs."
    )
    dph_total: float = Field(ge=0, description="$/hour including the storage asked for.")
    reliability2: float | None = None
    reliability: float | None = None
    inet_down: float | None = Field(default=None, description="Download Mb/s.")
    inet_up: float | None = None
    geolocation: str | None = None
    rentable: bool | None = None
    rented: bool | None = None
    external: bool | None = None
    verified: bool | None = None
    verification: str | None = None
    direct_port_count: int | None = None
    machine_id: int | None = None
    host_id: int | None = None
    disk_space: float | None = Field(default=None, description="GB available.")
    cpu_cores_effective: float | None = None
    min_bid: float | None = None
    cuda_max_good: float | None = None
    compute_cap: int | None = Field(default=None, description="CUDA compute capability x 100.")
    #: $/GB the host charges for downloads (what the renter pays on top of dph_total).
    inet_down_cost: float | None = Field(default=None, ge=0)
    inet_up_cost: float | None = Field(default=None, ge=0)
    #: The longest contract the host offers, in seconds (the CLI's ``duration``
    #: filter is in days x 86,400: vast-cli ``vastai/api/query.py``, ``offers_mult``).
    duration: float | None = None

    @property
    def ram_mb(self) -> float:
        """RAM the rental gets, MB (`slice_ram_mb`)."""
        return slice_ram_mb(self.cpu_ram, self.gpu_frac)


class Instance(_VastRecord):
    """One rented machine, from ``/api/v1/instances/`` or ``/api/v0/instances/{id}/``."""

    TEXT_LIMITS: ClassVar[dict[str, int]] = {
        **_VastRecord.TEXT_LIMITS,
        "actual_status": 32,
        "intended_status": 32,
        "cur_state": 32,
        "next_state": 32,
        # A longer label is no create label of ours (fleet/labels.py: 256).
        "label": 256,
        "status_msg": 500,
        "image_uuid": 300,
    }
    STATE_FIELDS: ClassVar[frozenset[str]] = frozenset(
        {"actual_status", "intended_status", "cur_state", "next_state"}
    )
    COST_FIELDS: ClassVar[frozenset[str]] = frozenset(
        {
            "dph_total",
            "storage_total_cost",
            "inet_down_cost",
            "inet_up_cost",
            "inet_down_billed",
            "inet_up_billed",
        }
    )

    #: Why the row did not parse, for a machine kept by `unreadable_row`; set
    #: by this code only (no field of a row can make a machine unreadable).
    _unreadable: str | None = PrivateAttr(default=None)

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
    #: The host's RAM, MB, and the rental's share of its GPUs (`ram_mb`).
    cpu_ram: float | None = None
    gpu_frac: float | None = None
    cpu_cores_effective: float | None = None
    dph_total: float | None = None
    #: $/hour of the rented disk alone: what a stopped instance is billed.
    storage_total_cost: float | None = None
    #: $/GB of traffic, and the traffic so far (cumulative, KB; see
    #: fleet_agent/fleet/billing.py for the units we read them in).
    # The host's listed download speed, Mb/s (as in its offer).
    inet_down: float | None = None
    inet_down_cost: float | None = None
    inet_up_cost: float | None = None
    inet_down_billed: float | None = None
    inet_up_billed: float | None = None
    start_date: float | None = None
    image_uuid: str | None = None
    disk_space: float | None = None
    reliability2: float | None = None
    geolocation: str | None = None
    public_ipaddr: str | None = None
    #: Port mappings of a running instance: ``{"9100/tcp": [{"HostIp", "HostPort"}]}``.
    ports: Any = None

    @classmethod
    def unreadable_row(cls, row: Any, why: str, instance_id: int | None = None) -> Self | None:
        """A row that does not parse, kept for what a fleet must know of it:
        its label, its state words (so a destroyed one is still no fleet
        member) and its id: the row's, else `instance_id` (the one a caller
        asked for), else one derived from the label, negative, which no
        machine on vast.ai has (such a row cannot be destroyed through the
        API). `why`: what failed. None for a row without a label, which is
        no fleet's. Every other field is absent: its price, hardware and
        state are unknown (`state` is `UNREADABLE`)."""
        if not isinstance(row, dict) or not isinstance(row.get("label"), str):
            return None
        kept: dict[str, Any] = {"id": _usable_id(row.get("id")) or instance_id or 0}
        kept |= {k: row[k] for k in ("label", *cls.STATE_FIELDS) if isinstance(row.get(k), str)}
        inst = cls.model_validate(kept)
        if not inst.label:
            return None
        if inst.id == 0:
            digest = hashlib.sha256(inst.label.encode()).digest()
            inst.id = -1 - int.from_bytes(digest[:6], "big")
        inst._unreadable = single_line(why, 200) or "unreadable"
        return inst

    @property
    def has_id(self) -> bool:
        """Whether this machine has its vast.ai id: every parsed row has; an
        unreadable one listed without a usable id has a derived, negative
        one, with which nothing can be done through the API."""
        return self.id > 0

    @property
    def unreadable(self) -> str | None:
        """Why this machine's row did not parse (`unreadable_row`), or None."""
        return self._unreadable

    @property
    def ram_mb(self) -> float:
        """RAM the rental gets, MB (`slice_ram_mb`)."""
        return slice_ram_mb(self.cpu_ram, self.gpu_frac)

    @property
    def price(self) -> float | None:
        """`dph_total` when the row states a usable one (finite, not negative),
        else None: an unpriced machine is never read as $0 (prices fail closed)."""
        dph = self.dph_total
        return dph if dph is not None and 0.0 <= dph < math.inf else None

    @property
    def is_gone(self) -> bool:
        """Destroyed and released: a row the service may still show, no fleet member."""
        fields = (self.actual_status, self.intended_status, self.cur_state, self.next_state)
        return any(f is not None and f.lower() in GONE_STATES for f in fields)

    @property
    def state(self) -> str:
        """One word for the four state fields (see the module docstring).

        ``destroyed`` for a gone row; the dead ``actual_status`` as it is; a
        machine stopped or frozen by the renter, the host or an outbid
        interruptible contract reads ``stopped``/``frozen`` even while its
        container still runs down; ``scheduling`` while there is no status yet;
        `UNREADABLE` for a row that did not parse (`unreadable_row`).
        """
        if self.is_gone:
            return "destroyed"
        if self._unreadable is not None:
            return UNREADABLE
        actual = self.actual_status
        if actual in TERMINAL_STATUSES or actual in IDLE_STATUSES:
            return str(actual)
        if self.intended_status in IDLE_STATUSES:
            return str(self.intended_status)
        if "stopped" in (self.cur_state, self.next_state):
            return "stopped"
        return actual if actual is not None else "scheduling"

    @property
    def phase(self) -> InstancePhase:
        return phase_of(self.state)

    @property
    def is_running(self) -> bool:
        """The container runs and is meant to (it may still be fetching proof parameters)."""
        return self.phase == "running"

    @property
    def is_terminal(self) -> bool:
        """Dead for good: ``exited``, ``unknown`` or ``offline``."""
        return self.actual_status in TERMINAL_STATUSES

    @property
    def is_booting(self) -> bool:
        """Not yet running and not dead: scheduled, loading, rebooting, or no status yet."""
        return self.phase == "booting"

    def mapped_port(self, container_port: int, proto: str = "tcp") -> tuple[str, int] | None:
        """Where `container_port` of a running instance is reachable: (public IP,
        host port), from ``ports`` and ``public_ipaddr``; None if not mapped."""
        if not self.public_ipaddr or not isinstance(self.ports, dict):
            return None
        bindings = self.ports.get(f"{container_port}/{proto}")
        if not isinstance(bindings, list):
            return None
        for binding in bindings:
            host_port = binding.get("HostPort") if isinstance(binding, dict) else None
            if isinstance(host_port, str | int) and str(host_port).isdigit():
                return self.public_ipaddr, int(host_port)
        return None
