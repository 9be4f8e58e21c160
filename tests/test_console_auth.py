"""Who may use the web console and as whom (issue 42): tokens, the cross-site
check, the confirmation before approve and deny, and the author a decision
is recorded as. Each attack is performed against the app (Starlette's
TestClient, an agent that records what it is sent) or, for the start-up
rules, against `fleet-agent console` as a process.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pty
import re
import signal
import socket
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient
from temporalio.client import Client

from fleet_agent.models import (
    AgentConfig,
    AgentStatus,
    ApprovalDecision,
    ApprovalOutcome,
    PendingApproval,
    Phase,
)
from starter.agent_client import AgentClient, CliError
from starter.console import ConsoleSettings, create_app, running_console
from starter.console.auth import COOKIE, is_loopback, parse_tokens
from starter.console.serve import with_token
from starter.identity import os_identity
from starter.render import fmt_time
from tests.helpers import eventually
from tests.ports import free_port

BASE = "http://127.0.0.1:8080"
ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdefgh"
NOW = datetime.now(UTC)
PENDING = PendingApproval(
    id="a3-1",
    run=3,
    run_workflow_id="agent/run-3",
    tool="create_instance",
    tool_use_id="tu-1",
    arguments={"offer_id": 991},
    dph=0.731,
    reason="offer costs $0.731/h, above approval_above_dph 0.5",
    asked_at=NOW,
    expires_at=NOW + timedelta(minutes=50),
)


async def _unreachable() -> Client:
    raise AssertionError("the recording agent never connects")


class RecordingAgent(AgentClient):
    """An agent with one pending approval that records what it is sent."""

    def __init__(self) -> None:
        super().__init__(_unreachable, "console-agent")
        self.signals: list[tuple[str, dict[str, Any]]] = []
        self.decisions: list[dict[str, Any]] = []

    async def status(self) -> AgentStatus:
        return AgentStatus(
            agent_id=self.agent_id,
            session=1,
            run_count=3,
            phase=Phase.RUNNING,
            current_run=3,
            pending_triggers=[],
            next_heartbeat_at=None,
            next_run_due_at=None,
            wakes=[],
            last_run=None,
            config=AgentConfig(),
            rejected=[],
            executions=1,
            history_length=10,
            pending_approvals=[] if self.decisions else [PENDING],
        )

    async def signal_with_start(self, signal: str, arg: dict[str, Any]) -> bool:
        self.signals.append((signal, arg))
        return False

    async def refusal(self, signal: str, payload: Any, since: datetime, *, wait: float = 3.0):  # type: ignore[no-untyped-def]
        return None

    async def decide_approval(self, request: dict[str, Any]) -> ApprovalOutcome:
        self.decisions.append(request)
        decision = ApprovalDecision(
            approval_id=request["approval_id"],
            approve=request["approve"],
            note=request.get("note", ""),
            author=request["author"],
            at=NOW,
        )
        return ApprovalOutcome(approval=PENDING, decision=decision)


@pytest.fixture
def agent() -> RecordingAgent:
    return RecordingAgent()


def _client(agent: AgentClient, settings: ConsoleSettings, **headers: str) -> TestClient:
    app = create_app(agent, settings)
    return TestClient(app, base_url=BASE, headers=headers, raise_server_exceptions=False)


@pytest.fixture
def with_tokens(agent: RecordingAgent) -> Iterator[TestClient]:
    """A console with two named tokens (as `CONSOLE_TOKEN` gives them), and
    the Origin a browser on its page sends."""
    settings = ConsoleSettings(tokens=(("alice", ALICE), ("bob", BOB)))
    with _client(agent, settings, Origin=BASE) as client:
        yield client


@pytest.fixture
def loopback(agent: RecordingAgent) -> Iterator[TestClient]:
    """A console without tokens (loopback): anyone here, as its OS identity."""
    with _client(agent, ConsoleSettings(), Origin=BASE) as client:
        yield client


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


# ---------------------------------------------------------------- tokens


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


# ---------------------------------------------------------------- confirmation


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


# ---------------------------------------------------------------- settings and start


def test_console_tokens_are_named_or_one_bare_token() -> None:
    assert parse_tokens(None) == () and parse_tokens(" ") == ()
    assert parse_tokens(ALICE) == (("console", ALICE),)
    assert parse_tokens(f"alice:{ALICE}, bob@phone:{BOB}") == (
        ("alice", ALICE),
        ("bob@phone", BOB),
    )


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("short", "entry 1: the token must be 16-256 characters"),
        (f"alice:{ALICE},bob:short", "entry 2: the token must be"),
        (f"al ice:{ALICE}", "entry 1: the name must be"),
        (f":{ALICE}", "entry 1: the name must be"),
        (f"alice:{ALICE},alice:{BOB}", "each token needs its own name"),
        (f"alice:{ALICE},bob:{ALICE}", "two names share one token"),
    ],
)
def test_a_bad_console_token_setting_is_refused_without_echoing_it(raw: str, message: str) -> None:
    with pytest.raises(CliError, match=message) as refused:
        parse_tokens(raw)
    assert ALICE not in str(refused.value) and "short" not in str(refused.value)


def test_what_counts_as_loopback() -> None:
    for host in ("127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost", "LOCALHOST"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "::", "10.0.0.5", "192.168.1.2", "fe80::1", "box.lan", ""):
        assert not is_loopback(host), host


class _Terminal:
    def __init__(self, tty: bool) -> None:
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_a_non_loopback_console_gets_a_token_or_does_not_start() -> None:
    plain = ConsoleSettings()
    assert with_token(plain, "127.0.0.1", _Terminal(False)) == (plain, None)  # type: ignore[arg-type]
    named = ConsoleSettings(tokens=(("alice", ALICE),))
    assert with_token(named, "0.0.0.0", _Terminal(False)) == (named, None)  # type: ignore[arg-type]
    with pytest.raises(CliError, match="needs a token: set CONSOLE_TOKEN"):
        with_token(plain, "0.0.0.0", _Terminal(False))  # type: ignore[arg-type]
    made, token = with_token(plain, "10.0.0.5", _Terminal(True))  # type: ignore[arg-type]
    assert token is not None and len(token) >= 40
    assert made.tokens == (("console", token),)
    assert token not in repr(made), "settings may be logged: never with their tokens"
    again = with_token(plain, "10.0.0.5", _Terminal(True))[1]  # type: ignore[arg-type]
    assert again != token


async def test_running_console_refuses_a_non_loopback_bind_without_tokens() -> None:
    with pytest.raises(CliError, match="needs a token"):
        async with running_console(RecordingAgent(), ConsoleSettings(), host="0.0.0.0"):
            pass


def _console_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONSOLE_", "FLEET_ENV"))}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parent.parent)
    env["FLEET_DATABASE_URL"] = f"sqlite:///{tmp_path}/none.db"
    return env | extra


def _console_argv(port: int) -> list[str]:
    code = "from starter.cli import main; main()"
    return [sys.executable, "-c", code, "console", "--host", "0.0.0.0", "--port", str(port)]


async def _stop(proc: asyncio.subprocess.Process) -> tuple[bytes, bytes]:
    """Ctrl-C, as an operator stops it; killed if it does not stop."""
    if proc.returncode is None:
        proc.send_signal(signal.SIGINT)
    try:
        return await asyncio.wait_for(proc.communicate(), timeout=30)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise


async def _served(port: int, **headers: str) -> int:
    async def answered() -> int | None:
        try:
            async with httpx.AsyncClient() as http:
                got = await http.get(f"http://127.0.0.1:{port}/runs", headers=headers)
            return got.status_code
        except httpx.TransportError:
            return None

    code = await eventually(answered, timeout=30, what="the console to answer")
    assert code is not None
    return code


async def test_bound_beyond_loopback_without_a_token_or_terminal_it_does_not_start(
    tmp_path: Path,
) -> None:
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        *_console_argv(port),
        env=_console_env(tmp_path),
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    finally:
        if proc.returncode is None:  # it started serving: end it, then fail
            proc.kill()
            await proc.wait()
    assert proc.returncode == 1, (out, err)
    assert "the console bound to 0.0.0.0 needs a token: set CONSOLE_TOKEN" in err.decode()
    with socket.socket() as probe:  # nothing listens
        assert probe.connect_ex(("127.0.0.1", port)) != 0


async def test_bound_beyond_loopback_with_console_token_it_needs_that_token(
    tmp_path: Path,
) -> None:
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        *_console_argv(port),
        env=_console_env(tmp_path, CONSOLE_TOKEN=f"alice:{ALICE}"),
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert await _served(port) == 401
        assert await _served(port, Authorization=f"Bearer {BOB}") == 401
        assert await _served(port, Authorization=f"Bearer {ALICE}") in (200, 503)
    finally:
        out, err = await _stop(proc)
    assert ALICE not in out.decode() + err.decode(), "a configured token is never printed"


async def test_bound_beyond_loopback_in_a_terminal_it_prints_a_token_once(
    tmp_path: Path,
) -> None:
    port = free_port()
    main, child = pty.openpty()
    proc = await asyncio.create_subprocess_exec(
        *_console_argv(port),
        env=_console_env(tmp_path),
        cwd=tmp_path,
        stdout=child,
        stderr=child,
    )
    os.close(child)
    os.set_blocking(main, False)
    printed = b""
    try:

        async def token_shown() -> str | None:
            nonlocal printed
            with contextlib.suppress(BlockingIOError):
                printed += os.read(main, 4096)
            found = re.search(rb"/\?token=([A-Za-z0-9_-]+)", printed)
            return found.group(1).decode() if found else None

        token = await eventually(token_shown, timeout=30, what="the token to be printed")
        assert token is not None
        assert f"http://127.0.0.1:{port}/?token={token}" in printed.decode()
        assert await _served(port) == 401
        assert await _served(port, Authorization=f"Bearer {token}") in (200, 503)
        assert printed.decode().count(token) == 2  # the URL and the header, once each
    finally:
        await _stop(proc)
        os.close(main)
