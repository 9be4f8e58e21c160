"""What the workflows call: a declaration of each activity, with its types.

Workflows must not import `activities/` (it pulls httpx, the anthropic SDK and
the database driver into the workflow sandbox), yet calling activities by a
string name loses every type check. These declarations carry the name and the
signature of each activity; the worker registers the real implementations
under the same names, and `tests/layers/test_layers.py` proves that every declaration
matches an implementation, parameter and return types included.

The bodies never run: a worker that registered a declaration instead of the
implementation would fail loudly.
"""

from __future__ import annotations

from typing import NoReturn

from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models only.
    from fleet_agent.demand.point import DemandStepRequest, DemandStepResult
    from fleet_agent.demand.reading import DemandReadRequest, DemandReadResult
    from fleet_agent.fleet.reconcile import ReconcileReport, ReconcileRequest
    from fleet_agent.fleet.snapshot import FleetSnapshot
    from fleet_agent.market.point import (
        MarketLeverResult,
        MarketStepRequest,
        MarketStepResult,
        RequestsChange,
    )
    from fleet_agent.models import (
        AgentCounters,
        AgentRecall,
        CompactRequest,
        CompactResult,
        ContextInfo,
        FleetToolRequest,
        LlmRequest,
        LlmResult,
        LoadContextRequest,
        NotifyRequest,
        NotifyResult,
        PollRequest,
        RecallRequest,
        RecordRunRequest,
        RunResult,
        SaveConfigRequest,
        StopFleetReport,
        StopFleetRequest,
        StoreMessagesRequest,
        StoreToolResults,
        ToolResult,
        WaitForRun,
        WatchdogInput,
    )

__all__ = [
    "FLEET_TOOL_ACTIVITIES",
    "agent_is_open",
    "call_llm",
    "change_requests",
    "compact_session",
    "create_instance",
    "destroy_instance",
    "ensure_agent",
    "get_fleet_status",
    "load_agent_counters",
    "load_context",
    "observe_demand",
    "observe_market",
    "poll_fleet",
    "read_demand",
    "recall_agent",
    "reconcile_labels",
    "record_run",
    "save_agent_config",
    "search_attributes_ready",
    "search_offers",
    "send_notification",
    "set_ask_price",
    "set_requests",
    "stop_fleet",
    "store_operator_messages",
    "store_tool_results",
    "wait_for_run",
]


def _declared(name: str) -> NoReturn:
    raise RuntimeError(f"{name} is a declaration; the worker must register its implementation")


# ---------------------------------------------------------------- store (activities/runlog.py)


@activity.defn(name="load_agent_counters")
async def load_agent_counters(agent_id: str) -> AgentCounters:
    """Highest run and session numbers of an agent in the store."""
    _declared("load_agent_counters")


@activity.defn(name="load_context")
async def load_context(req: LoadContextRequest) -> ContextInfo:
    """Open a run in the store and write its first message."""
    _declared("load_context")


@activity.defn(name="store_tool_results")
async def store_tool_results(req: StoreToolResults) -> None:
    """Write one round's tool results to the store."""
    _declared("store_tool_results")


@activity.defn(name="record_run")
async def record_run(req: RecordRunRequest) -> float:
    """Close a run's record in the store; returns its LLM cost in USD (an
    older worker's answer is None)."""
    _declared("record_run")


# ---------------------------------------------------------------- LLM (activities/llm.py)


@activity.defn(name="call_llm")
async def call_llm(req: LlmRequest) -> LlmResult:
    """One LLM round of one run; the reply goes to the store."""
    _declared("call_llm")


@activity.defn(name="compact_session")
async def compact_session(req: CompactRequest) -> CompactResult:
    """Fold the runs that left the history window into the session's summary."""
    _declared("compact_session")


# ---------------------------------------------------------------- fleet (activities/fleet.py)


@activity.defn(name="get_fleet_status")
async def get_fleet_status(req: FleetToolRequest) -> ToolResult:
    """Tool: this agent's instances and capacity."""
    _declared("get_fleet_status")


@activity.defn(name="search_offers")
async def search_offers(req: FleetToolRequest) -> ToolResult:
    """Tool: offers that pass the guardrails."""
    _declared("search_offers")


@activity.defn(name="create_instance")
async def create_instance(req: FleetToolRequest) -> ToolResult:
    """Tool: rent one offer, at most one machine per tool call."""
    _declared("create_instance")


