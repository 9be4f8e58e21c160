"""Each agent's last known config (`fa_agent_configs`), for the watchdog.

The agent workflow writes its config here when it starts and whenever it
changes (update_config, freeze, unfreeze); a fresh execution (after a
terminate, brought back by the watchdog) starts from it rather than from the
defaults. One row per agent, the config as JSON. A table that is only added
needs no schema version (schema.py).
"""

from __future__ import annotations

import logging
from datetime import datetime

from pydantic import ValidationError
from sqlalchemy import select

from fleet_agent.models import AgentConfig

from .base import Repository
from .tables import table_of
from .tables_agent import AgentConfigRow
from .timestamps import require_aware

__all__ = ["AgentConfigs"]

log = logging.getLogger("fleet_agent.store")


class AgentConfigs(Repository):
    """Reads and writes `fa_agent_configs` through a `Store`'s engine (synchronous)."""

    def save(self, agent_id: str, config: AgentConfig, at: datetime) -> None:
        """Make `config` the agent's last known one (one idempotent statement)."""
        data = config.model_dump_json()
        at = require_aware(at, "at")
        stmt = self._insert(table_of(AgentConfigRow)).values(
            agent_id=agent_id, data=data, updated_at=at
        )
        stmt = stmt.on_conflict_do_update(
            index_elements=["agent_id"], set_={"data": data, "updated_at": at}
        )
        with self._engine.begin() as conn:
            conn.execute(stmt)

    def load(self, agent_id: str) -> AgentConfig | None:
        """The agent's last known config; None if never kept, or if it no
        longer validates (an older release's keys): the agent then starts on
        the defaults, which is what it did before configs were kept."""
        table = table_of(AgentConfigRow)
        stmt = select(table.c.data).where(table.c.agent_id == agent_id)
        with self._engine.connect() as conn:
            data = conn.execute(stmt).scalar_one_or_none()
        if data is None:
            return None
        try:
            return AgentConfig.model_validate_json(data)
        except ValidationError as exc:
            log.warning("the stored config of agent %r no longer validates: %s", agent_id, exc)
            return None
