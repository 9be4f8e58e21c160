"""The fleet below its target: the monitor notifies once it has been below
for `notify_under_target_minutes`, not for a shorter dip, and once when it
is back in band (the rule: `band_step`; the monitor with a real webhook
receiver, the simulator and the time-skipping server)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from temporalio.testing import WorkflowEnvironment

from activities.fleet import FleetActivities
from fleet_agent.autopilot.provider import AutopilotProvider
from fleet_agent.config.settings import ProverSpec
from fleet_agent.notify.rules import band_step
from fleet_agent.notify.settings import NotifyEnv
from fleet_agent.store import Store
from fleet_agent.vast.client import VastClient
from fleet_agent.vast.pacing import NO_PACING
from simulator.server import SimServer
from testkit.notify_receivers import WebhookReceiver
from testkit.sim_helpers import SIM_RAM_GIB
from tests.helpers import eventually, running_worker

T0 = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)


def test_below_target_notifies_once_after_the_delay_and_once_when_back() -> None:
    def poll(since: datetime | None, notified: bool, capacity: float, minutes: float):  # type: ignore[no-untyped-def]
        return band_step(
            since,
            notified,
            capacity=capacity,
            target=100,
            now=T0 + timedelta(minutes=minutes),
            after_minutes=30,
        )

    first = poll(None, False, 50, 0)
    assert (first.under_since, first.notified, first.event) == (T0, False, None)
    assert poll(T0, False, 50, 29).event is None
    late = poll(T0, False, 50, 30)
    assert (late.notified, late.event) == (True, "under_target")
    assert poll(T0, True, 50, 90).event is None  # once
    back = poll(T0, True, 96, 95)  # within 5 % of the target is in band
    assert (back.under_since, back.notified, back.event) == (None, False, "back_in_band")
    dip = poll(T0, False, 100, 10)  # back before it was news: nothing
    assert dip.event is None and dip.under_since is None
    assert band_step(None, False, capacity=0, target=0, now=T0, after_minutes=1).event is None


async def _posts(hook: WebhookReceiver) -> list[str]:
    return [p.body["title"] for p in hook.posts]


async def test_the_monitor_tells_when_the_fleet_stays_below_target(
    ts_env: WorkflowEnvironment, store: Store, fleet: FleetActivities
) -> None:
    with WebhookReceiver() as hook:
        env = NotifyEnv.model_validate({"FLEET_NOTIFY_URLS": hook.url()})
        async with running_worker(
            ts_env.client, store, provider=AutopilotProvider(), fleet=fleet, notify=env
        ) as h:
            # Paused: nothing rents, the fleet stays empty, below its target.
            await h.start_agent(
                target_proofs_per_hour=50,
                paused=True,
                monitor_poll_seconds=30,
                notify_under_target_minutes=2,
            )
            await ts_env.sleep(60)
            assert hook.posts == []  # a minute below: not yet news
            await ts_env.sleep(120)

            async def told() -> list[str]:
                titles = await _posts(hook)
                return titles if titles else []

            titles = await eventually(told, timeout=60, what="the below-target notification")
            assert len(titles) == 1 and "fleet below target for" in titles[0]
            assert "target 50 proofs/h" in hook.posts[0].body["message"]
            await ts_env.sleep(300)
            assert len(hook.posts) == 1  # once, however long it stays below


async def test_a_key_vast_ai_refuses_to_the_monitor_notifies_once(
    ts_env: WorkflowEnvironment, store: Store, sim: SimServer
) -> None:
    """No run needs to be there: the monitor's polls meet the refused key."""
    async with VastClient(
        "not-the-key", sim.url, timeout=2, backoff_base=0.01, pacing=NO_PACING
    ) as vast:
        fleet = FleetActivities(
            vast,
            ProverSpec(mode="curio_on_host", allow_loopback=True, min_host_ram_gib=SIM_RAM_GIB),
            store=store,
            clock=sim.market.now,
        )
        with WebhookReceiver() as hook:
            env = NotifyEnv.model_validate({"FLEET_NOTIFY_URLS": hook.url()})
            async with running_worker(
                ts_env.client, store, provider=AutopilotProvider(), fleet=fleet, notify=env
            ) as h:
                # A quiet window of a minute: only the monitor's own memory can
                # keep twenty refused polls to one notification.
                await h.start_agent(paused=True, monitor_poll_seconds=30, notify_quiet_minutes=1)

                async def told() -> list[str]:
                    return [t for t in await _posts(hook) if "authentication failing" in t]

                (title,) = await eventually(told, timeout=60, what="the refused key, told")
                assert "vast.ai" in title
                assert "the fleet monitor's poll" in hook.posts[0].body["message"]
                await ts_env.sleep(600)  # twenty more polls, all refused
                assert len(await told()) == 1, "once until a poll succeeds"
