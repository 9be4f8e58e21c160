"""The web console without a browser: Starlette's TestClient on a real store,
with Temporal unreachable (a closed port), so every page that needs the agent
shows why instead of failing. Bad input gets a clear error page; the store's
parts still render. The browser test (tests/console/test_console_browser.py) covers
the live agent.
"""

from __future__ import annotations

import html
import re
import socket
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from starlette.testclient import TestClient

from fleet_agent.fleet.snapshot import FleetSnapshot
from fleet_agent.models import AgentConfig, AgentStatus, DemandTargetChange
from fleet_agent.store import FleetSnapshots, Store
from fleet_agent.store.run_fleets import fleet_point, fleet_rows
from starter.agent_client import AgentClient, open_client
from starter.console import ConsoleSettings, create_app
from starter.console.chart import trend_svg
from starter.console.data import Trend, read_trend
from starter.console.web import LOOPBACK_HOSTS, allowed_hosts_for, same_origin
from tests.helpers import idle_status
from tests.helpers.console_seed import AGENT, NOW, SIGNATURE, THOUGHT, seed, seed_demand, snapshot

BASE = "http://127.0.0.1:8080"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def console(store: Store, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    seed(store)
    monkeypatch.setenv("FLEET_DATABASE_URL", str(store.engine.url))
    port = _closed_port()

    def connect():  # type: ignore[no-untyped-def]
        return open_client(f"127.0.0.1:{port}", None, connect_timeout=2)

    settings = ConsoleSettings(ui_url="http://ui.test:8233", namespace="ns1")
    app = create_app(AgentClient(connect, AGENT), settings)
    # As a browser on this machine reaches it: the Host is checked, and a post
    # carries the page's Origin.
    with TestClient(
        app, base_url=BASE, headers={"Origin": BASE}, raise_server_exceptions=False
    ) as client:
        yield client


def test_the_run_log_shows_verdicts_badges_cost_and_filters(console: TestClient) -> None:
    page = console.get("/runs")
    assert page.status_code == 200
    assert page.text.count('class="run ') == 3
    assert "[skipped in prompt]" in page.text and "[no-op]" in page.text
    assert "error: model unreachable" in page.text
    acted = console.get("/runs?filter=acted").text
    assert acted.count('class="run ') == 1 and 'href="/runs/1"' in acted
    errors = console.get("/runs?filter=errors").text
    assert errors.count('class="run ') == 1 and 'href="/runs/3"' in errors
    human = console.get("/runs?filter=human").text
    assert human.count('class="run ') == 1 and 'href="/runs/1"' in human


def test_a_run_page_shows_the_models_summarised_thinking_never_its_signature(
    console: TestClient,
) -> None:
    page = console.get("/runs/1")
    assert page.status_code == 200
    assert "[thinking]" in page.text and THOUGHT in page.text
    assert SIGNATURE not in page.text
    assert "out 620 (600 thinking)" in page.text


def test_a_run_page_shows_its_transcript_and_links_to_the_web_ui(console: TestClient) -> None:
    page = console.get("/runs/2")
    assert page.status_code == 200
    assert "no (skipped in prompt)" in page.text and "capacity 200 proofs/h" in page.text
    assert (
        'href="http://ui.test:8233/namespaces/ns1/workflows/console-agent%2Frun-2/wfrun-2/history"'
        in page.text
    )


@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        ("/runs/99", 404, "agent &#39;console-agent&#39; has no run 99 in the run log"),
        ("/runs/1?attempt=5", 404, "run 1 of agent &#39;console-agent&#39; has no attempt 5"),
        ("/runs/1?attempt=two", 400, "attempt must be a whole number, not &#39;two&#39;"),
        ("/runs?filter=bogus", 400, "unknown filter &#39;bogus&#39;; choose from all, acted"),
        ("/runs?limit=0", 400, "limit must be between 1 and 1000, not 0"),
        ("/nowhere", 404, "no page at /nowhere"),
        ("/parts/answer?text=hi", 400, "not a message id: &#39;&#39;"),
        ("/parts/answer?id=m%22x&text=hi", 400, "not a message id: &#39;m&#34;x&#39;"),
    ],
)
def test_bad_requests_get_a_clear_error_page(
    console: TestClient, path: str, status: int, message: str
) -> None:
    page = console.get(path)
    assert page.status_code == status
    assert message in page.text and 'role="alert"' in page.text


