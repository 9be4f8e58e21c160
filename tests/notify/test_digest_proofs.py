"""The daily digest's "proofs done": the monitor's polls count what each
prover's `proofs_completed` rose by into `fa_proof_days`, and the digest's
delivery reads the day it reports on. The simulator's provers over HTTP,
the real poll activity, a real store (both backends) and webhook receiver."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import select
from temporalio.testing import ActivityEnvironment

from activities.fleet import FleetActivities
from activities.notify import NotifyActivities
from fleet_agent.models import NotifyEvent, NotifyRequest, PollRequest
from fleet_agent.notify.rules import idempotency_key
from fleet_agent.notify.settings import NotifyEnv
from fleet_agent.store import ProofDays, Store
from fleet_agent.store.tables import ProofDayRow, table_of
from simulator.server import SimServer
from testkit.notify_receivers import WebhookReceiver
from tests.helpers.fleet_provers import AGENT, rent
from tests.helpers.store_backends import store_on_both_backends

__all__ = ["store_on_both_backends"]  # the fixture, imported for pytest

DAY = datetime(2026, 12, 5, 23, 0, tzinfo=UTC)


def test_proofs_add_up_per_utc_day_and_nothing_counts_below_one(store: Store) -> None:
    days = ProofDays(store)
    days.add("a", 3, DAY)
    days.add("a", 4, DAY + timedelta(minutes=59))  # 23:59, the same day
    days.add("a", 5, DAY + timedelta(hours=1))  # 00:00 the next day
    days.add("a", 0, DAY)
    days.add("a", -2, DAY)
    days.add("b", 9, DAY)
    assert days.on("a", "2026-12-05") == 7
    assert days.on("a", "2026-12-06") == 5
    assert days.on("b", "2026-12-05") == 9
    assert days.on("a", "2026-12-04") == 0


async def test_the_polls_count_every_proof_the_provers_finished(
    tools: FleetActivities, sim: SimServer, store: Store
) -> None:
    await rent(tools, 2)
    env = ActivityEnvironment()
    for _ in range(90):  # three hours in 2-minute polls
        sim.market.advance(120)
        await env.run(tools.poll_fleet, PollRequest(agent_id=AGENT, target_proofs_per_hour=100))
    truth = sum(int(i["proofs_completed"]) for i in sim.market.state()["instances"])
    assert truth > 0, "the machines must have proved"
    table = table_of(ProofDayRow)
    with store.engine.connect() as conn:
        counted = sum(
            int(r.proofs) for r in conn.execute(select(table).where(table.c.agent_id == AGENT))
        )
    assert counted == truth


async def test_the_digest_says_the_proofs_of_its_day(store: Store) -> None:
    ProofDays(store).add("a", 1234, DAY)
    ProofDays(store).add("a", 99, DAY + timedelta(days=1))
    event = NotifyEvent(
        kind="daily_digest",
        subject="2026-12-05",
        at=DAY + timedelta(hours=1),
        facts={"spend_today": 1.5, "spend_24h": 30.0, "runs": 4, "failed_runs": 0, "approvals": 1},
    )
    request = NotifyRequest(agent_id="a", key=idempotency_key("a", event, 30), event=event)
    with WebhookReceiver() as hook:
        notify = NotifyEnv.model_validate({"FLEET_NOTIFY_URLS": hook.url()})
        await ActivityEnvironment().run(NotifyActivities(store, notify).send_notification, request)
        (post,) = hook.posts
    assert "proofs done 1234" in post.body["message"], post.body
