"""Proofs finished per agent and UTC day (`fa_proof_days`), for the daily digest.

The monitor's poll adds what each prover's `proofs_completed` counter rose by
since the poll before (activities/fleet_provers.py); the digest's delivery
reads the day it reports on (activities/notify.py). One monitor writes an
agent's rows, so a read-then-write in one transaction is enough. A table
that is only added needs no schema version (schema.py).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select, update

from .base import Repository
from .tables import ProofDayRow, table_of
from .timestamps import require_aware

__all__ = ["ProofDays"]


class ProofDays(Repository):
    """Reads and adds to `fa_proof_days` through a `Store`'s engine (synchronous)."""

    def add(self, agent_id: str, proofs: int, at: datetime) -> None:
        """Count `proofs` more in the UTC day of `at` (nothing for 0 or less)."""
        if proofs <= 0:
            return
        at = require_aware(at, "at")
        day = at.strftime("%Y-%m-%d")
        table = table_of(ProofDayRow)
        where = (table.c.agent_id == agent_id) & (table.c.day == day)
        with self._engine.begin() as conn:
            found = conn.execute(select(table.c.proofs).where(where)).first()
            if found is None:
                conn.execute(
                    table.insert(),
                    {"agent_id": agent_id, "day": day, "proofs": proofs, "updated_at": at},
                )
            else:
                conn.execute(
                    update(table).where(where).values(proofs=table.c.proofs + proofs, updated_at=at)
                )

    def on(self, agent_id: str, day: str) -> int:
        """The proofs counted for `day` (YYYY-MM-DD, UTC); 0 when none were."""
        table = table_of(ProofDayRow)
        stmt = select(table.c.proofs).where((table.c.agent_id == agent_id) & (table.c.day == day))
        with self._engine.connect() as conn:
            row = conn.execute(stmt).first()
        return int(row.proofs) if row is not None else 0
