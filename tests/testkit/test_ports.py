"""The tests' free ports (tests/helpers/ports.py) stay out of the ephemeral range and
are handed out once each."""

from __future__ import annotations

import itertools
import socket

import pytest

from tests.helpers import ports
from tests.helpers.ports import free_port


def test_free_ports_are_below_the_ephemeral_range_distinct_and_bindable() -> None:
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low = int(f.read().split()[0])
    got = [free_port() for _ in range(50)]
    assert len(set(got)) == 50 and max(got) < low
    with socket.socket() as s:
        s.bind(("127.0.0.1", got[0]))  # free indeed


def test_a_port_someone_listens_on_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    k = (ports._PORTS.index(free_port()) + 1) % len(ports._PORTS)  # the next one in turn
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", ports._PORTS[k]))
        taken.listen()
        monkeypatch.setattr(ports, "_NEXT", itertools.count(k))
        assert free_port() == ports._PORTS[(k + 1) % len(ports._PORTS)]
