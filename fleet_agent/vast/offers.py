"""The market half of the vast.ai client: searching offers and the GPU catalogue.

A mixin of `fleet_agent.vast.client.VastClient`, which owns the transport
(`self._t`: auth, pacing, 429 backoff, error mapping).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Literal

from .errors import VastError, VastProtocolError
from .models import Offer
from .parse import parse_rows
from .query import Filters, OrderSpec, normalize_order, validate_filters
from .transport import VastTransport

__all__ = ["OfferCalls", "OfferPages", "OfferType"]

OfferType = Literal["on-demand", "bid", "reserved"]

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


class OfferCalls:
    """``POST /api/v0/bundles/`` and ``GET /api/v0/gpu_names/unique/``."""

    _t: VastTransport
    _catalogue: tuple[float, list[str]] | None = None

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
        return parse_rows(Offer, rows, "POST", path)

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
