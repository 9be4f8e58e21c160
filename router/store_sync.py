"""The router's side of the store (issue 52): members in, witness out.

Every `MEMBERS_EVERY_S` the router loads the members the agent's monitor
wrote (`fa_router_members`, fleet_agent/store/router.py) and hands them to
`Router.set_members`; every `WITNESS_EVERY_S` it writes `Router.witness()`
and `Router.queue()` (`fa_router_witness`, `fa_router_queue`), dated by its
own clock: the agent judges a witness older than its stale bound as
unknown, never as a dead fleet (activities/fleet_router.py).

The store is reached through the synchronous engine in a thread
(`asyncio.to_thread`); the router's own state is read and set on the event
loop, where it lives. A store that cannot be reached stops nothing: the
router keeps the members it has and its queue, each loop tries again at its
next beat, and the outage is logged once when it starts and once when it
ends (per direction), not at every beat.

`StoreMembership(store_url, agent_id)` is a `MembershipSource`
(router/membership.py) for `router.server.serve`, in place of the members
file; `run_sync(router, store_url, agent_id)` does the same work on its
own; `add_sync_options` and `store_url_of` are the entry point's options
(router/__main__.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Protocol

from fleet_agent.cuzk.witness import MachineWitness, MemberSpec, RouterQueue
from fleet_agent.store import RouterMembers, RouterWitness, Store, redacted_url
from fleet_agent.store.engine import default_database_url

__all__ = [
    "AGENT_ID_ENV",
    "MEMBERS_EVERY_S",
    "STORE_URL_ENV",
    "WITNESS_EVERY_S",
    "StoreMembership",
    "StoreSync",
    "SyncedRouter",
    "add_sync_options",
    "run_sync",
    "store_url_of",
]

log = logging.getLogger("router.store_sync")

#: How often the members are read, and the witness and queue written, seconds.
MEMBERS_EVERY_S = 2.0
WITNESS_EVERY_S = 5.0
#: Where the store is (else the worker's: FLEET_DATABASE_URL or the local stack's).
STORE_URL_ENV = "FLEET_STORE_URL"
#: Whose machines this router serves (the agent workflow's ID).
AGENT_ID_ENV = "FLEET_AGENT_ID"
DEFAULT_AGENT_ID = "fleet-agent"


class SyncedRouter(Protocol):
    """What the sync needs of the router (router/engine.py, `Router`)."""

    def set_members(self, members: list[MemberSpec]) -> None: ...

    def witness(self) -> list[MachineWitness]: ...

    def queue(self) -> RouterQueue: ...


class _Outage:
    """Logs a failing direction once when it starts failing and once when it works again."""

    def __init__(self, what: str) -> None:
        self._what = what
        self.since: datetime | None = None
        self.failures = 0

    def failed(self, exc: BaseException, now: datetime) -> None:
        self.failures += 1
        if self.since is None:
            self.since = now
            # The error's type and first line only: a driver's message may
            # carry the URL, and the URL may carry a password.
            first = str(exc).splitlines()[0][:200] if str(exc) else ""
            log.warning(
                "store unreachable while %s (%s: %s); the router goes on with what it "
                "has and tries again",
                self._what,
                type(exc).__name__,
                first,
            )

    def worked(self, now: datetime) -> None:
        if self.since is not None:
            log.warning(
                "store reachable again for %s after %.0f s (%d failed attempts)",
                self._what,
                (now - self.since).total_seconds(),
                self.failures,
            )
        self.since, self.failures = None, 0


class StoreSync:
    """Moves members from the store into `router` and its witness back, for `agent_id`."""

    def __init__(
        self,
        router: SyncedRouter,
        store: Store,
        agent_id: str,
        *,
        clock: Callable[[], datetime] | None = None,
        members_every: float = MEMBERS_EVERY_S,
        witness_every: float = WITNESS_EVERY_S,
    ) -> None:
        self._router = router
        self._members = RouterMembers(store)
        self._witness = RouterWitness(store)
        self._agent = agent_id
        self._clock = clock or (lambda: datetime.now(UTC))
        self._members_every = members_every
        self._witness_every = witness_every
        self.reading = _Outage("reading the members")
        self.writing = _Outage("writing the witness")

    @property
    def skipped(self) -> int:
        """Member rows read back that did not validate (left out)."""
        return self._members.skipped

    async def pull_members(self) -> bool:
        """Load the members and hand them to the router; False (the router
        keeps its members) when the store could not be read."""
        try:
            members = await asyncio.to_thread(self._members.load, self._agent)
        except Exception as exc:  # any driver error is an outage, never the end
            self.reading.failed(exc, self._clock())
            return False
        self.reading.worked(self._clock())
        self._router.set_members(members)
        return True

    async def push_witness(self) -> bool:
        """Write the router's witness and queue, dated now; False when the
        store could not be written (tried again at the next beat)."""
        witnesses, queue, at = self._router.witness(), self._router.queue(), self._clock()
        try:
            await asyncio.to_thread(self._witness.replace, self._agent, witnesses, queue, at)
        except Exception as exc:
            self.writing.failed(exc, self._clock())
            return False
        self.writing.worked(self._clock())
        return True

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Both loops until `stop` is set (forever without one)."""
        stop = stop or asyncio.Event()
        async with asyncio.TaskGroup() as group:
            group.create_task(_every(self._members_every, self.pull_members, stop))
            group.create_task(_every(self._witness_every, self.push_witness, stop))


