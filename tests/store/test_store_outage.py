"""A PostgreSQL outage fails store calls fast, and the store comes back by itself.

Every address is on this machine: a port with nothing listening, a socket that
accepts connections and never answers, and a proxy to the real server that the
test cuts and restores. "Fast" is checked against a generous bound: without
the store's timeouts these calls hang for good (or for the driver's defaults,
minutes), which is the failure this guards against.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import TypeVar

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.pool import QueuePool

from fleet_agent.store import Store, create_engine_for
from testkit.fakes.tcp_proxy import SilentListener, TcpProxy
from tests.conftest import postgres_url
from tests.helpers.ports import free_port
from tests.helpers.store_backends import require_postgres

pytestmark = pytest.mark.postgres

# Seconds a store call may take to fail with the database unreachable.
BOUND = 20.0

_T = TypeVar("_T")


def _outcome(call: Callable[[], _T]) -> _T | BaseException:
    """`call()`'s result or exception; fails the test if it is still running after BOUND."""
    box: list[_T | BaseException] = []

    def run() -> None:
        try:
            box.append(call())
        except BaseException as exc:
            box.append(exc)

    # A daemon thread: a call that hangs must not hold up the test process.
    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(BOUND)
    if worker.is_alive():
        pytest.fail(f"the store call was still waiting after {BOUND:g}s")
    return box[0]


def _url_at(port: int) -> str:
    return (
        make_url(postgres_url())
        .set(host="127.0.0.1", port=port)
        .render_as_string(hide_password=False)
    )


@pytest.fixture
def schema() -> Iterator[str]:
    require_postgres()
    admin = create_engine_for(postgres_url())
    name = f"fa_test_{uuid.uuid4().hex}"
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{name}"'))
    try:
        yield name
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{name}" CASCADE'))
        admin.dispose()


def test_nothing_listening_fails_at_once() -> None:
    store = Store(_url_at(free_port()))
    try:
        assert isinstance(_outcome(lambda: store.run_reads.count_runs("a")), OperationalError)
    finally:
        store.dispose()


def test_a_server_that_never_answers_fails_within_the_connect_timeout() -> None:
    with SilentListener() as silent:
        store = Store(_url_at(silent.port))
        try:
            outcome = _outcome(lambda: store.run_reads.count_runs("a"))
            assert isinstance(outcome, OperationalError), outcome
            assert "timeout" in str(outcome)
        finally:
            store.dispose()


def test_an_outage_fails_fast_and_the_store_comes_back_by_itself(schema: str) -> None:
    upstream = make_url(postgres_url()).port or 5432
    with TcpProxy(upstream).start() as proxy:
        engine = create_engine_for(
            _url_at(proxy.port), connect_args={"options": f"-csearch_path={schema}"}
        )
        store = Store(engine=engine)
        try:
            store.create_all()
            store.sessions.ensure_session("a", 1, "start", _now())
            assert store.sessions.list_sessions("a")  # a pooled connection through the proxy

            proxy.cut()  # the database goes away, its connections with it
            for _ in range(3):
                outcome = _outcome(lambda: store.sessions.list_sessions("a"))
                assert isinstance(outcome, OperationalError), outcome

            proxy.start()  # back on the same address
            sessions = _outcome(lambda: store.sessions.list_sessions("a"))
            assert not isinstance(sessions, BaseException), sessions
            assert [s.session for s in sessions] == [1]
        finally:
            engine.dispose()


def test_a_full_pool_fails_within_the_pool_timeout(schema: str) -> None:
    engine = create_engine_for(postgres_url(), connect_args={"options": f"-csearch_path={schema}"})
    store = Store(engine=engine)
    held = []
    try:
        store.create_all()
        # Every connection the pool may open is busy (e.g. calls stuck on a lock).
        pool = engine.pool
        assert isinstance(pool, QueuePool)
        held = [engine.connect() for _ in range(pool.size() + pool._max_overflow)]
        outcome = _outcome(lambda: store.run_reads.count_runs("a"))
        assert isinstance(outcome, PoolTimeout), outcome
    finally:
        for conn in held:
            conn.close()
        engine.dispose()


def _now() -> datetime:
    return datetime.now(UTC)
