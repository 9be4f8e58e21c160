"""The router's rows (issue 52): members the agent names, what the router witnessed.

* `RouterMembers` (`fa_router_members`): the agent's monitor makes its list
  the agent's only members at every poll (`replace`); the destroy tool marks
  one machine ``drain`` (`drain`). A drain is kept: `replace` never turns a
  draining member back into ``serve`` (one statement per member, so a drain
  written between the monitor's read and its write is not lost), and a
  second `drain` does not move the first one's ``drain_by``.
* `RouterWitness` (`fa_router_witness`, `fa_router_queue`): the router
  replaces its witness of an agent's machines and its queue every 5 s
  (router/store_sync.py); the monitor loads them.

What is read back is validated against its model
(fleet_agent/cuzk/witness.py): the router and the agent may run different
versions, and anyone with the database can write a row. A row that does not
validate is skipped, logged and counted (`skipped`), never raised into the
monitor or the router. Synchronous: callers run it in a thread.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from sqlalchemy import delete, select

from fleet_agent.cuzk.witness import MachineWitness, MemberSpec, RouterQueue

from .base import Repository
from .store import Store
from .tables import table_of
from .tables_router import RouterMemberRow, RouterQueueRow, RouterWitnessRow
from .timestamps import require_aware

__all__ = ["RouterMembers", "RouterWitness", "WitnessRead"]

log = logging.getLogger(__name__)

_M = TypeVar("_M", bound=BaseModel)

#: What `RouterWitness.load` returns: the witness by instance id, the queue
#: (None: the router wrote none), and when the router last wrote (None: never).
WitnessRead = tuple[dict[int, MachineWitness], RouterQueue | None, datetime | None]


class _Rows(Repository):
    """A repository that counts the rows skipped on read."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        #: Rows read back that did not validate, since this object was made.
        self.skipped = 0

    def _parse(self, model: type[_M], data: str, where: str) -> _M | None:
        try:
            return model.model_validate_json(data)
        except (ValidationError, ValueError) as exc:
            self.skipped += 1
            log.warning(
                "%s: a row that is no %s was skipped (%d error(s))",
                where,
                model.__name__,
                exc.error_count() if isinstance(exc, ValidationError) else 1,
            )
            return None


class RouterMembers(_Rows):
    """Reads and writes `fa_router_members` through a `Store`'s engine."""

    def replace(self, agent_id: str, members: Sequence[MemberSpec], at: datetime) -> None:
        """Make `members` this agent's only members (one transaction); a member
        already draining stays draining whatever `members` says of it."""
        table = table_of(RouterMemberRow)
        at = require_aware(at, "at")
        ids = [m.instance_id for m in members]
        if len(set(ids)) != len(ids):
            raise ValueError(f"members of {agent_id} name an instance twice")
        gone = delete(table).where(table.c.agent_id == agent_id)
        if ids:
            gone = gone.where(table.c.instance_id.not_in(ids))
        with self._engine.begin() as conn:
            conn.execute(gone)
            for member in members:
                stmt = self._insert(table).values(_member_row(agent_id, member, at))
                conn.execute(
                    stmt.on_conflict_do_update(
                        index_elements=["agent_id", "instance_id"],
                        set_={
                            "want": stmt.excluded.want,
                            "data": stmt.excluded.data,
                            "updated_at": stmt.excluded.updated_at,
                        },
                        # Evaluated on the row as it is when the statement
                        # runs (PostgreSQL locks it): a drain is never undone.
                        where=(table.c.want != "drain") | (stmt.excluded.want == "drain"),
                    )
                )

    def drain(self, agent_id: str, member: MemberSpec, at: datetime) -> None:
        """Mark one machine ``drain`` (`member.want` must say so), adding it if
        it is not a member yet; a machine already draining keeps its first
        ``drain_by``."""
        if member.want != "drain" or member.drain_by is None:
            raise ValueError("a drain names want='drain' and its drain_by")
        table = table_of(RouterMemberRow)
        stmt = self._insert(table).values(_member_row(agent_id, member, require_aware(at, "at")))
        stmt = stmt.on_conflict_do_update(
            index_elements=["agent_id", "instance_id"],
            set_={
                "want": stmt.excluded.want,
                "data": stmt.excluded.data,
                "updated_at": stmt.excluded.updated_at,
            },
            where=table.c.want != "drain",
        )
        with self._engine.begin() as conn:
            conn.execute(stmt)

    def remove(self, agent_id: str, instance_id: int) -> None:
        """Drop one member (its machine was destroyed), drain or not."""
        table = table_of(RouterMemberRow)
        with self._engine.begin() as conn:
            conn.execute(
                delete(table).where(
                    table.c.agent_id == agent_id, table.c.instance_id == instance_id
                )
            )

    def load(self, agent_id: str) -> list[MemberSpec]:
        """This agent's members, by instance id; rows that do not validate skipped."""
        table = table_of(RouterMemberRow)
        stmt = (
            select(table.c.instance_id, table.c.data)
            .where(table.c.agent_id == agent_id)
            .order_by(table.c.instance_id)
        )
        with self._engine.connect() as conn:
            rows = conn.execute(stmt).all()
        members = []
        for row in rows:
            member = self._parse(MemberSpec, row.data, f"member {row.instance_id} of {agent_id}")
            if member is None:
                continue
            if member.instance_id != row.instance_id:
                self._mismatch(agent_id, row.instance_id, member.instance_id)
                continue
            members.append(member)
        return members

    def _mismatch(self, agent_id: str, row_id: int, data_id: int) -> None:
        self.skipped += 1
        log.warning("member row %s of %s names instance %s: skipped", row_id, agent_id, data_id)


