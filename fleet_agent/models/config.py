"""The agent's live configuration, and the partial patches `update_config` takes.

`ConfigPatch` is derived from `AgentConfig`: every field but those in
`NOT_PATCHABLE`, each with its own type and bounds, made optional (None: not
changed). A field or bound is declared once, in `AgentConfig`, and the patch
follows it (tests/config/test_config_patch.py checks that it does).

The patch is the payload of `update_config` and of a start's `config`: its
JSON schema, what it accepts and refuses (strict, unknown keys refused) and
its messages are those of the hand-written model it replaced, so running
agents replay the same.

The derived model is built at run time with `pydantic.create_model`, which
static checkers cannot see into. Under `TYPE_CHECKING` mypy is shown a class
with the same base that takes any keyword and attribute: `apply` and
`is_empty` stay typed, the names and values in a `ConfigPatch(...)` call are
checked when it runs. Repeating the fields for the checker would bring back
the second declaration this removes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Final, Literal, Self

from pydantic import Field, create_model, model_validator
from pydantic.fields import FieldInfo

from fleet_agent.demand.events import MAX_EVENTS
from fleet_agent.demand.forecast import DemandEvent
from fleet_agent.demand.target import DemandPolicy
from fleet_agent.market.point import MarketPolicy
from fleet_agent.wire import Wire

from .approvals import ApprovalMode
from .base import Strict
from .notify import DEFAULT_NOTIFY_EVENTS, NotifyEventKind

__all__ = [
    "NOT_PATCHABLE",
    "AgentConfig",
    "ConfigPatch",
    "DemandEventList",
    "Effort",
    "GpuList",
    "NotifyEventList",
    "TargetMode",
    "ThinkingDisplay",
]

Effort = Literal["low", "medium", "high", "xhigh", "max"]
"""`output_config.effort` of the Messages API: how much the model thinks and writes."""

ThinkingDisplay = Literal["omitted", "summarized"]
"""`thinking.display`: whether the model's thinking comes back as a summary
("summarized") or as an empty text with its signature ("omitted")."""


NotifyEventList = Annotated[list[NotifyEventKind], Field(max_length=20)]
"""`notify_events`: the kinds of event that notify (fleet_agent/models/notify.py)."""

TargetMode = Literal["fixed", "demand"]
"""`target_mode`: `fixed` holds `target_proofs_per_hour` as set; `demand` has
the monitor set it from the demand source (docs/operations/demand-mode.md, "Demand mode")."""

MarketMode = Literal["off", "snark"]
"""`market_mode`: `snark` has the monitor read the business on the Snark Market."""
MarketOnLoss = Literal["notify", "lower", "stop"]
"""`market_on_loss`: what the agent does when it has proved at a loss for
`market_loss_minutes`: tell the operator only; also lower the fleet (demand
mode's target to what pays); or also stop asking the market for work."""

DemandEventList = Annotated[list[DemandEvent], Field(max_length=MAX_EVENTS)]
"""`demand_events`: known changes of demand ("x3 from 14:00 to 16:00", UTC)."""

GpuList = Annotated[list[Annotated[str, Field(min_length=1, max_length=64)]], Field(max_length=50)]


class AgentConfig(Wire):
    """Live configuration of one agent; changed with the `update_config` update."""

    target_proofs_per_hour: Annotated[float, Field(ge=0, le=1_000_000)] = 0.0
    paused: bool = False
    heartbeat_seconds: Annotated[int, Field(ge=30, le=86_400)] = 300
    history_token_budget: Annotated[int, Field(ge=1_000, le=1_000_000)] = 24_000
    max_rounds: Annotated[int, Field(ge=1, le=50)] = 12
    # Room for the answer (text and tool calls); a thinking model gets more
    # for its thinking, by effort (fleet_agent/llm/request.py).
    max_output_tokens: Annotated[int, Field(ge=256, le=64_000)] = 4_096
    # How hard the model thinks (docs/DECISIONS.md, "Effort"); sent only to
    # models that take it (fleet_agent/llm/model_table.py).
    llm_effort: Effort = "medium"
    # "summarized" (the default): the model's thinking comes back readable,
    # for `show-run`, the console and the digests of its rounds; Sonnet 5.5
    # writes its text between tool calls there ("omitted" loses it). Agents
    # that ran before this default keep "omitted" (workflows/agent_state.py).
    llm_thinking_display: ThinkingDisplay = "summarized"
    p0_debounce_seconds: Annotated[float, Field(ge=0.1, le=600)] = 2.0
    p1_debounce_seconds: Annotated[float, Field(ge=0.1, le=3_600)] = 10.0
    continue_as_new_after_runs: Annotated[int, Field(ge=1, le=10_000)] = 200
    run_timeout_seconds: Annotated[int, Field(ge=60, le=86_400)] = 1_800
    # Guardrails on the fleet, enforced in code (never only in the prompt).
    max_instances: Annotated[int, Field(ge=0, le=10_000)] = 20
    max_fleet_dph: Annotated[float, Field(ge=0, le=100_000)] = 20.0
    max_instance_dph: Annotated[float, Field(ge=0, le=1_000)] = 2.0
    # What a host may charge for downloads, $ per TB (vast.ai's `inet_down_cost`
    # is $/GB: x 1,000). A prover downloads ~50 GB at boot; at the default that
    # is about $1 a rental. 0: only hosts that charge nothing for downloads.
    max_inet_down_cost_per_tb: Annotated[float, Field(ge=0, le=10_000)] = 20.0
    allowed_gpus: GpuList = Field(
        default_factory=lambda: ["RTX 3090", "RTX 4090", "RTX 5090", "A100", "H100"]
    )
    min_reliability: Annotated[float, Field(ge=0, le=1)] = 0.9
    dry_run: bool = False
    monitor_enabled: bool = True
    monitor_poll_seconds: Annotated[int, Field(ge=5, le=3_600)] = 30
    # The kill switch: set and cleared only by the freeze/unfreeze updates
    # (NOT_PATCHABLE). No runs, no monitor, every fleet change refused.
    frozen: bool = False
    # Capacity measured in proofs (docs/DECISIONS.md, "Capacity measured in proofs").
    # A running machine whose prover has made no progress (no proof finished,
    # no parameter byte fetched) for this long is "not_proving" and replaced.
    not_proving_minutes: Annotated[float, Field(ge=5, le=1_440)] = 20.0
    # A machine vast.ai shows `offline` or `unknown` (the host lost contact)
    # is waited out this long before it is replaced and its host remembered
    # as failed: a blip of a minute would otherwise cost a reload and a ban.
    offline_grace_minutes: Annotated[float, Field(ge=0, le=240)] = 5.0
    # Hysteresis: a healthy machine younger than this is never released, and a
    # release must leave the fleet at or above target.
    min_release_age_minutes: Annotated[float, Field(ge=0, le=10_080)] = 45.0
    # Hold enough that losing any one machine of up to 8.5 % of the target
    # leaves the fleet within 5 % under it (fleet_agent/fleet/spare.py).
    spare_one_machine: bool = True
    # A host that failed (dead, stuck loading, not proving) is not rented
    # again for this long; 0 forgets at once.
    failed_host_ttl_hours: Annotated[float, Field(ge=0, le=720)] = 24.0
    # Rates of fleet changes, enforced at the tool over any hour: a model in a
    # loop rents or releases at most this many machines an hour. Destroying a
    # machine that is not capacity (dead, stopped, not proving) is not limited.
    max_creates_per_hour: Annotated[int, Field(ge=0, le=1_000)] = 30
    max_destroys_per_hour: Annotated[int, Field(ge=0, le=1_000)] = 30
    # A bound on any 24 hours: a create is refused when the costliest 24-hour
    # window holding the present (spend so far, then the fleet's $/h with the
    # offer and the creates in flight) would exceed it (fleet_agent/fleet/budget.py).
    daily_budget_usd: Annotated[float, Field(ge=0, le=1_000_000)] = 500.0
    # Approvals (docs/DECISIONS.md, "Approvals"): when a fleet change waits
    # for an operator's `decide_approval`, and for how long.
    approval_mode: ApprovalMode = "off"
    # threshold mode: a create whose offer costs more than this $/h ...
    approval_above_dph: Annotated[float, Field(ge=0, le=1_000)] = 1.0
    # ... or that leaves the fleet's $/h more than this above what it was an
    # hour before (so small steps across runs add up).
    approval_above_fleet_dph_increase: Annotated[float, Field(ge=0, le=100_000)] = 5.0
    approval_timeout_seconds: Annotated[int, Field(ge=60, le=86_400)] = 3_600
    # A destroy of a healthy machine that leaves expected capacity below this
    # fraction of the target needs an approval (refused when approval_mode is off).
    min_fleet_fraction: Annotated[float, Field(ge=0, le=1)] = 0.5
    # Notifications (docs/operations/alerts.md, "Alerts: Slack, e-mail and more"):
    # the events that tell a human (default: those that need one) ...
    notify_events: NotifyEventList = Field(default_factory=lambda: list(DEFAULT_NOTIFY_EVENTS))
    # ... at most one per event kind and subject within this window ...
    notify_quiet_minutes: Annotated[float, Field(ge=0, le=10_080)] = 30.0
    # ... the fleet below target this long before it is news ...
    notify_under_target_minutes: Annotated[float, Field(ge=1, le=10_080)] = 30.0
    # ... and this many failed runs in a row.
    notify_failed_runs: Annotated[int, Field(ge=1, le=1_000)] = 3
    # Demand mode (docs/operations/demand-mode.md, "Demand mode"): with `demand` the
    # monitor sets target_proofs_per_hour from the worker's demand source
    # (FLEET_DEMAND_SOURCE) by fleet_agent/demand/target.py's rule, within
    # [min_target, max_target]; max_target must then be set (0: unset).
    target_mode: TargetMode = "fixed"
    min_target: Annotated[float, Field(ge=0, le=1_000_000)] = 0.0
    max_target: Annotated[float, Field(ge=0, le=1_000_000)] = 0.0
    # The share held above the need, the dip below target that may lower it,
    # and for how long; rental to first proof (what the forecast looks ahead).
    demand_headroom: Annotated[float, Field(ge=0, le=5)] = 0.2
    demand_hysteresis: Annotated[float, Field(ge=0, lt=1)] = 0.15
    demand_lower_after_minutes: Annotated[float, Field(ge=0, le=1_440)] = 30.0
    demand_lead_minutes: Annotated[float, Field(ge=0, le=1_440)] = 20.0
    # Known changes ahead, multiplying the forecast; the fleet is rented a
    # lead time before each starts.
    demand_events: DemandEventList = Field(default_factory=list)
    # Each demand target change wakes a run: at most this many are applied in
    # any hour; past it the latest waits until the hour allows
    # (fleet_agent/loop/pace.py, docs/decisions/demand.md "Paces").
    max_demand_changes_per_hour: Annotated[int, Field(ge=1, le=1_000)] = 6
    # No run starts while the runs that ended in the last hour cost this much
    # or more (their LLM rounds at the price table's rates; the autopilot
    # costs $0). Triggers, wakes and messages wait; nothing is dropped.
    max_llm_usd_per_hour: Annotated[float, Field(gt=0, le=10_000)] = 2.0
    # The Snark Market (docs/operations/snark-market.md, "Selling proofs on the Snark
    # Market"): with `snark` the monitor reads the business of the worker's
    # Curio node (FLEET_MARKET_SOURCE) each poll: slots, price, revenue, cost
    # and profit (fleet_agent/market/). The challenge balance the operator
    # read on the market's dashboard, which the agent counts on from;
    # dollars per FIL (0: the worker's FLEET_FIL_USD_URL, else profit is
    # unknown); the ask price range the agent may set (max 0: it may not);
    # asks it may withdraw an hour (1 challenge proof each); how long a loss
    # lasts before it acts, and how (notify only, lower the fleet, stop asking).
    market_mode: MarketMode = "off"
    market_challenges: Annotated[int, Field(ge=0, le=1_000_000_000)] = 0
    fil_usd: Annotated[float, Field(ge=0, le=100_000)] = 0.0
    market_min_price_nfil: Annotated[int, Field(ge=0, le=1_000_000_000)] = 0
    market_max_price_nfil: Annotated[int, Field(ge=0, le=1_000_000_000)] = 0
    market_max_withdrawals_per_hour: Annotated[int, Field(ge=0, le=1_000)] = 4
    market_loss_minutes: Annotated[float, Field(ge=1, le=10_080)] = 60.0
    market_on_loss: MarketOnLoss = "notify"

    @model_validator(mode="after")
    def _demand_bounds(self) -> Self:
        if self.target_mode == "demand" and self.max_target <= 0:
            raise ValueError("target_mode demand needs max_target above 0")
        if self.max_target > 0 and self.min_target > self.max_target:
            raise ValueError("min_target must not exceed max_target")
        if self.market_max_price_nfil and self.market_min_price_nfil > self.market_max_price_nfil:
            raise ValueError("market_min_price_nfil must not exceed market_max_price_nfil")
        return self

    def market_policy(self) -> MarketPolicy:
        """The business's knobs (fleet_agent/market/) from this config."""
        return MarketPolicy(
            challenges=self.market_challenges,
            fil_usd=self.fil_usd,
            min_price_nfil=self.market_min_price_nfil,
            max_price_nfil=self.market_max_price_nfil,
            max_withdrawals_per_hour=self.market_max_withdrawals_per_hour,
            loss_minutes=self.market_loss_minutes,
            on_loss=self.market_on_loss,
        )

    def demand_policy(self) -> DemandPolicy:
        """The target rule's knobs (fleet_agent/demand/target.py) from this config."""
        return DemandPolicy(
            min_target=self.min_target,
            max_target=max(self.max_target, self.min_target, 1.0),
            headroom=self.demand_headroom,
            hysteresis=self.demand_hysteresis,
            lower_after_minutes=self.demand_lower_after_minutes,
            lead_minutes=self.demand_lead_minutes,
        )

    def run_deadline_seconds(self) -> int:
        """How long a run may take: its own time, plus the time it may wait
        for approvals (all of a run's waits share one approval_timeout)."""
        waits = 0 if self.approval_mode == "off" else self.approval_timeout_seconds
        return self.run_timeout_seconds + waits


NOT_PATCHABLE: Final = frozenset({"frozen"})
"""`AgentConfig` fields `update_config` may not change: `frozen` is the kill
switch, set and cleared only by the freeze/unfreeze updates."""


class _ConfigPatchBase(Strict):
    """What every `ConfigPatch` does; its fields come from `AgentConfig`."""

    def apply(self, config: AgentConfig) -> AgentConfig:
        """The config with this patch applied, validated as a whole."""
        changes = self.model_dump(exclude_none=True)
        return AgentConfig.model_validate({**config.model_dump(), **changes})

    def is_empty(self) -> bool:
        return not self.model_dump(exclude_none=True)


def _optional(info: FieldInfo) -> tuple[Any, Any]:
    """An `AgentConfig` field as a patch field: its type with its bounds (the
    field's metadata: ge, le, max_length, strict ...), or None, by default None.
    The bounds stay on the inner type, as `Annotated[int, Field(ge=1)] | None`
    would put them, so the JSON schema and messages are those of the type."""
    # Any: a type built at run time is a value to mypy, not a type.
    bounded: Any = info.annotation
    if info.metadata:
        bounded = Annotated[(bounded, *info.metadata)]
    return bounded | None, Field(default=None, description=info.description)


def _patch_fields() -> dict[str, tuple[Any, Any]]:
    """Every patchable `AgentConfig` field, in its order, made optional."""
    return {
        name: _optional(info)
        for name, info in AgentConfig.model_fields.items()
        if name not in NOT_PATCHABLE
    }


if TYPE_CHECKING:
    # What mypy sees: a model built at run time has no static fields, so the
    # checker takes any keyword and any attribute, and the pydantic validation
    # below judges them (unknown keys refused, strict types). `apply` and
    # `is_empty` keep their static types from the base.
    class ConfigPatch(_ConfigPatchBase):
        """A partial `AgentConfig`: only the fields given are changed."""

        def __init__(self, **changes: Any) -> None: ...

        def __getattr__(self, name: str) -> Any: ...

else:
    ConfigPatch = create_model(
        "ConfigPatch",
        __base__=_ConfigPatchBase,
        __module__=__name__,
        __doc__="A partial `AgentConfig`: only the fields given are changed.",
        **_patch_fields(),
    )
