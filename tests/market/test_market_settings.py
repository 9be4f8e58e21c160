"""The worker's market settings (fleet_agent/market/settings.py): the
source needs the Curio node demand is read from, the URLs are checked, and
a bad value is one line naming its variable."""

from __future__ import annotations

import pytest

from activities.market_sources import CurioMarket, market_from_env
from fleet_agent.config.settings import Settings
from fleet_agent.demand.settings import DemandEnv
from fleet_agent.env.env_settings import SettingsError
from fleet_agent.market.settings import DEFAULT_PRICE_URL, MarketEnv

CURIO = {"FLEET_DEMAND_SOURCE": "curio", "FLEET_DEMAND_URL": "http://10.0.0.5:4701"}


def test_by_default_no_market_is_read_and_the_price_is_mainnets() -> None:
    env = MarketEnv.load({})
    assert (env.source, env.price_url, env.fil_usd_url) == ("none", DEFAULT_PRICE_URL, None)
    assert market_from_env(env, DemandEnv.load({})) is None


def test_curio_reads_the_node_demand_is_read_from() -> None:
    env = {**CURIO, "FLEET_MARKET_SOURCE": "curio", "FLEET_FIL_USD_URL": "https://fx.example/fil/"}
    market, demand = MarketEnv.load(env), DemandEnv.load(env)
    assert market.fil_usd_url == "https://fx.example/fil"
    client = market_from_env(market, demand)
    assert isinstance(client, CurioMarket)
    assert client._rpc == "http://10.0.0.5:4701/api/webrpc/v0"
    assert client._metrics == "http://10.0.0.5:12300/debug/metrics"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"FLEET_MARKET_SOURCE": "curio"}, "FLEET_MARKET_SOURCE=curio reads the Curio node"),
        (
            {
                "FLEET_MARKET_SOURCE": "curio",
                "FLEET_DEMAND_SOURCE": "http",
                "FLEET_DEMAND_URL": "http://10.0.0.5/d",
            },
            "FLEET_MARKET_SOURCE=curio reads the Curio node",
        ),
        ({"FLEET_MARKET_SOURCE": "vast"}, "FLEET_MARKET_SOURCE must be 'none' or 'curio'"),
        (
            {"FLEET_MARKET_PRICE_URL": "http://snass.example/price"},
            "FLEET_MARKET_PRICE_URL must be https",
        ),
        (
            {"FLEET_MARKET_PRICE_URL": "ftp://10.0.0.1/p"},
            "FLEET_MARKET_PRICE_URL must be http(s)://",
        ),
        (
            {"FLEET_MARKET_PRICE_URL": "http://169.254.169.254/latest"},
            "FLEET_MARKET_PRICE_URL refused",
        ),
        ({"FLEET_FIL_USD_URL": "https://metadata.google.internal/x"}, "FLEET_FIL_USD_URL refused"),
        (
            {"FLEET_FIL_USD_URL": "https://user:pw@fx.example/x"},
            "FLEET_FIL_USD_URL must not carry credentials",
        ),
        (
            {"FLEET_FIL_USD_URL": "https://fx.example/x#frag"},
            "FLEET_FIL_USD_URL must not carry a fragment",
        ),
        ({"FLEET_FIL_USD_URL": "https://[::1"}, "FLEET_FIL_USD_URL is not a URL"),
        ({"FLEET_FIL_USD_URL": "http://fx.example/x"}, "FLEET_FIL_USD_URL must be https"),
    ],
)
def test_a_bad_setting_is_one_line_naming_its_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError) as caught:
        MarketEnv.load(env)
    text = str(caught.value)
    assert text.startswith(message), text
    assert "\n" not in text and "pw" not in text.replace(message, "")
    assert "FLEET_DEMAND_TOKEN" not in text, "no token goes with these URLs"


@pytest.mark.parametrize(
    "url",
    [
        "https://api.coingecko.com/api/v3/simple/price?ids=filecoin&vs_currencies=usd",
        "http://127.0.0.1:8080/price",
        "http://localhost/price",
        "http://10.1.2.3/price",
        "http://[fd00::5]/price",
    ],
)
def test_https_or_a_near_address_is_taken(url: str) -> None:
    assert MarketEnv.load({"FLEET_FIL_USD_URL": url}).fil_usd_url == url


def test_the_worker_settings_carry_the_market_and_stop_on_a_bad_one() -> None:
    settings = Settings.from_env({**CURIO, "FLEET_MARKET_SOURCE": "curio"})
    assert settings.market.source == "curio"
    assert Settings.from_env({}).market.source == "none"
    with pytest.raises(ValueError, match=r"^FLEET_MARKET_SOURCE=curio reads"):
        Settings.from_env({"FLEET_MARKET_SOURCE": "curio"})
