"""``python -m simulator``: run the vast.ai simulator in the foreground."""

from __future__ import annotations

import argparse
import logging
from typing import Any

from .demand import DemandConfig, demand_from_options, parse_curve
from .faults import SCENARIOS
from .market import DEFAULT_OFFERS
from .persist import StateError
from .server import DEFAULT_API_KEY, DEFAULT_STATE_PATH, serve
from .snark_market import MarketConfig

__all__ = ["main"]


def main(argv: list[str] | None = None) -> None:
    """Parse arguments and serve until Ctrl-C."""
    parser = argparse.ArgumentParser(prog="python -m simulator", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--speed", type=float, default=1.0, help="sim seconds per real second")
    parser.add_argument("--api-key", default=DEFAULT_API_KEY)
    parser.add_argument("--scenario", default="realistic", choices=sorted(SCENARIOS))
    parser.add_argument(
        "--offers", type=int, default=DEFAULT_OFFERS, help="offers on the market (default 10000)"
    )
    parser.add_argument(
        "--no-rate-limits",
        action="store_true",
        help="turn off vast.ai's documented per-endpoint rate limits (on by default)",
    )
    parser.add_argument(
        "--state",
        default=str(DEFAULT_STATE_PATH),
        help=f"state file kept across restarts (default {DEFAULT_STATE_PATH})",
    )
    parser.add_argument("--no-state", action="store_true", help="keep nothing across restarts")
    add_demand_options(parser)
    add_snark_market_options(parser)
    parser.add_argument("-v", "--verbose", action="store_true", help="log every request")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO)
    try:
        demand = demand_from_options(
            args.demand_curve,
            args.demand_event,
            args.demand_burst_rate,
            args.demand_deadline_minutes,
            args.demand_seed,
        )
        snark_market = snark_market_from_options(args)
        if demand is not None and snark_market is not None and snark_market.prover == "fleet":
            raise ValueError("--snark-prover fleet is the machines' work: no --demand-* with it")
    except ValueError as exc:
        parser.error(str(exc))
    try:
        serve(
            args.host,
            args.port,
            args.seed,
            args.speed,
            args.api_key,
            args.scenario,
            offers=args.offers,
            rate_limits=not args.no_rate_limits,
            state_path=None if args.no_state else args.state,
            demand=demand,
            snark_market=snark_market,
        )
    except StateError as exc:
        parser.exit(2, f"{exc}\nRemove the file (or pass --no-state) to start a fresh market.\n")


def add_demand_options(parser: argparse.ArgumentParser) -> None:
    """The work source's ``--demand-*`` options (docs/SIMULATOR.md, "Demand")."""
    parser.add_argument(
        "--demand-curve",
        help='daily demand, proofs/hour at UTC hours, linear between: "0:100,14:800,22:200"',
    )
    parser.add_argument(
        "--demand-event",
        action="append",
        help='a known daily event, e.g. "14:00-16:00x3" (repeatable)',
    )
    parser.add_argument("--demand-burst-rate", type=float, help="random bursts per sim day")
    parser.add_argument(
        "--demand-deadline-minutes", type=float, help="minutes to prove each item (default 30)"
    )
    parser.add_argument("--demand-seed", type=int, help="seed of the arrivals (default --seed)")


def add_snark_market_options(parser: argparse.ArgumentParser) -> None:
    """The ``--snark-*`` options (docs/SIMULATOR.md, "The Snark Market")."""
    parser.add_argument(
        "--snark-market",
        action="store_true",
        help="run the Snark Market and a Curio stand-in serving its web RPC and metrics",
    )
    parser.add_argument(
        "--snark-curve", help='clients\' requests/hour at UTC hours, e.g. "0:200,14:600"'
    )
    parser.add_argument("--snark-gpus", type=int, help="the Curio node's GPUs (default 4)")
    parser.add_argument(
        "--snark-prover",
        choices=("simulated", "fleet"),
        help="who proves the node's work: its own --snark-gpus (simulated, the default) "
        "or the machines rented from this simulator (fleet)",
    )
    parser.add_argument(
        "--snark-challenges",
        type=int,
        help="challenge proofs the node's wallet starts with (default 0: no slots)",
    )


def snark_market_from_options(args: argparse.Namespace) -> MarketConfig | None:
    """The market's settings from the ``--snark-*`` options; None unless asked for."""
    given = [args.snark_curve, args.snark_gpus, args.snark_challenges, args.snark_prover]
    if not args.snark_market and all(v is None for v in given):
        return None
    settings: dict[str, Any] = {}
    if args.snark_curve is not None:
        settings["demand"] = DemandConfig(curve=parse_curve(args.snark_curve))
    if args.snark_gpus is not None:
        settings["node_gpus"] = args.snark_gpus
    if args.snark_challenges is not None:
        settings["node_challenges"] = args.snark_challenges
    if args.snark_prover is not None:
        settings["prover"] = args.snark_prover
    return MarketConfig(**settings)


if __name__ == "__main__":
    main()
