"""The fleet tool-call journal (`fa_tool_calls`): each call's result, keyed by its ID.

After `temporal workflow reset` a run re-executes and replays the model's
stored decisions, so fleet tools are called again with the same tool_use_ids.
The fleet activities write here themselves: `start` before a mutating call
reaches vast.ai, `finish` with the result after. A call whose ID already has a
result returns that result and never touches the fleet again; one that only
started (a crash mid-call) goes through the create's label-adopt path.

Writes are idempotent under retries and overlapping attempts: `start` keeps
the first row, and the first result recorded wins.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict
from sqlalchemy import Connection, case, func, select, update
from sqlmodel import col

from fleet_agent.models import FleetToolRequest, ToolResult

from .base import Repository
from .tables import ToolCallRow, table_of
from .timestamps import require_aware

__all__ = ["IN_FLIGHT_MAX", "CreateInFlight", "ToolCallRecord", "ToolCallStatus", "ToolJournal"]

ToolCallStatus = Literal["started", "done"]

#: A call started this long ago with no result is taken as dead (its worker
#: crashed), not in flight: far longer than any fleet activity's timeout.
IN_FLIGHT_MAX = timedelta(hours=1)


class ToolCallRecord(BaseModel):
    """One journalled tool call as stored."""

    model_config = ConfigDict(frozen=True)

    agent_id: str
    tool_use_id: str
    run: int
    round: int
    name: str
    input: dict[str, Any]
    status: ToolCallStatus
    result: ToolResult | None
    started_at: datetime
    finished_at: datetime | None


class CreateInFlight(BaseModel):
    """A create call journalled as started, with no result yet: its machine
    may appear at any moment, so it holds its price against the caps."""

    model_config = ConfigDict(frozen=True)

    tool_use_id: str
    run: int
    #: The price it was started at; None for a call journalled before schema 7.
    reserved_dph: float | None
    started_at: datetime


class ToolJournal(Repository):
    """Reads and writes `fa_tool_calls` through a `Store`'s engine (synchronous)."""

    def get(self, agent_id: str, tool_use_id: str) -> ToolCallRecord | None:
        with self._engine.connect() as conn:
            return self._get(conn, agent_id, tool_use_id)

    def start(
        self, call: FleetToolRequest, at: datetime, reserved_dph: float | None = None
    ) -> ToolCallRecord:
        """Record that `call` is about to act on the fleet; returns the row as
        stored. A repeat (retry, overlapping attempt) keeps the first row.
        `reserved_dph`: a create's price, held against the caps until it ends."""
        with self._engine.begin() as conn:
            self._insert_row(
                conn, call, "started", None, require_aware(at, "at"), reserved_dph=reserved_dph
            )
            return self._must_get(conn, call)

    def creates_in_flight(
        self, agent_id: str, now: datetime, except_call: str = ""
    ) -> list[CreateInFlight]:
        """This agent's create calls started less than IN_FLIGHT_MAX before
        `now` with no result yet, oldest first; `except_call` left out."""
        now = require_aware(now, "now")
        table = table_of(ToolCallRow)
        stmt = (
            select(table.c.tool_use_id, table.c.run, table.c.reserved_dph, table.c.started_at)
            .where(
                table.c.agent_id == agent_id,
                table.c.name == "create_instance",
                table.c.status == "started",
                table.c.tool_use_id != except_call,
                table.c.started_at >= now - IN_FLIGHT_MAX,
            )
            .order_by(table.c.started_at)
        )
        with self._engine.connect() as conn:
            rows = conn.execute(stmt).all()
        return [
            CreateInFlight(
                tool_use_id=r.tool_use_id,
                run=r.run,
                reserved_dph=r.reserved_dph,
                started_at=_aware(r.started_at),
            )
            for r in rows
        ]

    def finish(self, call: FleetToolRequest, result: ToolResult, at: datetime) -> ToolCallRecord:
        """Record `call`'s result (with no `start` before it, for read-only
        tools, the row is created done). The first result recorded wins: an
        overlapping attempt that finishes later gets the stored row back."""
        at = require_aware(at, "at")
        result_json = result.model_dump_json()
        with self._engine.begin() as conn:
            # The insert comes first: on SQLite it takes the write lock, so the
            # update and read below see one consistent row.
            self._insert_row(conn, call, "done", result_json, at)
            conn.execute(
                update(ToolCallRow)
                .where(
                    col(ToolCallRow.agent_id) == call.agent_id,
                    col(ToolCallRow.tool_use_id) == call.tool_use_id,
                    col(ToolCallRow.status) == "started",
                )
                .values(status="done", result_json=result_json, finished_at=at)
            )
            return self._must_get(conn, call)

    def changes_since(
        self, agent_id: str, name: str, since: datetime, except_call: str = ""
    ) -> list[datetime]:
        """When this agent's calls of tool `name` that changed the fleet (a
        machine rented or destroyed) started, from `since` on, oldest first.
        Calls still in flight count too: their outcome is not known yet.
        `except_call` (a tool_use_id) is left out."""
        table = table_of(ToolCallRow)
        stmt = (
            select(table.c.status, table.c.result_json, table.c.started_at)
            .where(
                table.c.agent_id == agent_id,
                table.c.name == name,
                table.c.tool_use_id != except_call,
                table.c.started_at >= require_aware(since, "since"),
            )
            .order_by(table.c.started_at)
        )
        with self._engine.connect() as conn:
            rows = conn.execute(stmt).all()
        return [
            row.started_at
            for row in rows
            if row.status == "started"
            or (row.result_json and ToolResult.model_validate_json(row.result_json).mutating)
        ]

    def releases_since(self, agent_id: str, since: datetime, except_call: str = "") -> set[int]:
        """The instances this agent's destroy_instance calls started from
        `since` on released (destroyed or drained) or may be releasing (no
        result yet); `except_call` (a tool_use_id) is left out. Such a machine
        may still be listed as capacity for a while: a drain until the
        monitor's next poll reads it, a destroy until the listing catches up."""
        table = table_of(ToolCallRow)
        stmt = select(table.c.status, table.c.result_json, table.c.input_json).where(
            table.c.agent_id == agent_id,
            table.c.name == "destroy_instance",
            table.c.tool_use_id != except_call,
            table.c.started_at >= require_aware(since, "since"),
        )
        with self._engine.connect() as conn:
            rows = conn.execute(stmt).all()
        released: set[int] = set()
        for row in rows:
            if row.status != "started" and not (
                row.result_json and ToolResult.model_validate_json(row.result_json).mutating
            ):
                continue
            iid = json.loads(row.input_json or "{}").get("instance_id")
            if isinstance(iid, int) and not isinstance(iid, bool):
                released.add(iid)
        return released

    def last_change(self, agent_id: str, names: Collection[str], now: datetime) -> datetime | None:
        """When this agent's fleet may last have changed through its calls of
        the tools `names`: the latest a call of them ended, or `now` while
        one that started less than IN_FLIGHT_MAX ago has no result yet.
        None when there was no such call. One aggregate over the agent's
        rows (the unique index leads with agent_id)."""
        now = require_aware(now, "now")
        table = table_of(ToolCallRow)
        stmt = select(
            func.max(table.c.finished_at),
            func.max(case((table.c.status == "started", table.c.started_at))),
        ).where(table.c.agent_id == agent_id, table.c.name.in_(list(names)))
        with self._engine.connect() as conn:
            ended, open_since = conn.execute(stmt).one()
        if open_since is not None and now - _aware(open_since) < IN_FLIGHT_MAX:
            return now
        return None if ended is None else _aware(ended)

    def temporary_creates(
        self, agent_id: str, runs: Collection[int]
    ) -> list[tuple[int, str, dict[str, Any]]]:
        """(run, tool_use_id, input) of this agent's create_instance calls in
        `runs` that asked for a temporary machine (fleet_agent/fleet/temporary.py).
        The input is stored as `json.dumps(sort_keys=True)`, so the text filter
        narrows the rows and the parsed input decides."""
        found = self._creates(agent_id, runs, like='%"temporary": true%')
        return [(run, use_id, args) for run, use_id, args in found if args.get("temporary") is True]

    def creates(
        self, agent_id: str, runs: Collection[int]
    ) -> list[tuple[int, str, dict[str, Any]]]:
        """(run, tool_use_id, input) of every create_instance call of this
        agent in `runs`: what each rental was for, by its reason
        (bench/market_day/day.py counts swaps and trades so)."""
        return self._creates(agent_id, runs)

    def _creates(
        self, agent_id: str, runs: Collection[int], *, like: str | None = None
    ) -> list[tuple[int, str, dict[str, Any]]]:
        if not runs:
            return []
        table = table_of(ToolCallRow)
        stmt = select(table.c.run, table.c.tool_use_id, table.c.input_json).where(
            table.c.agent_id == agent_id,
            table.c.name == "create_instance",
            table.c.run.in_(sorted(set(runs))),
        )
        if like is not None:
            stmt = stmt.where(table.c.input_json.like(like))
        with self._engine.connect() as conn:
            rows = conn.execute(stmt).all()
        return [(r.run, r.tool_use_id, json.loads(r.input_json or "{}")) for r in rows]

    # ------------------------------------------------------------ helpers

    def _insert_row(
        self,
        conn: Connection,
        call: FleetToolRequest,
        status: ToolCallStatus,
        result_json: str | None,
        at: datetime,
        *,
        reserved_dph: float | None = None,
    ) -> None:
        stmt = (
            self._insert(table_of(ToolCallRow))
            .values(
                agent_id=call.agent_id,
                tool_use_id=call.tool_use_id,
                run=call.run,
                round=call.round,
                name=call.name,
                input_json=json.dumps(call.input, sort_keys=True, default=str),
                status=status,
                result_json=result_json or "",
                reserved_dph=reserved_dph,
                started_at=at,
                finished_at=at if status == "done" else None,
            )
            .on_conflict_do_nothing(index_elements=["agent_id", "tool_use_id"])
        )
        conn.execute(stmt)

    def _must_get(self, conn: Connection, call: FleetToolRequest) -> ToolCallRecord:
        record = self._get(conn, call.agent_id, call.tool_use_id)
        if record is None:  # pragma: no cover - the insert above guarantees a row
            raise RuntimeError(f"tool call {call.tool_use_id} vanished from the journal")
        return record

    @staticmethod
    def _get(conn: Connection, agent_id: str, tool_use_id: str) -> ToolCallRecord | None:
        table = table_of(ToolCallRow)
        row = (
            conn.execute(
                select(table).where(
                    table.c.agent_id == agent_id, table.c.tool_use_id == tool_use_id
                )
            )
            .mappings()
            .first()
        )
        if row is None:
            return None
        status: ToolCallStatus = "done" if row["status"] == "done" else "started"
        return ToolCallRecord(
            agent_id=row["agent_id"],
            tool_use_id=row["tool_use_id"],
            run=row["run"],
            round=row["round"],
            name=row["name"],
            input=json.loads(row["input_json"] or "{}"),
            status=status,
            result=ToolResult.model_validate_json(row["result_json"])
            if status == "done" and row["result_json"]
            else None,
            started_at=row["started_at"],
            finished_at=row["finished_at"],
        )


def _aware(value: datetime) -> datetime:
    """An aggregate's timestamp as aware UTC (SQLite's come back naive, in UTC)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
