"""The market's public figures on the Curio stand-in's origin
(simulator/snark_market/public.py, simulator/curio/web.py): the market
service's current price in curio lib/proofsvc/clientctl.go ``PriceResponse``'s
shape, and FIL in dollars as CoinGecko's ``/api/v3/simple/price`` answers,
byte for byte; the Filecoin epoch of the sim time; the seeded FIL walk."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from simulator import SimServer
from simulator.demand import DemandConfig
from simulator.snark_market import MarketConfig
from simulator.snark_market.public import FilUsdWalk, mainnet_epoch

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z
#: (T0 - 2020-08-24T22:00:00Z) / 30 s.
EPOCH_T0 = 6_723_120
PRICE = "/v0/proofs/client/current-price"
FIL_USD = "/api/v3/simple/price"


def _sim(**settings: Any) -> SimServer:
    return SimServer(
        seed=5,
        speed=0,
        scenario="ideal",
        offers=100,
        rate_limits=False,
        start_epoch=T0,
        snark_market=MarketConfig(**settings),
    )


@pytest.fixture
def sim() -> Iterator[SimServer]:
    with _sim() as server:
        yield server


def _get(sim: SimServer, path: str, **params: str) -> httpx.Response:
    return httpx.get(f"{sim.curio_url}{path}", params=params, timeout=10)


def test_the_current_price_is_curios_price_response(sim: SimServer) -> None:
    answer = _get(sim, PRICE)
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json"
    # PriceResponse's JSON tags in its order, compact, one newline (Go's
    # json.Encoder); no service fee: the base is the price, the fee 0/1.
    assert answer.content == (
        b'{"price_nfil":5000000,"price_nfil_base":5000000,"price_nfil_service_fee":0,'
        b'"fee_num":0,"fee_denom":1,"epoch":6723120}\n'
    )
    sim.market.advance(3600 + 45)
    assert sim.snark_market is not None
    price = sim.snark_market.report()["price_nfil"]
    assert price != 5_000_000, "an hour of clients moves the price"
    body = _get(sim, PRICE).json()
    assert body["price_nfil"] == body["price_nfil_base"] == price
    assert body["epoch"] == EPOCH_T0 + 121


def test_the_epoch_is_filecoin_mainnets() -> None:
    genesis = 1_598_306_400  # 2020-08-24T22:00:00Z
    assert [mainnet_epoch(genesis + s) for s in (0, 29.9, 30, 3600)] == [0, 0, 1, 120]
    assert mainnet_epoch(T0) == EPOCH_T0


def test_fil_in_dollars_is_coingeckos_simple_price(sim: SimServer) -> None:
    answer = _get(sim, FIL_USD, ids="filecoin", vs_currencies="usd")
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json; charset=utf-8"
    assert answer.content == b'{"filecoin":{"usd":2.5}}'
    both = _get(sim, FIL_USD, ids="bitcoin,filecoin", vs_currencies="usd,eur")
    assert both.content == b'{"filecoin":{"usd":2.5}}'
    # An unknown id is left out; a known one with no known currency is {}.
    assert _get(sim, FIL_USD, ids="bitcoin", vs_currencies="usd").content == b"{}"
    assert _get(sim, FIL_USD, ids="filecoin", vs_currencies="eur").content == b'{"filecoin":{}}'
    missing = _get(sim, FIL_USD, ids="filecoin")
    assert missing.status_code == 422
    assert missing.content == b'{"error":"Missing parameter vs_currencies"}'
    assert httpx.post(f"{sim.curio_url}{FIL_USD}").status_code == 404


def test_fil_in_dollars_is_the_configured_rate_and_its_seeded_walk() -> None:
    with _sim(fil_usd=3.1, demand=DemandConfig(curve=((0.0, 0.0),))) as server:
        assert _get(server, FIL_USD, ids="filecoin", vs_currencies="usd").json() == {
            "filecoin": {"usd": 3.1}
        }
    with _sim(fil_usd=3.1, fil_usd_walk=0.05) as server:
        server.market.advance(6 * 3600)
        walked = _get(server, FIL_USD, ids="filecoin", vs_currencies="usd").json()
        assert server.snark_market is not None
        assert walked["filecoin"]["usd"] == server.snark_market.report()["fil_usd"] != 3.1


def test_the_walk_is_a_function_of_the_hour_and_the_seed() -> None:
    assert FilUsdWalk(2.5, 0.0, 1, T0).at(T0 + 86_400) == 2.5
    walk = FilUsdWalk(2.5, 0.05, 1, T0)
    hourly = [walk.at(T0 + 3600 * h) for h in range(48)]
    assert hourly[0] == 2.5 and len(set(hourly)) > 40  # it moves every hour...
    assert walk.at(T0 + 3600 * 5 + 1800) == hourly[5]  # ...and only then
    jumped = FilUsdWalk(2.5, 0.05, 1, T0).at(T0 + 3600 * 47)
    assert jumped == hourly[47], "one read or 48: the same path"
    assert walk.at(T0 + 3600 * 3) == hourly[3], "read again earlier: the same value"
    other = [FilUsdWalk(2.5, 0.05, 2, T0).at(T0 + 3600 * h) for h in range(48)]
    assert other != hourly
    assert all(0 < v < 10 for v in hourly)  # 5 % an hour for two days stays near 2.5
