"""Persistence of agent sessions, runs and messages (SQLite or PostgreSQL).

Temporal-free and synchronous: activities call it from their thread pool.
"""

from .engine import create_engine_for, default_database_url, redacted_url
from .journal import ToolCallRecord, ToolCallStatus, ToolJournal
from .records import HistoryEntry, MessageRecord, RunRecord, SessionRecord
from .store import Store

__all__ = [
    "HistoryEntry",
    "MessageRecord",
    "RunRecord",
    "SessionRecord",
    "Store",
    "ToolCallRecord",
    "ToolCallStatus",
    "ToolJournal",
    "create_engine_for",
    "default_database_url",
    "redacted_url",
]