async def _every(seconds: float, beat: Callable[[], Awaitable[bool]], stop: asyncio.Event) -> None:
    """Call `beat` now and every `seconds` (from the start of the last) until `stop`."""
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        started = loop.time()
        await beat()
        wait = max(0.0, seconds - (loop.time() - started))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), wait)


async def run_sync(
    router: SyncedRouter,
    store_url: str,
    agent_id: str,
    *,
    stop: asyncio.Event | None = None,
) -> None:
    """Keep `router`'s members and the store's witness of `agent_id` in step
    until `stop` is set: the router's entry point runs this beside its
    server. The store's tables are the worker's (it creates and upgrades
    them); a store without them yet is an outage like any other."""
    store = Store(store_url)
    log.info("router of agent %s syncs with the store at %s", agent_id, redacted_url(store_url))
    try:
        await StoreSync(router, store, agent_id).run(stop)
    finally:
        store.dispose()


class StoreMembership:
    """The store as the router's membership source (router/membership.py,
    `MembershipSource`): members in, witness and queue out, until cancelled."""

    def __init__(self, store_url: str, agent_id: str) -> None:
        self._url = store_url
        self._agent = agent_id

    async def run(self, router: SyncedRouter) -> None:
        await run_sync(router, self._url, self._agent)


def add_sync_options(parser: argparse.ArgumentParser) -> None:
    """``--store-url`` and ``--agent-id``, for the router's entry point."""
    parser.add_argument(
        "--store-url",
        default=None,
        help=f"the store the agent writes its members to (default: ${STORE_URL_ENV}, else "
        "the worker's: $FLEET_DATABASE_URL or the local stack's file)",
    )
    parser.add_argument(
        "--agent-id",
        default=os.environ.get(AGENT_ID_ENV) or DEFAULT_AGENT_ID,
        help=f"whose machines this router serves (default: ${AGENT_ID_ENV} or {DEFAULT_AGENT_ID})",
    )


def store_url_of(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> str:
    """The store URL the options name: ``--store-url``, else `STORE_URL_ENV`,
    else the worker's default (fleet_agent/store/engine.py)."""
    environ = os.environ if env is None else env
    given = getattr(args, "store_url", None) or environ.get(STORE_URL_ENV, "").strip()
    return str(given) if given else default_database_url(make_folder=False)
