"""What a monitor poll's spend accrual costs the store, timed.

Every monitor poll accrues the agent's listed machines in the spend ledger
(`SpendLedger.accrue`). Until 2026-12-01 that was two transactions: the
listed machines brought up to now (a read, a compare-and-set and an hour
row each), then every open machine read again to close the ones no longer
listed. Now it is one transaction over both, in one order. This times both
forms on the same store, with `--machines` machines listed per poll, and
prints the worker CPU and wall time per poll.

    .venv/bin/python -m bench.perf.accrue_store [--polls 400] [--machines 1] [--database URL]
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import select

from bench import _common
from fleet_agent.store import Store
from fleet_agent.store.spend import SpendLedger
from fleet_agent.vast.models import Instance

AGENT = "bench-agent"
T0 = datetime(2026, 12, 1, tzinfo=UTC)


def _instances(n: int) -> list[Instance]:
    return [
        Instance.model_validate(
            {
                "id": 1000 + i,
                "actual_status": "running",
                "intended_status": "running",
                "cur_state": "running",
                "dph_total": 0.25,
                "storage_total_cost": 0.04,
                "start_date": T0.timestamp(),
            }
        )
        for i in range(n)
    ]


def two_transactions(ledger: SpendLedger, fleet: Sequence[Instance], now: datetime) -> None:
    """The accrual before 2026-12-01: bring up, then close the vanished."""
    listed = {i.id for i in fleet}
    ledger._bring_up(AGENT, {i.id: i for i in fleet}, now)
    m = ledger._machines
    with ledger._engine.begin() as conn:
        rows = conn.execute(
            select(m).where(m.c.agent_id == AGENT, m.c.ended_at.is_(None)).order_by(m.c.instance_id)
        ).all()
        for row in rows:
            if row.instance_id not in listed:
                ledger._move(conn, AGENT, row, ended_at=row.accrued_until, closed_by="vanished")


def one_transaction(ledger: SpendLedger, fleet: Sequence[Instance], now: datetime) -> None:
    """The accrual now."""
    ledger.accrue(AGENT, fleet, now)


def measure(
    ledger: SpendLedger,
    fleet: Sequence[Instance],
    start: datetime,
    polls: int,
    accrue: Callable[[SpendLedger, Sequence[Instance], datetime], None],
) -> dict[str, float]:
    def loop() -> None:
        for k in range(polls):
            accrue(ledger, fleet, start + timedelta(seconds=30 * (k + 1)))

    return _common.per_item_ms(loop, polls, "poll")


def main() -> None:
    parser = argparse.ArgumentParser(
        prog=f"python -m {__spec__.name}", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    parser.add_argument("--polls", type=int, default=400)
    parser.add_argument("--machines", type=int, default=1, help="listed per poll (1)")
    parser.add_argument("--database", help="a store URL (default: SQLite in a temporary directory)")
    parser.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args()
    fleet = _instances(args.machines)
    results: dict[str, list[dict[str, float]]] = {"two_transactions": [], "one_transaction": []}
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(args.database or f"sqlite:///{Path(tmp) / 'store.db'}")
        store.create_all()
        store.delete_agent(AGENT)
        ledger = SpendLedger(store)
        at = T0
        # Interleaved, twice each, so a warm cache or a growing table favours neither.
        for _ in range(2):
            for name, accrue in (
                ("two_transactions", two_transactions),
                ("one_transaction", one_transaction),
            ):
                results[name].append(measure(ledger, fleet, at, args.polls, accrue))
                at += timedelta(seconds=30 * args.polls)
        store.delete_agent(AGENT)
        store.dispose()
    summary: dict[str, Any] = {"polls": args.polls, "machines": args.machines}
    summary |= _common.better_of(results, f"{args.polls} polls")
    out = _common.write_json("accrue_store", summary, args.json_out)
    print(f"\nJSON: {out}")


if __name__ == "__main__":
    main()
