"""The console's chat: the answer to a message, by the id it was sent with.

Sending is `starter.answers.send_message` (the CLI's `ask` uses it too); this
module opens the store for `starter.answers.find_answer`, which never blocks:
the page polls it until the run that took the message in has ended.
"""

from __future__ import annotations

import re

from sqlalchemy.exc import SQLAlchemyError

from fleet_agent.models.signals import MESSAGE_ID_PATTERN
from starter.agent_client import CliError, UsageError
from starter.answers import Answer, find_answer
from starter.views.runlog import open_store

__all__ = ["answer_for"]

_MESSAGE_ID = re.compile(MESSAGE_ID_PATTERN)


def answer_for(agent_id: str, message_id: str) -> Answer | None:
    """The run that took message `message_id` in (running or ended), or None
    while the message waits. Reads the store; a malformed id is a `UsageError`."""
    if not message_id or len(message_id) > 64 or not _MESSAGE_ID.fullmatch(message_id):
        raise UsageError(f"not a message id: {message_id!r}")
    store = open_store()
    try:
        return find_answer(store, agent_id, message_id)
    except SQLAlchemyError as exc:
        raise CliError(f"cannot read the run log ({store!r}): {str(exc).splitlines()[0]}") from None
    finally:
        store.dispose()