@activity.defn(name="destroy_instance")
async def destroy_instance(req: FleetToolRequest) -> ToolResult:
    """Tool: release one of this agent's instances."""
    _declared("destroy_instance")


@activity.defn(name="poll_fleet")
async def poll_fleet(req: PollRequest) -> FleetSnapshot:
    """The monitor's read of the fleet."""
    _declared("poll_fleet")


@activity.defn(name="reconcile_labels")
async def reconcile_labels(req: ReconcileRequest) -> ReconcileReport:
    """Keep one machine per create label, destroy the duplicates (the monitor calls it)."""
    _declared("reconcile_labels")


@activity.defn(name="set_ask_price")
async def set_ask_price(req: FleetToolRequest) -> ToolResult:
    """The tool `set_ask_price`: the node's ask price, guarded (activities/market.py)."""
    _declared("set_ask_price")


@activity.defn(name="set_requests")
async def set_requests(req: FleetToolRequest) -> ToolResult:
    """The tool `set_requests`: the node asks for work or stops, guarded (activities/market.py)."""
    _declared("set_requests")


FLEET_TOOL_ACTIVITIES = {
    "get_fleet_status": get_fleet_status,
    "search_offers": search_offers,
    "create_instance": create_instance,
    "destroy_instance": destroy_instance,
    "set_ask_price": set_ask_price,
    "set_requests": set_requests,
}


# ---------------------------------------------------------------- Temporal (activities/temporal.py)


@activity.defn(name="store_operator_messages")
async def store_operator_messages(req: StoreMessagesRequest) -> list[str]:
    """Copy message texts from the agent's state into the store; returns the keys stored."""
    _declared("store_operator_messages")


@activity.defn(name="wait_for_run")
async def wait_for_run(req: WaitForRun) -> RunResult:
    """Wait for a run an earlier execution of the agent started."""
    _declared("wait_for_run")


@activity.defn(name="agent_is_open")
async def agent_is_open(agent_id: str) -> bool:
    """Whether the agent workflow is still running (for its monitor)."""
    _declared("agent_is_open")


@activity.defn(name="search_attributes_ready")
async def search_attributes_ready() -> bool:
    """Implemented by `VisibilityActivities` (activities/visibility.py)."""
    _declared("search_attributes_ready")


@activity.defn(name="stop_fleet")
async def stop_fleet(req: StopFleetRequest) -> StopFleetReport:
    """Implemented by `FleetActivities.stop_fleet` (activities/fleet.py)."""
    _declared("stop_fleet")


# ---------------------------------------------------------------- watchdog (activities/restart.py)


@activity.defn(name="ensure_agent")
async def ensure_agent(req: WatchdogInput) -> str:
    """Start the agent unless it is running; its run ID."""
    _declared("ensure_agent")


@activity.defn(name="save_agent_config")
async def save_agent_config(req: SaveConfigRequest) -> None:
    """Keep the agent's config as its last known one in the store."""
    _declared("save_agent_config")


@activity.defn(name="recall_agent")
async def recall_agent(req: RecallRequest) -> AgentRecall:
    """A fresh execution's last known config and how the previous one ended."""
    _declared("recall_agent")


# ---------------------------------------------------------------- notify (activities/notify.py)


@activity.defn(name="send_notification")
async def send_notification(req: NotifyRequest) -> NotifyResult:
    """Implemented by `NotifyActivities.send_notification` (activities/notify.py)."""
    _declared("send_notification")


# ---------------------------------------------------------------- demand (activities/demand.py)


@activity.defn(name="read_demand")
async def read_demand(req: DemandReadRequest) -> DemandReadResult:
    """One reading of the worker's demand source, or why there is none."""
    _declared("read_demand")


@activity.defn(name="observe_demand")
async def observe_demand(req: DemandStepRequest) -> DemandStepResult:
    """Read demand, decide the target, keep the point (activities/demand.py)."""
    _declared("observe_demand")


# ---------------------------------------------------------------- market (activities/market.py)


@activity.defn(name="observe_market")
async def observe_market(req: MarketStepRequest) -> MarketStepResult:
    """Read the Curio node's business, count the ledger, keep the point (activities/market.py)."""
    _declared("observe_market")


@activity.defn(name="change_requests")
async def change_requests(req: RequestsChange) -> MarketLeverResult:
    """Requests on or off at the Curio node, guarded as the tool is (activities/market.py)."""
    _declared("change_requests")
