"""Who may use the web console and as whom (issue 42): without its token the
console answers 401 and does nothing; a bearer token or a token in the URL (an
http-only strict cookie) opens it as the token's name; on loopback without
tokens it acts as its OS identity. Each attack is performed against the app
(Starlette's TestClient, an agent that records what it is sent). The
confirmation before approve and deny: tests/test_console_confirmation.py; the
start-up rules: tests/test_console_start.py.
"""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from starter.console.auth import COOKIE
from starter.identity import os_identity
from tests.console_auth_helpers import (
    ALICE,
    BOB,
    RecordingAgent,
    _bearer,
    agent,
    loopback,
    with_tokens,
)

__all__ = ["agent", "loopback", "with_tokens"]  # the fixtures, imported for pytest


@pytest.mark.parametrize(
    "offered",
    [
        {},
        _bearer("wrong-token-0123456789abcdef"),
        _bearer(ALICE[:-1]),
        {"Authorization": f"Basic {ALICE}"},
        {"Cookie": f"{COOKIE}=not-{ALICE}"},
    ],
)
def test_without_its_token_the_console_answers_401_and_does_nothing(
    with_tokens: TestClient, agent: RecordingAgent, offered: dict[str, str]
) -> None:
    for path in ("/", "/runs", "/parts/agent", "/static/htmx.min.js", "/?token=guess"):
        page = with_tokens.get(path, headers=offered)
        assert page.status_code == 401, path
        assert page.headers["www-authenticate"].startswith("Bearer")
        assert "set-cookie" not in page.headers
    for path in ("/say", "/trigger", "/approvals/a3-1/decide"):
        data = {"text": "destroy everything", "decision": "approve", "confirm": "a3-1"}
        assert with_tokens.post(path, headers=offered, data=data).status_code == 401
    # A token in a post's URL is not taken: only a page visit sets the cookie.
    posted = with_tokens.post(f"/trigger?token={ALICE}", headers=offered)
    assert posted.status_code == 401
    assert agent.signals == [] and agent.decisions == []


def test_a_bearer_token_opens_the_console_as_its_name(
    with_tokens: TestClient, agent: RecordingAgent
) -> None:
    assert with_tokens.get("/parts/agent", headers=_bearer(ALICE)).status_code == 200
    # A script: the bearer header and no Origin (no browser page can send it).
    del with_tokens.headers["Origin"]
    said = with_tokens.post(
        "/say",
        headers=_bearer(BOB),
        data={"text": "hello", "author": "the CEO"},
        follow_redirects=False,
    )
    assert said.status_code == 303
    assert agent.signals[-1][1]["author"] == "bob", "the token's name, not the form's text"
    # Still: a post whose Origin is another site's is refused, token or not.
    evil = {**_bearer(BOB), "Origin": "http://evil.test"}
    assert with_tokens.post("/trigger", headers=evil).status_code == 403


def test_a_token_in_the_url_sets_an_http_only_strict_cookie(
    with_tokens: TestClient, agent: RecordingAgent
) -> None:
    """The phone's way in: open the printed URL once; the cookie does the rest."""
    page = with_tokens.get(f"/runs?token={ALICE}")
    assert page.status_code in (200, 503)  # no store here: the run log says so
    cookie = page.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}={ALICE};")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    assert ALICE not in page.text
    # The client keeps the cookie: later requests need no token in the URL.
    assert with_tokens.get("/parts/agent").status_code == 200
    with_tokens.post("/approvals/a3-1/decide", data={"decision": "deny", "confirm": "a3-1"})
    assert agent.decisions[-1]["author"] == "alice"
    # The cookie is not a bearer header: without an Origin (or Referer) a post is refused.
    del with_tokens.headers["Origin"]
    assert with_tokens.post("/trigger").status_code == 403


def test_a_loopback_console_without_tokens_acts_as_its_os_identity(
    loopback: TestClient, agent: RecordingAgent
) -> None:
    loopback.post("/say", data={"text": "hi", "author": "mallory"})
    loopback.post(
        "/approvals/a3-1/decide",
        data={"decision": "approve", "confirm": "a3-1", "author": "mallory"},
    )
    assert agent.signals[-1][1]["author"] == os_identity()
    assert agent.decisions[-1]["author"] == os_identity()
