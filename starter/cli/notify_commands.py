"""`fleet-agent notify test`: one test notification to every FLEET_NOTIFY_URLS destination.

Sent from this process, through apprise (fleet_agent/notify/deliver.py), not
through the worker: it checks the URLs the operator set here, before a worker
uses them. Each destination is printed by scheme and host only: the rest of
a URL is a secret.
"""

from __future__ import annotations

import argparse
import asyncio
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from starter.cli.options import agent_options

if TYPE_CHECKING:
    from fleet_agent.notify.settings import NotifyEnv

__all__ = ["add_notify_commands", "notify_test"]


def add_notify_commands(sub: Any) -> None:
    help = "notifications: `notify test` sends a test to every FLEET_NOTIFY_URLS destination"
    p = sub.add_parser("notify", help=help, description=help)
    p.add_argument(
        "action",
        choices=["test"],
        help="test: send a test notification to every URL and print the result for each",
    )
    agent_options(p, temporal=False)  # the agent the test names
    p.set_defaults(handler=lambda ns: asyncio.run(notify_test(ns)))


async def notify_test(args: argparse.Namespace, env: NotifyEnv | None = None) -> int:
    """0 when every destination took the test, 1 when one failed or none is set."""
    # Here, not at the top: other commands need neither apprise nor pydantic-settings.
    from fleet_agent.models import NotifyEvent
    from fleet_agent.notify.deliver import send_one
    from fleet_agent.notify.render import render
    from fleet_agent.notify.settings import NotifyEnv, redact

    env = env or NotifyEnv.load()
    urls = env.url_list()
    if not urls:
        print("no destinations: set FLEET_NOTIFY_URLS (apprise URLs, comma-separated)")
        return 1
    event = NotifyEvent(
        kind="test",
        at=datetime.now(UTC),
        facts={"text": "fleet-agent can reach you here (fleet-agent notify test)."},
    )
    message = render(args.agent_id, event, env.console_url)
    results = await asyncio.gather(*(send_one(url, message) for url in urls))
    for url, error in zip(urls, results, strict=True):
        print(f"ok    {redact(url)}" if not error else f"FAIL  {error}")
    failed = sum(1 for e in results if e)
    print(f"{len(urls) - failed} of {len(urls)} destination(s) reached")
    return 1 if failed else 0
