"""`fleet-agent status --json` shows spend as of now, from the ledger, as
`status` does (issue 51): the path a new user takes, on the CLI's stack
(tests/helpers/cli.py: the dev server, a worker with the autopilot and the
simulator). Before, it printed the query's figure, read at the start of the
last run: after a rental, $0 today, $0 in 24 h and $0/h until the next run.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from fleet_agent.models import AgentStatus, SpendSummary
from fleet_agent.store.spend_reads import SpendReads
from tests.helpers import eventually, finished_runs
from tests.helpers.cli import Stack, agent_cli, env, new_agent, sim, stack

__all__ = ["env", "sim", "stack"]  # the fixtures, imported for pytest

pytestmark = pytest.mark.devserver


async def test_status_json_shows_a_rentals_spend_before_the_next_run(
    env: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = new_agent(env)
    started = await agent_cli(
        capsys,
        env,
        "start",
        "--set",
        "target_proofs_per_hour=30",
        "--set",
        "heartbeat_seconds=3600",
        "--agent-id",
        agent,
    )
    assert started.code == 0, started

    async def rented() -> bool:
        return any(r.dph_added > 0 for r in finished_runs(env.store, agent))

    await eventually(rented, timeout=90, what="a run that rents")

    async def both() -> tuple[datetime, AgentStatus, str, SpendSummary] | None:
        """`status --json` and `status`, with the ledger read around them;
        None when the fleet changed meanwhile (the autopilot rents on)."""
        before = SpendReads(env.store).summary(agent, datetime.now(UTC))
        asked = datetime.now(UTC)
        shown = await agent_cli(capsys, env, "status", "--json", "--agent-id", agent)
        text = await agent_cli(capsys, env, "status", "--agent-id", agent)
        after = SpendReads(env.store).summary(agent, datetime.now(UTC))
        assert shown.code == 0 and text.code == 0, (shown, text)
        if (before.current_dph, before.open_instances) != (after.current_dph, after.open_instances):
            return None
        line = next(ln for ln in text.out.splitlines() if "spend:" in ln)
        return asked, AgentStatus.model_validate(json.loads(shown.out)), line, after

    found = await eventually(both, timeout=60, what="a steady fleet between two reads")
    assert found is not None
    asked, st, line, ledger = found
    spend = st.spend
    assert spend is not None and spend.as_of >= asked, "as of now, not of the last run's start"
    assert spend.current_dph > 0 and spend.open_instances >= 1, spend
    assert (spend.current_dph, spend.open_instances) == (ledger.current_dph, ledger.open_instances)
    assert spend.accrued_until is not None
    # The text says the same.
    assert "from the ledger" in line, line
    assert f"now ${spend.current_dph:.3f}/h ({spend.open_instances} machine(s))" in line, line
