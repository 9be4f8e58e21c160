"""The Curio stand-in over real HTTP (simulator/curio/web.py, started by
`SimServer(snark_market=...)`): each CurioWeb.PS* method's bytes as curio's
web/api/webrpcporep/proofshare.go writes them, the curio_psvc_proofshare_*
page as tasks/proofshare/metrics.go exports it, the GUI server's HTTP rules,
and the agent's Curio demand reading (fleet_agent/demand/sources.py) taken
from the simulator's answers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from temporalio.testing import ActivityEnvironment

from activities.demand import DemandActivities, source_from_env
from fleet_agent.demand.reading import DemandReading, DemandReadRequest
from fleet_agent.demand.settings import DemandEnv
from fleet_agent.demand.sources import curio_reading
from simulator import SimServer
from simulator.curio.address import key_address
from simulator.curio.fil import fil_short
from simulator.demand import DemandConfig
from simulator.snark_market import MarketConfig, ProviderSpec

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z
WALLET = key_address("operator")
_JSON = "application/json"


def _sim(**settings: Any) -> SimServer:
    config = MarketConfig(**{"node_challenges": 1000, **settings})
    return SimServer(
        seed=5,
        speed=0,
        scenario="ideal",
        offers=200,
        rate_limits=False,
        start_epoch=T0,
        snark_market=config,
    )


@pytest.fixture
def sim() -> Iterator[SimServer]:
    with _sim() as server:
        yield server


@pytest.fixture
def idle() -> Iterator[SimServer]:
    """No client and no other provider: the node's asks stay open."""
    with _sim(providers=(), demand=DemandConfig(curve=((0.0, 0.0),))) as server:
        yield server


def _post(sim: SimServer, method: str, *params: Any) -> httpx.Response:
    body = {"jsonrpc": "2.0", "method": f"CurioWeb.{method}", "params": list(params), "id": 1}
    return httpx.post(f"{sim.curio_url}/api/webrpc/v0", json=body, timeout=10)


def _result(sim: SimServer, method: str, *params: Any) -> Any:
    answer = _post(sim, method, *params)
    assert answer.status_code == 200 and answer.headers["content-type"] == _JSON
    body = answer.json()
    assert "error" not in body, body
    return body["result"]


def _enable(sim: SimServer, price: str = "0.004") -> None:
    assert _result(sim, "PSSetMeta", True, WALLET, price) is None


def _metrics(sim: SimServer) -> httpx.Response:
    return httpx.get(f"{sim.curio_url}/debug/metrics", timeout=10)


def test_a_fresh_node_answers_as_a_fresh_curio_database(sim: SimServer) -> None:
    expected = {
        "PSGetMeta": b'{"enabled":false,"wallet":"","request_task_id":0,"price":"0"}',
        "PSListQueue": b"[]",
        "PSListAsks": b"null",
        "PSProviderLastPaymentsSummary": b"null",
    }
    for method, result in expected.items():
        answer = _post(sim, method)
        assert (answer.status_code, answer.headers["content-type"]) == (200, _JSON)
        assert answer.content == b'{"id":1,"jsonrpc":"2.0","result":' + result + b"}\n"
    page = _metrics(sim)
    assert page.headers["content-type"] == (
        "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"
    )
    # initProofshareMetricRows: five series at 0; no hold decision yet.
    assert page.text == "".join(
        f"# HELP curio_psvc_proofshare_{name} {help_text}\n"
        f"# TYPE curio_psvc_proofshare_{name} {kind}\n"
        f"curio_psvc_proofshare_{name} 0\n"
        for name, kind, help_text in [
            (
                "adder_commits_total",
                "counter",
                "Total number of successful task additions scheduled by Adder",
            ),
            ("need_asks", "gauge", "Number of asks still needed in current Do loop iteration"),
            ("newly_added_total", "counter", "Total number of new work requests inserted locally"),
            ("queue_count", "gauge", "Current proofshare request queue count"),
            ("to_request_remaining", "gauge", "Remaining requests to fulfill for high-water mark"),
        ]
    )


