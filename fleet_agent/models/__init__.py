"""Payload models shared by workflows, activities, the store and the CLI.

Every workflow, activity, signal, update and query payload is one of these
pydantic models, carried by Temporal's pydantic data converter. They are
Temporal-free so the store, the prompt code and the CLI can use them too.
"""

from .activities import (
    AgentCounters,
    ContextInfo,
    FleetToolRequest,
    LlmRequest,
    LlmResult,
    LoadContextRequest,
    MonitorConfig,
    MonitorInput,
    PollRequest,
    RecordRunRequest,
    StoreMessagesRequest,
    StoreToolResults,
    ToolCall,
    ToolResult,
    WaitForRun,
)
from .agent import (
    AgentInput,
    AgentState,
    AgentStatus,
    Phase,
    RejectedInput,
    RunInFlight,
)
from .config import (
    AgentConfig,
    ConfigPatch,
    GpuList,
)
from .freeze import (
    FreezeInfo,
    FreezeReport,
    FreezeRequest,
    StopFleetReport,
    StopFleetRequest,
    UnfreezeRequest,
)
from .runs import (
    LastRun,
    RunInput,
    RunResult,
    RunStatus,
    TokenUsage,
    Verdict,
    Wake,
    WakeRequest,
)
from .signals import (
    CancelWake,
    HumanMessage,
    ResetSession,
    StateChanged,
    TriggerNow,
)
from .spend import SpendSummary
from .trigger import (
    InboxItem,
    Priority,
    Trigger,
    TriggerKind,
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
    "FreezeInfo",
    "FreezeReport",
    "FreezeRequest",
    "GpuList",
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
    "SpendSummary",
    "StateChanged",
    "StopFleetReport",
    "StopFleetRequest",
    "StoreMessagesRequest",
    "StoreToolResults",
    "TokenUsage",
    "ToolCall",
    "ToolResult",
    "Trigger",
    "TriggerKind",
    "TriggerNow",
    "UnfreezeRequest",
    "Verdict",
    "WaitForRun",
    "Wake",
    "WakeRequest",
]
