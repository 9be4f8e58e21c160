"""Async client for the vast.ai REST API (httpx).

The origin comes from the ``base_url`` argument, else ``$VAST_API_URL``, else
``https://console.vast.ai``; like the vastai CLI's ``--url`` it is the origin
only, and every path (``/api/v0/...``, ``/api/v1/...``) is appended to it. The
key comes from ``api_key`` or ``$VAST_API_KEY`` and travels only in an
``Authorization: Bearer`` header.

Every request waits for its endpoint's pacing slot (`fleet_agent.vast.pacing`):
one `VastClient` per API key and process, shared by every activity of a
worker, keeps the service's documented limits. Only HTTP 429 is retried here
(after a backoff that outlasts the endpoint's penalty); everything else raises
a typed `VastError` at once (`fleet_agent.vast.transport`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Self

import httpx

from .instances import CREATE_TIMEOUT_S, LIST_PAGE_SIZE, InstanceCalls
from .listing import SharedListing
from .offers import OfferCalls, OfferPages, OfferType
from .pacing import DOCUMENTED, Pacer, Pacing
from .transport import VastTransport, normalize_base_url

__all__ = [
    "API_KEY_ENV",
    "API_URL_ENV",
    "DEFAULT_BASE_URL",
    "LIST_PAGE_SIZE",
    "OfferPages",
    "OfferType",
    "VastClient",
]

DEFAULT_BASE_URL = "https://console.vast.ai"
API_KEY_ENV = "VAST_API_KEY"
API_URL_ENV = "VAST_API_URL"


class VastClient(OfferCalls, InstanceCalls):
    """Async vast.ai client. Use as ``async with VastClient() as vast: ...``.

    Its calls are in `fleet_agent.vast.offers` (the market) and
    `fleet_agent.vast.instances` (the fleet); this class owns the transport
    and the shared listing they use.

    `timeout` bounds each call; `create_timeout` a create's wait for its
    answer (120 s, as the `vastai` CLI allows: `CREATE_TIMEOUT_S`).
    `pacing` is the set of limits to keep (default: the documented ones);
    `pacer` shares another client's slots (same key) instead. `list_ttl_s`
    is how long one walk of the account's instances serves every
    `list_instances(shared=True)` (`fleet_agent.vast.listing`): 0, the
    default, shares nothing; the worker sets `DEFAULT_LIST_TTL_S`.
    `list_stale_s`: how old a listing may be for a caller that takes one
    at once (`stale_ok`); 0, the default, serves none.
    """

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        timeout: float = 30,
        create_timeout: float = CREATE_TIMEOUT_S,
        max_429_retries: int = 4,
        backoff_base: float = 0.5,
        pacing: Pacing = DOCUMENTED,
        pacer: Pacer | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        list_ttl_s: float = 0.0,
        list_stale_s: float = 0.0,
    ) -> None:
        key = (api_key if api_key is not None else os.environ.get(API_KEY_ENV, "")).strip()
        if not key:
            raise ValueError(f"no vast.ai API key: pass api_key or set ${API_KEY_ENV}")
        if max_429_retries < 0 or backoff_base < 0 or timeout <= 0 or create_timeout <= 0:
            raise ValueError("timeouts must be > 0; retries and backoff must be >= 0")
        self.create_timeout = create_timeout
        self.base_url = normalize_base_url(
            base_url or os.environ.get(API_URL_ENV, "").strip() or DEFAULT_BASE_URL
        )
        self.pacer = pacer or Pacer(pacing)
        self._t = VastTransport(
            key,
            self.base_url,
            timeout=timeout,
            max_429_retries=max_429_retries,
            backoff_base=backoff_base,
            pacer=self.pacer,
            transport=transport,
        )
        self._catalogue: tuple[float, list[str]] | None = None
        # One walk of the account's instances serves every view of this
        # process's agents for a few seconds (fleet_agent/vast/listing.py).
        self.listing = SharedListing(
            lambda: self._walk_instances(None, LIST_PAGE_SIZE),
            ttl_s=list_ttl_s,
            stale_s=list_stale_s,
        )

    def __repr__(self) -> str:
        return f"VastClient(base_url={self.base_url!r}, api_key=<redacted>)"

    def derived_key(self, purpose: str) -> bytes:
        """A key for `purpose` derived from the API key (HMAC-SHA256), so a
        secret of the worker's own needs no setting of its own and the API
        key never leaves this client (fleet_agent/fleet/drain.py)."""
        return self._t.derived_key(purpose)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._t.aclose()

    async def raw_request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        json_body: Any = None,
    ) -> Any:
        """Any other endpoint, with the same auth, pacing, 429 handling and error mapping.

        Returns the decoded JSON body. A request other than GET/HEAD/OPTIONS is
        treated as mutating for `VastError.ambiguous`. `path` must be a path on
        the configured origin: an absolute URL would carry the key elsewhere.
        """
        if not path.startswith("/") or path.startswith("//") or "://" in path:
            raise ValueError(f"raw_request takes a path like /api/v0/..., got {path!r}")
        method = method.upper()
        try:
            return await self._t.request(method, path, params=params, json_body=json_body)
        finally:
            if method not in ("GET", "HEAD", "OPTIONS"):
                self.listing.invalidate()
