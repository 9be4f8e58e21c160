"""`fleet-agent runs`, `fleet`, `show-run` and `session`: readers of the store
(FLEET_DATABASE_URL), which never talk to Temporal or vast.ai."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import Any

from starter.cli.fleet_render import fleet_text
from starter.cli.options import agent_options, json_option
from starter.views.cost import totals_line
from starter.views.fleet import read_fleet_view
from starter.views.market import market_of
from starter.views.runlog import (
    open_store,
    read_run,
    read_runs,
    read_session_totals,
    run_detail,
    runs_table,
)
from starter.views.session import (
    read_session_summaries,
    read_summary_of_run,
    summaries_text,
    summary_text,
)

__all__ = ["add_store_commands"]


def _runs(args: argparse.Namespace) -> int:
    runs = read_runs(args.agent_id, args.limit, args.session)
    if args.json:
        print(json.dumps([r.model_dump(mode="json") for r in runs], indent=2, ensure_ascii=False))
    else:
        print(runs_table(runs))
        if args.session is not None:
            totals = read_session_totals(args.agent_id, args.session)
            print(totals_line(f"session {args.session}", totals))
    return 0


def _fleet(args: argparse.Namespace) -> int:
    store = open_store()
    try:
        view = read_fleet_view(store, args.agent_id)
        # The agent is not asked: its last known config says whether it sells.
        market_mode, market = market_of(store, args.agent_id)
    finally:
        store.dispose()
    if args.json:
        print(view.model_dump_json(indent=2))
    else:
        print(fleet_text(view, datetime.now(UTC), market_mode=market_mode, market=market))
    return 0


def _show_run(args: argparse.Namespace) -> int:
    record, attempts, messages = read_run(args.agent_id, args.run, args.attempt)
    summary = read_summary_of_run(args.agent_id, args.run)
    if args.json:
        data = {
            "run": record.model_dump(mode="json"),
            "attempts": [a.model_dump(mode="json") for a in attempts],
            "messages": [m.model_dump(mode="json") for m in messages],
            "summary": None if summary is None else summary.model_dump(mode="json"),
        }
        print(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        print(run_detail(record, messages, attempts))
        if summary is not None:
            print(f"\nIn the session's {summary_text(summary)}")
    return 0


def _session(args: argparse.Namespace) -> int:
    session, summaries = read_session_summaries(args.agent_id, args.session)
    if args.json:
        data = {"session": session, "summaries": [s.model_dump(mode="json") for s in summaries]}
        print(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        print(summaries_text(session, summaries))
    return 0


def add_store_commands(sub: Any) -> None:
    """The store's commands on `sub` (the parser's subparsers)."""
    p = sub.add_parser(
        "runs",
        help="the run log",
        description="The run log, from the store: every run, and every replay of a run "
        "after a reset (#12 replay 2).",
    )
    agent_options(p, temporal=False)
    p.add_argument(
        "--limit",
        type=int,
        default=20,
        help="newest N records, replays included (default %(default)s)",
    )
    p.add_argument("--session", type=int, help="only runs of this session")
    json_option(p)
    p.set_defaults(handler=_runs)

    p = sub.add_parser(
        "fleet",
        help="the fleet: machines, capacity against target, $/h and spend today",
        description="Each machine with its GPU, state, measured and expected proofs/h, "
        "$/h, age, host and flags, then the totals, as of the monitor's last poll (from the "
        "store: no vast.ai call). The spend comes from the ledger. In market mode a last "
        "line: the GPUs against the work slots, the queue, the prices and the profit.",
    )
    agent_options(p, temporal=False)
    json_option(p)
    p.set_defaults(handler=_fleet)

    p = sub.add_parser("show-run", help="one run in full: triggers, messages, record")
    agent_options(p, temporal=False)
    p.add_argument("run", type=int, metavar="N")
    p.add_argument(
        "--attempt",
        type=int,
        metavar="K",
        help="which execution of the run (1 = the original; default: the latest)",
    )
    json_option(p)
    p.set_defaults(handler=_show_run)

    p = sub.add_parser(
        "session",
        help="the session's rolling summaries",
        description="The runs that left the prompt's window, as the session's summary "
        "holds them: every version, newest last (from the store).",
    )
    agent_options(p, temporal=False)
    p.add_argument(
        "session", type=int, nargs="?", metavar="N", help="session number (default: the newest)"
    )
    json_option(p)
    p.set_defaults(handler=_session)
