"""A prover's status port is the host's, and the host may be hostile (issue
42, finding 3): an answer is read only up to 64 KB, and the whole read has
one deadline, which a host trickling a byte at a time cannot stretch."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from fleet_agent.fleet.prover_status import READ_TIMEOUT_S, read_statuses
from fleet_agent.vast.models import Instance


class _Hostile(BaseHTTPRequestHandler):
    mode = "huge"
    sent = 0  # bytes of the last answer that left before the reader hung up

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        try:
            _Hostile.sent = 0
            if self.mode == "huge":
                for _ in range(200):  # 20 MB, if anyone read it all
                    self.wfile.write(b" " * 100_000)
                    _Hostile.sent += 100_000
            else:  # a byte every 0.3 s, for a minute
                for _ in range(200):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.3)
        except OSError:
            return  # the reader gave up: as it should

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture
def host() -> Iterator[tuple[ThreadingHTTPServer, Instance]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hostile)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    inst = Instance.model_validate(
        {"id": 9, "public_ipaddr": "127.0.0.1", "ports": {"9100/tcp": [{"HostPort": str(port)}]}}
    )
    yield server, inst
    server.shutdown()


@pytest.mark.parametrize(
    ("mode", "error"),
    [("huge", "status answer too large"), ("trickle", f"no answer within {READ_TIMEOUT_S:g} s")],
)
async def test_a_hostile_status_answer_is_cut_short(
    host: tuple[ThreadingHTTPServer, Instance], mode: str, error: str
) -> None:
    _Hostile.mode = mode
    reads = await read_statuses([host[1]], 9100)
    # Read whole, the trickle would end after a minute as "not JSON"; the
    # huge one would be read to its 20 MB before being judged.
    assert not reads[9].ok and reads[9].error == error
    if mode == "huge":
        await asyncio.sleep(0.5)  # the writer sees the hang-up
        assert _Hostile.sent < 20_000_000
