"""The router's rows (fleet_agent/store/router.py) on SQLite and PostgreSQL:
members replaced as a whole with a drain kept, the witness and queue
replaced together, and rows that do not validate skipped and counted."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import update

from fleet_agent.cuzk.witness import MachineWitness, MemberSpec, RouterQueue
from fleet_agent.store import RouterMembers, RouterWitness, Store
from fleet_agent.store.tables import table_of
from fleet_agent.store.tables_router import (
    RouterMemberRow,
    RouterQueueRow,
    RouterWitnessRow,
)
from tests.helpers.store_backends import in_threads, store_on_both_backends  # noqa: F401  (a fixture)

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def _member(iid: int, want: str = "serve", drain_by: datetime | None = None) -> MemberSpec:
    return MemberSpec.model_validate(
        {
            "instance_id": iid,
            "label": f"fleet-agent/r1-{iid}",
            "address": f"203.0.113.{iid}:4{iid:04d}",
            "want": want,
            "drain_by": drain_by,
        }
    )


def _witness(iid: int, **fields: object) -> MachineWitness:
    return MachineWitness.model_validate(
        {"instance_id": iid, "phase": "serving", "since": T0, **fields}
    )


def test_members_are_replaced_as_a_whole_and_a_drain_is_kept(store: Store) -> None:
    members = RouterMembers(store)
    members.replace("a", [_member(1), _member(2)], T0)
    members.replace("b", [_member(1)], T0)
    assert [m.instance_id for m in members.load("a")] == [1, 2]
    drain_by = T0 + timedelta(minutes=15)
    members.drain("a", _member(2, "drain", drain_by), T0)
    # The monitor's next write says serve for 2 (it read before the drain): kept drain.
    members.replace("a", [_member(2), _member(3)], T0 + timedelta(seconds=5))
    loaded = {m.instance_id: m for m in members.load("a")}
    assert sorted(loaded) == [2, 3], "1 is gone"
    assert loaded[2].want == "drain" and loaded[2].drain_by == drain_by
    assert loaded[3].want == "serve"
    # A second drain does not move the first one's bound.
    members.drain("a", _member(2, "drain", drain_by + timedelta(hours=1)), T0)
    assert {m.instance_id: m for m in members.load("a")}[2].drain_by == drain_by
    # A drain of a machine that is no member yet adds it.
    members.drain("a", _member(4, "drain", drain_by), T0)
    assert [m.want for m in members.load("a")] == ["drain", "serve", "drain"]
    members.replace("a", [], T0)
    assert members.load("a") == []
    assert [m.instance_id for m in members.load("b")] == [1], "another agent's own"


def test_concurrent_drains_and_replaces_never_lose_a_drain(store: Store) -> None:
    """The monitor's write and the destroy tool's drain race: whatever the
    order, the drain stands."""
    members = RouterMembers(store)
    drain_by = T0 + timedelta(minutes=15)
    for round_ in range(5):
        members.replace("a", [_member(1), _member(2)], T0)
        iid = 1 + round_ % 2

        def act(i: int, iid: int = iid) -> None:
            if i % 2:
                members.drain("a", _member(iid, "drain", drain_by), T0)
            else:
                members.replace("a", [_member(1), _member(2)], T0)

        in_threads(4, act)
        wants = {m.instance_id: m.want for m in members.load("a")}
        assert wants[iid] == "drain", (round_, wants)
        # Next round starts from serve again: only a removal undoes a drain.
        members.replace("a", [], T0)


def test_the_witness_and_queue_are_replaced_together(store: Store) -> None:
    witness = RouterWitness(store)
    assert witness.load("a") == ({}, None, None)
    queue = RouterQueue(at=T0, pending={"porep": 3}, in_flight=2, pending_proving_seconds=450.0)
    witness.replace("a", [_witness(1, done=4), _witness(2, phase="joining")], queue, T0)
    later = T0 + timedelta(seconds=5)
    witness.replace("a", [_witness(2, done=1)], queue.model_copy(update={"at": later}), later)
    seen, q, at = witness.load("a")
    assert list(seen) == [2] and seen[2].done == 1 and seen[2].phase == "serving"
    assert q is not None and q.pending == {"porep": 3} and q.at == later
    assert at == later
    assert witness.load("b") == ({}, None, None)
    witness.replace("a", [], queue, later)
    assert witness.load("a")[0] == {}


def test_rows_that_do_not_validate_are_skipped_and_counted(store: Store) -> None:
    members, witness = RouterMembers(store), RouterWitness(store)
    members.replace("a", [_member(1), _member(2), _member(3)], T0)
    queue = RouterQueue(at=T0)
    witness.replace("a", [_witness(1), _witness(2), _witness(3)], queue, T0)
    m, w, q = table_of(RouterMemberRow), table_of(RouterWitnessRow), table_of(RouterQueueRow)
    bad_member = '{"instance_id": 2, "label": "", "address": "x"}'
    bad_witness = '{"instance_id": 2, "phase": "lying", "since": "2026-05-01T12:00:00Z"}'
    with store.engine.begin() as conn:
        conn.execute(update(m).where(m.c.instance_id == 2).values(data=bad_member))
        # Row 3 holds instance 1's data: it would answer for another machine.
        other = _member(1).model_dump_json()
        conn.execute(update(m).where(m.c.instance_id == 3).values(data=other))
        conn.execute(update(w).where(w.c.instance_id == 2).values(data=bad_witness))
        conn.execute(update(w).where(w.c.instance_id == 3).values(data="not json"))
        conn.execute(update(q).values(data='{"at": "2026-05-01T12:00:00Z", "in_flight": -1}'))
    assert [x.instance_id for x in members.load("a")] == [1]
    assert members.skipped == 2
    seen, loaded_queue, at = witness.load("a")
    assert list(seen) == [1] and loaded_queue is None and at == T0
    assert witness.skipped == 3


def test_naive_times_and_twice_named_instances_are_refused(store: Store) -> None:
    members, witness = RouterMembers(store), RouterWitness(store)
    calls: list[Callable[[], None]] = [
        lambda: members.replace("a", [_member(1), _member(1)], T0),
        lambda: members.replace("a", [_member(1)], T0.replace(tzinfo=None)),
        lambda: members.drain("a", _member(1), T0),
        lambda: witness.replace("a", [_witness(1), _witness(1)], RouterQueue(at=T0), T0),
    ]
    for call in calls:
        with pytest.raises(ValueError):
            call()