def test_set_meta_stores_the_key_address_and_the_price_in_attofil(sim: SimServer) -> None:
    _enable(sim, "0.0045")
    meta = _post(sim, "PSGetMeta").content
    assert meta == (
        b'{"id":1,"jsonrpc":"2.0","result":{"enabled":true,"wallet":"'
        + WALLET.encode()
        + b'","request_task_id":0,"price":"0.0045"}}\n'
    )
    assert sim.snark_market is not None
    assert sim.snark_market.node.meta.pprice_atto == 4_500_000_000_000_000
    # An f0 id of a known account is stored as its key address (StateAccountKey).
    report = sim.snark_market.report()
    ident = f"f0{report['node']['account']['provider_id']}"
    assert _result(sim, "PSSetMeta", False, ident, "5 fil") is None
    assert _result(sim, "PSGetMeta")["wallet"] == WALLET
    assert _result(sim, "PSGetMeta")["price"] == "5"


@pytest.mark.parametrize(
    ("wallet", "price", "message"),
    [
        (WALLET, "cheap", 'PSSetMeta: invalid price: unrecognized suffix: "cheap"'),
        ("f1nope", "1", "PSSetMeta: invalid wallet address: invalid address payload"),
        ("", "1", "PSSetMeta: failed to get account key: resolve address <empty>: actor not found"),
        (
            "f012",
            "1",
            "PSSetMeta: failed to get account key: resolve address f012: actor not found",
        ),
    ],
)
def test_set_meta_refuses_as_curio_does(
    sim: SimServer, wallet: str, price: str, message: str
) -> None:
    answer = _post(sim, "PSSetMeta", True, wallet, price)
    assert answer.status_code == 200
    assert answer.json() == {"error": {"code": 1, "message": message}, "id": 1, "jsonrpc": "2.0"}
    assert _result(sim, "PSGetMeta")["enabled"] is False


def test_asks_are_listed_oldest_first_and_withdrawing_one_costs_a_challenge(
    idle: SimServer,
) -> None:
    _enable(idle)
    assert _post(idle, "PSListAsks").content == b'{"id":1,"jsonrpc":"2.0","result":null}\n'
    idle.market.advance(3)  # the Adder's first tick: 8 asks at 0.004 FIL/P
    asks = _result(idle, "PSListAsks")
    assert len(asks) == 8
    assert list(asks[0]) == ["id", "min_price_nfil", "created_at", "min_price_fil"]
    assert asks[0] == {
        "id": asks[0]["id"],
        "min_price_nfil": 4_000_000,
        "created_at": "2027-01-15T08:00:03Z",
        "min_price_fil": "4 mFIL",
    }
    assert [a["id"] for a in asks] == sorted(a["id"] for a in asks)
    assert _result(idle, "PSAskWithdraw", asks[0]["id"]) is None
    assert len(_result(idle, "PSListAsks")) == 7
    assert idle.snark_market is not None
    account = idle.snark_market.report()["node"]["account"]
    assert (account["challenges"], account["withdrawals"]) == (999, 1)
    again = _post(idle, "PSAskWithdraw", asks[0]["id"])
    assert again.json()["error"] == {
        "code": 1,
        "message": "PSAskWithdraw: failed to withdraw ask: failed to withdraw ask: "
        "404 Not Found - ask not found",
    }


def test_withdrawing_before_a_wallet_is_set_is_curio_s_scan_error(sim: SimServer) -> None:
    answer = _post(sim, "PSAskWithdraw", 1)
    assert answer.content == (
        b'{"error":{"code":1,"message":"PSAskWithdraw: failed to get wallet: can\'t scan into '
        b'dest[0] (col: wallet): cannot scan NULL into *string"},"id":1,"jsonrpc":"2.0"}\n'
    )


