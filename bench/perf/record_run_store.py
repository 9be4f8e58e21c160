"""What closing a run costs the store: the record_run activity's writes, timed.

The activity closes an attempt with its outcome and its prompt's bookkeeping.
Until 2026-12-01 that was three calls: `get_attempt_of` (four queries, to see
that the attempt was opened), `set_run_context` (a transaction) and
`finish_run` (another); now it is `finish_run(context=...)` alone, one
transaction, which raises `KeyError` for an attempt never opened. This times
both on the same SQLite store (each run with a context message and a reply,
as a run has) and prints the worker CPU and wall time per closed run.

    .venv/bin/python -m bench.perf.record_run_store [--runs 400] [--database URL]
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench import _common
from fleet_agent.models import ContextInfo, RunStatus, TokenUsage, Trigger, TriggerKind
from fleet_agent.store import Store

AGENT = "bench-agent"
T0 = datetime(2026, 12, 1, tzinfo=UTC)
CONTEXT = ContextInfo(
    history_runs_included=12, history_runs_dropped=3, estimated_prompt_tokens=9000
)


def _open(store: Store, run: int) -> str:
    wf = f"wf-{run}"
    trigger = Trigger(seq=run, kind=TriggerKind.HUMAN_MESSAGE, received_at=T0, text="hello")
    store.run_writes.begin_run(AGENT, run, 1, [trigger], "block", T0 + timedelta(seconds=run), wf)
    store.messages.add_message(AGENT, run, 1, 0, "user", "context", "x" * 2000, T0)
    store.messages.add_message(AGENT, run, 2, 0, "assistant", "assistant", "y" * 2000, T0)
    return wf


def _finish(store: Store, run: int, wf: str, context: ContextInfo | None) -> None:
    store.run_writes.finish_run(
        AGENT,
        run,
        status=RunStatus.OK,
        verdict=None,
        verdict_error="",
        noop=False,
        in_prompt=True,
        error="",
        final_text="done",
        actions_digest="",
        mutating_calls=0,
        tool_calls=1,
        rounds=2,
        usage=TokenUsage(input_tokens=9000, output_tokens=120),
        llm_seconds=0.3,
        ended_at=T0 + timedelta(seconds=run, milliseconds=500),
        workflow_run_id=wf,
        context=context,
    )


def three_calls(store: Store, run: int, wf: str) -> None:
    """The activity's writes before 2026-12-01."""
    assert store.run_reads.get_attempt_of(AGENT, run, wf) is not None
    store.run_writes.set_run_context(AGENT, run, CONTEXT, wf)
    _finish(store, run, wf, None)


def one_call(store: Store, run: int, wf: str) -> None:
    """The activity's write now."""
    _finish(store, run, wf, CONTEXT)


def measure(
    store: Store, first: int, runs: int, close: Callable[[Store, int, str], None]
) -> dict[str, float]:
    opened = [(run, _open(store, run)) for run in range(first, first + runs)]

    def loop() -> None:
        for run, wf in opened:
            close(store, run, wf)

    return _common.per_item_ms(loop, runs, "run")


def main() -> None:
    parser = argparse.ArgumentParser(
        prog=f"python -m {__spec__.name}", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--database", help="a store URL (default: SQLite in a temporary directory)")
    parser.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(args.database or f"sqlite:///{Path(tmp) / 'store.db'}")
        store.create_all()
        store.delete_agent(AGENT)
        # Interleaved, twice each, so a warm cache or a growing table favours neither.
        results: dict[str, list[dict[str, float]]] = {"three_calls": [], "one_call": []}
        first = 1
        for _ in range(2):
            for name, close in (("three_calls", three_calls), ("one_call", one_call)):
                results[name].append(measure(store, first, args.runs, close))
                first += args.runs
        store.delete_agent(AGENT)
    summary = _common.better_of(results, f"{args.runs} runs")
    out = _common.write_json("record_run_store", {"runs": args.runs, **summary}, args.json_out)
    print(f"\nJSON: {out}")


if __name__ == "__main__":
    main()