def test_the_chat_polls_until_the_run_that_took_the_message_ended(console: TestClient) -> None:
    answered = console.get("/parts/answer?id=m-seed-1&text=hello+agent")
    assert answered.status_code == 200
    assert "answer 1" in answered.text and 'href="/runs/1"' in answered.text
    assert "hx-trigger" not in answered.text, "an answered message stops polling"
    waiting = console.get("/parts/answer?id=m-not-yet&text=hello")
    assert "waiting for a run to take it in" in waiting.text and "every 1s" in waiting.text


def test_without_temporal_the_dashboard_says_why_and_actions_fail_clearly(
    console: TestClient,
) -> None:
    page = console.get("/")
    assert page.status_code == 200 and "cannot reach Temporal at 127.0.0.1:" in page.text
    # The chat's history comes from the run log: the message run 1 answered.
    assert "earlier messages" in page.text and "<pre>answer 1</pre>" in page.text
    said = console.post("/say", data={"text": "hello"})
    assert said.status_code == 400 and "cannot reach Temporal" in said.text
    # htmx gets a fragment aimed at the page's notice area, with the same status.
    htmx = console.post("/trigger", headers={"HX-Request": "true"})
    assert htmx.status_code == 400 and htmx.headers["HX-Retarget"] == "#notice"
    assert "cannot reach Temporal" in htmx.text and "<html" not in htmx.text
    # The store's parts still render.
    fleet = console.get("/parts/fleet")
    assert fleet.status_code == 200 and "RTX 4090" in fleet.text and "<polyline" in fleet.text


@pytest.mark.parametrize(
    ("path", "data", "message"),
    [
        ("/say", {}, "missing form field &#39;text&#39;"),
        ("/say", {"text": "   "}, "form field &#39;text&#39; is empty"),
        ("/say", {"text": "x" * 10_001}, "longer than 10000 characters"),
        ("/approvals/a1-1/decide", {"decision": "maybe"}, "decision must be approve or deny"),
        ("/approvals/a1-1/decide", {}, "missing form field &#39;decision&#39;"),
    ],
)
def test_bad_forms_are_refused_before_the_agent_is_asked(
    console: TestClient, path: str, data: dict[str, str], message: str
) -> None:
    page = console.post(path, data=data)
    assert page.status_code == 400 and message in page.text
    assert "cannot reach Temporal" not in page.text


def test_a_bug_is_an_error_page_and_a_logged_traceback(
    console: TestClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*args: object) -> None:
        raise KeyError("boom")

    monkeypatch.setattr("starter.console.app.run_view", broken)
    page = console.get("/runs/1")
    assert page.status_code == 500 and "internal error (KeyError)" in page.text
    assert "boom" not in page.text and "KeyError: &#39;boom&#39;" not in page.text
    assert any(r.exc_info and "GET /runs/1 failed" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    "headers",
    [
        # A page on another site posts to the console (the Host is ours).
        {"Origin": "http://evil.test"},
        {"Origin": "http://evil.test:8080"},
        {"Origin": "https://evil.test", "Sec-Fetch-Site": "same-origin"},
        {"Sec-Fetch-Site": "cross-site"},
        # Another server on a loopback name (another port): not this console.
        {"Origin": "http://127.0.0.1:3000"},
        {"Origin": "http://localhost:8080", "Sec-Fetch-Site": "same-site"},
        # A sandboxed frame, or a privacy redirect.
        {"Origin": "null"},
        {"Origin": "file://"},
        # No Origin: the Referer is the source, and it is another site's.
        {"Origin": "", "Referer": "http://evil.test/page"},
    ],
)
def test_a_cross_site_post_is_refused(console: TestClient, headers: dict[str, str]) -> None:
    console.headers.update(headers)
    if not console.headers["Origin"]:
        del console.headers["Origin"]
    for path in ("/trigger", "/say", "/approvals/a1-1/decide", "/reset", "/wakes/w1/cancel"):
        page = console.post(path, data={"text": "hi", "decision": "approve"})
        assert page.status_code == 403 and "cross-site request refused" in page.text, path


def test_origin_is_checked_against_the_host_list_itself() -> None:
    """The finding's request, on the check alone (as if nothing checked Host):
    an Origin that matches its Host is still refused when the name is not ours."""
    evil = {"host": "evil.example:8080", "origin": "http://evil.example:8080"}
    assert not same_origin(evil, LOOPBACK_HOSTS)
    assert not same_origin(evil, LOOPBACK_HOSTS, bearer=True)
    ours = {"host": "[::1]:8080", "origin": "http://[::1]:8080"}
    assert same_origin(ours, LOOPBACK_HOSTS)
    assert not same_origin({"host": "127.0.0.1:8080"}, LOOPBACK_HOSTS)
    assert same_origin({"host": "127.0.0.1:8080"}, LOOPBACK_HOSTS, bearer=True)


