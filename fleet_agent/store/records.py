"""Plain pydantic records the store returns, so callers never hold ORM objects."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from fleet_agent.models import ContextInfo, RunStatus, TokenUsage, Trigger, Verdict

__all__ = [
    "HistoryEntry",
    "MessageRecord",
    "MessageRole",
    "RunRecord",
    "SessionRecord",
    "StoreCondition",
]

MessageRole = Literal["user", "assistant"]


class RunRecord(BaseModel):
    """Everything stored about one attempt of a run (1 = the original execution;
    a run executes again after a `temporal workflow reset` to before it)."""

    model_config = ConfigDict(frozen=True)

    agent_id: str
    run: int
    attempt: int
    workflow_run_id: str
    session: int
    status: RunStatus
    triggers: list[Trigger]
    trigger_block: str
    started_at: datetime
    ended_at: datetime | None
    verdict: Verdict | None
    verdict_error: str
    noop: bool
    in_prompt: bool
    error: str
    final_text: str
    actions_digest: str
    mutating_calls: int
    tool_calls: int
    rounds: int
    stop_reasons: list[str] = Field(default_factory=list)
    usage: TokenUsage
    llm_seconds: float
    history_runs_included: int
    history_runs_dropped: int
    estimated_prompt_tokens: int
    # $/hour the attempt's tool calls added and removed (`fa_run_spend`).
    dph_added: float = 0.0
    dph_removed: float = 0.0
    # The run's LLM rounds priced, the model of its last round, and its fleet
    # tools' seconds (`fa_run_costs`; 0 and "" for a run recorded before it).
    cost_usd: float = 0.0
    model: str = ""
    tool_seconds: float = 0.0

    @property
    def context(self) -> ContextInfo:
        """The prompt bookkeeping recorded by `RunWrites.set_run_context`."""
        return ContextInfo(
            history_runs_included=self.history_runs_included,
            history_runs_dropped=self.history_runs_dropped,
            estimated_prompt_tokens=self.estimated_prompt_tokens,
        )


class MessageRecord(BaseModel):
    """One stored conversation message."""

    model_config = ConfigDict(frozen=True)

    agent_id: str
    run: int
    seq: int
    round: int
    role: MessageRole
    kind: str
    content: str
    in_prompt: bool
    created_at: datetime


class SessionRecord(BaseModel):
    """One conversation of an agent: why and when it began."""

    model_config = ConfigDict(frozen=True)

    session: int
    started_at: datetime
    reason: str


class HistoryEntry(BaseModel):
    """What the prompt builder needs about one earlier run of the session."""

    model_config = ConfigDict(frozen=True)

    run: int
    started_at: datetime
    ended_at: datetime | None
    status: RunStatus
    trigger_block: str
    final_text: str
    actions_digest: str
    noop: bool


class StoreCondition(BaseModel):
    """What is at the store's URL, looked at before a worker opens it."""

    model_config = ConfigDict(frozen=True)

    exists: bool  # False: the SQLite file is missing (always True on PostgreSQL)
    version: int | None  # schema version; None: no fleet-agent tables

    @property
    def empty(self) -> bool:
        """Missing, or reachable with no fleet-agent tables: nothing to lose."""
        return self.version is None
