"""Async client for the vast.ai REST API (httpx).

The origin comes from the ``base_url`` argument, else ``$VAST_API_URL``, else
``https://console.vast.ai``; like the vastai CLI's ``--url`` it is the origin
only, and every path (``/api/v0/...``, ``/api/v1/...``) is appended to it. The
key comes from ``api_key`` or ``$VAST_API_KEY`` and travels only in an
``Authorization: Bearer`` header: it is never logged, never put in a URL, an
exception or a repr.

Only HTTP 429 is retried, a bounded number of times with jittered exponential
backoff (the service sends no Retry-After). Everything else raises a typed
`VastError` at once; retrying other failures is the caller's decision, because
a failed create may have rented a machine anyway (see `VastError.ambiguous`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
from collections.abc import Generator, Mapping
from types import TracebackType
from typing import Any, Literal, Self, TypeVar
from urllib.parse import urlsplit

import httpx
from pydantic import ValidationError

from .errors import (
    VastAuthError,
    VastBadRequest,
    VastConnectionError,
    VastError,
    VastNotFound,
    VastProtocolError,
    VastRateLimited,
    VastServerError,
    VastTimeout,
)
from .models import Instance, Offer
from .query import Filters, OrderSpec, normalize_order, validate_filters

__all__ = [
    "API_KEY_ENV",
    "API_URL_ENV",
    "DEFAULT_BASE_URL",
    "LIST_PAGE_SIZE",
    "OfferType",
    "VastClient",
]

_log = logging.getLogger(__name__)
_M = TypeVar("_M", Offer, Instance)

DEFAULT_BASE_URL = "https://console.vast.ai"
API_KEY_ENV = "VAST_API_KEY"
API_URL_ENV = "VAST_API_URL"

#: The v1 instance list serves at most 25 rows a page.
LIST_PAGE_SIZE = 25

OfferType = Literal["on-demand", "bid", "reserved"]

# A fleet of 25 x 4000 instances is far beyond anything we rent; a longer walk
# means the pagination is broken, and looping on would hide that.
_MAX_PAGES = 4000
_MAX_BACKOFF_S = 30.0
_SNIPPET_CHARS = 200
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# The service's own words for "no such thing", whatever the HTTP status: an
# offer already taken, an instance already destroyed.
_NOT_FOUND_ERRORS = frozenset({"no_such_ask", "no_such_instance"})


class _BearerAuth(httpx.Auth):
    """Adds the bearer header per request, so the key never sits in client headers."""

    __slots__ = ("_key",)

    def __init__(self, key: str) -> None:
        self._key = key

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Bearer {self._key}"
        yield request

    def redact(self, text: str) -> str:
        """`text` with any copy of the key replaced, for text the service echoes back."""
        return text.replace(self._key, "<redacted>") if self._key else text

    def __repr__(self) -> str:
        return "_BearerAuth(<redacted>)"


def _normalize_base_url(raw: str) -> str:
    """Check the origin the way the CLI's ``--url`` is meant to be used."""
    url = raw.strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"vast.ai base URL must be http(s)://host[:port], got {raw!r}")
    if parts.query or parts.fragment:
        raise ValueError("vast.ai base URL must not carry a query or fragment")
    # The CLI appends /api/v0/... itself; an origin that already ends in /api/vN
    # would double it and turn every call into a 404, which could look like
    # "instance gone". Refuse it up front.
    tail = parts.path.rstrip("/").rsplit("/", 2)[-2:]
    if len(tail) == 2 and tail[0] == "api" and tail[1].startswith("v"):
        raise ValueError(f"vast.ai base URL is the origin only (no /api/vN), got {raw!r}")
    return url


