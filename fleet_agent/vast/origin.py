"""The vast.ai origin the client talks to (``VAST_API_URL``), checked before use.

Every request carries the API key (an ``Authorization: Bearer`` header), so
the origin must be https: over plain http anyone on the path reads the key
and can rent on the account. Plain http is allowed only to this machine
(127.0.0.0/8, ::1, ``localhost``), where the simulator and test stubs listen.
Pure (no httpx): the settings check it when a worker or CLI starts.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

__all__ = ["is_loopback_host", "normalize_base_url"]


def is_loopback_host(host: str) -> bool:
    """`localhost`, or a loopback address (127.0.0.0/8, ::1). A name is not
    resolved: only `localhost` itself counts."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def normalize_base_url(raw: str, name: str = "vast.ai base URL") -> str:
    """The origin `raw` as the client uses it (stripped, no trailing slash),
    checked the way the CLI's ``--url`` is meant to be used; ValueError that
    starts with `name` (a variable's, for the settings) when it is not one."""
    url = raw.strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{name} must be http(s)://host[:port], got {raw!r}")
    if parts.query or parts.fragment:
        raise ValueError(f"{name} must not carry a query or fragment, got {raw!r}")
    # The CLI appends /api/v0/... itself; an origin that already ends in /api/vN
    # would double it and turn every call into a 404, which could look like
    # "instance gone". Refuse it up front.
    tail = parts.path.rstrip("/").rsplit("/", 2)[-2:]
    if len(tail) == 2 and tail[0] == "api" and tail[1].startswith("v"):
        raise ValueError(f"{name} is the origin only (no /api/vN), got {raw!r}")
    if parts.scheme == "http" and not is_loopback_host(parts.hostname):
        raise ValueError(
            f"{name} must be https unless it points at this machine (127.0.0.0/8, ::1, "
            f"localhost), not {raw!r}: plain http would send the API key in the clear"
        )
    return url