def test_the_queue_shows_the_15_newest_rows_newest_first(sim: SimServer) -> None:
    _enable(sim)
    sim.market.advance(3600)
    rows = _result(sim, "PSListQueue")
    assert sim.snark_market is not None
    node = sim.snark_market.node
    assert len(node.rows) > 15 and len(rows) == 15
    assert list(rows[0]) == [
        "service_id",
        "obtained_at",
        "compute_task_id",
        "compute_done",
        "submit_task_id",
        "submit_done",
        "was_pow",
        "payment_amount",
    ]
    newest = sorted(node.rows, key=lambda r: r.obtained_at, reverse=True)[:15]
    assert [r["service_id"] for r in rows] == [r.request_cid for r in newest]
    times = [datetime.fromisoformat(r["obtained_at"]) for r in rows]
    assert times == sorted(times, reverse=True) and len(set(times)) == 15
    for row, truth in zip(rows, newest, strict=True):
        assert row["compute_task_id"] == (truth.compute_task_id or 0)
        assert row["submit_task_id"] == 0
        assert (row["compute_done"], row["submit_done"]) == (truth.compute_done, truth.submit_done)
        if not truth.submit_done or truth.was_pow:
            assert row["payment_amount"] == ""


def test_a_paid_row_shows_its_own_payment() -> None:
    spec = ProviderSpec("p", 2, 9_000_000, challenges=200)
    with _sim(providers=(spec,), node_porep_s=300.0, node_snap_s=300.0) as sim:
        _enable(sim)
        sim.market.advance(30)
        # Off: the running request task ends, and no other starts.
        assert _result(sim, "PSSetMeta", False, WALLET, "0.004") is None
        sim.market.advance(1800)
        rows = _result(sim, "PSListQueue")
        assert sim.snark_market is not None
        payments = sim.snark_market.node.payments
        by_cid = {p.request_cid: p for p in payments}
        paid = [r for r in rows if r["submit_done"] and not r["was_pow"]]
        assert len(paid) == len(rows) >= 8
        for row in paid:
            payment = by_cid[row["service_id"]]
            before = next((p.cumulative_atto for p in payments if p.nonce == payment.nonce - 1), 0)
            amount = payment.cumulative_atto - before
            # The request's price (the market's when it arrived) x its size in P.
            request = sim.snark_market.service.requests[row["service_id"]]
            assert amount == request.payment_nfil * 10**9 > 0
            assert row["payment_amount"] == fil_short(amount)
            assert row["payment_amount"].endswith(" mFIL")


def test_the_payments_summary_after_a_settlement(sim: SimServer) -> None:
    _enable(sim)
    sim.market.advance(1800)
    [summary] = _result(sim, "PSProviderLastPaymentsSummary")
    assert sim.snark_market is not None
    node = sim.snark_market.node
    last = node.settlements[-1]
    assert list(summary) == [
        "wallet_id",
        "last_payment_nonce",
        "address",
        "last_settled_amount_fil",
        "unsettled_amount_fil",
        "time_since_last_settlement",
        "last_settled_at",
        "contract_settled_fil",
        "contract_last_nonce",
    ]
    assert summary["wallet_id"] == node.payments[-1].provider_id
    assert summary["last_payment_nonce"] == node.payments[-1].nonce
    assert summary["address"] == WALLET
    assert summary["last_settled_amount_fil"] == fil_short(last.cumulative_atto)
    assert summary["unsettled_amount_fil"] == fil_short(node.unsettled_atto())
    assert summary["contract_settled_fil"] == summary["last_settled_amount_fil"]
    assert summary["contract_last_nonce"] == last.nonce
    # Autosettle runs every 2 min; the last ran at 30:00.
    assert summary["last_settled_at"] == "2027-01-15T08:30:00Z"
    assert summary["time_since_last_settlement"] == "0s"
    sim.market.advance(61)
    assert _result(sim, "PSProviderLastPaymentsSummary")[0]["time_since_last_settlement"] == (
        "1m1s"
    )


def test_the_metrics_page_follows_the_node(sim: SimServer) -> None:
    _enable(sim)
    sim.market.advance(600)
    samples = dict(
        line.rsplit(" ", 1) for line in _metrics(sim).text.splitlines() if line[:1] != "#"
    )
    assert sim.snark_market is not None
    c = sim.snark_market.node.counters
    prefix = "curio_psvc_proofshare_"
    assert samples == {
        f"{prefix}adder_commits_total": str(c.adder_commits),
        f'{prefix}adder_hold_decisions_total{{hold="pass"}}': "200",  # every 3 s
        f"{prefix}need_asks": f"{c.need_asks:g}",
        f"{prefix}newly_added_total": str(c.asks_created),
        f"{prefix}queue_count": f"{c.queue_count:g}",
        f"{prefix}to_request_remaining": f"{c.to_request_remaining:g}",
    }
    assert c.asks_created > 8 and c.adder_commits > 1


