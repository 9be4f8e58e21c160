"""Who may use the web console and as whom (issue 42): without its token the
console answers 401 and does nothing; a bearer token or a token in the URL (an
http-only cookie, and a redirect to the page without the token) opens it as
the token's name; on loopback without
tokens it acts as its OS identity. Each attack is performed against the app
(Starlette's TestClient, an agent that records what it is sent). The
confirmation before approve and deny: tests/console/test_console_confirmation.py; the
start-up rules: tests/console/test_console_start.py.
"""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient
from starlette.types import Message, Receive, Scope, Send

from starter.console.auth import COOKIE, TokenGate
from starter.identity import os_identity
from tests.helpers.console_auth import (
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


def test_a_token_in_the_url_sets_a_cookie_and_redirects_to_the_page_without_it(
    with_tokens: TestClient, agent: RecordingAgent
) -> None:
    """The phone's way in: open the printed URL once; the cookie does the rest,
    and the page the browser keeps (address bar, history, bookmark) has no token."""
    visit = with_tokens.get(f"/runs?token={ALICE}", follow_redirects=False)
    assert visit.status_code == 303
    assert visit.headers["location"] == "/runs"
    assert visit.headers["cache-control"] == "no-store"
    cookie = visit.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}={ALICE};")
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Path=/" in cookie
    assert "Secure" not in cookie, "plain http: a Secure cookie would never come back"
    assert ALICE not in visit.text
    # The client keeps the cookie: the page it is sent to opens without a token.
    assert with_tokens.get("/runs").status_code in (200, 503)  # no store here: it says so
    assert with_tokens.get("/parts/agent").status_code == 200
    with_tokens.post("/approvals/a3-1/decide", data={"decision": "deny", "confirm": "a3-1"})
    assert agent.decisions[-1]["author"] == "alice"
    # The cookie is not a bearer header: without an Origin (or Referer) a post is refused.
    del with_tokens.headers["Origin"]
    assert with_tokens.post("/trigger").status_code == 403


@pytest.mark.parametrize(
    ("path", "location"),
    [
        (f"/?token={ALICE}", "/"),
        (f"/runs?filter=human&token={ALICE}&limit=5", "/runs?filter=human&limit=5"),
        (f"/runs/3?token={ALICE}&attempt=2", "/runs/3?attempt=2"),
    ],
)
def test_the_redirect_keeps_the_page_and_its_other_parameters(
    with_tokens: TestClient, path: str, location: str
) -> None:
    visit = with_tokens.get(path, follow_redirects=False)
    assert visit.status_code == 303 and visit.headers["location"] == location
    head = with_tokens.head(path, follow_redirects=False)
    assert head.status_code == 303 and head.headers["location"] == location


async def test_the_redirect_never_leads_to_another_site() -> None:
    """A request line of "//evil.test/?token=…" (no client sends it from a URL):
    "//evil.test/" as the Location would be another site."""
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    async def receive() -> Message:
        return {"type": "http.request", "body": b""}

    async def never(scope: Scope, receive: Receive, send: Send) -> None:
        raise AssertionError("the redirect answers before the app")

    scope = {
        "type": "http",
        "method": "GET",
        "scheme": "http",
        "path": "//evil.test/",
        "query_string": f"token={ALICE}".encode(),
        "headers": [],
    }
    await TokenGate(never, (("alice", ALICE),), "nobody")(scope, receive, send)
    assert sent[0]["status"] == 303
    assert (b"location", b"/evil.test/") in sent[0]["headers"]


def test_a_token_in_the_url_is_dropped_whatever_let_the_visit_in(
    with_tokens: TestClient,
) -> None:
    """Signed in by cookie or header, a URL with a wrong (or another) token is
    still answered with the page without it, and sets no cookie."""
    with_tokens.get(f"/?token={ALICE}")  # the cookie
    visit = with_tokens.get(f"/runs?token={BOB}x", follow_redirects=False)
    assert visit.status_code == 303 and visit.headers["location"] == "/runs"
    assert "set-cookie" not in visit.headers
    with_tokens.cookies.clear()
    bearer = with_tokens.get("/runs?token=", headers=_bearer(BOB), follow_redirects=False)
    assert bearer.status_code == 303 and "set-cookie" not in bearer.headers


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
