"""From an approval being asked to the webhook receiving its notification.

A real Temporal dev server, a worker in this process, the vast.ai simulator,
a scripted model behind the fake Messages API that rents one machine per run
(every create needs an approval: approval_above_dph 0.01), and apprise's
JSON webhook to a local HTTP receiver. Each round: a run asks (the approval's
`asked_at`, the workflow's clock = the server's), the notification arrives
(the receiver's wall clock), the approval is denied, the next run is asked
for. Prints the table and writes bench/results/notify-latency-<date>.json.

    .venv/bin/python -m bench.perf.notify_latency [--rounds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from activities.fleet import FleetActivities
from bench._common import RESULTS, percentile, print_table, write_json
from fleet_agent.config.settings import ProverSpec
from fleet_agent.models import AgentStatus
from fleet_agent.notify.settings import NotifyEnv
from fleet_agent.store import Store
from fleet_agent.vast.client import VastClient
from fleet_agent.vast.pacing import NO_PACING
from simulator import SimServer
from starter.stack.devserver import load_dev_config
from testkit.agents import ASKS_EVERY_CREATE, running_worker
from testkit.fakes.anthropic_server import FakeAnthropic
from testkit.fakes.scripts import renter
from testkit.notify_receivers import WebhookReceiver
from testkit.servers import start_dev_env
from testkit.sim_helpers import SIM_RAM_GIB
from workflows import FleetAgentWorkflow

_renter = renter()


async def _wait(probe: Any, what: str, within: float = 60) -> Any:
    """Poll `probe` every 5 ms until it answers, for `within` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        found = await probe()
        if found:
            return found
        await asyncio.sleep(0.005)
    raise TimeoutError(what)


async def main(rounds: int) -> None:
    env = await start_dev_env(load_dev_config().dynamic_config_args())
    work = Path(tempfile.mkdtemp(prefix="notify-latency-"))
    store = Store(f"sqlite:///{work / 'fleet.db'}")
    store.create_all()
    samples: list[float] = []
    try:
        with (
            FakeAnthropic() as fake,
            SimServer(seed=11, speed=0, scenario="ideal", offers=2000, rate_limits=False) as sim,
            WebhookReceiver() as hook,
        ):
            fake.set_responder(_renter)
            os.environ.update(fake.env())
            notify = NotifyEnv.model_validate({"FLEET_NOTIFY_URLS": hook.url("bench")})
            async with (
                VastClient(sim.api_key, sim.url, timeout=2, pacing=NO_PACING) as vast,
                running_worker(
                    env.client,
                    store,
                    fleet=FleetActivities(
                        vast,
                        ProverSpec(
                            mode="curio_on_host", allow_loopback=True, min_host_ram_gib=SIM_RAM_GIB
                        ),
                        store=store,
                        clock=sim.market.now,
                    ),
                    notify=notify,
                ) as h,
            ):
                handle = await h.start_agent(**ASKS_EVERY_CREATE, notify_quiet_minutes=0)
                for n in range(rounds):

                    async def asked() -> Any:
                        st: AgentStatus = await handle.query(FleetAgentWorkflow.status)
                        return st.pending_approvals[0] if st.pending_approvals else None

                    pending = await _wait(asked, f"approval {n + 1}")

                    async def posted(wanted: str = pending.id) -> Any:
                        return next(
                            (p for p in hook.posts if wanted in p.body.get("title", "")), None
                        )

                    post = await _wait(posted, f"the notification of {pending.id}")
                    samples.append(post.wall - pending.asked_at.timestamp())
                    await handle.execute_update(
                        FleetAgentWorkflow.decide_approval,
                        {"approval_id": pending.id, "approve": False, "author": "bench"},
                    )

                    async def ended(run: int = pending.run) -> bool:
                        st: AgentStatus = await handle.query(FleetAgentWorkflow.status)
                        return st.last_run is not None and st.last_run.run >= run

                    await _wait(ended, f"run {pending.run} to end")
                    await handle.signal(FleetAgentWorkflow.trigger_now, {"reason": "again"})
    finally:
        store.dispose()
        await env.shutdown()
    ms = [1000 * s for s in samples]
    table = {
        "rounds": len(ms),
        "p50 ms": percentile(ms, 50),
        "p90 ms": percentile(ms, 90),
        "max ms": max(ms) if ms else None,
        "min ms": min(ms) if ms else None,
    }
    print_table("approval asked → webhook received (real dev server, apprise json://)", table)
    day = datetime.now(UTC).strftime("%Y-%m-%d")
    path = write_json(
        "notify-latency",
        {"what": "approval asked_at → webhook POST received", "ms": ms, **table},
        RESULTS / f"notify-latency-{day}.json",
    )
    print(f"\nwritten: {path.relative_to(RESULTS.parent.parent)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog=f"python -m {__spec__.name}", description=__doc__)
    parser.add_argument("--rounds", type=int, default=10)
    asyncio.run(main(parser.parse_args().rounds))
