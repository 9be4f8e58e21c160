"""Prover tracks (`fa_prover_tracks`): what the monitor measured, kept between polls.

One row per instance of an agent, holding a `ProverTrack` as JSON. The
monitor's poll replaces the agent's rows as a whole; the fleet views (the
run's context, get_fleet_status, the destroy tool's hysteresis) only read
them. A table that is only added needs no schema version (schema.py).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select

from fleet_agent.fleet.provers import ProverTrack

from .base import Repository
from .tables import ProverTrackRow, table_of
from .timestamps import require_aware

__all__ = ["ProverTracks"]


class ProverTracks(Repository):
    """Reads and writes `fa_prover_tracks` through a `Store`'s engine (synchronous)."""

    def load(self, agent_id: str) -> dict[int, ProverTrack]:
        """This agent's tracks by instance id."""
        table = table_of(ProverTrackRow)
        stmt = select(table.c.instance_id, table.c.data).where(table.c.agent_id == agent_id)
        with self._engine.connect() as conn:
            return {
                int(row.instance_id): ProverTrack.model_validate_json(row.data)
                for row in conn.execute(stmt)
            }

    def replace(self, agent_id: str, tracks: dict[int, ProverTrack], at: datetime) -> None:
        """Make `tracks` this agent's only tracks (one transaction)."""
        table = table_of(ProverTrackRow)
        rows = [
            {
                "agent_id": agent_id,
                "instance_id": iid,
                "data": track.model_dump_json(exclude_defaults=True),
                "updated_at": require_aware(at, "at"),
            }
            for iid, track in sorted(tracks.items())
        ]
        with self._engine.begin() as conn:
            conn.execute(delete(table).where(table.c.agent_id == agent_id))
            if rows:
                conn.execute(table.insert(), rows)
