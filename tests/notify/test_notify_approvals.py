"""Notifications, end to end with real parts: an approval asked → one webhook
POST (apprise's json://, to a local HTTP server) and one e-mail (apprise's
mailto:// to a local aiosmtpd server), each naming the approval and linking
to the console's page for it; the expiry warning; a freeze's quiet window; a
destination that fails shows in `status` and does not hold the run; no URL
ever in the agent's history. The model is scripted behind the fake Messages
API, vast.ai is the simulator, the time-skipping server makes waits instant.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Awaitable, Callable
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from activities.fleet import FleetActivities
from fleet_agent.notify.settings import NotifyEnv
from fleet_agent.store import Store
from simulator.server import SimServer
from testkit.fakes.anthropic_server import FakeAnthropic, Reply
from testkit.fakes.scripts import DONE, renter
from testkit.notify_receivers import SmtpReceiver, WebhookReceiver
from tests.helpers import ASKS_EVERY_CREATE, eventually, first_pending, running_worker, status
from tests.helpers.ports import free_port
from workflows import FleetAgentWorkflow

CONSOLE = "https://console.example.test:8443"
SECRET_PATH = "hook-s3cret-T0KEN"
Agent = WorkflowHandle[FleetAgentWorkflow, None]


_renter = renter()


def _seen(check: Callable[[], bool]) -> Callable[[], Awaitable[bool]]:
    """`check` as a probe for `eventually`."""

    async def probe() -> bool:
        return check()

    return probe


async def _history_text(handle: Agent) -> str:
    """The agent's history as JSON, with every payload's data decoded (the
    JSON carries them base64-encoded)."""
    raw = (await handle.fetch_history()).to_json()
    decoded: list[str] = [raw]

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "data" and isinstance(value, str):
                    decoded.append(base64.b64decode(value).decode(errors="replace"))
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(json.loads(raw))
    return "\n".join(decoded)


async def _start(h: Any, **config: Any) -> Agent:
    handle: Agent = await h.start_agent(**(ASKS_EVERY_CREATE | config))
    return handle


async def test_an_approval_asked_sends_one_post_and_one_mail_that_link_to_it(
    ts_env: WorkflowEnvironment,
    store: Store,
    sim: SimServer,
    fleet: FleetActivities,
    fake_llm: FakeAnthropic,
) -> None:
    fake_llm.set_responder(_renter)
    with WebhookReceiver() as hook, SmtpReceiver(free_port()) as smtp:
        env = NotifyEnv.model_validate(
            {
                "FLEET_NOTIFY_URLS": f"{hook.url(SECRET_PATH)}, {smtp.url()}",
                "FLEET_CONSOLE_URL": CONSOLE,
            }
        )
        async with running_worker(ts_env.client, store, fleet=fleet, notify=env) as h:
            handle = await _start(h)
            pending = await first_pending(handle)
            link = f"{CONSOLE}/approvals/{pending.id}"

            await eventually(
                _seen(lambda: bool(hook.posts) and bool(smtp.mails)),
                timeout=60,
                what="both deliveries",
            )
            (post,) = hook.posts
            assert post.path == f"/{SECRET_PATH}"
            assert pending.id in post.body["title"] and "needed" in post.body["title"]
            body = post.body["message"]
            assert link in body and f"fleet-agent approve {pending.id}" in body
            assert f"{pending.dph:+.3f} $/h" in body and "Expires:" in body
            (mail,) = smtp.mails
            assert mail.recipients == ["ops@example.com"]
            assert pending.id in mail.text() and link in mail.text()

            # 45 minutes on: still one of each, and no expiry warning yet (it
            # comes 10 minutes before the hour's wait ends).
            await ts_env.sleep(45 * 60)
            st = await status(handle)
            assert [p.id for p in st.pending_approvals] == [pending.id]
            assert len(hook.posts) == 1 and len(smtp.mails) == 1
            await ts_env.sleep(6 * 60)
            await eventually(
                _seen(lambda: len(hook.posts) == 2), timeout=60, what="the expiry warning"
            )
            assert "expires soon" in hook.posts[1].body["title"]
            assert link in hook.posts[1].body["message"]

            st = await status(handle)
            assert st.notify_delivered == 2 and st.notify_failures == []
            # The URLs are the worker's: nowhere in the agent's history.
            history = await _history_text(handle)
            assert SECRET_PATH not in history and f":{smtp.port}" not in history
            assert pending.id in history  # (the history was read)


async def test_a_freeze_notifies_once_within_the_quiet_window(
    ts_env: WorkflowEnvironment,
    store: Store,
    sim: SimServer,
    fleet: FleetActivities,
    fake_llm: FakeAnthropic,
) -> None:
    fake_llm.set_responder(lambda req: Reply(text=DONE))
    with WebhookReceiver() as hook:
        env = NotifyEnv.model_validate({"FLEET_NOTIFY_URLS": hook.url()})
        async with running_worker(ts_env.client, store, fleet=fleet, notify=env) as h:
            handle = await _start(h, notify_quiet_minutes=30)
            for _ in range(2):
                await handle.execute_update(
                    FleetAgentWorkflow.freeze, {"reason": "audit", "author": "ops"}
                )
                await handle.execute_update(FleetAgentWorkflow.unfreeze, {"author": "ops"})
            await eventually(
                _seen(lambda: len(hook.posts) >= 2), timeout=60, what="freeze, unfreeze"
            )
            # Past the quiet window, the same event notifies again.
            await ts_env.sleep(31 * 60)
            await handle.execute_update(
                FleetAgentWorkflow.freeze, {"reason": "again", "author": "ops"}
            )
            await eventually(_seen(lambda: len(hook.posts) >= 3), timeout=60, what="the third post")
            titles = [p.body["title"] for p in hook.posts]
            assert sum(t.endswith("] frozen by ops") for t in titles) == 2, titles
            assert sum(t.endswith("] unfrozen by ops") for t in titles) == 1, titles
            assert "Reason: again" in hook.posts[-1].body["message"]
            # The workflow held the repeats back itself (not only the store's
            # key, which would also drop a repeat within the same time bucket).
            history = await handle.fetch_history()
            sent = [
                e
                for e in history.events
                if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
                and e.activity_task_scheduled_event_attributes.activity_type.name
                == "send_notification"
            ]
            assert len(sent) == 3


async def test_a_failing_destination_holds_no_run_and_shows_in_status(
    ts_env: WorkflowEnvironment,
    store: Store,
    sim: SimServer,
    fleet: FleetActivities,
    fake_llm: FakeAnthropic,
) -> None:
    fake_llm.set_responder(_renter)
    dead = f"json://127.0.0.1:{free_port()}/{SECRET_PATH}"  # nobody listens there
    env = NotifyEnv.model_validate({"FLEET_NOTIFY_URLS": dead})
    async with running_worker(ts_env.client, store, fleet=fleet, notify=env) as h:
        handle = await _start(h)
        pending = await first_pending(handle)
        await handle.execute_update(
            FleetAgentWorkflow.decide_approval,
            {"approval_id": pending.id, "approve": True, "author": "alice"},
        )

        async def failure_shown() -> bool:
            st = await status(handle)
            return bool(st.notify_failures)

        # The delivery's retries back off 2, 6 and 18 s (workflows/policies.py,
        # NOTIFY_RETRY): in workflow time, not waited out for real.
        await ts_env.sleep(30)
        await eventually(failure_shown, timeout=120, what="the failure in status")

        async def run_ended() -> bool:
            st = await status(handle)
            return st.last_run is not None and st.last_run.run == pending.run

        await eventually(run_ended, timeout=60, what="the approved run to end")
        st = await status(handle)
        assert st.last_run is not None and st.last_run.status.value == "ok"
        (failure,) = st.notify_failures
        assert failure.kind == "approval_requested" and failure.subject == pending.id
        assert "json://127.0.0.1" in failure.error and SECRET_PATH not in failure.error
        history = await _history_text(handle)
        assert SECRET_PATH not in history
