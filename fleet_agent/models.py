"""Payload models shared by workflows, activities, the store and the CLI.

Every workflow, activity, signal, update and query payload is one of these
pydantic models, carried by Temporal's pydantic data converter. They are
Temporal-free so the store, the prompt code and the CLI can use them too.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

__all__ = [
    "AgentConfig",
    "AgentCounters",
    "AgentInput",
    "AgentState",
    "AgentStatus",
    "CancelWake",
    "ConfigPatch",
    "ContextInfo",
    "FleetToolRequest",
    "HumanMessage",
    "InboxItem",
    "LastRun",
    "LlmRequest",
    "LlmResult",
    "LoadContextRequest",
    "MonitorConfig",
    "MonitorInput",
    "Phase",
    "PollRequest",
    "Priority",
    "RecordRunRequest",
    "RejectedInput",
    "ResetSession",
    "RunInFlight",
    "RunInput",
    "RunResult",
    "RunStatus",
    "StateChanged",
    "StoreMessagesRequest",
    "StoreToolResults",
    "TokenUsage",
    "ToolCall",
    "ToolResult",
    "Trigger",
    "TriggerKind",
    "TriggerNow",
    "Verdict",
    "WaitForRun",
    "Wake",
    "WakeRequest",
]


class _Strict(BaseModel):
    """Base for inbound payloads: unknown fields are an error, not silently
    dropped, and types are strict (`true` is not the number 1, "5" not 5)."""

    model_config = ConfigDict(extra="forbid", strict=True)


# ---------------------------------------------------------------- signals


class HumanMessage(_Strict):
    """`human_message` signal: the operator talks to the agent (P0)."""

    text: Annotated[str, Field(min_length=1, max_length=20_000)]
    author: Annotated[str, Field(min_length=1, max_length=200)] = "operator"

    @model_validator(mode="after")
    def _not_blank(self) -> HumanMessage:
        if not self.text.strip():
            raise ValueError("text must not be blank")
        return self


class StateChanged(_Strict):
    """`state_changed` signal: an instance moved between states (P1)."""

    instance_id: Annotated[str, Field(min_length=1, max_length=200)]
    old_state: str | None = None
    new_state: Annotated[str, Field(min_length=1, max_length=200)]
    detail: Annotated[str, Field(max_length=2_000)] = ""


class TriggerNow(_Strict):
    """`trigger_now` signal: run as soon as the P0 window allows."""

    reason: Annotated[str, Field(max_length=2_000)] = "operator asked for a run"


class ResetSession(_Strict):
    """`reset_session` signal: start a new conversation after the current run."""

    reason: Annotated[str, Field(max_length=2_000)] = "operator reset"


class CancelWake(_Strict):
    """`cancel_wake` signal: drop one pending wake."""

    wake_id: Annotated[str, Field(min_length=1, max_length=100)]


# ---------------------------------------------------------------- triggers


class Priority(StrEnum):
    P0 = "P0"  # a human is waiting: human messages, trigger_now, due wakes
    P1 = "P1"  # the fleet changed: state changes, session start/reset
    P2 = "P2"  # nothing happened: the heartbeat


class TriggerKind(StrEnum):
    HUMAN_MESSAGE = "human_message"
    STATE_CHANGED = "state_changed"
    TRIGGER_NOW = "trigger_now"
    WAKE = "wake"
    HEARTBEAT = "heartbeat"
    AGENT_STARTED = "agent_started"
    SESSION_RESET = "session_reset"
    CONFIG_CHANGED = "config_changed"


PRIORITY_OF: dict[TriggerKind, Priority] = {
    TriggerKind.HUMAN_MESSAGE: Priority.P0,
    TriggerKind.TRIGGER_NOW: Priority.P0,
    TriggerKind.WAKE: Priority.P0,
    TriggerKind.STATE_CHANGED: Priority.P1,
    TriggerKind.AGENT_STARTED: Priority.P1,
    TriggerKind.SESSION_RESET: Priority.P1,
    TriggerKind.CONFIG_CHANGED: Priority.P1,
    TriggerKind.HEARTBEAT: Priority.P2,
}


class Trigger(BaseModel):
    """One reason for a run, buffered in workflow state until a run consumes it.

    `seq` is unique within the agent's continue-as-new chain, so tests and
    operators can prove each trigger was handled by exactly one run. State
    changes of one instance coalesce into one trigger while they wait: the
    first old state, the last new state, `count` changes, seqs `seq` to
    `last_seq`. A human message's text moves to the store once it is there
    (`text_key`); the trigger then keeps a preview only.
    """

    seq: int
    kind: TriggerKind
    received_at: datetime
    text: str = ""
    # Non-empty: the full text of this human message is in the store's inbox
    # under this key and `text` holds only a preview; `load_context` puts the
    # full text back before the run uses or stores its triggers.
    text_key: str = ""
    author: str = ""
    instance_id: str = ""
    old_state: str | None = None
    new_state: str = ""
    detail: str = ""
    reason: str = ""
    wake_id: str = ""
    count: int = 1
    last_seq: int | None = None
    last_received_at: datetime | None = None

    @model_serializer(mode="wrap")
    def _compact(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Triggers fill RunInput, the continue-as-new input and the status
        # query: leave out fields at their defaults (half the bytes of a trigger).
        data: dict[str, Any] = handler(self)
        return {k: v for k, v in data.items() if k in _TRIGGER_KEEP or v not in ("", None, 1)}

    @property
    def priority(self) -> Priority:
        return PRIORITY_OF[self.kind]

    @property
    def seqs(self) -> range:
        """Every trigger seq this one stands for (several for coalesced changes)."""
        return range(self.seq, (self.last_seq or self.seq) + 1)


_TRIGGER_KEEP = frozenset({"seq", "kind", "received_at"})


# ---------------------------------------------------------------- wakes


class Wake(BaseModel):
    """A future run the agent asked for with `schedule_next_check`."""

    id: str
    due_at: datetime
    reason: str
    requested_by_run: int


class WakeRequest(BaseModel):
    """What a run decided about wakes; the parent workflow applies it."""

    op: Literal["add", "cancel"]
    wake: Wake | None = None
    wake_id: str = ""


# ---------------------------------------------------------------- config


GpuList = Annotated[list[Annotated[str, Field(min_length=1, max_length=64)]], Field(max_length=50)]


class AgentConfig(BaseModel):
    """Live configuration of one agent; changed with the `update_config` update."""

    target_proofs_per_hour: Annotated[float, Field(ge=0, le=1_000_000)] = 0.0
    paused: bool = False
    heartbeat_seconds: Annotated[int, Field(ge=30, le=86_400)] = 300
    history_token_budget: Annotated[int, Field(ge=1_000, le=1_000_000)] = 24_000
    max_rounds: Annotated[int, Field(ge=1, le=50)] = 12
    max_output_tokens: Annotated[int, Field(ge=256, le=64_000)] = 4_096
    p0_debounce_seconds: Annotated[float, Field(ge=0.1, le=600)] = 2.0
    p1_debounce_seconds: Annotated[float, Field(ge=0.1, le=3_600)] = 10.0
    continue_as_new_after_runs: Annotated[int, Field(ge=1, le=10_000)] = 200
    run_timeout_seconds: Annotated[int, Field(ge=60, le=86_400)] = 1_800
    # Guardrails on the fleet, enforced in code (never only in the prompt).
    max_instances: Annotated[int, Field(ge=0, le=10_000)] = 20
    max_fleet_dph: Annotated[float, Field(ge=0, le=100_000)] = 20.0
    max_instance_dph: Annotated[float, Field(ge=0, le=1_000)] = 2.0
    allowed_gpus: GpuList = Field(
        default_factory=lambda: ["RTX 3090", "RTX 4090", "RTX 5090", "A100", "H100"]
    )
    min_reliability: Annotated[float, Field(ge=0, le=1)] = 0.9
    dry_run: bool = False
    monitor_enabled: bool = True
    monitor_poll_seconds: Annotated[int, Field(ge=5, le=3_600)] = 30


class ConfigPatch(_Strict):
    """A partial `AgentConfig`: only the fields given are changed."""

    target_proofs_per_hour: Annotated[float, Field(ge=0, le=1_000_000)] | None = None
    paused: bool | None = None
    heartbeat_seconds: Annotated[int, Field(ge=30, le=86_400)] | None = None
    history_token_budget: Annotated[int, Field(ge=1_000, le=1_000_000)] | None = None
    max_rounds: Annotated[int, Field(ge=1, le=50)] | None = None
    max_output_tokens: Annotated[int, Field(ge=256, le=64_000)] | None = None
    p0_debounce_seconds: Annotated[float, Field(ge=0.1, le=600)] | None = None
    p1_debounce_seconds: Annotated[float, Field(ge=0.1, le=3_600)] | None = None
    continue_as_new_after_runs: Annotated[int, Field(ge=1, le=10_000)] | None = None
    run_timeout_seconds: Annotated[int, Field(ge=60, le=86_400)] | None = None
    max_instances: Annotated[int, Field(ge=0, le=10_000)] | None = None
    max_fleet_dph: Annotated[float, Field(ge=0, le=100_000)] | None = None
    max_instance_dph: Annotated[float, Field(ge=0, le=1_000)] | None = None
    allowed_gpus: GpuList | None = None
    min_reliability: Annotated[float, Field(ge=0, le=1)] | None = None
    dry_run: bool | None = None
    monitor_enabled: bool | None = None
    monitor_poll_seconds: Annotated[int, Field(ge=5, le=3_600)] | None = None

    def apply(self, config: AgentConfig) -> AgentConfig:
        """The config with this patch applied, validated as a whole."""
        changes = self.model_dump(exclude_none=True)
        return AgentConfig.model_validate({**config.model_dump(), **changes})

    def is_empty(self) -> bool:
        return not self.model_dump(exclude_none=True)


# ---------------------------------------------------------------- runs


class Verdict(BaseModel):
    """The verdict tag that ends every run's final text."""

    action: bool
    state_changed: bool


