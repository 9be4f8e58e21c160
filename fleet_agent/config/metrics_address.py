"""Where the worker serves Prometheus metrics: METRICS_PORT, read once at start.

Pure (no Temporal): `Settings.from_env` calls it, so a bad value is an error
that names the variable before anything starts.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["DEFAULT_METRICS_HOST", "METRICS_ENV", "METRICS_ENV_ALIAS", "metrics_address"]

METRICS_ENV = "METRICS_PORT"
# Also read, for operators who keep every setting of ours under FLEET_.
METRICS_ENV_ALIAS = "FLEET_METRICS_PORT"
# Loopback unless told otherwise: a scraper on another host is a deliberate
# choice (`METRICS_PORT=0.0.0.0:9464`).
DEFAULT_METRICS_HOST = "127.0.0.1"


def metrics_address(env: Mapping[str, str]) -> str | None:
    """`HOST:PORT` to serve /metrics on, or None when metrics are off.

    METRICS_PORT (else FLEET_METRICS_PORT) is `PORT` (bound on 127.0.0.1),
    `HOST:PORT`, or empty/`off` for none. Raises `ValueError` naming the
    variable for anything else.
    """
    name = METRICS_ENV if env.get(METRICS_ENV, "").strip() else METRICS_ENV_ALIAS
    raw = env.get(name, "").strip()
    if raw.lower() in ("", "off", "none"):
        return None
    host, sep, port_text = raw.rpartition(":")
    if not sep:
        host = DEFAULT_METRICS_HOST
    host = host.strip("[]")
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535 or (sep and not host):
        raise ValueError(f"{name} must be a port (1-65535), HOST:PORT, or off, not {env[name]!r}")
    # An IPv6 host keeps its brackets: the SDK parses a socket address.
    return f"[{host}]:{int(port_text)}" if ":" in host else f"{host}:{int(port_text)}"
