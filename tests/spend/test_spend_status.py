"""Where spend shows: the run's context, the `status` query (as of the last
run that read it), `fleet-agent status` and the console (the ledger's, as of
now), and the $/hour each run rented and released in the run log. A whole
agent (autopilot) on the time-skipping server with the simulator's fleet,
and a status query gone stale against the ledger."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from starlette.testclient import TestClient
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from activities.fleet import FleetActivities
from fleet_agent.autopilot.provider import AutopilotProvider
from fleet_agent.models import AgentStatus, SpendSummary
from fleet_agent.store import SpendLedger, Store
from fleet_agent.store.engine import DATABASE_URL_ENV
from fleet_agent.vast.models import Instance
from simulator.server import SimServer
from starter.agent_client import AgentClient
from starter.cli import agent_commands as commands
from starter.console import ConsoleSettings, create_app
from starter.views.render import status_text
from starter.views.runlog import run_detail, runs_table
from tests.helpers import eventually, finished_runs, idle_status, running_worker, status


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
    context = store.messages.run_messages(handle.id, runs[-1].run)[0].content
    assert "Spend: today $" in context and "(budget $500.00)" in context
    shown = status_text(st, datetime.now(UTC))
    assert (
        "spend:" in shown and "of $500.00 budget" in shown and "when the last run read it" in shown
    )
    assert f"+${rented[0].dph_added:.3f}/h" in runs_table(runs)
    assert "fleet $/h: +" in run_detail(rented[0], [])


class _StaleAgent(AgentClient):
    """An agent whose status query still carries the spend its last run read:
    $0.00/h, before the machine rented since."""

    def __init__(self, as_of: datetime) -> None:
        super().__init__(_unreachable, "fresh-spend")
        self.as_of = as_of

    async def status(self) -> AgentStatus:
        return idle_status(self.agent_id, spend=SpendSummary(as_of=self.as_of))


async def _unreachable() -> Client:
    raise AssertionError("the stale agent never connects")


async def test_status_and_the_console_show_the_ledgers_spend_as_of_now(
    store: Store, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The last run read the spend at its start; a machine was rented after it,
    # and the monitor's poll has accrued it in the ledger since.
    last_run = datetime.now(UTC) - timedelta(minutes=30)
    rented = Instance.model_validate(
        {
            "id": 42,
            "actual_status": "running",
            "intended_status": "running",
            "cur_state": "running",
            "dph_total": 0.412,
            "start_date": (last_run + timedelta(minutes=5)).timestamp(),
        }
    )
    SpendLedger(store).accrue("fresh-spend", [rented], datetime.now(UTC))
    monkeypatch.setenv(DATABASE_URL_ENV, str(store.engine.url))
    agent = _StaleAgent(last_run)

    assert await commands.status(agent, as_json=False) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if "spend:" in ln)
    assert "now $0.412/h (1 machine(s))" in line and "from the ledger" in line, line
    # So does --json: the ledger's figure, as of now.
    assert await commands.status(agent, as_json=True) == 0
    shown = AgentStatus.model_validate_json(capsys.readouterr().out).spend
    assert shown is not None and shown.current_dph == 0.412 and shown.open_instances == 1
    assert shown.as_of > last_run + timedelta(minutes=29)

    with TestClient(create_app(agent, ConsoleSettings()), base_url="http://127.0.0.1:8080") as c:
        page = c.get("/parts/agent")
    assert page.status_code == 200, page.text
    assert "$0.41/h now" in page.text, page.text

    # Without a run log to read (a CLI far from the worker's store), the query's
    # stands in, with its as-of time: the last run's start.
    monkeypatch.setenv(DATABASE_URL_ENV, f"sqlite:///{store.engine.url.database}-missing")
    assert await commands.status(agent, as_json=False) == 0
    assert "now $0.000/h (0 machine(s)) · as of" in capsys.readouterr().out
    assert await commands.status(agent, as_json=True) == 0
    queried = AgentStatus.model_validate_json(capsys.readouterr().out).spend
    assert queried is not None and (queried.current_dph, queried.as_of) == (0.0, last_run)