class RunStatus(StrEnum):
    RUNNING = "running"
    OK = "ok"
    FAILED = "failed"
    MAX_ROUNDS = "max_rounds"


class TokenUsage(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_input_tokens=self.cache_read_input_tokens + other.cache_read_input_tokens,
            cache_creation_input_tokens=(
                self.cache_creation_input_tokens + other.cache_creation_input_tokens
            ),
        )


class LastRun(BaseModel):
    run: int
    status: RunStatus
    verdict: Verdict | None
    noop: bool
    in_prompt: bool = True
    verdict_error: str = ""
    error: str = ""
    started_at: datetime | None = None
    ended_at: datetime | None = None


class RunInput(BaseModel):
    """Everything one `AgentRunWorkflow` needs; texts stay in the store."""

    agent_id: str
    run: int
    session: int
    triggers: list[Trigger]
    config: AgentConfig
    wakes: list[Wake] = Field(default_factory=list)
    next_heartbeat_at: datetime | None = None


class RunResult(BaseModel):
    """What a run hands back to the agent workflow."""

    run: int
    status: RunStatus
    verdict: Verdict | None = None
    verdict_error: str = ""
    noop: bool = False
    in_prompt: bool = True
    error: str = ""
    wake_requests: list[WakeRequest] = Field(default_factory=list)
    usage: TokenUsage = Field(default_factory=TokenUsage)
    mutating_calls: int = 0
    tool_calls: int = 0
    rounds: int = 0
    stop_reasons: list[str] = Field(default_factory=list)
    llm_seconds: float = 0.0
    started_at: datetime | None = None
    ended_at: datetime | None = None


