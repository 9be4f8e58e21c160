"""Persistence of agent sessions, runs, messages and the inbox (SQLite or PostgreSQL).

Temporal-free and synchronous: activities call it from their thread pool.
"""

from .agent_configs import AgentConfigs
from .demand_history import DemandHistory
from .engine import create_engine_for, default_database_url, redacted_url
from .fleet_snapshots import FleetSnapshots, StoredSnapshot
from .guard import NEW_STORE_ENV, NEW_STORE_FLAG, StoreRefused, store_refusal
from .hosts import FailedHost, FailedHosts
from .journal import CreateInFlight, ToolCallRecord, ToolCallStatus, ToolJournal
from .market_history import MarketHistory
from .notifications import Notifications
from .proof_days import ProofDays
from .provers import ProverTracks
from .records import HistoryEntry, MessageRecord, RunRecord, SessionRecord, StoreCondition
from .router import RouterMembers, RouterWitness
from .schema import SCHEMA_VERSION, SchemaError
from .spend import SpendInstance, SpendLedger
from .store import Store
from .summaries import SummaryRecord, SummarySource
from .trends import SpendHour, TrendReads

__all__ = [
    "NEW_STORE_ENV",
    "NEW_STORE_FLAG",
    "SCHEMA_VERSION",
    "AgentConfigs",
    "CreateInFlight",
    "DemandHistory",
    "FailedHost",
    "FailedHosts",
    "FleetSnapshots",
    "HistoryEntry",
    "MarketHistory",
    "MessageRecord",
    "Notifications",
    "ProofDays",
    "ProverTracks",
    "RouterMembers",
    "RouterWitness",
    "RunRecord",
    "SchemaError",
    "SessionRecord",
    "SpendHour",
    "SpendInstance",
    "SpendLedger",
    "Store",
    "StoreCondition",
    "StoreRefused",
    "StoredSnapshot",
    "SummaryRecord",
    "SummarySource",
    "ToolCallRecord",
    "ToolCallStatus",
    "ToolJournal",
    "TrendReads",
    "create_engine_for",
    "default_database_url",
    "redacted_url",
    "store_refusal",
]