class RouterWitness(_Rows):
    """Reads and writes `fa_router_witness` and `fa_router_queue` through a `Store`'s engine."""

    def replace(
        self,
        agent_id: str,
        witnesses: Sequence[MachineWitness],
        queue: RouterQueue,
        at: datetime,
    ) -> None:
        """Make `witnesses` this agent's only witness rows and `queue` its queue
        (one transaction), all dated `at` (the router's clock)."""
        at = require_aware(at, "at")
        table, queues = table_of(RouterWitnessRow), table_of(RouterQueueRow)
        rows = [
            {
                "agent_id": agent_id,
                "instance_id": w.instance_id,
                "data": w.model_dump_json(exclude_defaults=True),
                "updated_at": at,
            }
            for w in sorted(witnesses, key=lambda w: w.instance_id)
        ]
        if len({r["instance_id"] for r in rows}) != len(rows):
            raise ValueError(f"the witness of {agent_id} names an instance twice")
        stmt = self._insert(queues).values(
            agent_id=agent_id, data=queue.model_dump_json(exclude_defaults=True), updated_at=at
        )
        upsert = stmt.on_conflict_do_update(
            index_elements=["agent_id"],
            set_={"data": stmt.excluded.data, "updated_at": stmt.excluded.updated_at},
        )
        with self._engine.begin() as conn:
            conn.execute(delete(table).where(table.c.agent_id == agent_id))
            if rows:
                conn.execute(table.insert(), rows)
            conn.execute(upsert)

    def load(self, agent_id: str) -> WitnessRead:
        """This agent's witness by instance id, its queue, and when the router
        last wrote either (the newest row's time); rows that do not validate
        skipped (their time still counts: the router wrote)."""
        table, queues = table_of(RouterWitnessRow), table_of(RouterQueueRow)
        with self._engine.connect() as conn:
            rows = conn.execute(
                select(table.c.instance_id, table.c.data, table.c.updated_at).where(
                    table.c.agent_id == agent_id
                )
            ).all()
            queue_row = conn.execute(
                select(queues.c.data, queues.c.updated_at).where(queues.c.agent_id == agent_id)
            ).first()
        witnesses: dict[int, MachineWitness] = {}
        times: list[datetime] = [r.updated_at for r in rows]
        for row in rows:
            where = f"witness of instance {row.instance_id} ({agent_id})"
            witness = self._parse(MachineWitness, row.data, where)
            if witness is None:
                continue
            if witness.instance_id != row.instance_id:
                self.skipped += 1
                log.warning("%s names instance %s: skipped", where, witness.instance_id)
                continue
            witnesses[witness.instance_id] = witness
        queue = None
        if queue_row is not None:
            times.append(queue_row.updated_at)
            queue = self._parse(RouterQueue, queue_row.data, f"router queue of {agent_id}")
        return witnesses, queue, max(times) if times else None


def _member_row(agent_id: str, member: MemberSpec, at: datetime) -> dict[str, Any]:
    return {
        "agent_id": agent_id,
        "instance_id": member.instance_id,
        "want": member.want,
        "data": member.model_dump_json(exclude_defaults=True),
        "updated_at": at,
    }
