"""Where spend shows: the run's context, the `status` query (as of the last
run that read it), `fleet-agent status`, and the $/hour each run rented and
released in the run log. A whole agent (autopilot) on the time-skipping
server with the simulator's fleet."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from temporalio.testing import WorkflowEnvironment

from activities.fleet import FleetActivities
from fleet_agent.llm.autopilot import AutopilotProvider
from fleet_agent.models import AgentStatus
from fleet_agent.sim.server import SimServer
from fleet_agent.store import Store
from starter.render import status_text
from starter.runlog_view import run_detail, runs_table
from tests.helpers import eventually, finished_runs, running_worker, status


async def test_status_and_the_run_log_show_spend_and_the_dph_each_run_changed(
    ts_env: WorkflowEnvironment, store: Store, sim: SimServer, fleet: FleetActivities
) -> None:
    async with running_worker(ts_env.client, store, provider=AutopilotProvider(), fleet=fleet) as h:
        handle = await h.start_agent(
            target_proofs_per_hour=40, monitor_poll_seconds=60, heartbeat_seconds=600
        )

        async def spending() -> AgentStatus | None:
            sim.market.advance(120)
            await ts_env.sleep(120)
            st = await status(handle)
            spend = st.spend
            ready = st.current_run is None and spend is not None and spend.today_usd > 0
            return st if ready else None

        found = await eventually(spending, timeout=90, what="a run that read a spending fleet")
        runs = finished_runs(store, handle.id)
    assert found is not None and found.spend is not None
    st, spend = found, found.spend
    rented = [r for r in runs if r.dph_added > 0]
    assert rented, "the run that rented recorded the $/h it added"
    truth = sim.market.state()["spend_per_hour"]
    assert sum(r.dph_added - r.dph_removed for r in runs) == pytest.approx(truth, abs=1e-3)
    # As of the last run that read it: no more than what is rented now.
    assert 0 < spend.current_dph <= truth + 1e-3
    assert spend.today_usd > 0 and spend.month_usd >= spend.today_usd
    # The run that read it put the same line in its context.
    context = store.run_messages(handle.id, runs[-1].run)[0].content
    assert "Spend: today $" in context and "(budget $500.00)" in context
    shown = status_text(st, datetime.now(UTC))
    assert (
        "spend:" in shown and "of $500.00 budget" in shown and "when the last run read it" in shown
    )
    assert f"+${rented[0].dph_added:.3f}/h" in runs_table(runs)
    assert "fleet $/h: +" in run_detail(rented[0], [])
