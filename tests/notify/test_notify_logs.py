"""Two deliveries at once keep their own apprise log lines: a failure's
error text is made of the lines of its own send, never of another
destination's (which its scrub does not know, so its secrets would show).

Driven by doing it: two real SMTP servers (aiosmtpd) that refuse recipients,
reached through apprise's ``mailto://``, which sends one message per
recipient and logs ``Sending email to "<recipient>" failed.`` for each
refused one (apprise/plugins/email/base.py; the refusal itself is logged by
apprise/plugins/email/smtp.py), sent to at the same time.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from aiosmtpd.controller import Controller

from fleet_agent.notify.deliver import send_one
from fleet_agent.notify.render import Rendered
from tests.helpers.ports import free_port

MESSAGE = Rendered(title="t", body="b", link="")
REFUSED = "550 5.1.1 mailbox unavailable"
#: How long a server waits for the other's step before it goes on anyway.
STEP_S = 10.0


@contextmanager
def _smtp(answer: Callable[[str], str]) -> Iterator[int]:
    """An SMTP server whose RCPT answer for an address is `answer(address)`
    (run in a thread: it may wait); its port."""

    class Handler:
        async def handle_RCPT(
            self, server: Any, session: Any, envelope: Any, address: str, options: Any
        ) -> str:
            reply = await asyncio.to_thread(answer, address)
            if reply.startswith("250"):
                envelope.rcpt_tos.append(address)
            return reply

        async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
            return "250 OK"

    port = free_port()
    controller = Controller(Handler(), hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield port
    finally:
        controller.stop()


def _mailto(port: int, *to: str) -> str:
    return (
        f"mailto://fleet@example.com?smtp=127.0.0.1&port={port}"
        f"&from=fleet@example.com&to={','.join(to)}&mode=insecure"
    )


async def test_two_failing_sends_at_once_keep_their_own_log_lines() -> None:
    """Alpha has two recipients: its server refuses the first, and takes
    the second only after bravo's server has refused bravo's one (which it
    does once alpha's second message is on its way, so after apprise logged
    alpha's refusal): bravo's line is logged while alpha's send is still
    open, after alpha's own. A capture on the process-wide logger made that line the last of
    alpha's, and alpha's error named bravo's recipient."""
    alpha_second, bravo_refused = threading.Event(), threading.Event()
    alpha_seen: list[str] = []

    def alpha(address: str) -> str:
        alpha_seen.append(address)
        if len(alpha_seen) == 1:
            return REFUSED
        # apprise logged the first refusal before it sent the second message.
        alpha_second.set()
        bravo_refused.wait(STEP_S)
        threading.Event().wait(0.3)  # a slow server: bravo's client logs meanwhile
        return "250 OK"

    def bravo(address: str) -> str:
        alpha_second.wait(STEP_S)
        threading.Timer(0.05, bravo_refused.set).start()
        return REFUSED

    with _smtp(alpha) as alpha_port, _smtp(bravo) as bravo_port:
        alpha_url = _mailto(alpha_port, "alpha-one@example.com", "alpha-two@example.com")
        bravo_url = _mailto(bravo_port, "bravo-only@example.com")
        alpha_error, bravo_error = await asyncio.gather(
            send_one(alpha_url, MESSAGE), send_one(bravo_url, MESSAGE)
        )
    assert alpha_second.is_set() and bravo_refused.is_set()
    assert len(alpha_seen) == 2, "alpha's second recipient was sent to"
    assert alpha_error and bravo_error, (alpha_error, bravo_error)
    for error in (alpha_error, bravo_error):
        assert error.startswith("mailto://example.com: "), error
        assert "Sending email to" in error, error
    assert "bravo" not in alpha_error, alpha_error
    assert "alpha" not in bravo_error, bravo_error
