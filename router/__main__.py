"""``python -m router``: the cuzk router in the foreground.

    python -m router --listen 127.0.0.1:9820 --members-file members.json

``members.json`` is a JSON list of MemberSpec (fleet_agent/cuzk/witness.py),
re-read when it changes. Member channels are plaintext here; the production
path dials each machine over TLS (fleet_agent/cuzk/channels.py). Prints
``listening <host>:<port>`` once serving; stops on Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
from dataclasses import replace
from pathlib import Path

from .config import RouterConfig
from .engine import Router
from .members import insecure_connect
from .membership import MembersFile
from .server import DEFAULT_LISTEN, serve

__all__ = ["main"]


def main(argv: list[str] | None = None) -> None:
    """Parse arguments and serve until Ctrl-C."""
    p = argparse.ArgumentParser(
        prog="python -m router",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--listen", default=DEFAULT_LISTEN)
    p.add_argument("--members-file", type=Path, required=True)
    p.add_argument("--poll-seconds", type=float, default=None, help="GetStatus interval")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    config = RouterConfig.from_env()
    if a.poll_seconds is not None:
        config = replace(config, poll_s=a.poll_seconds)
    router = Router(config, insecure_connect)
    host = a.listen.rsplit(":", 1)[0]

    def ready(port: int) -> None:
        print(f"listening {host}:{port}", flush=True)

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(a.listen, router, MembersFile(a.members_file), on_ready=ready))


if __name__ == "__main__":
    main()
