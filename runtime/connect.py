"""Connect to Temporal the way the SDK's environment configuration says.

TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TLS settings and named
profiles (TEMPORAL_PROFILE, the TOML config file) all work as they do for the
temporal CLI; explicit arguments win. With none of them, the local stack:
127.0.0.1 on TEMPORAL_PORT (the port `make run` was given), else 7233.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.envconfig import ClientConfig
from temporalio.runtime import Runtime

from fleet_agent.env.local_stack import DEFAULT_TEMPORAL_PORT, TEMPORAL_PORT_ENV, env_port

__all__ = [
    "DEFAULT_ADDRESS",
    "connect",
    "connect_failure",
    "default_address",
    "is_connect_failure",
    "target_address",
    "unreachable",
]

DEFAULT_ADDRESS = f"127.0.0.1:{DEFAULT_TEMPORAL_PORT}"
_OS_MESSAGE = re.compile(r'message: "([^"]+)"')


def default_address() -> str:
    """The local stack's frontend: TEMPORAL_PORT, else the default port.

    Raises `ValueError` naming TEMPORAL_PORT when it is not a port number.
    """
    port = env_port(TEMPORAL_PORT_ENV)
    return DEFAULT_ADDRESS if port is None else f"127.0.0.1:{port}"


def target_address(config: Mapping[str, Any], address: str | None = None) -> str:
    """The address `connect()` uses with `config` (the environment's client
    configuration, loaded): `address`, else the configuration's (the
    TEMPORAL_ADDRESS or a profile's), else the local stack's. Raises
    `ValueError` naming TEMPORAL_PORT when it is not a port number."""
    return address or str(config.get("target_host") or default_address())


def is_connect_failure(exc: BaseException) -> bool:
    """Whether `exc` is the SDK's failure to reach the server at all."""
    return isinstance(exc, RuntimeError) and str(exc).startswith("Failed client connect")


def connect_failure(exc: RuntimeError) -> str:
    """The readable part of a failed connect: the core SDK reports a Rust error
    chain, in which the OS message ("Connection refused") is the useful bit."""
    found = _OS_MESSAGE.search(str(exc))
    return found.group(1) if found else str(exc).removeprefix("Failed client connect: ")


def unreachable(where: str, exc: RuntimeError) -> str:
    """The one line the CLI and the worker give for a failed connect to `where`."""
    return f"cannot reach Temporal at {where}: {connect_failure(exc)}"


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
    config["target_host"] = target_address(config, address)
    if namespace:
        config["namespace"] = namespace
    return await Client.connect(data_converter=pydantic_data_converter, **config)