# ---------------------------------------------------------------- activities


class AgentCounters(BaseModel):
    """The highest run and session numbers the store has seen for an agent."""

    max_run: int = 0
    max_session: int = 0


class LoadContextRequest(BaseModel):
    run_input: RunInput
    started_at: datetime
    # `workflow.info().run_id` of the run workflow: a run executed again after a
    # reset opens a new attempt in the run log. "" = unknown (the latest attempt).
    workflow_run_id: str = ""


class ContextInfo(BaseModel):
    """What `load_context` tells the run about the prompt it prepared."""

    history_runs_included: int = 0
    history_runs_dropped: int = 0
    estimated_prompt_tokens: int = 0


class LlmRequest(BaseModel):
    agent_id: str
    run: int
    session: int
    round: int
    config: AgentConfig


class ToolCall(BaseModel):
    id: str
    name: str
    input: dict[str, Any] = Field(default_factory=dict)


class LlmResult(BaseModel):
    """The decision-relevant part of one LLM reply; its text stays in the store."""

    stop_reason: str
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: TokenUsage = Field(default_factory=TokenUsage)
    verdict: Verdict | None = None
    verdict_error: str = ""
    seconds: float = 0.0
    replayed: bool = False


class ToolResult(BaseModel):
    tool_use_id: str
    name: str
    content: str
    is_error: bool = False
    mutating: bool = False
    not_run: bool = False  # refused before running (its reply was cut off)
    # The recorded result of an earlier execution of this very tool call (e.g.
    # after `temporal workflow reset`): nothing was done again this time.
    replayed: bool = False


