"""The fleet views' look-up of temporary creates on a long tool journal.

Every fleet view (the run's context, `get_fleet_status`, the monitor's
snapshot) asks the tool journal which of the fleet's machines were rented
as `temporary` (`ToolJournal.temporary_creates`: the agent's create calls
of the runs its machines' labels name). This fills the journal of ten agents
with N rows each (a quarter of them creates, a third of those temporary),
then times the look-up for one agent and the 30 runs of its newest
machines: as the store has it (schema 5, with the index on (agent_id, name,
run)) and with that index dropped (schema 4). Best of 20 calls, ms.

    .venv/bin/python -m bench.perf.journal_lookup             # SQLite, 3,000, 30,000, 100,000 rows
    .venv/bin/python -m bench.perf.journal_lookup --postgres postgresql://postgres@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import text

from bench import _common
from fleet_agent.store import Store, ToolJournal
from fleet_agent.store.tables import TOOL_CALLS_TABLE, ToolCallRow, table_of

INDEX = "ix_fa_tool_calls_agent_name_run"
NAMES = ("get_fleet_status", "search_offers", "create_instance", "destroy_instance")
T0 = datetime(2026, 12, 1, tzinfo=UTC)


def _rows(agents: int, n: int) -> list[dict[str, Any]]:
    rows = []
    for agent in range(agents):
        for i in range(n):
            name = NAMES[i % 4]
            args: dict[str, Any] = {"offer_id": i, "reason": "cover a 25 proofs/h gap"}
            if name == "create_instance" and i % 3 == 0:
                args["temporary"] = True
            rows.append(
                {
                    "agent_id": f"agent-{agent}",
                    "tool_use_id": f"toolu_{i}",
                    "run": i // 3,
                    "round": 1,
                    "name": name,
                    "input_json": json.dumps(args, sort_keys=True),
                    "status": "done",
                    "result_json": "",
                    "started_at": T0,
                }
            )
    return rows


def _best_ms(journal: ToolJournal, runs: list[int]) -> tuple[float, int]:
    best, found = float("inf"), 0
    for _ in range(20):
        started = time.perf_counter()
        found = len(journal.temporary_creates("agent-3", runs))
        best = min(best, time.perf_counter() - started)
    return best * 1000, found


def measure(url: str, n: int) -> dict[str, Any]:
    store = Store(url)
    store.create_all()
    try:
        with store.engine.begin() as conn:
            conn.execute(text(f"DELETE FROM {TOOL_CALLS_TABLE}"))
            conn.execute(table_of(ToolCallRow).insert(), _rows(10, n))
            if conn.dialect.name == "postgresql":
                # What autovacuum does after a load: the planner's statistics.
                conn.execute(text(f"ANALYZE {TOOL_CALLS_TABLE}"))
        journal = ToolJournal(store)
        runs = list(range(n // 3 - 30, n // 3))
        indexed, found = _best_ms(journal, runs)
        with store.engine.begin() as conn:
            conn.execute(text(f"DROP INDEX {INDEX}"))
        bare, again = _best_ms(journal, runs)
        assert found == again, (found, again)
        return {"rows_per_agent": n, "found": found, "indexed_ms": indexed, "unindexed_ms": bare}
    finally:
        store.dispose()


def main() -> int:
    parser = argparse.ArgumentParser(
        prog=f"python -m {__spec__.name}", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--rows", default="3000,30000,100000", help="rows per agent, e.g. 3000,30000"
    )
    parser.add_argument(
        "--postgres", help="a PostgreSQL URL (libpq form): a scratch database there per size"
    )
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    results = []
    for n in (int(x) for x in args.rows.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            if args.postgres:
                url, name = _fresh_database(args.postgres)
                try:
                    result = measure(url, n)
                finally:
                    _drop_database(args.postgres, name)
            else:
                result = measure(f"sqlite:///{tmp}/journal.db", n)
        result["backend"] = "postgres" if args.postgres else "sqlite"
        results.append(result)
        _common.print_table(f"journal look-up, {n} rows an agent × 10 agents", result)
    out = _common.write_json("journal_lookup", {"runs": results}, args.json_out)
    print(f"\nwrote {out}")
    return 0


def _fresh_database(url: str) -> tuple[str, str]:
    """A scratch database on the server of `url` (libpq form), and its name."""
    import psycopg
    from sqlalchemy.engine import make_url

    name = f"fa_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    store_url = make_url(url).set(drivername="postgresql+psycopg", database=name)
    return store_url.render_as_string(hide_password=False), name


def _drop_database(url: str, name: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    raise SystemExit(main())
