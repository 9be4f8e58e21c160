"""`FLEET_MARKET_SOURCE`, `FLEET_MARKET_PRICE_URL` and `FLEET_FIL_USD_URL`:
where the worker reads the business on the Snark Market.

- `FLEET_MARKET_SOURCE`: `none` (the default: `observe_market` reads
  nothing, and the levers refuse) or `curio`: the operator's Curio node,
  the one demand is read from, so it needs ``FLEET_DEMAND_SOURCE=curio``
  and reads the web RPC at `FLEET_DEMAND_URL` and the metrics at
  `FLEET_DEMAND_METRICS_URL` (fleet_agent/demand/settings.py);
- `FLEET_MARKET_PRICE_URL`: the market service's current price (default
  `DEFAULT_PRICE_URL`, the URL Curio's client reads: lib/proofsvc/
  clientctl.go, ``clientUrl + "/client/current-price"``);
- `FLEET_FIL_USD_URL`: optional, a URL answering CoinGecko's simple-price
  shape (``{"filecoin": {"usd": 2.5}}``, e.g.
  ``https://api.coingecko.com/api/v3/simple/price?ids=filecoin&vs_currencies=usd``);
  unset, FIL has a dollar price only when the agent's `fil_usd` gives one.

Both URLs are checked as `FLEET_DEMAND_URL` is (fleet_agent/demand/sources.py,
`demand_url`: no link-local address or cloud metadata service, no
credentials, no fragment) and must be https unless they point at loopback or
a private address: an answer over plain http from afar could be anyone's.
None of them is a secret; the worker's log names a URL's host, never the
URL (a query could still hold a key the operator put there).

Read with the worker's other settings (fleet_agent/config/settings.py): a
bad value stops the worker at start with one line naming the variable.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field

from fleet_agent.demand.settings import DemandEnv
from fleet_agent.demand.sources import demand_url
from fleet_agent.env.env_settings import EnvModel, SettingsError

__all__ = ["DEFAULT_PRICE_URL", "MarketEnv", "MarketSourceKind", "checked_url"]

MarketSourceKind = Literal["none", "curio"]
#: lib/proofsvc/clientctl.go: ``clientUrl`` + ``/client/current-price``.
DEFAULT_PRICE_URL = "https://mainnet.snass.fsp.sh/v0/proofs/client/current-price"


class MarketEnv(EnvModel):
    """The market's sources as the worker's environment names them."""

    source: MarketSourceKind = Field("none", alias="FLEET_MARKET_SOURCE")
    price_url: str = Field(DEFAULT_PRICE_URL, alias="FLEET_MARKET_PRICE_URL")
    fil_usd_url: str | None = Field(None, alias="FLEET_FIL_USD_URL")

    @classmethod
    def load(
        cls,
        env: Mapping[str, str] | None = None,
        *,
        demand: DemandEnv | None = None,
        env_file: Path | None = None,
    ) -> MarketEnv:
        """The variables, checked together with the demand source's
        (`demand`, default read from the same place); `SettingsError` (one
        line) when they do not fit. The URLs come back normalized."""
        read = cls.read(env, env_file=env_file)
        if read.source == "curio":
            demand = demand if demand is not None else DemandEnv.load(env, env_file=env_file)
            if demand.source != "curio":
                raise SettingsError(
                    "FLEET_MARKET_SOURCE=curio reads the Curio node demand is read from: "
                    "it needs FLEET_DEMAND_SOURCE=curio (and FLEET_DEMAND_URL)"
                )
        price = checked_url(read.price_url, "FLEET_MARKET_PRICE_URL")
        usd = checked_url(read.fil_usd_url, "FLEET_FIL_USD_URL") if read.fil_usd_url else None
        return read.model_copy(update={"price_url": price, "fil_usd_url": usd})


def _near(host: str) -> bool:
    """Loopback, `localhost` or a private address: plain http may stay near."""
    if host.lower() == "localhost":
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_loopback or ip.is_private


def checked_url(raw: str, name: str) -> str:
    """`raw` checked (module doc) and normalized; `SettingsError` naming `name`."""
    try:
        parts = urlsplit(raw.strip())
        credentials = parts.username is not None or parts.password is not None
    except ValueError:
        raise SettingsError(f"{name} is not a URL, not {raw!r}") from None
    if credentials:
        raise SettingsError(f"{name} must not carry credentials")
    try:
        url = demand_url(raw, name)
    except ValueError as exc:
        raise SettingsError(str(exc)) from None
    parts = urlsplit(url)
    if parts.scheme == "http" and not _near(parts.hostname or ""):
        raise SettingsError(
            f"{name} must be https unless it points at loopback or a private address"
        )
    return url
