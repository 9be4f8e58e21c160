"""``python -m simulator.cuzk``: one cuzk stand-in in the foreground.

Prints ``listening <host>:<port>`` once serving (``--listen 127.0.0.1:0``
picks the port), then serves until Ctrl-C or, for ``--behaviour dies``,
until it dies (exit status 3).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from typing import cast, get_args

from .config import DEFAULT_PROOF_SECONDS, Behaviour, Mode, StandInConfig
from .server import CuzkStandIn

__all__ = ["main", "parse_config"]


def _proof_seconds(items: list[str]) -> dict[str, float]:
    out = dict(DEFAULT_PROOF_SECONDS)
    for item in items:
        kind, sep, value = item.partition("=")
        if not sep or kind not in DEFAULT_PROOF_SECONDS:
            raise SystemExit(f"--proof-seconds wants KIND=SECONDS, KIND one of {list(out)}")
        out[kind] = float(value)
    return out


def parse_config(argv: list[str] | None = None) -> tuple[str, StandInConfig]:
    """(listen address, config) from the command line."""
    p = argparse.ArgumentParser(prog="python -m simulator.cuzk", description=__doc__)
    p.add_argument("--listen", default="127.0.0.1:9820")
    p.add_argument("--gpus", type=int, default=1)
    p.add_argument("--speed", type=float, default=1.0, help="simulated seconds per real second")
    p.add_argument(
        "--proof-seconds", action="append", default=[], metavar="KIND=S",
        help="e.g. porep-c2=53 (repeatable)",
    )  # fmt: skip
    p.add_argument("--preload", action="append", default=None, help="circuit id (repeatable)")
    p.add_argument("--preload-seconds", type=float, default=30.0)
    p.add_argument("--behaviour", default="honest", choices=get_args(Mode))
    p.add_argument("--slow-factor", type=float, default=3.0)
    p.add_argument("--die-after-proofs", type=int, default=None)
    p.add_argument("--die-at", type=float, default=None, help="simulated seconds after start")
    p.add_argument("--trickle-seconds", type=float, default=5.0)
    a = p.parse_args(argv)
    behaviour = Behaviour(
        mode=cast(Mode, a.behaviour),
        slow_factor=a.slow_factor,
        die_after_proofs=a.die_after_proofs,
        die_at_s=a.die_at,
        trickle_s=a.trickle_seconds,
    )
    config = StandInConfig(
        gpus=a.gpus,
        proof_seconds=_proof_seconds(a.proof_seconds),
        speed=a.speed,
        preload=tuple(a.preload) if a.preload is not None else ("porep-32g",),
        preload_seconds=a.preload_seconds,
        behaviour=behaviour,
    )
    return a.listen, config


async def _run(listen: str, config: StandInConfig) -> int:
    standin = await CuzkStandIn.start(config, listen)
    print(f"listening {standin.address}", flush=True)
    try:
        await standin.wait_stopped()
    finally:
        await standin.stop()
    return 3


def main(argv: list[str] | None = None) -> None:
    """Serve until Ctrl-C (or death)."""
    listen, config = parse_config(argv)
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(asyncio.run(_run(listen, config)))


if __name__ == "__main__":
    main()
