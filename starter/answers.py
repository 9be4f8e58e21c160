"""Send the agent a message, and its answer.

`ask` (the CLI's `ask` and `say --wait`) sends the message by the agent's
`ask` update, which returns the answer of the run that took it, or says
`pending` with the run to follow: it needs Temporal only. `send_message`
signals `human_message` with an id chosen here (`HumanMessage.message_id`),
which the agent carries into the trigger its run records in the store; the
web console sends that way and polls `find_answer` (never blocks) from its
page. The message is never lost when a wait ends: it stays with the agent
until a run takes it in.
"""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from fleet_agent.llm.verdict import strip_verdict
from fleet_agent.models import (
    ASK_MAX_WAIT_SECONDS,
    AskOutcome,
    AskRequest,
    AskResult,
    HumanMessage,
    RejectedInput,
    RunStatus,
    Verdict,
)
from fleet_agent.store import RunRecord, Store
from starter.agent_client import (
    UNCONFIRMED,
    AgentClient,
    CliError,
    UsageError,
    validation_message,
)

__all__ = [
    "ANSWER_TIMEOUT_EXIT",
    "Answer",
    "AnswerTimeout",
    "SentMessage",
    "ask",
    "checked_message",
    "find_answer",
    "new_message_id",
    "send_message",
]

#: Exit code of a wait that ended before the answer came (GNU `timeout`'s).
ANSWER_TIMEOUT_EXIT = 124
# The CLI's call waits this much longer than the workflow's own wait: the
# workflow always answers first (pending), unless no worker runs it.
_CALL_MARGIN_SECONDS = 15.0


class SentMessage(BaseModel):
    """A message sent and not refused: the agent showed it took it in
    (`confirmed`), or did not answer the check in time."""

    model_config = ConfigDict(frozen=True)

    agent_id: str
    message_id: str
    sent_at: datetime
    # The agent was not running: the message started it.
    started: bool
    # No run starts before this: the LLM spend cap holds them (None: not held,
    # or the agent did not answer the query).
    held_until: datetime | None = None
    # False: the agent did not answer within the check's wait (a backlog of
    # signals, a loaded worker, or none): sent, but not yet seen taken in.
    confirmed: bool = True


class Answer(BaseModel):
    """The run that took the message in: still running, or its final answer."""

    model_config = ConfigDict(frozen=True)

    agent_id: str
    message_id: str
    run: int
    attempt: int
    status: RunStatus
    started_at: datetime
    ended_at: datetime | None
    # The run's final assistant text without its verdict tags ("" while it runs).
    text: str
    verdict: Verdict | None
    error: str

    @property
    def finished(self) -> bool:
        return self.status != RunStatus.RUNNING

    @property
    def ok(self) -> bool:
        return self.status == RunStatus.OK


class AnswerTimeout(CliError):
    """The wait ended first (the `ask` update said `pending`); the message
    stays with the agent."""

    exit_code = ANSWER_TIMEOUT_EXIT

    def __init__(self, result: AskResult, waited: float) -> None:
        super().__init__(
            f"no answer within {waited:g}s; the message was delivered and is not lost: "
            f"{result.reason}. Follow it with {result.follow}"
        )
        self.result = result


def new_message_id() -> str:
    """A fresh id for `send_message` (random: no two senders share one)."""
    return f"m-{uuid.uuid4().hex}"


def checked_message(text: str, author: str, message_id: str) -> dict[str, Any]:
    """The `human_message` argument, validated as the workflow will (a bad one
    would only be recorded in its `rejected` list). Raises `UsageError`."""
    arg = {"text": text, "author": author, "message_id": message_id}
    try:
        HumanMessage.model_validate(arg)
    except ValidationError as exc:
        raise UsageError(f"invalid message: {validation_message(exc)}") from None
    return arg


async def send_message(
    agent: AgentClient, text: str, author: str, *, message_id: str | None = None
) -> SentMessage:
    """Signal `human_message` with an id (starting the agent if it is not
    running: Temporal signal-with-start) and check the agent did not refuse
    it. Touches Temporal only. Raises `UsageError` for a bad message,
    `CliError` when Temporal fails or the agent refuses it."""
    message_id = message_id or new_message_id()
    arg = checked_message(text, author, message_id)
    sent_at = datetime.now(UTC)
    started = await agent.signal_with_start("human_message", arg)
    refused = await agent.refusal("human_message", arg, sent_at)
    if isinstance(refused, RejectedInput):
        raise CliError(f"agent {agent.agent_id!r} refused the message: {refused.error}")
    seen = agent.seen_status
    return SentMessage(
        agent_id=agent.agent_id,
        message_id=message_id,
        sent_at=sent_at,
        started=started,
        held_until=seen.llm_spend.held_until if seen and seen.llm_spend else None,
        confirmed=refused is not UNCONFIRMED,
    )


def answer_of(record: RunRecord, message_id: str) -> Answer:
    return Answer(
        agent_id=record.agent_id,
        message_id=message_id,
        run=record.run,
        attempt=record.attempt,
        status=record.status,
        started_at=record.started_at,
        ended_at=record.ended_at,
        text=strip_verdict(record.final_text),
        verdict=record.verdict,
        error=record.error,
    )


def find_answer(store: Store, agent_id: str, message_id: str) -> Answer | None:
    """The latest run (and attempt) that took the message in, or None while it
    waits. Reads the store only (synchronous; a server calls it in a thread)."""
    found = store.run_reads.runs_with_message(agent_id, message_id)
    return answer_of(found[0], message_id) if found else None


def checked_ask(text: str, author: str, within: float) -> dict[str, Any]:
    """The `ask` argument (waiting `within` seconds), validated as the
    workflow's validator will. Raises `UsageError`."""
    if not 0 < within <= ASK_MAX_WAIT_SECONDS:
        raise UsageError(
            f"--timeout must be more than 0 and at most {ASK_MAX_WAIT_SECONDS} seconds, "
            f"got {within:g}"
        )
    arg: dict[str, Any] = checked_message(text, author, new_message_id())
    arg["wait_seconds"] = max(1, math.ceil(within))
    try:
        AskRequest.model_validate(arg)
    except ValidationError as exc:
        raise UsageError(f"invalid message: {validation_message(exc)}") from None
    return arg


async def ask(agent: AgentClient, text: str, author: str, within: float) -> tuple[AskResult, bool]:
    """Send the message by the agent's `ask` update (starting the agent if it
    is not running) and wait up to `within` seconds for the run that takes
    it to end; the answer and whether the agent was started. Touches
    Temporal only. Raises `UsageError` for a bad message, `CliError` when the
    agent refuses it or Temporal fails, `AnswerTimeout` when the wait ends
    first."""
    arg = checked_ask(text, author, within)
    result, started = await agent.ask(arg, wait=arg["wait_seconds"] + _CALL_MARGIN_SECONDS)
    if result.outcome == AskOutcome.REFUSED:
        raise CliError(f"agent {agent.agent_id!r} refused the message: {result.reason}")
    if result.outcome == AskOutcome.PENDING:
        raise AnswerTimeout(result, within)
    return result, started
