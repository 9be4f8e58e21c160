"""What runs tell a human: an Anthropic key refused (a 401 from the fake
Messages API) fails every run; the key's failure notifies once within the
quiet window and `notify_failed_runs` failures in a row notify once; an
approval nobody decides notifies as expired; a create refused by the daily
budget notifies with the refusal. Real parts: the time-skipping server, the
fake Messages API over HTTP, the simulator, a real webhook receiver."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from temporalio.testing import WorkflowEnvironment

from activities.fleet import FleetActivities
from fleet_agent.notify.settings import NotifyEnv
from fleet_agent.store import Store
from simulator.server import SimServer
from testkit.fakes.anthropic_payloads import ErrorReply
from testkit.fakes.anthropic_server import FakeAnthropic, Reply
from testkit.fakes.scripts import DONE, renter
from testkit.notify_receivers import WebhookReceiver
from tests.helpers import ASKS_EVERY_CREATE, eventually, running_worker, status
from workflows import FleetAgentWorkflow


def _titles(hook: WebhookReceiver) -> list[str]:
    return [str(p.body["title"]) for p in hook.posts]


def _count(hook: WebhookReceiver, part: str) -> Callable[[], Awaitable[int]]:
    async def probe() -> int:
        return sum(part in t for t in _titles(hook))

    return probe


_renter = renter(stop_on_refusal=True)


async def test_a_refused_key_and_failed_runs_notify_once_each(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    fake_llm.set_responder(lambda req: ErrorReply(status=401))
    with WebhookReceiver() as hook:
        env = NotifyEnv.model_validate({"FLEET_NOTIFY_URLS": hook.url()})
        async with running_worker(ts_env.client, store, notify=env) as h:
            handle: Any = await h.start_agent(monitor_enabled=False, notify_failed_runs=3)
            for n in range(4):
                await handle.signal(FleetAgentWorkflow.trigger_now, {"reason": f"try {n}"})

                async def ended(n: int = n) -> bool:
                    st = await status(handle)
                    return st.last_run is not None and st.last_run.run >= n + 1

                await eventually(ended, timeout=60, what=f"run {n + 1}")
            await eventually(_count(hook, "3 runs failed in a row"), timeout=60, what="streak")
            await eventually(_count(hook, "anthropic authentication failing"), timeout=60)
            st = await status(handle)
            assert st.last_run is not None and st.last_run.status.value == "failed"
            titles = _titles(hook)
            assert sum("authentication failing" in t for t in titles) == 1, titles
            assert sum("runs failed in a row" in t for t in titles) == 1, titles
            auth = next(p for p in hook.posts if "authentication" in p.body["title"])
            assert "401" in auth.body["message"]


async def test_an_expired_approval_and_a_budget_refusal_notify(
    ts_env: WorkflowEnvironment,
    store: Store,
    sim: SimServer,
    fleet: FleetActivities,
    fake_llm: FakeAnthropic,
) -> None:
    fake_llm.set_responder(_renter)
    with WebhookReceiver() as hook:
        env = NotifyEnv.model_validate({"FLEET_NOTIFY_URLS": hook.url()})
        async with running_worker(ts_env.client, store, fleet=fleet, notify=env) as h:
            handle: Any = await h.start_agent(**ASKS_EVERY_CREATE, approval_timeout_seconds=120)
            await eventually(_count(hook, "needed"), timeout=60, what="the approval asked")
            await ts_env.sleep(130)
            await eventually(_count(hook, "expired"), timeout=60, what="the expiry")
            expired = next(p for p in hook.posts if "expired" in p.body["title"])
            assert "Nobody decided in time" in expired.body["message"]

            # No approvals, and a budget nothing fits in: the create is refused.
            await handle.execute_update(
                FleetAgentWorkflow.update_config,
                {"approval_mode": "off", "daily_budget_usd": 0.01},
            )
            await handle.signal(FleetAgentWorkflow.trigger_now, {"reason": "rent"})
            await eventually(_count(hook, "refused (budget)"), timeout=60, what="the refusal")
            refused = next(p for p in hook.posts if "refused (budget)" in p.body["title"])
            assert "Refused by the daily budget" in refused.body["message"]


async def test_a_retried_delivery_posts_once_where_it_went_through(
    ts_env: WorkflowEnvironment,
    store: Store,
    sim: SimServer,
    fleet: FleetActivities,
    fake_llm: FakeAnthropic,
) -> None:
    """Two destinations, one answering 500 to its first POST: Temporal retries
    the activity, which sends again only to that one."""
    fake_llm.set_responder(lambda req: Reply(text=DONE))
    with WebhookReceiver() as steady, WebhookReceiver(fail_first=1) as flaky:
        env = NotifyEnv.model_validate({"FLEET_NOTIFY_URLS": f"{steady.url()} {flaky.url()}"})
        async with running_worker(ts_env.client, store, fleet=fleet, notify=env) as h:
            handle: Any = await h.start_agent(monitor_enabled=False)
            await handle.execute_update(
                FleetAgentWorkflow.freeze, {"reason": "audit", "author": "ops"}
            )

            async def delivered() -> bool:
                return (await status(handle)).notify_delivered == 1

            await ts_env.sleep(10)  # past the retry's backoff
            await eventually(delivered, timeout=60, what="the retried delivery")
            assert len(flaky.posts) == 2  # the 500, then the retry
            assert len(steady.posts) == 1  # not sent again by the retry
            st = await status(handle)
            assert st.notify_failures == []


async def test_the_daily_digest_comes_at_midnight_when_asked_for(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    fake_llm.set_responder(lambda req: Reply(text=DONE))
    with WebhookReceiver() as hook:
        env = NotifyEnv.model_validate({"FLEET_NOTIFY_URLS": hook.url()})
        async with running_worker(ts_env.client, store, notify=env) as h:
            # Paused: no heartbeat runs while a day passes.
            await h.start_agent(monitor_enabled=False, paused=True, notify_events=["daily_digest"])
            await ts_env.sleep(25 * 3600)
            await eventually(_count(hook, "daily digest"), timeout=60, what="the digest")
            (post,) = hook.posts
            assert "Spend today $" in post.body["message"] and "approvals 0" in post.body["message"]
