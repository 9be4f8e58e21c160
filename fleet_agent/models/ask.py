"""The `ask` update: a `human_message` that waits for its answer.

The request is the `human_message` payload, plus how long to wait; the result
says whether the message was taken, and if so the answer of the run that took
it (or the run to follow when the wait ended first). The answer is cut at
`ASK_ANSWER_CHARS`: the result is written to the agent's history.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import Field

from fleet_agent.wire import Wire

from .runs import RunStatus, Verdict
from .signals import HumanMessage

__all__ = [
    "ASK_ANSWER_CHARS",
    "ASK_DEFAULT_WAIT_SECONDS",
    "ASK_MAX_WAIT_SECONDS",
    "AskOutcome",
    "AskRequest",
    "AskResult",
]

#: Characters of the run's answer an `ask` returns (and a run that took a
#: message carries back to the agent): the whole text stays in the store.
ASK_ANSWER_CHARS = 4_000
#: How long an `ask` waits for the run by default, and at most: a waiting ask
#: holds the agent's continue-as-new (it waits for every update handler).
ASK_DEFAULT_WAIT_SECONDS = 600
ASK_MAX_WAIT_SECONDS = 1_800


class AskRequest(HumanMessage):
    """`ask` update: the `human_message` payload (`text`, `author`,
    `message_id`) and how long to wait for the answer."""

    wait_seconds: Annotated[int, Field(ge=1, le=ASK_MAX_WAIT_SECONDS)] = ASK_DEFAULT_WAIT_SECONDS

    def message(self) -> HumanMessage:
        return HumanMessage(text=self.text, author=self.author, message_id=self.message_id)


class AskOutcome(StrEnum):
    #: The run that took the message has ended: its answer (or its error).
    ANSWERED = "answered"
    #: The message was not taken (frozen, paused, backlog full): nothing waits.
    REFUSED = "refused"
    #: The wait ended first: the message was taken and a run will answer it.
    PENDING = "pending"


class AskResult(Wire):
    """What `ask` returns. `answer` holds at most ASK_ANSWER_CHARS characters
    of the run's final text, without its verdict tags (`answer_cut`: more
    is in the store, `fleet-agent show-run RUN`)."""

    agent_id: str
    outcome: AskOutcome
    #: Why it was refused, or what a pending message waits for.
    reason: str = ""
    #: The run that took the message (None: refused, or not taken yet).
    run: int | None = None
    run_status: RunStatus | None = None
    verdict: Verdict | None = None
    verdict_error: str = ""
    noop: bool = False
    error: str = ""
    #: What the run's LLM rounds cost (0 for the autopilot).
    cost_usd: float = 0.0
    answer: Annotated[str, Field(max_length=ASK_ANSWER_CHARS)] = ""
    answer_cut: bool = False
    #: How to follow a pending run, or read the whole answer.
    follow: str = ""