def test_the_gui_server_s_http_rules(sim: SimServer) -> None:
    base = sim.curio_url
    assert httpx.options(f"{base}/api/webrpc/v0").status_code == 204
    missing = httpx.get(f"{base}/index.php")
    assert (missing.status_code, missing.text) == (404, "404 Not Found")
    # go-jsonrpc checks no HTTP method: a GET has an empty body.
    empty = httpx.get(f"{base}/api/webrpc/v0")
    assert empty.status_code == 400
    assert empty.json()["error"] == {"code": -32600, "message": "Invalid request"}
    unknown = _post(sim, "Version")
    assert unknown.status_code == 500
    assert unknown.json()["error"]["code"] == -32601


def _reading(sim: SimServer) -> tuple[DemandReading | str, Any]:
    answer = httpx.post(
        f"{sim.curio_url}/api/webrpc/v0",
        json={"jsonrpc": "2.0", "method": "CurioWeb.PSListQueue", "params": [], "id": 1},
    ).json()
    lines = _metrics(sim).text.splitlines()
    return curio_reading(answer, lines, datetime.now(UTC)), answer


def test_the_curio_reading_takes_queued_from_the_gauge_and_the_rest_in_flight() -> None:
    # Two GPUs for a node that keeps 8 waiting: the queue stays full.
    with _sim(node_gpus=2) as sim:
        _enable(sim)
        sim.market.advance(900)
        reading, answer = _reading(sim)
        assert isinstance(reading, DemandReading), reading
        assert sim.snark_market is not None
        gauge = sim.snark_market.node.counters.queue_count
        open_rows = sum(1 for r in answer["result"] if not r["compute_done"])
        assert reading.queued == gauge >= 1
        assert reading.saturated == (gauge > 5)
        assert reading.in_flight == max(0, open_rows - reading.queued)
        assert reading.arrived_total == sim.snark_market.node.counters.asks_created
        # Every waiting row already has a task id: a task id is not a machine.
        waiting = [r for r in sim.snark_market.node.rows if r.waiting]
        assert waiting and all(r.compute_task_id for r in waiting)


async def test_the_agent_s_curio_source_reads_the_simulator(sim: SimServer) -> None:
    _enable(sim)
    sim.market.advance(600)
    env = DemandEnv.model_validate(
        {
            "FLEET_DEMAND_SOURCE": "curio",
            "FLEET_DEMAND_URL": sim.curio_url,
            "FLEET_DEMAND_METRICS_URL": sim.curio_url,
        }
    )
    acts = DemandActivities(source_from_env(env))
    result = await ActivityEnvironment().run(acts.read_demand, DemandReadRequest(agent_id="a"))
    assert result.reading is not None, result.refusal
    assert sim.snark_market is not None
    counters = sim.snark_market.node.counters
    assert result.reading.source == "curio"
    assert result.reading.queued == counters.queue_count
    assert result.reading.arrived_total == counters.asks_created


def test_the_control_route_reports_and_changes_the_market(idle: SimServer) -> None:
    _enable(idle)
    base = f"{idle.curio_url}/_sim/snark-market"
    report = httpx.get(base).json()
    assert report["node"]["gpus"] == 4 and report["node"]["hold"] is False
    changed = httpx.post(base, json={"hold": True, "gpus": 2}).json()
    assert (changed["node"]["hold"], changed["node"]["gpus"]) == (True, 2)
    granted = httpx.post(base, json={"grant": {"wallet": WALLET, "challenges": 50}})
    assert granted.status_code == 200
    assert idle.snark_market is not None
    assert idle.snark_market.service.account(WALLET).challenges == 1050
    bad = httpx.post(base, json={"gpus": "many"})
    assert bad.status_code == 400 and json.loads(bad.text)["error"] == "gpus is an integer"
