"""The web console's approve and deny decide only once confirmed (issue 42):
the confirmation shows what is decided, a confirm naming another approval is
none, and the decision is recorded as the console's user
(tests/helpers/console_auth.py)."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from starter.identity import os_identity
from starter.views.render import fmt_time
from tests.helpers.console_auth import PENDING, RecordingAgent, agent, loopback

__all__ = ["agent", "loopback"]  # the fixtures, imported for pytest


@pytest.mark.parametrize("verdict", ["approve", "deny"])
def test_approve_and_deny_decide_only_once_confirmed(
    loopback: TestClient, agent: RecordingAgent, verdict: str
) -> None:
    url = "/approvals/a3-1/decide"
    asked = loopback.post(url, data={"decision": verdict, "note": "for the weekend"})
    assert asked.status_code == 200 and agent.decisions == []
    # The confirmation shows what is decided: $/h, reason, expiry, the note.
    expiry = fmt_time(PENDING.expires_at)
    for shown in ("+0.731", "above approval_above_dph 0.5", expiry, "for the weekend"):
        assert shown in asked.text, shown
    assert 'name="confirm" value="a3-1"' in asked.text
    assert f'name="decision" value="{verdict}"' in asked.text
    # A confirm that names another approval is no confirmation.
    other = loopback.post(url, data={"decision": verdict, "confirm": "a9-9"})
    assert other.status_code == 200 and agent.decisions == []
    # htmx: the confirmation goes to the page's notice line (the status part refreshes).
    htmx = loopback.post(url, data={"decision": verdict}, headers={"HX-Request": "true"})
    assert htmx.headers["HX-Retarget"] == "#notice" and "<html" not in htmx.text
    assert agent.decisions == []

    decided = loopback.post(
        url,
        data={"decision": verdict, "note": "for the weekend", "confirm": "a3-1"},
        headers={"HX-Request": "true"},
    )
    assert decided.status_code == 200
    said = "approved" if verdict == "approve" else "denied"
    assert f"{said} a3-1" in decided.text
    assert 'id="notice" hx-swap-oob="innerHTML"' in decided.text  # the confirmation goes
    assert agent.decisions == [
        {
            "approval_id": "a3-1",
            "approve": verdict == "approve",
            "note": "for the weekend",
            "author": os_identity(),
        }
    ]


def test_confirming_an_approval_that_is_not_pending_is_a_clear_error(
    loopback: TestClient, agent: RecordingAgent
) -> None:
    page = loopback.post("/approvals/a9-9/decide", data={"decision": "approve"})
    assert page.status_code == 400
    assert "no pending approval &#39;a9-9&#39; (pending: a3-1)" in page.text
    assert agent.decisions == []
