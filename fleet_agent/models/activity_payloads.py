"""Inputs and results of the activities. The workflows' inputs are with their
concept: runs.py, monitor.py, restart.py and agent.py."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import Field

from fleet_agent.wire import Wire

from .approvals import ApprovalAsk, ApprovalDecision
from .config import AgentConfig
from .runs import LlmCostSummary, RunInput, RunResult, TokenUsage, Verdict
from .spend import SpendSummary

__all__ = [
    "AgentCounters",
    "ContextInfo",
    "FleetToolRequest",
    "LlmRequest",
    "LlmResult",
    "LoadContextRequest",
    "PollRequest",
    "RecordRunRequest",
    "RequestLayout",
    "StoreMessagesRequest",
    "StoreToolResults",
    "ToolCall",
    "ToolResult",
    "WaitForRun",
]


class AgentCounters(Wire):
    """The highest run and session numbers the store has seen for an agent."""

    max_run: int = 0
    max_session: int = 0


class LoadContextRequest(Wire):
    run_input: RunInput
    started_at: datetime
    # `workflow.info().run_id` of the run workflow: a run executed again after a
    # reset opens a new attempt in the run log. "" = unknown (the latest attempt).
    workflow_run_id: str = ""


class ContextInfo(Wire):
    """What `load_context` tells the run about the prompt it prepared."""

    history_runs_included: int = 0
    history_runs_dropped: int = 0
    estimated_prompt_tokens: int = 0
    # Runs left the history window and are not yet in the session's summary:
    # the run calls `compact_session` before its first LLM round.
    compaction_due: bool = False
    # The agent's spend when the context was written (None: no fleet connected).
    spend: SpendSummary | None = None
    # The agent's LLM cost (today, 24 h) from the store's run records.
    llm_cost: LlmCostSummary | None = None


class RequestLayout(Wire):
    """How a run's request was shrunk to fit (fleet_agent/llm/request_fit.py).

    A thinking model's blocks are bound to everything before them, so a
    request may only ever keep the previous round's layout and add to its
    end, or fold the whole run so far: each reply carries the layout it was
    made under and the next round starts from it."""

    # Rounds 1..folded_upto of the run are given as a digest in its context
    # message rather than as turns (0: none).
    folded_upto: int = Field(default=0, ge=0)
    # The oldest history messages left out (in pairs: a run's trigger and answer).
    history_dropped: int = Field(default=0, ge=0)
    # The share of the context message's text kept, cut in the middle.
    context_keep: float = Field(default=1.0, gt=0, le=1)


class LlmRequest(Wire):
    agent_id: str
    run: int
    session: int
    round: int
    config: AgentConfig
    # The layout of the previous round's request (its reply's).
    layout: RequestLayout = Field(default_factory=RequestLayout)
    # > 0: a final reply comes back with this many characters of its text
    # (`LlmResult.reply`): the run took an operator's message, which an
    # `ask` may be waiting to answer.
    reply_chars: Annotated[int, Field(ge=0, le=100_000)] = 0


class ToolCall(Wire):
    id: str
    name: str
    input: dict[str, Any] = Field(default_factory=dict)


class LlmResult(Wire):
    """The decision-relevant part of one LLM reply (and a final answer's preview);
    its text stays in the store."""

    stop_reason: str
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: TokenUsage = Field(default_factory=TokenUsage)
    verdict: Verdict | None = None
    verdict_error: str = ""
    seconds: float = 0.0
    replayed: bool = False
    # A final reply's first ANSWER_PREVIEW_CHARS (fleet_agent/llm/verdict.py), for
    # the Web UI; the whole text stays in the store.
    answer: str = ""
    # The final reply's text without its verdict, its first
    # `LlmRequest.reply_chars` characters (empty unless asked for).
    reply: str = ""
    reply_cut: bool = False
    # The layout the reply's request was made under: the next round's start.
    layout: RequestLayout = Field(default_factory=RequestLayout)


class ToolResult(Wire):
    tool_use_id: str
    name: str
    content: str
    is_error: bool = False
    mutating: bool = False
    not_run: bool = False  # refused before running (its reply was cut off)
    # The recorded result of an earlier execution of this very tool call (e.g.
    # after `temporal workflow reset`): nothing was done again this time.
    replayed: bool = False
    # Set instead of acting when the change needs an operator's approval: the
    # run asks, waits, and calls the tool again with the decision (approvals.py).
    approval: ApprovalAsk | None = None
    # $/hour this call added to the fleet (create: + the rented machine's
    # dph_total) or removed (destroy: - what the machine was billed). A
    # replayed result carries the figure of the call that did it.
    dph_delta: float = 0.0
    # True: `content` is only a one-line status; the full text is the tool
    # journal's result for `tool_use_id` (fa_tool_calls), which
    # `store_tool_results` puts in the round's message. Keeps tool output
    # out of the run workflow's history.
    stored: bool = False
    # A short note the run puts before the content (an operator's approval).
    preface: str = ""


class FleetToolRequest(Wire):
    """One fleet tool call; the label of a create derives from (agent, run, tool_use_id)."""

    agent_id: str
    run: int
    round: int
    tool_use_id: str
    name: str
    input: dict[str, Any] = Field(default_factory=dict)
    config: AgentConfig
    # An operator's approval of this very call: the tool skips the approval
    # gate (every other guardrail still holds).
    approval: ApprovalDecision | None = None
    # True (the run workflow): return a `stored` result, the text left in the
    # journal. False (direct callers, tests): the full text.
    slim: bool = False


class StoreToolResults(Wire):
    """The user message answering one round: its tool results, and a note to
    the model when the round needs one (a reply cut off without tool calls)."""

    agent_id: str
    run: int
    round: int
    results: list[ToolResult]
    note: str = ""


class StoreMessagesRequest(Wire):
    """`store_operator_messages`: copy the message texts still only in the
    agent's state into the store. No texts here: the activity reads them with
    a query, so they do not pass through history a second time."""

    agent_id: str


class WaitForRun(Wire):
    """`wait_for_run`: the run handed over by an earlier execution of the agent."""

    run: int
    workflow_id: str
    run_id: str
    started_at: datetime


class RecordRunRequest(Wire):
    agent_id: str
    session: int
    result: RunResult
    final_round: int | None = None
    context: ContextInfo | None = None
    # The run workflow's `workflow.info().run_id`: which attempt to close.
    # "" = unknown (the latest attempt).
    workflow_run_id: str = ""


class PollRequest(Wire):
    """`poll_fleet`: this agent's instances, summarised against its target, with
    their provers read and judged by the agent's rules."""

    agent_id: str
    target_proofs_per_hour: float = 0.0
    not_proving_minutes: float = 20.0
    offline_grace_minutes: float = 5.0
    min_release_age_minutes: float = 45.0
    failed_host_ttl_hours: float = 24.0
    # The snapshot's `hold_proofs_per_hour` with a spare for one failure.
    spare_one_machine: bool = False
