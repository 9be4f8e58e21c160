"""Connect to Temporal the way the SDK's environment configuration says.

TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TLS settings and named
profiles (TEMPORAL_PROFILE, the TOML config file) all work as they do for the
temporal CLI; explicit arguments win.
"""

from __future__ import annotations

from typing import Any

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.envconfig import ClientConfig

__all__ = ["connect"]

DEFAULT_ADDRESS = "127.0.0.1:7233"


async def connect(
    address: str | None = None, namespace: str | None = None, profile: str | None = None
) -> Client:
    config: dict[str, Any] = dict(ClientConfig.load_client_connect_config(profile=profile))
    config.setdefault("target_host", DEFAULT_ADDRESS)
    if address:
        config["target_host"] = address
    if namespace:
        config["namespace"] = namespace
    return await Client.connect(data_converter=pydantic_data_converter, **config)