def test_a_post_from_the_console_itself_goes_through(console: TestClient) -> None:
    """The console's own page: its Origin, or, without one, its Referer. A
    post with neither (a script's) is refused: it would need the bearer token
    (tests/console/test_console_auth.py)."""
    assert console.post("/trigger").status_code == 400  # Temporal is down: past the guard
    del console.headers["Origin"]
    assert console.post("/trigger", headers={"Referer": BASE + "/runs"}).status_code == 400
    refused = console.post("/trigger")
    assert refused.status_code == 403 and "cross-site request refused" in refused.text


@pytest.mark.parametrize("path", ["/", "/runs", "/parts/agent"])
def test_a_rebinding_domain_is_refused_even_with_a_matching_origin(
    console: TestClient, path: str
) -> None:
    """DNS rebinding: evil.example resolves to 127.0.0.1, so its page reaches
    the console under its own name, with an Origin that matches that Host.
    Starlette's TrustedHostMiddleware refuses any Host not ours, before an
    endpoint runs: no page read, no approval decided, no message sent."""
    evil = {"Host": "evil.example:8080", "Origin": "http://evil.example:8080"}
    assert console.get(path, headers=evil).status_code == 400
    for post in ("/trigger", "/reset", "/say", "/approvals/a1/decide"):
        refused = console.post(post, headers={**evil, "Sec-Fetch-Site": "same-origin"})
        assert refused.status_code == 400 and "Invalid host header" in refused.text
    assert console.get(path).status_code in (200, 503)


def test_no_page_may_be_framed_or_run_injected_script(console: TestClient) -> None:
    for path in ("/", "/runs", "/static/htmx.min.js", "/no-such-page"):
        page = console.get(path)
        assert page.headers["x-frame-options"] == "DENY", path
        csp = [p.strip() for p in page.headers["content-security-policy"].split(";")]
        assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp, csp
        assert page.headers["referrer-policy"] == "same-origin"


def test_no_page_has_inline_script(console: TestClient) -> None:
    """`script-src 'self'` runs no inline script, handler attribute,
    javascript: URL or htmx eval (hx-on, a trigger's [filter]): a page that
    used one would break silently in the browser. The page's own code is
    static/console.js."""
    pages = [console.get(p).text for p in ("/", "/runs", "/runs/1", "/runs/2", "/nowhere")]
    pages += [console.get("/parts/fleet").text, console.get("/parts/answer?id=m-x&text=a").text]
    for text in pages:
        assert re.findall(r"<script(?![^>]*\bsrc=)[^>]*>", text) == []
        assert re.findall(r"\s(on[a-z]+|hx-on[:\w-]*)=", text) == []
        assert "javascript:" not in text
        assert re.findall(r'hx-trigger="[^"]*\[', text) == []
    assert re.findall(r'<script src="([^"]+)"', pages[0]) == [
        "/static/htmx.min.js",
        "/static/console.js",
    ]
    assert console.get("/static/console.js").status_code == 200


def test_the_hosts_a_console_accepts() -> None:
    loopback = ("127.0.0.1", "localhost", "[::1]")
    assert allowed_hosts_for("127.0.0.1", None) == loopback
    assert allowed_hosts_for("0.0.0.0", "Box.LAN, proxy.example") == (
        *loopback,
        "box.lan",
        "proxy.example",
    )
    assert allowed_hosts_for("10.0.0.5", "") == (*loopback, "10.0.0.5")
    # IPv6 as a Host header writes it: in brackets.
    assert allowed_hosts_for("::1", None) == loopback
    assert allowed_hosts_for("::", "FE80::1") == (*loopback, "[fe80::1]")


@pytest.mark.parametrize("host", ["127.0.0.1:8080", "localhost:8080", "[::1]:8080"])
def test_each_loopback_name_reaches_the_console(console: TestClient, host: str) -> None:
    origin = f"http://{host}"
    assert console.get("/runs", headers={"Host": host}).status_code == 200
    # A post from that page: its Origin is its own, and on the list.
    posted = console.post("/trigger", headers={"Host": host, "Origin": origin})
    assert posted.status_code == 400 and "cannot reach Temporal" in posted.text