class VastClient:
    """Async vast.ai client. Use as ``async with VastClient() as vast: ...``."""

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        timeout: float = 30,
        max_429_retries: int = 4,
        backoff_base: float = 0.5,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        key = (api_key if api_key is not None else os.environ.get(API_KEY_ENV, "")).strip()
        if not key:
            raise ValueError(f"no vast.ai API key: pass api_key or set ${API_KEY_ENV}")
        if max_429_retries < 0 or backoff_base < 0 or timeout <= 0:
            raise ValueError("timeout must be > 0; retries and backoff must be >= 0")
        self.base_url = _normalize_base_url(
            base_url or os.environ.get(API_URL_ENV, "").strip() or DEFAULT_BASE_URL
        )
        self._auth = _BearerAuth(key)
        self._max_429_retries = max_429_retries
        self._backoff_base = backoff_base
        self._jitter = random.Random()
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            auth=self._auth,
            timeout=timeout,
            transport=transport,
            # Redirects are not followed: a 3xx would re-send a create, or carry
            # the request to another origin. It surfaces as VastProtocolError.
            follow_redirects=False,
            headers={"Accept": "application/json", "User-Agent": "fleet-agent"},
        )

    def __repr__(self) -> str:
        return f"VastClient(base_url={self.base_url!r}, api_key=<redacted>)"

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
        await self._http.aclose()

    # ------------------------------------------------------------------ API

    async def search_offers(
        self,
        filters: Filters,
        *,
        order: OrderSpec = "score-",
        limit: int | None = None,
        type: OfferType = "on-demand",
        allocated_storage: float | None = None,
    ) -> list[Offer]:
        """Search the market: ``POST /api/v0/bundles/``.

        `filters` is ``{field: {op: value}}`` (ops: eq neq gt gte lt lte in notin)
        in the service's units: ``gpu_ram``/``cpu_ram`` in MB, ``gpu_name`` with
        spaces ("RTX 4090"). Unlike the CLI, no default filter is added: pass
        ``rentable``/``verified`` yourself. `allocated_storage` (GB) is the disk
        the price in ``dph_total`` includes.
        """
        body: dict[str, Any] = dict(validate_filters(filters))
        body["order"] = normalize_order(order)
        body["type"] = type
        if limit is not None:
            body["limit"] = int(limit)
        if allocated_storage is not None:
            body["allocated_storage"] = float(allocated_storage)
        path = "/api/v0/bundles/"
        data = await self._request("POST", path, json_body=body)
        rows = data.get("offers") if isinstance(data, dict) else None
        if not isinstance(rows, list):
            raise VastProtocolError(
                "search answer has no 'offers' list", status=200, method="POST", path=path
            )
        return [self._parse(Offer, row, "POST", path) for row in rows]

    async def create_instance(
        self,
        offer_id: int,
        *,
        image: str,
        disk: float,
        label: str,
        onstart: str | None = None,
        env: Mapping[str, str] | None = None,
        runtype: str = "ssh",
        price: float | None = None,
    ) -> int:
        """Rent an offer: ``PUT /api/v0/asks/{offer_id}/``; returns the new instance id.

        Give every instance a unique `label`: after an ambiguous failure
        (`VastError.ambiguous`) the only way to learn whether the machine was
        rented is ``list_instances(label=...)``. `price` makes it an
        interruptible (bid) instance at that $/hour.
        """
        path = f"/api/v0/asks/{int(offer_id)}/"
        body: dict[str, Any] = {
            "client_id": "me",
            "image": image,
            "disk": float(disk),
            "label": label,
            "onstart": onstart,
            "env": dict(env or {}),
            "runtype": runtype,
        }
        if price is not None:
            body["price"] = float(price)
        data = await self._request("PUT", path, json_body=body)
        new_id = data.get("new_contract") if isinstance(data, dict) else None
        if not isinstance(new_id, int) or isinstance(new_id, bool):
            # The service said yes but not what it rented: the machine may exist.
            raise VastProtocolError(
                "create answer has no integer 'new_contract'",
                status=200,
                method="PUT",
                path=path,
                ambiguous=True,
            )
        return new_id

    async def list_instances(
        self,
        *,
        label: str | None = None,
        label_prefix: str | None = None,
        page_size: int = LIST_PAGE_SIZE,
    ) -> list[Instance]:
        """Every instance of the account: ``GET /api/v1/instances/``, all pages.

        `label` filters on the service (``select_filters``) and again here.
        `label_prefix` filters here only, because the API documents no prefix
        operator. A body with ``success: false`` or without an ``instances``
        list raises `VastProtocolError`: it is never taken for an empty fleet.
        """
        path = "/api/v1/instances/"
        select: dict[str, Any] = {}
        if label is not None:
            select["label"] = {"eq": label}
        params: dict[str, str] = {
            "select_filters": json.dumps(select),
            "order_by": json.dumps([{"col": "id", "dir": "asc"}]),
            "limit": str(max(1, min(int(page_size), LIST_PAGE_SIZE))),
        }
        found: dict[int, Instance] = {}
        seen_tokens: set[str] = set()
        for _page in range(_MAX_PAGES):
            data = await self._request("GET", path, params=params)
            rows = data.get("instances") if isinstance(data, dict) else None
            if not isinstance(rows, list):
                raise VastProtocolError(
                    "instance list has no 'instances' list", status=200, method="GET", path=path
                )
            for row in rows:
                inst = self._parse(Instance, row, "GET", path)
                found[inst.id] = inst
            token = data.get("next_token")
            if token in (None, ""):
                break
            if not isinstance(token, str) or token in seen_tokens:
                raise VastProtocolError(
                    "instance list pagination repeats or is malformed",
                    status=200,
                    method="GET",
                    path=path,
                )
            seen_tokens.add(token)
            params["after_token"] = token
        else:
            raise VastProtocolError(
                f"instance list did not end within {_MAX_PAGES} pages", method="GET", path=path
            )
        result = list(found.values())
        if label is not None:
            result = [i for i in result if i.label == label]
        if label_prefix is not None:
            result = [i for i in result if i.label is not None and i.label.startswith(label_prefix)]
        return result

    async def show_instance(self, instance_id: int) -> Instance | None:
        """One instance: ``GET /api/v0/instances/{id}/``; None if it no longer exists."""
        path = f"/api/v0/instances/{int(instance_id)}/"
        try:
            data = await self._request("GET", path, params={"owner": "me"})
        except VastNotFound as exc:
            # The service saying "no such instance" (a JSON 404 or a
            # ``no_such_instance`` refusal) means it is gone; a bare 404 may
            # be a proxy and stays an error.
            if exc.error or exc.msg:
                return None
            raise
        if not isinstance(data, dict) or "instances" not in data:
            raise VastProtocolError(
                "show answer has no 'instances' key", status=200, method="GET", path=path
            )
        row = data["instances"]
        # Older deployments wrapped the row in a list; accept zero or one.
        if isinstance(row, list):
            if len(row) > 1:
                raise VastProtocolError(
                    "show answer lists several instances", status=200, method="GET", path=path
                )
            row = row[0] if row else None
        if row is None:
            return None
        inst = self._parse(Instance, row, "GET", path)
        if inst.id != int(instance_id):
            raise VastProtocolError(
                f"asked for instance {instance_id}, got {inst.id}",
                status=200,
                method="GET",
                path=path,
            )
        return inst

    async def destroy_instance(self, instance_id: int, *, missing_ok: bool = True) -> None:
        """Destroy an instance: ``DELETE /api/v0/instances/{id}/``.

        With `missing_ok` (the default) an instance the service reports as not
        found counts as destroyed, so a retried destroy is harmless: a JSON 404,
        or a ``success: false`` answer with ``no_such_instance``. A bare 404
        (no JSON error) may come from a proxy and is raised.
        """
        path = f"/api/v0/instances/{int(instance_id)}/"
        try:
            await self._request("DELETE", path, json_body={})
        except VastNotFound as exc:
            # Only a JSON 404 is the service speaking; a bare one may be a proxy.
            if not (missing_ok and (exc.error or exc.msg)):
                raise

    async def raw_request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        json_body: Any = None,
    ) -> Any:
        """Any other endpoint, with the same auth, 429 handling and error mapping.

        Returns the decoded JSON body. A request other than GET/HEAD/OPTIONS is
        treated as mutating for `VastError.ambiguous`. `path` must be a path on
        the configured origin: an absolute URL would carry the key elsewhere.
        """
        if not path.startswith("/") or path.startswith("//") or "://" in path:
            raise ValueError(f"raw_request takes a path like /api/v0/..., got {path!r}")
        return await self._request(method.upper(), path, params=params, json_body=json_body)

    # ------------------------------------------------------------ plumbing

    async def _request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        json_body: Any = None,
    ) -> Any:
        mutating = method not in _SAFE_METHODS
        attempt = 0
        while True:
            try:
                resp = await self._http.request(
                    method, path, params=dict(params) if params else None, json=json_body
                )
            except (httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
                # Nothing was sent, so nothing can have happened.
                raise VastTimeout(
                    f"no connection in time ({type(exc).__name__})", method=method, path=path
                ) from exc
            except httpx.TimeoutException as exc:
                raise VastTimeout(
                    f"no answer in time ({type(exc).__name__})",
                    method=method,
                    path=path,
                    ambiguous=mutating,
                ) from exc
            except httpx.ConnectError as exc:
                raise VastConnectionError("could not connect", method=method, path=path) from exc
            except httpx.TransportError as exc:
                raise VastConnectionError(
                    f"connection failed ({type(exc).__name__})",
                    method=method,
                    path=path,
                    ambiguous=mutating,
                ) from exc
            _log.debug("vast %s %s -> %d (attempt %d)", method, path, resp.status_code, attempt)
            if resp.status_code != 429:
                return self._decode(resp, method, path, mutating)
            if attempt >= self._max_429_retries:
                raise VastRateLimited(
                    self._snippet(resp) or "rate limited",
                    status=429,
                    msg=self._snippet(resp) or None,
                    method=method,
                    path=path,
                )
            # A 429 is refused before anything happens, so even a create is safe
            # to send again.
            delay = min(_MAX_BACKOFF_S, self._backoff_base * 2**attempt)
            delay *= self._jitter.uniform(0.5, 1.0)
            attempt += 1
            _log.info("vast %s %s rate limited; retry %d in %.2fs", method, path, attempt, delay)
            await asyncio.sleep(delay)

    def _decode(self, resp: httpx.Response, method: str, path: str, mutating: bool) -> Any:
        status = resp.status_code
        body: Any = None
        readable = True
        try:
            body = resp.json()
        except ValueError:
            readable = False
        error, msg = self._error_fields(body)
        text = msg or error or self._snippet(resp) or resp.reason_phrase or "no detail"
        common: dict[str, Any] = {
            "status": status,
            "error": error,
            "msg": msg,
            "method": method,
            "path": path,
        }
        if status >= 300:
            kind = self._http_error(status, error)
            raise kind(text, **common, ambiguous=mutating and status >= 500)
        if not readable:
            raise VastProtocolError("answer is not JSON", **common, ambiguous=mutating)
        if isinstance(body, dict) and body.get("success") is False:
            raise self._refusal(error)(text, **common)
        return body

    @staticmethod
    def _http_error(status: int, error: str | None) -> type[VastError]:
        if error == "auth_error" or status in (401, 403):
            return VastAuthError
        if error == "deprecated_endpoint" or status == 410 or status < 400:
            return VastProtocolError
        if status == 404 or error in _NOT_FOUND_ERRORS:
            return VastNotFound
        if status >= 500:
            return VastServerError
        return VastBadRequest

    @staticmethod
    def _refusal(error: str | None) -> type[VastError]:
        if error == "auth_error":
            return VastAuthError
        if error in _NOT_FOUND_ERRORS:
            return VastNotFound
        return VastProtocolError

    def _error_fields(self, body: Any) -> tuple[str | None, str | None]:
        if not isinstance(body, dict):
            return None, None
        error = body.get("error")
        msg = body.get("msg", body.get("message"))
        return (
            self._auth.redact(str(error)) if error not in (None, "", False, True) else None,
            self._auth.redact(str(msg)) if msg not in (None, "") else None,
        )

    def _snippet(self, resp: httpx.Response) -> str:
        try:
            text = resp.text
        except (UnicodeDecodeError, httpx.ResponseNotRead):
            return ""
        return self._auth.redact(" ".join(text.split())[:_SNIPPET_CHARS])

    @staticmethod
    def _parse(model: type[_M], row: Any, method: str, path: str) -> _M:
        try:
            return model.model_validate(row)
        except ValidationError as exc:
            raise VastProtocolError(
                f"unexpected {model.__name__} shape: {exc.error_count()} error(s), "
                f"first: {exc.errors()[0]['loc']} {exc.errors()[0]['msg']}",
                status=200,
                method=method,
                path=path,
            ) from None
