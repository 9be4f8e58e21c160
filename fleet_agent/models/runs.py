"""Runs: their input, result and verdict; the wakes a run asks for; what the LLM cost."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field

from fleet_agent.wire import Wire

from .config import AgentConfig, DemandEventList
from .notify import RunNotice
from .spend import SpendSummary
from .trigger import Trigger

__all__ = [
    "LastRun",
    "LlmCostSummary",
    "LlmTotals",
    "RunInput",
    "RunResult",
    "RunStatus",
    "TokenUsage",
    "Verdict",
    "Wake",
    "WakeRequest",
]


class Wake(Wire):
    """A future run the agent asked for with `schedule_next_check`."""

    id: str
    due_at: datetime
    reason: str
    requested_by_run: int


class WakeRequest(Wire):
    """What a run decided about wakes; the parent workflow applies it."""

    op: Literal["add", "cancel"]
    wake: Wake | None = None
    wake_id: str = ""


class Verdict(Wire):
    """The verdict tag that ends every run's final text."""

    action: bool
    state_changed: bool


class RunStatus(StrEnum):
    RUNNING = "running"
    OK = "ok"
    FAILED = "failed"
    MAX_ROUNDS = "max_rounds"


class TokenUsage(Wire):
    """Tokens of one LLM round, or summed over rounds, as the Messages API counts
    them: `input_tokens` is only the uncached rest of the prompt; the prompt is
    `input_tokens + cache_creation_input_tokens + cache_read_input_tokens`.
    `cache_creation_1h_input_tokens` is the part of the cache writes made with
    the 1-hour TTL (billed 2 × input instead of 1.25 ×). `output_tokens`
    includes thinking, as the API counts and bills it; `thinking_tokens` is
    the part of them spent thinking (the API's
    `usage.output_tokens_details.thinking_tokens`), for the run log only."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_creation_1h_input_tokens: int = 0
    thinking_tokens: int = 0

    @property
    def prompt_tokens(self) -> int:
        """Every input token of the request(s): uncached, written and read."""
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_input_tokens=self.cache_read_input_tokens + other.cache_read_input_tokens,
            cache_creation_input_tokens=(
                self.cache_creation_input_tokens + other.cache_creation_input_tokens
            ),
            cache_creation_1h_input_tokens=(
                self.cache_creation_1h_input_tokens + other.cache_creation_1h_input_tokens
            ),
            thinking_tokens=self.thinking_tokens + other.thinking_tokens,
        )


class LlmTotals(Wire):
    """Tokens, dollars and seconds of the LLM summed over runs.

    Each run counts once, by its latest finished attempt (an attempt after a
    reset reuses the stored replies of the one before: nothing is paid twice).
    `cost_usd` prices each round at its model's entry in the price table;
    a model without one (the autopilot) costs nothing.
    """

    runs: int = 0
    usage: TokenUsage = Field(default_factory=TokenUsage)
    cost_usd: float = 0.0
    llm_seconds: float = 0.0
    tool_seconds: float = 0.0

    @property
    def cached_share(self) -> float:
        """The part of the prompt tokens read from the cache (0 with no prompt)."""
        prompt = self.usage.prompt_tokens
        return self.usage.cache_read_input_tokens / prompt if prompt else 0.0


class LlmCostSummary(Wire):
    """The agent's LLM cost today (UTC) and over the last 24 h, as of `as_of`.

    A run counts in a window when it started in it.
    """

    as_of: datetime
    today: LlmTotals = Field(default_factory=LlmTotals)
    last_24h: LlmTotals = Field(default_factory=LlmTotals)

    def line(self) -> str:
        """One line for the operator:
        ``LLM: today $0.42 (120 runs, 85 % cached), 24 h $0.51 (as of 2026-11-29 21:00 UTC)``."""
        t, d = self.today, self.last_24h
        return (
            f"LLM: today ${t.cost_usd:.2f} ({t.runs} run(s), {t.cached_share:.0%} of the prompt "
            f"cached, {t.usage.output_tokens:,} output tokens), 24 h ${d.cost_usd:.2f} "
            f"({d.runs} run(s)) (as of {self.as_of:%Y-%m-%d %H:%M} UTC)"
        )


class LastRun(Wire):
    run: int
    status: RunStatus
    verdict: Verdict | None
    noop: bool
    in_prompt: bool = True
    verdict_error: str = ""
    error: str = ""
    started_at: datetime | None = None
    ended_at: datetime | None = None
    # $/hour the run's tool calls added (creates) and removed (destroys).
    dph_added: float = 0.0
    dph_removed: float = 0.0
    # The start of the run's final answer (RunResult.answer).
    answer: str = ""


class RunInput(Wire):
    """Everything one `AgentRunWorkflow` needs; texts stay in the store."""

    agent_id: str
    run: int
    session: int
    triggers: list[Trigger]
    config: AgentConfig
    wakes: list[Wake] = Field(default_factory=list)
    next_heartbeat_at: datetime | None = None
    # The namespace has our search attributes: the run upserts its outcome.
    search_attributes: bool = False


class RunResult(Wire):
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
    # Sums of the tool results' dph_delta: $/hour rented and released.
    dph_added: float = 0.0
    dph_removed: float = 0.0
    # The spend ledger's summary as load_context read it (None: not read).
    spend: SpendSummary | None = None
    # Seconds the fleet tool activities took, by the workflow's clock
    # (approval waits excluded).
    tool_seconds: float = 0.0
    # The LLM cost summary as load_context read it (None: not read).
    llm_cost: LlmCostSummary | None = None
    # What this run's LLM rounds cost, as record_run priced them (0: the
    # autopilot, or a run that was not recorded); max_llm_usd_per_hour counts it.
    cost_usd: Annotated[float, Field(ge=0, le=1_000_000)] = 0.0
    # The first ANSWER_PREVIEW_CHARS of the final answer, so the Web UI shows
    # it in the run's result; the whole text is in the store.
    answer: str = ""
    # A run that took an operator's message: its final answer without the
    # verdict, cut at ASK_ANSWER_CHARS (`reply_cut`), for the `ask` update.
    reply: str = ""
    reply_cut: bool = False
    # What the run saw that notifies a human (fleet_agent/notify/run_notices.py).
    notices: list[RunNotice] = Field(default_factory=list)
    # Known demand events the model recorded (`expect_demand`), for the agent
    # to add to its config (workflows/run_events.py).
    demand_events: DemandEventList = Field(default_factory=list)
