"""The spend ledger (`fa_spend_instances`, `fa_spend_hours`): what each machine cost.

Per agent and instance: when it started (its `start_date`), the rate it was
billed at when last seen, how far it is accrued (`accrued_until`), when it
ended; and per UTC hour, the $ and seconds billed. `accrue` brings every
listed machine up to now at its current rate (fleet_agent/fleet/billing.py),
opening a new one from its own `start_date` (a machine rented while nobody
watched is billed from its start, not from when it was first seen) and
closing one no longer listed at the time it was last seen. `close` ends a
machine our own tools destroyed at the known time.

Nothing is ever credited: every amount added is at least 0 (a row's
negative cost already reads as absent, fleet_agent/vast/models.py), and a
traffic counter the row does not state, or states without its price, is
held until it does (its traffic is billed then, not lost as $0). So a
machine whose row does not parse (`Instance.unreadable`: no price, no
counters) goes on at the rate it was last billed at, its traffic held,
and one that never parsed is opened at $0/h from when it is first seen:
the ledger records what is known; the caps count such a machine at their
own values (fleet_agent/fleet/guardrails.py).

Every accrual is a compare-and-set on `accrued_until` (`UPDATE ... WHERE
accrued_until = <as read>`, rowcount checked) inside the transaction that
adds its hour rows, so two accruals at once (the monitor's poll and a tool)
never count the same time twice: the loser reads again and accrues only what
is left. A table only added needs no schema version (schema.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import ColumnElement, Connection, Row, or_, select, update

from fleet_agent.fleet.billing import billed_dph, hour_slices, traffic_usd
from fleet_agent.vast.models import Instance

from .spend_reads import SpendInstance, SpendReads
from .timestamps import require_aware

__all__ = ["SpendInstance", "SpendLedger"]

# A compare-and-set lost to a concurrent accrual is tried again after reading
# the row anew; each loss means another writer moved on, so a few rounds do.
_CAS_ROUNDS = 5


def _epoch(at: datetime) -> float:
    return at.timestamp()


def _at(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def _traffic(counter: float | None, price: float | None, last: float) -> tuple[float, float]:
    """(the counter to keep, KB new since `last`) of one traffic counter.
    A counter the row does not state, or states without a usable price,
    is held at `last`: nothing is billed now and nothing is lost (billed
    at the price the row states next). A counter lower than `last` started
    again (a new contract): all of it is new."""
    if counter is None or price is None:
        return last, 0.0
    return counter, counter - last if counter >= last else counter


class SpendLedger(SpendReads):
    """Reads and writes the ledger through a `Store`'s engine (synchronous)."""

    # ------------------------------------------------------------ writes

    def accrue(self, agent_id: str, instances: Iterable[Instance], now: datetime) -> None:
        """Bring every listed machine of the agent up to `now`; close the open
        ones `instances` no longer lists (the agent's whole fleet, as listed)
        at the time they were last seen."""
        require_aware(now, "now")
        listed = {i.id: i for i in instances if not i.is_gone}
        # One transaction for the listed and the vanished (the monitor accrues
        # at every poll: two transactions each cost a checkout and a commit);
        # one order over both, so two accruals never wait on each other's
        # rows. What a concurrent writer moved first is read again after.
        lost: dict[int, Instance] = {}
        with self._engine.begin() as conn:
            rows = self._rows(conn, agent_id, listed, open_too=True)
            for iid in sorted(set(listed) | set(rows)):
                inst, row = listed.get(iid), rows.get(iid)
                if inst is None:
                    if row is not None and row.ended_at is None:
                        # Lost to a concurrent accrual: that writer saw it listed.
                        self._move(
                            conn, agent_id, row, ended_at=row.accrued_until, closed_by="vanished"
                        )
                    continue
                row = row or self._opened(conn, agent_id, inst, now)
                if row is None or not self._advance(conn, agent_id, inst, row, now):
                    lost[iid] = inst
        self._bring_up(agent_id, lost, now)

    def open(self, agent_id: str, instance: Instance, now: datetime) -> None:
        """Accrue one machine (e.g. just rented) up to `now`, from its start if
        it is new; the agent's other machines are left alone."""
        self._bring_up(agent_id, {instance.id: instance}, require_aware(now, "now"))

    def close(
        self, agent_id: str, instance_id: int, at: datetime, instance: Instance | None = None
    ) -> None:
        """End a machine our own tools destroyed at `at`, billed up to then at
        its last seen rate (`instance`, its row just before the destroy, is
        accrued first: a machine the ledger never saw is billed from its
        start). A machine already accrued past `at` ends where it was accrued;
        one already ended keeps its end."""
        require_aware(at, "at")
        if instance is not None:
            self._bring_up(agent_id, {instance_id: instance}, at)
        for _ in range(_CAS_ROUNDS):
            with self._engine.begin() as conn:
                row = self._rows(conn, agent_id, [instance_id]).get(instance_id)
                if row is None or row.ended_at is not None:
                    return
                end = max(at, row.accrued_until)
                usd = max(0.0, row.dph) * (end - row.accrued_until).total_seconds() / 3600.0
                done = self._move(
                    conn,
                    agent_id,
                    row,
                    accrued_until=end,
                    ended_at=end,
                    closed_by="destroyed",
                    usd=row.usd + usd,
                )
                if done:
                    self._add_hours(conn, agent_id, instance_id, row.accrued_until, end, usd)
                    return

    # ------------------------------------------------------------ internals

    def _rows(
        self, conn: Connection, agent_id: str, ids: Iterable[int], *, open_too: bool = False
    ) -> dict[int, Row[Any]]:
        """The agent's rows of `ids`, and with `open_too` every open one too."""
        m = self._machines
        mine: ColumnElement[bool] = m.c.instance_id.in_(list(ids))
        if open_too:
            mine = or_(mine, m.c.ended_at.is_(None))
        stmt = select(m).where(m.c.agent_id == agent_id, mine)
        return {int(row.instance_id): row for row in conn.execute(stmt)}

    def _bring_up(self, agent_id: str, listed: Mapping[int, Instance], now: datetime) -> None:
        pending = dict(listed)
        for _ in range(_CAS_ROUNDS):
            if not pending:
                return
            lost: dict[int, Instance] = {}
            with self._engine.begin() as conn:
                rows = self._rows(conn, agent_id, pending)
                # One order for every writer: two transactions never wait on each other's rows.
                for iid, inst in sorted(pending.items()):
                    row = rows.get(iid) or self._opened(conn, agent_id, inst, now)
                    if row is None or not self._advance(conn, agent_id, inst, row, now):
                        lost[iid] = inst
            pending = lost

    def _opened(
        self, conn: Connection, agent_id: str, inst: Instance, now: datetime
    ) -> Row[Any] | None:
        """Insert a new machine as accrued up to its start; None if another
        writer inserted it first (read it again)."""
        start = min(_at(inst.start_date), now) if inst.start_date else now
        values = {
            "agent_id": agent_id,
            "instance_id": inst.id,
            "started_at": start,
            "accrued_until": start,
            "ended_at": None,
            "closed_by": "",
            "dph": billed_dph(inst),
            "dph_total": inst.price or 0.0,
            "inet_down_billed": 0.0,
            "inet_up_billed": 0.0,
            "usd": 0.0,
        }
        stmt = (
            self._insert(self._machines)
            .values(values)
            .on_conflict_do_nothing(index_elements=["agent_id", "instance_id"])
            .execution_options(preserve_rowcount=True)
        )
        if conn.execute(stmt).rowcount != 1:
            return None
        return self._rows(conn, agent_id, [inst.id])[inst.id]

    def _advance(
        self, conn: Connection, agent_id: str, inst: Instance, row: Row[Any], now: datetime
    ) -> bool:
        """Accrue `row` from its `accrued_until` to `now` at `inst`'s rate, plus
        the traffic since the last sight; False if another writer moved it."""
        if row.closed_by == "destroyed":
            return True  # we destroyed it; a listing from before says nothing new
        old = row.accrued_until
        end = max(now, old)
        down, d_down = _traffic(inst.inet_down_billed, inst.inet_down_cost, row.inet_down_billed)
        up, d_up = _traffic(inst.inet_up_billed, inst.inet_up_cost, row.inet_up_billed)
        traffic = traffic_usd(inst, d_down, d_up)
        # A row without a usable price keeps the machine's last rate: read
        # as $0 it would hide spend from the budget (prices fail closed).
        priced = inst.price is not None
        rate = billed_dph(inst) if priced else max(0.0, row.dph)
        usd = rate * (end - old).total_seconds() / 3600.0
        done = self._move(
            conn,
            agent_id,
            row,
            accrued_until=end,
            ended_at=None,  # a machine closed as vanished and listed again is open again
            closed_by="",
            dph=rate,
            dph_total=row.dph_total if inst.price is None else inst.price,
            inet_down_billed=down,
            inet_up_billed=up,
            usd=row.usd + usd + traffic,
        )
        if done:
            self._add_hours(conn, agent_id, inst.id, old, end, usd, traffic)
        return done

    def _move(self, conn: Connection, agent_id: str, row: Row[Any], **values: Any) -> bool:
        """The compare-and-set: update `row` only if nobody changed it since it was read."""
        m = self._machines
        ended = m.c.ended_at.is_(None) if row.ended_at is None else m.c.ended_at == row.ended_at
        stmt = (
            update(m)
            .where(
                m.c.agent_id == agent_id,
                m.c.instance_id == row.instance_id,
                m.c.accrued_until == row.accrued_until,
                ended,
            )
            .values(**values)
        )
        return int(conn.execute(stmt).rowcount) == 1

    def _add_hours(
        self,
        conn: Connection,
        agent_id: str,
        instance_id: int,
        start: datetime,
        end: datetime,
        usd: float,
        traffic: float = 0.0,
    ) -> None:
        """Spread `usd` (time) and `traffic` over the UTC hours of [start, end)."""
        span = (end - start).total_seconds()
        slices = hour_slices(_epoch(start), _epoch(end))
        if not slices:
            if traffic <= 0:
                return
            hour = end.replace(minute=0, second=0, microsecond=0)
            slices = [(_epoch(hour), 0.0)]
        for hour_start, seconds in slices:
            part = seconds / span if span > 0 else 1.0
            amount = max(0.0, usd) + max(0.0, traffic)
            self._add_hour(conn, agent_id, instance_id, _at(hour_start), amount * part, seconds)

    def _add_hour(
        self,
        conn: Connection,
        agent_id: str,
        instance_id: int,
        hour: datetime,
        usd: float,
        seconds: float,
    ) -> None:
        h = self._hours
        stmt = self._insert(h).values(
            agent_id=agent_id, instance_id=instance_id, hour=hour, usd=usd, seconds=seconds
        )
        stmt = stmt.on_conflict_do_update(
            index_elements=["agent_id", "instance_id", "hour"],
            set_={
                "usd": h.c.usd + stmt.excluded.usd,
                "seconds": h.c.seconds + stmt.excluded.seconds,
            },
        )
        conn.execute(stmt)
