"""``python -m simulator.curio``: a Curio node's proofs against a cuzk address.

Sends PoRep SNARKs at a rate (or along a daily curve) for some minutes,
waits for them, and prints the summary as JSON (and writes the job records
with ``--jobs-out``). Touches only the gRPC address it is given.

    python -m simulator.curio --cuzk 127.0.0.1:9820 --rate 1000 --minutes 10 \
        --input-mb 50 --max-pending 8 --prove-timeout 3600
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
from pathlib import Path

from .node import CurioConfig, CurioStandIn, arrival_times

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m simulator.curio", description=__doc__)
    p.add_argument("--cuzk", default="127.0.0.1:9820", help="[Cuzk] Address (host:port)")
    p.add_argument("--rate", type=float, help="proofs per hour (Curio time), flat")
    p.add_argument("--curve", help='a daily curve "hour:rate,..." (simulator/demand.py)')
    p.add_argument("--start-hour", type=float, default=0.0, help="where on the curve to start")
    p.add_argument("--minutes", type=float, default=10.0, help="minutes of arrivals (Curio time)")
    p.add_argument("--input-mb", type=float, default=50.0, help="vanilla proof size, MB")
    p.add_argument("--max-pending", type=int, default=10, help="[Cuzk] MaxPending")
    p.add_argument("--prove-timeout", type=float, default=1800.0, help="[Cuzk] ProveTimeout, s")
    p.add_argument("--deadline-minutes", type=float, default=30.0, help="each proof's deadline")
    p.add_argument("--drain-minutes", type=float, help="wait after arrivals (default: deadline)")
    p.add_argument("--max-failures", type=int, default=10, help="harmony MaxFailures (PoRep 10)")
    p.add_argument(
        "--check-capacity",
        action="store_true",
        help="ask HasCapacity (GetStatus) before each claim, as Curio once did",
    )
    p.add_argument("--proofshare-ids", action="store_true", help="ps-porep-<m>-<s>-<task> ids")
    p.add_argument("--speed", type=float, default=1.0, help="Curio seconds per real second")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--miner", type=int, default=1000)
    p.add_argument("--jobs-out", type=Path, help="write every job's record here (JSON)")
    return p


async def _main(args: argparse.Namespace) -> int:
    config = CurioConfig(
        cuzk=args.cuzk,
        max_pending=args.max_pending,
        prove_timeout_s=args.prove_timeout,
        input_bytes=int(args.input_mb * 1_000_000),
        miner_id=args.miner,
        id_style="ps-porep" if args.proofshare_ids else "porep",
        max_failures=args.max_failures,
        check_capacity=args.check_capacity,
        deadline_s=args.deadline_minutes * 60,
        speed=args.speed,
        seed=args.seed,
    )
    arrivals = arrival_times(
        args.minutes,
        rate_per_hour=None if args.curve else (args.rate if args.rate is not None else 100.0),
        curve=args.curve,
        start_hour=args.start_hour,
        seed=args.seed,
    )
    drain = None if args.drain_minutes is None else args.drain_minutes * 60
    async with CurioStandIn(config) as node:
        await node.run(arrivals, drain_s=drain)
        summary = node.summary()
        if args.jobs_out is not None:
            records = [dataclasses.asdict(j) for j in node.jobs]
            args.jobs_out.write_text(json.dumps(records, indent=1) + "\n")
    print(summary.model_dump_json(indent=2))
    return 0 if summary.lost == 0 else 1


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run, print the summary; exit 1 when a proof was lost."""
    return asyncio.run(_main(_parser().parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