class FleetToolRequest(BaseModel):
    """One fleet tool call; the label of a create derives from (agent, run, tool_use_id)."""

    agent_id: str
    run: int
    round: int
    tool_use_id: str
    name: str
    input: dict[str, Any] = Field(default_factory=dict)
    config: AgentConfig


class StoreToolResults(BaseModel):
    """The user message answering one round: its tool results, and a note to
    the model when the round needs one (a reply cut off without tool calls)."""

    agent_id: str
    run: int
    round: int
    results: list[ToolResult]
    note: str = ""


class StoreMessagesRequest(BaseModel):
    """`store_operator_messages`: copy the message texts still only in the
    agent's state into the store. No texts here: the activity reads them with
    a query, so they do not pass through history a second time."""

    agent_id: str


class WaitForRun(BaseModel):
    """`wait_for_run`: the run handed over by an earlier execution of the agent."""

    run: int
    workflow_id: str
    run_id: str
    started_at: datetime


class RecordRunRequest(BaseModel):
    agent_id: str
    session: int
    result: RunResult
    final_round: int | None = None
    context: ContextInfo | None = None
    # The run workflow's `workflow.info().run_id`: which attempt to close.
    # "" = unknown (the latest attempt).
    workflow_run_id: str = ""


class InboxItem(BaseModel):
    """The full text of one human message, kept in the store's inbox under `key`."""

    key: Annotated[str, Field(min_length=1, max_length=200)]
    seq: int
    author: str
    text: str
    received_at: datetime


# ---------------------------------------------------------------- monitor


class MonitorConfig(BaseModel):
    """What the agent tells its monitor; sent again when the agent's config changes."""

    poll_seconds: int = 30
    target_proofs_per_hour: float = 0.0
    enabled: bool = True


class PollRequest(BaseModel):
    """`poll_fleet`: this agent's instances, summarised against its target."""

    agent_id: str
    target_proofs_per_hour: float = 0.0


class MonitorInput(BaseModel):
    agent_id: str
    config: MonitorConfig = Field(default_factory=MonitorConfig)
    # id -> state of the last poll, carried through continue-as-new so a new
    # execution does not report every instance as new.
    last_states: dict[int, str] | None = None
    polls: int = 0


# ---------------------------------------------------------------- agent state


class Phase(StrEnum):
    IDLE = "idle"
    DEBOUNCING = "debouncing"
    RUNNING = "running"
    PAUSED = "paused"


class RejectedInput(BaseModel):
    """A signal that was not kept: kept visible, never silently dropped.

    `preview` is the start of the payload's text (a message's text, a reason),
    so a sender can recognise its own refused signal.
    """

    at: datetime
    signal: str
    error: str
    preview: str = ""


class RunInFlight(BaseModel):
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


class AgentState(BaseModel):
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
    # Keys of operator messages whose text is still only in `pending_triggers`.
    unstored_keys: list[str] = Field(default_factory=list)
    run_in_flight: RunInFlight | None = None
    # Runs lost to a timeout or a terminate whose record the store has yet to close.
    unrecorded_runs: list[RunResult] = Field(default_factory=list)


class AgentInput(BaseModel):
    """Input of `FleetAgentWorkflow`: fresh start (no state) or continue-as-new.

    The agent ID is the workflow ID: one agent per fleet, by construction.
    """

    config: ConfigPatch | None = None
    state: AgentState | None = None


class AgentStatus(BaseModel):
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
