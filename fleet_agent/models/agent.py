"""The agent workflow's durable state, its input, and the `status` answer."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, Field

from fleet_agent.wire import Wire

from .approvals import ApprovalDecision, PendingApproval
from .config import AgentConfig, ConfigPatch
from .freeze import FreezeInfo
from .notify import NotifyFailure, NotifyState
from .pace import DemandPace, HeldDemandChange, LlmSpendPace, SpendMark
from .restart import AgentRestarted
from .runs import LastRun, LlmCostSummary, RunResult, Wake
from .signals import DemandTargetChange
from .spend import SpendSummary
from .trigger import InboxItem, Trigger

__all__ = [
    "AgentInput",
    "AgentState",
    "AgentStatus",
    "Phase",
    "RejectedInput",
    "RunInFlight",
]


class Phase(StrEnum):
    IDLE = "idle"
    DEBOUNCING = "debouncing"
    RUNNING = "running"
    PAUSED = "paused"
    FROZEN = "frozen"  # the kill switch: see fleet_agent/models/freeze.py


class RejectedInput(Wire):
    """A signal that was not kept: kept visible, never silently dropped.

    `preview` is the start of the payload's text (a message's text, a reason),
    so a sender can recognise its own refused signal.
    """

    at: datetime
    signal: str
    error: str
    preview: str = ""


class RunInFlight(Wire):
    """A run that was still going when the agent continued as new.

    Runs are started with ParentClosePolicy.ABANDON, so a continue-as-new in
    the middle of one (a flood of signals) does not stop it; the next
    execution waits for it by workflow ID and run ID.
    """

    run: int
    workflow_id: str
    run_id: str
    started_at: datetime
    triggers: int = 0


class AgentState(Wire):
    """The whole durable state of an agent, handed to continue-as-new as is."""

    session: int = 1
    run_count: int = 0
    next_trigger_seq: int = 1
    config: AgentConfig = Field(default_factory=AgentConfig)
    pending_triggers: list[Trigger] = Field(default_factory=list)
    wakes: list[Wake] = Field(default_factory=list)
    last_run: LastRun | None = None
    last_run_ended_at: datetime | None = None
    reset_reason: str | None = None
    rejected: list[RejectedInput] = Field(default_factory=list)
    rejected_total: int = 0
    executions: int = 1
    # Keys of operator messages whose text is not in the store yet: the text is
    # in `pending_triggers`, or in `unstored_texts` once a run has taken it.
    unstored_keys: list[str] = Field(default_factory=list)
    # Texts of messages a run has taken that the store does not have yet (the
    # run carries previews): handed over by a continue-as-new that could not
    # wait for the store (bounded with the rest: MAX_UNSTORED_BYTES).
    unstored_texts: list[InboxItem] = Field(default_factory=list)
    run_in_flight: RunInFlight | None = None
    # Runs lost to a timeout or a terminate whose record the store has yet to close.
    unrecorded_runs: list[RunResult] = Field(default_factory=list)
    # Set by the `freeze` update, cleared by `unfreeze` (config.frozen says the same).
    freeze: FreezeInfo | None = None
    # Approvals a run waits for (at most one: runs and their tool calls go one
    # at a time), and the latest decisions, so a second decision is refused
    # with what the first one was.
    pending_approvals: list[PendingApproval] = Field(default_factory=list)
    decided_approvals: list[ApprovalDecision] = Field(default_factory=list)
    # The spend summary the latest run that read one brought back (as of its start).
    spend: SpendSummary | None = None
    # Likewise the LLM cost summary (fleet_agent/models/runs.py).
    llm_cost: LlmCostSummary | None = None
    # The config last written to the store (the watchdog's restart reads it):
    # written again only when `config` differs (workflows/agent_config.py).
    stored_config: AgentConfig | None = None
    # Set when this agent came back after its previous execution ended.
    restarted: AgentRestarted | None = None
    # Notifications: the quiet window, the queue, the failures (models/notify.py).
    notify: NotifyState = Field(default_factory=NotifyState)
    # Demand mode: the monitor's last change of the target (None: none yet).
    demand: DemandTargetChange | None = None
    # When the last hour's demand target changes were applied, and the change
    # held back past max_demand_changes_per_hour (fleet_agent/loop/pace.py).
    demand_changes: list[datetime] = Field(default_factory=list)
    demand_held: HeldDemandChange | None = None
    # What the runs of the last hour cost (max_llm_usd_per_hour), and since
    # when a due run waits for the hour to allow it (None: not held).
    llm_spend: list[SpendMark] = Field(default_factory=list)
    llm_held_since: datetime | None = None


class AgentInput(BaseModel):
    """Input of `FleetAgentWorkflow`: fresh start (no state) or continue-as-new.

    The agent ID is the workflow ID: one agent per fleet, by construction.
    """

    config: ConfigPatch | None = None
    state: AgentState | None = None
    # Who started it, when not an operator: "watchdog" (fleet_agent/models/restart.py).
    started_by: str = ""


class AgentStatus(Wire):
    """The `status` query: what an operator needs to see at a glance."""

    agent_id: str
    session: int
    run_count: int
    phase: Phase
    current_run: int | None
    pending_triggers: list[Trigger]
    next_heartbeat_at: datetime | None
    next_run_due_at: datetime | None
    wakes: list[Wake]
    last_run: LastRun | None
    config: AgentConfig
    rejected: list[RejectedInput]
    executions: int
    history_length: int
    rejected_total: int = 0
    pending_bytes: int = 0
    unstored_messages: int = 0
    history_bytes: int = 0
    frozen: FreezeInfo | None = None
    pending_approvals: list[PendingApproval] = Field(default_factory=list)
    # Spend as of the last run that read it (`spend.as_of`); None before any.
    spend: SpendSummary | None = None
    # LLM cost as of the last run's start (`llm_cost.as_of`); None before any.
    llm_cost: LlmCostSummary | None = None
    # Set when the agent came back after its previous execution ended (the watchdog).
    restarted: AgentRestarted | None = None
    # The latest notification deliveries that failed after their retries
    # (redacted: no URL), and how many went out in this agent's life.
    notify_failures: list[NotifyFailure] = Field(default_factory=list)
    notify_delivered: int = 0
    # Demand mode: the monitor's last change of the target, and the reading
    # it was decided on (the store has every reading: DemandHistory).
    demand: DemandTargetChange | None = None
    # Demand changes in the last hour and the change held back past the cap
    # (demand mode only); the last hour's LLM cost against its cap, and the
    # runs held for it. None from an execution that predates them.
    demand_pace: DemandPace | None = None
    llm_spend: LlmSpendPace | None = None
