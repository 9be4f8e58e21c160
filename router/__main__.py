"""``python -m router`` (``fleet-agent router``): the cuzk router in the foreground.

    python -m router                      # members from the store, TLS to each machine
    python -m router --members-file m.json --insecure-members   # stand-ins on loopback

Listens on ``--listen`` (``FLEET_ROUTER_LISTEN``, default 127.0.0.1:9820): the
operator's Curio node sets ``[Cuzk] Address`` to it. Members come from the
store the agent writes them to (``--store-url``, ``--agent-id``;
router/store_sync.py), which also receives the router's witness; or from a
JSON file of MemberSpec (``--members-file``), re-read when it changes.
Each machine is dialled over TLS with the router's client certificate from
the worker's CA (``--ca-dir``, ``FLEET_ROUTER_CA_DIR``, default
var/router-ca; fleet_agent/cuzk/channels.py); ``--insecure-members`` dials
plaintext, for stand-ins on loopback only. Prints ``listening
<host>:<port>`` once serving; stops on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
from dataclasses import replace
from pathlib import Path

from fleet_agent.cuzk.witness import MemberSpec

from .config import RouterConfig
from .engine import Router
from .members import ChannelClient, Connect, insecure_connect
from .membership import MembersFile, MembershipSource
from .server import DEFAULT_LISTEN, serve
from .store_sync import StoreMembership, add_sync_options, store_url_of

__all__ = ["LISTEN_ENV", "MIN_DEAD_AFTER_S", "at_speed", "main", "tls_connect"]

#: Where the router listens (Curio's ``[Cuzk] Address``).
LISTEN_ENV = "FLEET_ROUTER_LISTEN"
#: The worker's CA directory (fleet_agent/config/settings.py, the same variable).
CA_DIR_ENV = "FLEET_ROUTER_CA_DIR"
DEFAULT_CA_DIR = "var/router-ca"


def tls_connect(ca_dir: Path) -> Connect:
    """Dial each member over TLS as the router (the CA's client certificate),
    checking the machine's own name. The CA is the worker's: the router and
    the worker share the directory (it makes the client certificate once)."""
    # Imported here: cryptography is loaded only where TLS is used.
    from fleet_agent.cuzk.channels import machine_channel
    from fleet_agent.cuzk.credentials import Authority

    client = Authority.load_or_create(ca_dir).router_client()

    def connect(spec: MemberSpec) -> ChannelClient:
        return ChannelClient(machine_channel(spec.address, spec.label, client))

    return connect


#: The least silence that makes a member dead at a speed: five GetStatus
#: polls and a timeout of real time, so a loaded machine's slow answers
#: are not a death.
MIN_DEAD_AFTER_S = 15.0


def at_speed(config: RouterConfig, speed: float) -> RouterConfig:
    """`config` for members that run `speed` simulated seconds per real second
    (stand-ins): expected proof times, the least attempt budget and the
    silence that makes a member dead divided by it (the last not below
    `MIN_DEAD_AFTER_S`), so each is the same span of the members' time.
    The polls and the call timeouts stay real: they are the network's."""
    if speed <= 0 or speed != speed or speed == float("inf"):
        raise ValueError("the speed must be a positive number")
    if speed == 1.0:
        return config
    return replace(
        config,
        expected_seconds={k: v / speed for k, v in config.expected_seconds.items()},
        min_attempt_s=config.min_attempt_s / speed,
        dead_after_s=max(min(MIN_DEAD_AFTER_S, config.dead_after_s), config.dead_after_s / speed),
    )


def _parser(prog: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--listen",
        default=os.environ.get(LISTEN_ENV) or DEFAULT_LISTEN,
        help=f"address Curio's [Cuzk] Address names (env {LISTEN_ENV}; default %(default)s)",
    )
    p.add_argument(
        "--members-file",
        type=Path,
        default=None,
        help="a JSON list of MemberSpec, instead of the store",
    )
    add_sync_options(p)
    p.add_argument(
        "--ca-dir",
        type=Path,
        default=Path(os.environ.get(CA_DIR_ENV) or DEFAULT_CA_DIR),
        help=f"the worker's CA directory (env {CA_DIR_ENV}; default %(default)s)",
    )
    p.add_argument(
        "--insecure-members",
        action="store_true",
        help="dial members in plaintext (stand-ins on loopback; never real machines)",
    )
    p.add_argument("--poll-seconds", type=float, default=None, help="GetStatus interval")
    p.add_argument(
        "--speed",
        type=float,
        default=1.0,
        help="simulated seconds per real second of the members (stand-ins): expected "
        "proof times, and so attempt budgets, are divided by it (default 1)",
    )
    return p


def main(argv: list[str] | None = None, prog: str = "python -m router") -> None:
    """Parse arguments and serve until Ctrl-C or SIGTERM."""
    a = _parser(prog).parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    config = RouterConfig.from_env()
    if a.poll_seconds is not None:
        config = replace(config, poll_s=a.poll_seconds)
    try:
        config = at_speed(config, a.speed)
    except ValueError:
        raise SystemExit("--speed must be a positive number") from None
    connect = insecure_connect if a.insecure_members else tls_connect(a.ca_dir)
    router = Router(config, connect, report_speed=a.speed)
    members: MembershipSource = (
        MembersFile(a.members_file)
        if a.members_file is not None
        else StoreMembership(store_url_of(a), a.agent_id)
    )
    host = a.listen.rsplit(":", 1)[0]

    def ready(port: int) -> None:
        print(f"listening {host}:{port}", flush=True)

    async def run() -> None:
        task = asyncio.current_task()
        assert task is not None
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await serve(a.listen, router, members, on_ready=ready)

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())


if __name__ == "__main__":
    main()
