"""The fake Messages API for the provider's tests: one server a module, cleared
for each test. Import both fixtures into a test module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from testkit.fakes import FakeAnthropic


@pytest.fixture(scope="module")
def server() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as fake:
        yield fake


@pytest.fixture
def fake(server: FakeAnthropic) -> FakeAnthropic:
    server.clear()
    server.set_responder(None)
    server.latency = 0.0
    return server
