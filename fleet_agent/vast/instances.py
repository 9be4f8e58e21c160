"""The fleet half of the vast.ai client: renting, listing, showing and
destroying instances.

A mixin of `fleet_agent.vast.client.VastClient`, which owns the transport
(`self._t`) and the shared listing (`self.listing`, invalidated by every
write so that no view serves a fleet from before it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .errors import VastNotFound, VastProtocolError
from .listing import SharedListing
from .models import Instance
from .parse import parse_instance, parse_instances
from .transport import VastTransport

__all__ = ["CREATE_TIMEOUT_S", "LIST_PAGE_SIZE", "InstanceCalls"]

#: The v1 instance list serves at most 25 rows a page.
LIST_PAGE_SIZE = 25

# A fleet of 25 x 4000 instances is far beyond anything we rent; a longer walk
# means the pagination is broken, and looping on would hide that.
_MAX_PAGES = 4000


CREATE_TIMEOUT_S = 120.0
"""How long a create may take to answer, by default (`VastClient`'s
`create_timeout`): the `vastai` CLI's per-request timeout, "conservative
enough for slow operations like log retrieval and instance creation"
(vastai/api/client.py, `_DEFAULT_TIMEOUT_SECONDS`). The client's `timeout`
(30 s) stays for every other call."""


class InstanceCalls:
    """``/api/v0/asks/``, ``/api/v1/instances/`` and ``/api/v0/instances/{id}/``."""

    _t: VastTransport
    listing: SharedListing
    create_timeout: float

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
            data = await self._t.request(
                "PUT", path, json_body=body, http_timeout_s=self.create_timeout
            )
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
        client's last write, or the walk another caller has under way (an
        older one at once: `self.listing.view`).
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
            for inst in parse_instances(rows, "GET", path):
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
        inst = parse_instance(row, int(instance_id), "GET", path)
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
