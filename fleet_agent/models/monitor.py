"""The fleet monitor workflow's input, and the config the agent hands it.

`FleetMonitorWorkflow` (workflows/monitor.py) starts with a `MonitorInput`
and carries it through continue-as-new; the agent sends a new
`MonitorConfig` when its own config changes.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from fleet_agent.demand.forecast import DemandEvent
from fleet_agent.demand.target import DemandPolicy
from fleet_agent.market.point import MarketPolicy
from fleet_agent.wire import Wire

__all__ = ["MonitorConfig", "MonitorInput"]


class MonitorConfig(Wire):
    """What the agent tells its monitor; sent again when the agent's config changes."""

    poll_seconds: int = 30
    target_proofs_per_hour: float = 0.0
    enabled: bool = True
    # How the poll judges provers and failed hosts (AgentConfig's fields of these names).
    not_proving_minutes: float = 20.0
    offline_grace_minutes: float = 5.0
    min_release_age_minutes: float = 45.0
    failed_host_ttl_hours: float = 24.0
    spare_one_machine: bool = False
    # Notifications the monitor sends (fleet below target, back in band):
    # AgentConfig's fields of these names. Empty from agents before them.
    notify_events: list[str] = Field(default_factory=list)
    notify_under_target_minutes: float = 30.0
    notify_quiet_minutes: float = 30.0
    # Demand mode (AgentConfig.target_mode): the monitor sets the target from
    # the demand source by `demand_policy` and `demand_events`. "fixed" from
    # agents before it.
    target_mode: str = "fixed"
    demand_policy: DemandPolicy | None = None
    demand_events: list[DemandEvent] = Field(default_factory=list)
    # The Snark Market (AgentConfig.market_mode): the monitor reads the
    # business each poll. "off" from agents before it.
    market_mode: str = "off"
    market_policy: MarketPolicy | None = None
    #: [min_target, max_target], for a lowered target (market_on_loss "lower").
    min_target: float = 0.0


class MonitorInput(Wire):
    agent_id: str
    config: MonitorConfig = Field(default_factory=MonitorConfig)
    # id -> state of the last poll, carried through continue-as-new so a new
    # execution does not report every instance as new.
    last_states: dict[int, str] | None = None
    polls: int = 0
    # Instances whose first proving the monitor has signalled (or found
    # proving when it started), carried the same way: each is signalled once.
    # None in inputs older than the field: the next poll only records them.
    proving: list[int] | None = None
    # Instances offline or unknown and waited out (`FleetInstance.in_grace`)
    # at the last poll: one whose grace ends while it is still down is
    # signalled, so a run replaces it then, not at the next heartbeat.
    waiting: list[int] = Field(default_factory=list)
    # Since when the fleet is below target, and whether that notified
    # (fleet_agent/notify/rules.py, `band_step`), carried the same way.
    under_since: datetime | None = None
    under_notified: bool = False
    # Demand mode: since when the need stays below the lowering line, and its
    # peak since (fleet_agent/demand/target.py), carried the same way.
    demand_below_since: datetime | None = None
    demand_below_peak: float = 0.0
    # The Snark Market: the start of the loss the monitor has acted on
    # (workflows/monitor_market.py), so it acts once per loss.
    market_acted_on: datetime | None = None
