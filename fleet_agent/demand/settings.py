"""`FLEET_DEMAND_SOURCE`, `FLEET_DEMAND_URL` and `FLEET_DEMAND_TOKEN`: where
the worker reads demand.

- `FLEET_DEMAND_SOURCE`: `none` (the default: no reading), `curio` (a Curio
  node's web GUI, e.g. ``http://10.0.0.5:4701``), `http` (a URL answering
  the generic JSON shape; the simulator's ``/demand``) or `router` (the
  agent's cuzk router queue, from the store: issue 52);
- `FLEET_DEMAND_URL`: the GUI's origin (`curio`) or the endpoint (`http`),
  checked at start (fleet_agent/demand/sources.py, `demand_url`);
- `FLEET_DEMAND_METRICS_URL`: `curio` only, optional: the origin of the
  node's RPC server, which serves ``/debug/metrics`` (default: the GUI's
  host on port 12300, `curio run --listen`'s default);
- `FLEET_DEMAND_TOKEN`: an optional bearer token for the `http` source. A
  secret: it stays in the worker's environment, never in a workflow, the
  store or a log line.

Read with the worker's other settings (fleet_agent/config/settings.py): a
bad value stops the worker at start with one line naming the variable.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr

from fleet_agent.env.env_settings import EnvModel, SettingsError

from .sources import curio_metrics_origin, demand_url

__all__ = ["DemandEnv", "DemandSourceKind"]

DemandSourceKind = Literal["none", "curio", "http", "router"]


class DemandEnv(EnvModel):
    """The demand source as the worker's environment names it."""

    source: DemandSourceKind = Field("none", alias="FLEET_DEMAND_SOURCE")
    url: str | None = Field(None, alias="FLEET_DEMAND_URL")
    token: SecretStr | None = Field(None, alias="FLEET_DEMAND_TOKEN")
    metrics_url: str | None = Field(None, alias="FLEET_DEMAND_METRICS_URL")

    @classmethod
    def load(
        cls, env: Mapping[str, str] | None = None, *, env_file: Path | None = None
    ) -> DemandEnv:
        """The variables, checked together; `SettingsError` (one line) when
        they do not fit. The URL comes back normalized."""
        read = cls.read(env, env_file=env_file)
        if read.source == "router" and (read.url or read.token or read.metrics_url):
            raise SettingsError(
                "FLEET_DEMAND_SOURCE=router reads the router's queue from the store: "
                "no FLEET_DEMAND_URL, TOKEN or METRICS_URL"
            )
        if read.source in ("none", "router"):
            return read
        if read.url is None:
            raise SettingsError(
                f"FLEET_DEMAND_URL must be set when FLEET_DEMAND_SOURCE={read.source}"
            )
        if read.token is not None and read.source != "http":
            raise SettingsError("FLEET_DEMAND_TOKEN is for FLEET_DEMAND_SOURCE=http only")
        if read.metrics_url is not None and read.source != "curio":
            raise SettingsError("FLEET_DEMAND_METRICS_URL is for FLEET_DEMAND_SOURCE=curio only")
        url = _checked(read.url, "FLEET_DEMAND_URL", read.token is not None)
        if read.source == "http":
            return read.model_copy(update={"url": url})
        _origin_only(url, "FLEET_DEMAND_URL", "the Curio GUI's origin only (http://host:4701)")
        metrics = _checked(
            read.metrics_url or curio_metrics_origin(url), "FLEET_DEMAND_METRICS_URL", False
        )
        _origin_only(metrics, "FLEET_DEMAND_METRICS_URL", "the Curio node's origin only")
        return read.model_copy(update={"url": url, "metrics_url": metrics})


def _checked(raw: str, name: str, token: bool) -> str:
    try:
        return demand_url(raw, name, token=token)
    except ValueError as exc:
        raise SettingsError(str(exc)) from None


def _origin_only(url: str, name: str, what: str) -> None:
    parts = urlsplit(url)
    if parts.path or parts.query:
        raise SettingsError(f"{name} is {what}, not {url!r}")
