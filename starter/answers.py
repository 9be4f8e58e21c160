"""Send the agent a message and find the run that answered it.

The CLI's `say --wait` / `ask` and the web console share this: `send_message`
signals the message with an id chosen here (`HumanMessage.message_id`), which
the agent carries into the trigger its run records in the store;
`find_answer` looks that run up (never blocks: the console polls it) and
`wait_for_answer` polls it with a deadline (the CLI). The message is never
lost when a wait ends: it stays with the agent until a run takes it in.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, ValidationError

from fleet_agent.llm.verdict import strip_verdict
from fleet_agent.models import HumanMessage, RunStatus, Verdict
from fleet_agent.store import RunRecord, Store
from starter.agent_client import AgentClient, CliError, UsageError, validation_message
from starter.hints import CLI

__all__ = [
    "ANSWER_TIMEOUT_EXIT",
    "Answer",
    "AnswerTimeout",
    "SentMessage",
    "find_answer",
    "new_message_id",
    "send_message",
    "wait_for_answer",
]

#: Exit code of a wait that ended before the answer came (GNU `timeout`'s).
ANSWER_TIMEOUT_EXIT = 124
_POLL_SECONDS = 0.5


class SentMessage(BaseModel):
    """A message the agent accepted."""

    model_config = ConfigDict(frozen=True)

    agent_id: str
    message_id: str
    sent_at: datetime
    # The agent was not running: the message started it.
    started: bool
    # No run starts before this: the LLM spend cap holds them (None: not held,
    # or the agent did not answer the query).
    held_until: datetime | None = None


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
    """The wait ended first; the message stays with the agent."""

    exit_code = ANSWER_TIMEOUT_EXIT

    def __init__(self, sent: SentMessage, waited: float, last: Answer | None) -> None:
        where = (
            f"run #{last.run} took it in and is still running"
            if last is not None
            else "it waits for the agent's next run (is the agent paused or frozen?)"
        )
        super().__init__(
            f"no answer within {waited:g}s; the message was delivered and is not lost: {where}. "
            f"Read the answer later with `{CLI} runs --agent {sent.agent_id}`"
        )
        self.sent = sent
        self.last = last


def new_message_id() -> str:
    """A fresh id for `send_message` (random: no two senders share one)."""
    return f"m-{uuid.uuid4().hex}"


def checked_message(text: str, author: str, message_id: str) -> dict[str, str]:
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
    if refused is not None:
        raise CliError(f"agent {agent.agent_id!r} refused the message: {refused.error}")
    seen = agent.seen_status
    return SentMessage(
        agent_id=agent.agent_id,
        message_id=message_id,
        sent_at=sent_at,
        started=started,
        held_until=seen.llm_spend.held_until if seen and seen.llm_spend else None,
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


async def wait_for_answer(
    store: Store, sent: SentMessage, *, within: float, poll_seconds: float = _POLL_SECONDS
) -> Answer:
    """Poll the store until the run that took the message in has ended.
    Raises `AnswerTimeout` after `within` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        answer = await asyncio.to_thread(find_answer, store, sent.agent_id, sent.message_id)
        if answer is not None and answer.finished:
            return answer
        left = deadline - loop.time()
        if left <= 0:
            raise AnswerTimeout(sent, within, answer)
        await asyncio.sleep(min(poll_seconds, left))
