"""The agent's side of the watchdog on the time-skipping server: its config
is kept in the store as it changes, and a fresh start takes it back (an
explicit start config applied over it, a freeze kept). And the parts around
it: the store's table, the restart fact's text, the interval's parsing.

How the previous execution ended needs Temporal's visibility, which the
time-skipping server lacks: tests/agent/test_watchdog_e2e.py covers it on the dev
server.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import update
from temporalio.testing import WorkflowEnvironment

from fleet_agent.models import (
    AgentConfig,
    AgentRestarted,
    AgentState,
    AgentStatus,
    Phase,
    PreviousEnd,
)
from fleet_agent.store import AgentConfigs, Store
from fleet_agent.store.tables import table_of
from fleet_agent.store.tables_agent import AgentConfigRow
from fleet_agent.visibility.details import agent_details
from starter.agent_client import UsageError
from starter.views.render import status_text
from starter.watchdog_schedule import WATCHDOG_ENV, watchdog_interval
from tests.helpers import eventually, idle_status, running_worker, status
from workflows import FleetAgentWorkflow

AT = datetime(2026, 12, 6, 9, 30, tzinfo=UTC)


async def test_a_fresh_start_takes_the_kept_config_with_its_own_options_over_it(
    ts_env: WorkflowEnvironment, store: Store
) -> None:
    agent_id = f"keep-{uuid.uuid4().hex[:8]}"
    configs = AgentConfigs(store)
    async with running_worker(ts_env.client, store) as h:
        handle = await h.start_agent(agent_id=agent_id, target_proofs_per_hour=2.0)
        await handle.execute_update(
            FleetAgentWorkflow.update_config, {"target_proofs_per_hour": 3.5, "max_instances": 7}
        )

        async def kept() -> AgentConfig | None:
            config = configs.load(agent_id)
            return config if config is not None and config.max_instances == 7 else None

        await eventually(kept, what="the changed config kept in the store")
        await handle.terminate(reason="test")
        handle = await h.start_agent(agent_id=agent_id, paused=True)

        async def restored() -> AgentStatus | None:
            st = await status(handle)
            # Queries are answered at once: wait until the recall is done.
            return st if st.config.max_instances == 7 else None

        st = await eventually(restored, what="the fresh start's config")
        assert st is not None and st.config.target_proofs_per_hour == 3.5
        assert st.config.paused, "the start's own option, over the kept config"
        assert st.config.monitor_enabled is False
        # Its own start config is kept in turn.
        await eventually(
            lambda: _kept_paused(configs, agent_id), what="the restored config kept again"
        )


async def _kept_paused(configs: AgentConfigs, agent_id: str) -> bool:
    config = configs.load(agent_id)
    return config is not None and config.paused and config.max_instances == 7


async def test_an_agent_frozen_before_it_ended_comes_back_frozen(
    ts_env: WorkflowEnvironment, store: Store
) -> None:
    agent_id = f"frozen-{uuid.uuid4().hex[:8]}"
    AgentConfigs(store).save(agent_id, AgentConfig(frozen=True, monitor_enabled=False), AT)
    async with running_worker(ts_env.client, store) as h:
        handle = await h.start_agent(agent_id=agent_id)

        async def frozen() -> AgentStatus | None:
            st = await status(handle)
            return st if st.frozen is not None else None

        st = await eventually(frozen, what="the kill switch restored")
        assert st is not None and st.config.frozen and st.phase == Phase.FROZEN


def test_the_kept_config_round_trips_and_an_unreadable_one_is_none(store: Store) -> None:
    configs = AgentConfigs(store)
    assert configs.load("a1") is None
    configs.save("a1", AgentConfig(target_proofs_per_hour=4.0), AT)
    configs.save("a1", AgentConfig(target_proofs_per_hour=5.0), AT + timedelta(seconds=1))
    loaded = configs.load("a1")
    assert loaded is not None and loaded.target_proofs_per_hour == 5.0
    with store.engine.begin() as conn:
        conn.execute(update(table_of(AgentConfigRow)).values(data='{"max_instances": -1}'))
    assert configs.load("a1") is None, "a config this release refuses: start on defaults"


def _restart(**previous: str) -> AgentRestarted:
    end = PreviousEnd(run_id="r1", status="terminated", ended_at=AT, **previous)
    return AgentRestarted(at=AT, started_by="watchdog", previous=end, config_restored=True)


def test_the_restart_fact_says_who_brought_it_back_and_how_it_had_ended() -> None:
    text = _restart(reason="bad deploy", by="ops@host").text()
    assert text == (
        "restarted by the watchdog; it had ended: terminated (reason: bad deploy) by ops@host "
        "at 2026-12-06 09:30:00 UTC; last known config restored from the store"
    )
    st = idle_status(run_count=4, restarted=_restart(reason="bad deploy"))
    assert "restarted:" in status_text(st, AT) and "bad deploy" in status_text(st, AT)
    state = AgentState(restarted=_restart(reason="bad deploy"))
    details = agent_details(state, Phase.IDLE, None, None)
    assert "restarted by the watchdog; it had ended: terminated" in details, "the Web UI"


def test_the_watchdog_interval_comes_from_the_option_the_environment_or_5_minutes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(WATCHDOG_ENV, raising=False)
    assert watchdog_interval() == timedelta(minutes=5)
    assert watchdog_interval(0.05) == timedelta(seconds=3)
    monkeypatch.setenv(WATCHDOG_ENV, "10")
    assert watchdog_interval() == timedelta(minutes=10)
    for bad in ("soon", "0"):
        monkeypatch.setenv(WATCHDOG_ENV, bad)
        with pytest.raises(UsageError):
            watchdog_interval()
