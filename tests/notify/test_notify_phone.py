"""The link in an approval's notification opens the console's approval page,
as a phone would: a console with a token, a phone that opened it once with
`?token=` (the session cookie), then the link (no secret in it) → the
approval's page → approve → the confirmation step → decided. The agent is
real (time-skipping server, scripted model, simulated vast.ai); the console
is served in-process over ASGI.
"""

from __future__ import annotations

from typing import Any

import httpx
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from activities.fleet import FleetActivities
from fleet_agent.notify.render import approval_link
from fleet_agent.store import Store
from simulator.server import SimServer
from starter.agent_client import AgentClient
from starter.console import ConsoleSettings, create_app
from starter.console.auth import parse_tokens
from testkit.fakes.anthropic_server import FakeAnthropic
from testkit.fakes.scripts import renter
from tests.helpers import ASKS_EVERY_CREATE, eventually, running_worker, status

BASE = "http://127.0.0.1:8080"


_renter = renter()


async def test_the_notification_link_opens_the_approval_page_and_decides_it(
    ts_env: WorkflowEnvironment,
    store: Store,
    sim: SimServer,
    fleet: FleetActivities,
    fake_llm: FakeAnthropic,
) -> None:
    fake_llm.set_responder(_renter)
    async with running_worker(ts_env.client, store, fleet=fleet) as h:
        handle: Any = await h.start_agent(**ASKS_EVERY_CREATE)

        async def asked() -> str | None:
            st = await status(handle)
            return st.pending_approvals[0].id if st.pending_approvals else None

        approval_id = await eventually(asked, timeout=60, what="an approval")
        assert approval_id is not None

        async def connect() -> Client:
            return ts_env.client

        settings = ConsoleSettings(tokens=parse_tokens("alice:phone-token-0123456789"))
        app = create_app(AgentClient(connect, handle.id, task_queue=h.task_queue), settings)
        link = approval_link(BASE, approval_id)
        assert "token" not in link
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url=BASE, headers={"Origin": BASE}
        ) as phone:
            # Without the token the link shows nothing of the approval.
            refused = await phone.get(link)
            assert refused.status_code == 401 and approval_id not in refused.text
            # Logged in once (the cookie, and a redirect to the page without
            # the token), the link opens the page.
            login = await phone.get("/?token=phone-token-0123456789")
            assert login.status_code == 303 and login.headers["location"] == "/", login.headers
            page = await phone.get(link)
            assert page.status_code == 200
            assert f"Approval {approval_id} needed" in page.text
            assert 'name="viewport"' in page.text and "approve…" in page.text
            # Approve: first the confirmation step, nothing decided yet ...
            step = await phone.post(
                f"/approvals/{approval_id}/decide", data={"decision": "approve"}
            )
            assert step.status_code == 200 and f"yes, approve {approval_id}" in step.text
            assert (await status(handle)).pending_approvals
            # ... then decided, as alice (the token's name).
            done = await phone.post(
                f"/approvals/{approval_id}/decide",
                data={"decision": "approve", "confirm": approval_id},
            )
            assert done.status_code in (200, 303)
            st = await status(handle)
            assert st.pending_approvals == []
            again = await phone.get(link)
            assert "no longer pending" in again.text
