"""Connect to Temporal the way the SDK's environment configuration says.

TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TLS settings and named
profiles (TEMPORAL_PROFILE, the TOML config file) all work as they do for the
temporal CLI; explicit arguments win. With none of them, the local stack:
127.0.0.1 on TEMPORAL_PORT (the port `make run` was given), else 7233.
"""

from __future__ import annotations

from typing import Any

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.envconfig import ClientConfig
from temporalio.runtime import Runtime

from fleet_agent.local_stack import DEFAULT_TEMPORAL_PORT, TEMPORAL_PORT_ENV, env_port

__all__ = ["DEFAULT_ADDRESS", "connect", "default_address"]

DEFAULT_ADDRESS = f"127.0.0.1:{DEFAULT_TEMPORAL_PORT}"


def default_address() -> str:
    """The local stack's frontend: TEMPORAL_PORT, else the default port.

    Raises `ValueError` naming TEMPORAL_PORT when it is not a port number.
    """
    port = env_port(TEMPORAL_PORT_ENV)
    return DEFAULT_ADDRESS if port is None else f"127.0.0.1:{port}"


async def connect(
    address: str | None = None,
    namespace: str | None = None,
    profile: str | None = None,
    runtime: Runtime | None = None,
) -> Client:
    """A client as the environment configures it; `runtime` (default: the
    process's default) lets a probe leave that default to the metrics."""
    config: dict[str, Any] = dict(ClientConfig.load_client_connect_config(profile=profile))
    if runtime is not None:
        config["runtime"] = runtime
    config.setdefault("target_host", default_address())
    if address:
        config["target_host"] = address
    if namespace:
        config["namespace"] = namespace
    return await Client.connect(data_converter=pydantic_data_converter, **config)
