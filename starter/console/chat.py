"""The console's chat: which run answered a message sent at a known time.

A message is a `human_message` trigger; the run that consumed it stores its
triggers with their full text, and its final text is the answer. So the
answer to a message is the final text of the newest run whose triggers hold
that text, received at or after the send. Reads the store only (through the
CLI's `read_runs`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from fleet_agent.models import RunStatus, TriggerKind
from fleet_agent.verdict import strip_verdict
from starter.runlog_view import read_runs

__all__ = ["ChatAnswer", "find_answer"]

# Between this machine's clock and the workflow's (the server's) time.
_CLOCK_SLACK = timedelta(seconds=5)
# Runs to look through: a message is answered by one of the next few runs.
_LOOKBACK = 50


@dataclass(frozen=True)
class ChatAnswer:
    """The run that took the message; `text` is its answer once it ended."""

    run: int
    attempt: int
    done: bool
    text: str
    error: str


def find_answer(agent_id: str, text: str, sent_at: datetime) -> ChatAnswer | None:
    """The run that handled the message `text` sent at `sent_at`; None until one took it."""
    for record in reversed(read_runs(agent_id, _LOOKBACK, None)):
        if any(
            t.kind == TriggerKind.HUMAN_MESSAGE
            and t.text == text
            and t.received_at >= sent_at - _CLOCK_SLACK
            for t in record.triggers
        ):
            done = record.status != RunStatus.RUNNING
            return ChatAnswer(
                run=record.run,
                attempt=record.attempt,
                done=done,
                text=strip_verdict(record.final_text).strip() if done else "",
                error=record.error,
            )
    return None
