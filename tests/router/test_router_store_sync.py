"""The router's store sync (router/store_sync.py) with a fake router: members
the agent wrote reach `set_members`, the witness and queue reach the store
dated by the router's clock, and a store outage keeps the last members and
is logged once."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from fleet_agent.cuzk.witness import MachineWitness, MemberSpec, RouterQueue
from fleet_agent.store import RouterMembers, RouterWitness, Store
from router.config import RouterConfig
from router.engine import Router
from router.members import insecure_connect
from router.store_sync import StoreMembership, StoreSync, add_sync_options, store_url_of
from tests.helpers import eventually

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


class FakeRouter:
    """The three calls of router/engine.py's `Router` the sync makes."""

    def __init__(self) -> None:
        self.members: list[list[MemberSpec]] = []
        self.seen = [
            MachineWitness(instance_id=7, phase="serving", since=T0, sent=3, done=2, in_flight=1)
        ]
        self.waiting = RouterQueue(at=T0, pending={"porep": 2}, in_flight=1)

    def set_members(self, members: list[MemberSpec]) -> None:
        self.members.append(list(members))

    def witness(self) -> list[MachineWitness]:
        return list(self.seen)

    def queue(self) -> RouterQueue:
        return self.waiting


def _member(iid: int) -> MemberSpec:
    return MemberSpec(instance_id=iid, label=f"fleet-agent/r1-{iid}", address=f"192.0.2.1:{iid}")


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


async def test_members_go_in_and_the_witness_comes_out(store: Store) -> None:
    router, clock = FakeRouter(), Clock()
    RouterMembers(store).replace("a", [_member(7), _member(8)], T0)
    RouterMembers(store).replace("b", [_member(9)], T0)
    sync = StoreSync(router, store, "a", clock=clock, members_every=0.02, witness_every=0.05)
    stop = asyncio.Event()
    task = asyncio.create_task(sync.run(stop))
    try:

        async def members_in() -> bool:
            return bool(router.members) and [m.instance_id for m in router.members[-1]] == [7, 8]

        await eventually(members_in, what="the members to reach the router")
        RouterMembers(store).replace("a", [_member(8)], T0)

        async def member_left() -> bool:
            return [m.instance_id for m in router.members[-1]] == [8]

        await eventually(member_left, what="a removed member to leave the router")

        async def witnessed() -> bool:
            return 7 in RouterWitness(store).load("a")[0]

        await eventually(witnessed, what="the witness in the store")
    finally:
        stop.set()
        await asyncio.wait_for(task, 5)
    seen, queue, at = RouterWitness(store).load("a")
    assert seen[7].done == 2 and queue is not None and queue.pending == {"porep": 2}
    assert at == T0, "dated by the router's clock"
    assert RouterWitness(store).load("b") == ({}, None, None), "only its own agent's"


async def test_a_store_outage_keeps_the_last_members_and_is_logged_once(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    router, clock = FakeRouter(), Clock()
    RouterMembers(store).replace("a", [_member(7)], T0)
    sync = StoreSync(router, store, "a", clock=clock)
    assert await sync.pull_members() and await sync.push_witness()
    real_load, real_replace = sync._members.load, sync._witness.replace

    def down(*_: object) -> list[MemberSpec]:
        raise ConnectionError("server closed the connection\npostgresql://u:secret@db/x")

    sync._members.load = down  # type: ignore[assignment,method-assign]
    sync._witness.replace = down  # type: ignore[assignment,method-assign]
    caplog.set_level(logging.WARNING, logger="router.store_sync")
    for _ in range(5):
        clock.now += timedelta(seconds=2)
        assert not await sync.pull_members()
        assert not await sync.push_witness()
    assert len(router.members) == 1, "no set_members while the store is away"
    assert [m.instance_id for m in router.members[-1]] == [7], "the last members kept"
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines  # one per direction
    assert all("unreachable" in line and "secret" not in line for line in lines), lines
    sync._members.load = real_load  # type: ignore[method-assign]
    sync._witness.replace = real_replace  # type: ignore[method-assign]
    clock.now += timedelta(seconds=2)
    assert await sync.pull_members() and await sync.push_witness()
    assert len(router.members) == 2
    assert sum("reachable again" in r.getMessage() for r in caplog.records) == 2
    assert RouterWitness(store).load("a")[2] == clock.now


def test_the_options_name_the_store_and_the_agent() -> None:
    parser = argparse.ArgumentParser()
    add_sync_options(parser)
    args = parser.parse_args(["--agent-id", "x"])
    assert args.agent_id == "x"
    assert store_url_of(args, {"FLEET_STORE_URL": "sqlite:///r.db"}) == "sqlite:///r.db"
    given = parser.parse_args(["--store-url", "sqlite:///s.db"])
    assert store_url_of(given, {"FLEET_STORE_URL": "sqlite:///r.db"}) == "sqlite:///s.db"
    assert store_url_of(args, {"FLEET_DATABASE_URL": "sqlite:///w.db"}) != "sqlite:///r.db"


async def test_the_real_router_takes_its_members_from_the_store(tmp_path: Path) -> None:
    """router.engine.Router behind `StoreMembership` (router.server.serve's
    membership source): a member the agent wrote is polled by the router, and
    its witness (joining: nothing answers at its address) reaches the store."""
    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    store = Store(url)
    store.create_all()
    RouterMembers(store).replace("a", [_member(7)], datetime.now(UTC))
    router = Router(RouterConfig(), insecure_connect)
    await router.start()
    task = asyncio.create_task(StoreMembership(url, "a").run(router))
    try:

        async def witnessed() -> MachineWitness | None:
            return RouterWitness(store).load("a")[0].get(7)

        seen = await eventually(witnessed, timeout=20, what="the router's witness of 7")
        assert seen is not None
        assert seen.phase == "joining"
        _, queue, at = RouterWitness(store).load("a")
        assert queue is not None and at is not None
        assert abs((datetime.now(UTC) - at).total_seconds()) < 30
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await router.close()
        store.dispose()
