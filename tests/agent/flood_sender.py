"""A signal flood from its own process, as a flood reaches an agent in production.

`tests/agent/test_floods.py` runs it with `python -m tests.agent.flood_sender`: sent from
the test's own process, the client's thousand signals a second compete with
the worker's workflow tasks for one interpreter lock and stretch them (a task
of 800 signals took 1.4 s of wall time for 0.08 s of CPU), which a worker in
production does not suffer from its senders. Prints one JSON line: how many
signals were sent and the server's refusals (count and the first messages).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Awaitable, Callable

from temporalio.client import Client
from temporalio.service import RPCError

from runtime.process_exit import end_process

__all__ = ["flood", "main"]


async def flood(
    n: int, send: Callable[[int], Awaitable[None]], *, batch: int = 100, pause: float = 0.0
) -> None:
    """`n` signals, `batch` at a time, with `pause` seconds between batches."""
    for start in range(0, n, batch):
        await asyncio.gather(*(send(i) for i in range(start, min(n, start + batch))))
        if pause:
            await asyncio.sleep(pause)


async def _state_changes(args: argparse.Namespace) -> dict[str, object]:
    client = await Client.connect(args.address, namespace=args.namespace)
    handle = client.get_workflow_handle(args.workflow_id)
    refused: list[str] = []

    async def send(i: int) -> None:
        try:
            await handle.signal(
                "state_changed",
                {
                    "instance_id": str(i % args.instances),
                    "old_state": "loading",
                    "new_state": f"s{i}",
                },
            )
        except RPCError as exc:
            refused.append(str(exc))

    await flood(args.n, send, batch=args.batch, pause=args.pause)
    return {"sent": args.n, "refused_count": len(refused), "refused": refused[:5]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--address", required=True)
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--workflow-id", required=True)
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--pause", type=float, default=0.0)
    parser.add_argument("--instances", type=int, default=200)
    print(json.dumps(asyncio.run(_state_changes(parser.parse_args()))))
    # As the CLI and the worker do: an abort at finalization once failed a
    # storm whose flood had all gone (runtime/process_exit.py).
    end_process(0)


if __name__ == "__main__":
    main()
