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

import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, Self, TypeVar

import httpx
from pydantic import ValidationError

from .errors import VastError, VastNotFound, VastProtocolError
from .listing import SharedListing
from .models import Instance, Offer
from .pacing import DOCUMENTED, Pacer, Pacing
from .query import Filters, OrderSpec, normalize_order, validate_filters
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
# The GPU catalogue changes when vast.ai onboards a model: look again hourly.
_CATALOGUE_TTL_S = 3600.0


@dataclass(frozen=True, slots=True)
class OfferPages:
    """Offers from `VastClient.search_offers_paged`, cheapest $/h first.

    `complete`: the last page was not full, so every matching offer is here.
    """

    offers: list[Offer]
    complete: bool
    pages: int


class VastClient:
    """Async vast.ai client. Use as ``async with VastClient() as vast: ...``.

    `pacing` is the set of limits to keep (default: the documented ones);
    `pacer` shares another client's slots (same key) instead. `list_ttl_s`
    is how long one walk of the account's instances serves every
    `list_instances(shared=True)` (`fleet_agent.vast.listing`): 0, the
    default, shares nothing; the worker sets `DEFAULT_LIST_TTL_S`.
    """

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        timeout: float = 30,
        max_429_retries: int = 4,
        backoff_base: float = 0.5,
        pacing: Pacing = DOCUMENTED,
        pacer: Pacer | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        list_ttl_s: float = 0.0,
    ) -> None:
        key = (api_key if api_key is not None else os.environ.get(API_KEY_ENV, "")).strip()
        if not key:
            raise ValueError(f"no vast.ai API key: pass api_key or set ${API_KEY_ENV}")
        if max_429_retries < 0 or backoff_base < 0 or timeout <= 0:
            raise ValueError("timeout must be > 0; retries and backoff must be >= 0")
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
            lambda: self._walk_instances(None, LIST_PAGE_SIZE), ttl_s=list_ttl_s
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
        await self._t.aclose()

    # ------------------------------------------------------------- offers

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
        the price in ``dph_total`` includes (the service's default is small).
        """
        body: dict[str, Any] = dict(validate_filters(filters))
        body["order"] = normalize_order(order)
        body["type"] = type
        if limit is not None:
            body["limit"] = int(limit)
        if allocated_storage is not None:
            body["allocated_storage"] = float(allocated_storage)
        path = "/api/v0/bundles/"
        data = await self._t.request("POST", path, json_body=body)
        rows = data.get("offers") if isinstance(data, dict) else None
        if not isinstance(rows, list):
            raise VastProtocolError(
                "search answer has no 'offers' list", status=200, method="POST", path=path
            )
        return [_parse(Offer, row, "POST", path) for row in rows]

    async def search_offers_paged(
        self,
        filters: Filters,
        *,
        page_size: int = 500,
        max_pages: int = 3,
        type: OfferType = "on-demand",
        allocated_storage: float | None = None,
    ) -> OfferPages:
        """Every offer matching `filters`, cheapest ``dph_total`` first, page by page.

        The search has no cursor, so a page starts at the last page's highest
        price (``dph_total >= p``, within any price bound in `filters`), and
        offers seen already are dropped. It stops at a page that is not full
        (`OfferPages.complete`) or after `max_pages` (each page costs one of
        the ten searches a minute).
        """
        if page_size < 1 or max_pages < 1:
            raise ValueError("page_size and max_pages must be >= 1")
        base = validate_filters(filters)
        price = dict(base.get("dph_total", {}))
        seen: dict[int, Offer] = {}
        for page in range(1, max_pages + 1):
            page_filters = {**base, "dph_total": price} if price else base
            rows = await self.search_offers(
                page_filters,
                order="dph_total",
                limit=page_size,
                type=type,
                allocated_storage=allocated_storage,
            )
            new = [o for o in rows if o.id not in seen]
            seen.update((o.id, o) for o in new)
            if len(rows) < page_size:
                return OfferPages(list(seen.values()), complete=True, pages=page)
            if not new:
                # A full page of one price, all seen: no way past it.
                break
            floor = max(o.dph_total for o in rows)
            price = {**price, "gte": max(floor, float(price.get("gte", floor)))}
            price.pop("gt", None)
        return OfferPages(list(seen.values()), complete=False, pages=page)

    async def gpu_names(self) -> list[str]:
        """The GPU models the market lists: ``GET /api/v0/gpu_names/unique/``.

        Public (no key sent), as the CLI reads it at start-up. Cached for an
        hour; when a refresh fails, the last good list is used.
        """
        now = time.monotonic()
        if self._catalogue is not None and now - self._catalogue[0] < _CATALOGUE_TTL_S:
            return list(self._catalogue[1])
        path = "/api/v0/gpu_names/unique/"
        try:
            data = await self._t.request("GET", path, auth=False)
            names = data.get("gpu_names") if isinstance(data, dict) else None
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                raise VastProtocolError(
                    "GPU catalogue has no 'gpu_names' list", status=200, method="GET", path=path
                )
        except VastError:
            if self._catalogue is None:
                raise
            return list(self._catalogue[1])
        self._catalogue = (now, list(names))
        return list(names)

    # ---------------------------------------------------------- instances

    async def create_instance(
        self,
        offer_id: int,
        *,
        image: str,
        disk: float,
        label: str,
        runtype: str | None = None,
        onstart: str | None = None,
        args: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        price: float | None = None,
    ) -> int:
        """Rent an offer: ``PUT /api/v0/asks/{offer_id}/``; returns the new instance id.

        Give every instance a unique `label`: after an ambiguous failure
        (`VastError.ambiguous`) the only way to learn whether the machine was
        rented is ``list_instances(label=...)``. `runtype` None leaves it to
        the service (``ssh``, which replaces the image's ENTRYPOINT, unless
        `args` are given); ``"args"`` keeps the image's ENTRYPOINT and `args`
        replace its CMD. `env` holds variables and port mappings
        (``{"-p 9100:9100": "1"}``). `price` makes it an interruptible (bid)
        instance at that $/hour. An offer that is gone raises `VastOfferGone`.
        """
        path = f"/api/v0/asks/{int(offer_id)}/"
        body: dict[str, Any] = {
            "client_id": "me",
            "image": image,
            "disk": float(disk),
            "label": label,
            "onstart": onstart,
            "env": dict(env or {}),
        }
        if runtype is not None:
            body["runtype"] = runtype
        if args is not None:
            body["args"] = [str(a) for a in args]
        if price is not None:
            body["price"] = float(price)
        try:
            data = await self._t.request("PUT", path, json_body=body)
        finally:
            # Even a failed create may have rented (an ambiguous failure).
            self.listing.invalidate()
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
        include_gone: bool = False,
        shared: bool = False,
    ) -> list[Instance]:
        """Every instance of the account: ``GET /api/v1/instances/``, all pages.

        `label` filters on the service (``select_filters``) and again here.
        `label_prefix` filters here only, because the API documents no prefix
        operator. Rows of destroyed machines (`Instance.is_gone`) are left out
        unless `include_gone`. A body with ``success: false`` or without an
        ``instances`` list raises `VastProtocolError`: it is never taken for an
        empty fleet. `shared` (without `label`) serves the listing from
        `self.listing`: a walk at most `list_ttl_s` old, begun after this
        client's last write, or the walk another caller has under way.
        """
        if shared and label is None:
            rows = await self.listing.get()
        else:
            rows = await self._walk_instances(label, page_size)
        result = [i for i in rows if include_gone or not i.is_gone]
        if label is not None:
            result = [i for i in result if i.label == label]
        if label_prefix is not None:
            result = [i for i in result if i.label is not None and i.label.startswith(label_prefix)]
        return result

    async def _walk_instances(self, label: str | None, page_size: int) -> list[Instance]:
        """Every page of the instance list (`label` as a service-side filter)."""
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
            data = await self._t.request("GET", path, params=params)
            rows = data.get("instances") if isinstance(data, dict) else None
            if not isinstance(rows, list):
                raise VastProtocolError(
                    "instance list has no 'instances' list", status=200, method="GET", path=path
                )
            for row in rows:
                inst = _parse(Instance, row, "GET", path)
                found[inst.id] = inst
            token = data.get("next_token")
            if token in (None, ""):
                return list(found.values())
            if not isinstance(token, str) or token in seen_tokens:
                raise VastProtocolError(
                    "instance list pagination repeats or is malformed",
                    status=200,
                    method="GET",
                    path=path,
                )
            seen_tokens.add(token)
            params["after_token"] = token
        raise VastProtocolError(
            f"instance list did not end within {_MAX_PAGES} pages", method="GET", path=path
        )

    async def show_instance(self, instance_id: int) -> Instance | None:
        """One instance: ``GET /api/v0/instances/{id}/``; None if it no longer exists.

        A row the service still shows for a destroyed machine is returned as
        is: check `Instance.is_gone`.
        """
        path = f"/api/v0/instances/{int(instance_id)}/"
        try:
            data = await self._t.request("GET", path, params={"owner": "me"})
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
        inst = _parse(Instance, row, "GET", path)
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
        found counts as destroyed, so a retried destroy is harmless: a JSON 404
        (``no_such_instance``, ``not_found``, or only a ``msg``) or a
        ``success: false`` answer saying so. A bare 404 (no JSON) may come from
        a proxy and is raised; so is a rejected key, whatever its status.
        """
        path = f"/api/v0/instances/{int(instance_id)}/"
        try:
            await self._t.request("DELETE", path, json_body={})
        except VastNotFound as exc:
            # Only a JSON 404 is the service speaking; a bare one may be a proxy.
            if not (missing_ok and (exc.error or exc.msg)):
                raise
        finally:
            self.listing.invalidate()

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