def test_a_missing_store_is_a_clear_error(
    console: TestClient, monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    monkeypatch.setenv("FLEET_DATABASE_URL", f"sqlite:///{tmp_path}/absent.db")
    page = console.get("/runs")
    assert page.status_code == 503 and "no run log at" in page.text
    assert "no run log at" in console.get("/parts/fleet").text


def test_a_run_that_has_not_read_the_fleet_yet_leaves_the_run_before_shown(
    console: TestClient, store: Store
) -> None:
    # Run 4 has begun but not yet written its context (the fleet it saw).
    store.run_writes.begin_run(AGENT, 4, 1, [], "- heartbeat", NOW, "wfrun-4")
    fleet = console.get("/parts/fleet").text
    assert 'as run <a href="/runs/3">#3</a> saw it' in fleet
    assert "RTX 4090" in fleet  # its machine


def test_the_fleet_is_the_monitors_last_poll_when_there_is_one(
    console: TestClient, store: Store
) -> None:
    assert "no monitor poll stored: as run" in console.get("/parts/fleet").text
    polled = snapshot(77.0, 250)
    polled.instances[0].gpu = "RTX 5090"
    FleetSnapshots(store).save(AGENT, polled, datetime.now(UTC))
    fleet = console.get("/parts/fleet").text
    assert "as of the monitor's last poll" in fleet and "stale" not in fleet
    assert "RTX 5090" in fleet and "<strong>77</strong> proofs/h of target 250" in fleet


def test_the_fleet_line_and_rows_read_back_as_written() -> None:
    text = snapshot(123.0, 400).to_text()
    point = fleet_point(text, NOW, 5)
    assert point is not None
    assert (point.capacity, point.expected, point.target, point.dph) == (123, 123, 400, 0.42)
    rows = fleet_rows(text)
    assert rows is not None and [r.id for r in rows] == [41]
    unavailable = FleetSnapshot(error="vast.ai down").to_text()
    assert fleet_point(unavailable, NOW, 5) is None and fleet_rows(unavailable) is None


def test_the_plot_holds_each_run_and_hour_of_the_last_day(console: TestClient) -> None:
    trend = read_trend(AGENT, NOW)
    assert [p.capacity for p in trend.points] == [100, 200, 300]
    assert [round(h.usd, 2) for h in trend.hours] == [0.42, 0.42, 0.42]
    svg = trend_svg(trend)
    assert svg.count("<polyline") == 3 and svg.count('<rect class="dph"') == 3
    empty = trend_svg(read_trend("nobody", NOW))
    assert "no run in the last 24 h" in empty and "no spend in the last 24 h" in empty


def test_the_plot_draws_demand_beside_capacity_when_there_are_readings(
    console: TestClient, store: Store
) -> None:
    points = seed_demand(store)
    trend = read_trend(AGENT, NOW)
    assert [p.at for p in trend.demand] == [p.at for p in points]
    svg = trend_svg(trend)
    lines = dict(re.findall(r'<polyline class="(demand-[a-z]+)" fill="none" points="([^"]+)"', svg))
    assert set(lines) == {"demand-arrivals", "demand-forecast", "demand-target"}
    # Arrivals start at the first reading with a rate: one pair (a step) less.
    assert len(lines["demand-arrivals"].split()) == len(lines["demand-forecast"].split()) - 2
    for text in ("arrivals/h", "forecast", "demand target"):
        assert f"— {text}</text>" in svg, text
    # The axis holds the highest demand figure (260/h: the target), not only capacity.
    alone = trend_svg(Trend(trend.start, trend.end, demand=trend.demand))
    assert 'text-anchor="end">500</text>' in alone and "no run in the last 24 h" not in alone
    assert "demand-" in console.get("/parts/fleet").text
    # Without readings: no demand line, no demand legend.
    plain = trend_svg(read_trend("nobody", NOW))
    assert "demand-" not in plain and "arrivals/h" not in plain


class _DemandAgent(AgentClient):
    """An agent in demand mode whose status query answers without Temporal."""

    async def status(self) -> AgentStatus:
        config = AgentConfig(target_mode="demand", min_target=100, max_target=900)
        change = DemandTargetChange(
            target_per_h=260, previous_per_h=200, action="raise", reason="raise to 260/h: need"
        )
        return idle_status(AGENT, config=config, demand=change)


def test_the_summary_has_a_demand_line_in_demand_mode(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(store)
    points = seed_demand(store)
    monkeypatch.setenv("FLEET_DATABASE_URL", str(store.engine.url))
    app = create_app(_DemandAgent(lambda: None, AGENT), ConsoleSettings())  # type: ignore[arg-type,return-value]
    with TestClient(app, base_url=BASE, headers={"Origin": BASE}) as client:
        page = html.unescape(client.get("/").text)
    line = page.split('<dd class="demand-line">', 1)[1].split("</dd>", 1)[0]
    assert "demand within [100, 900] proofs/h" in line
    assert points[-1].line() in line, "the store's latest reading"
    assert "last change 200 → 260: raise to 260/h: need" in line
