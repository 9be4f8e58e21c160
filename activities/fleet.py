"""Fleet activities: the model's fleet tools and the monitor's poll, on vast.ai.

Every tool returns a compact, model-friendly ToolResult; a refusal (guardrail,
bad input, offer gone) is an error result for the model, never an exception.
Transient vast.ai failures raise retryable ApplicationErrors so Temporal
retries them. Creates are idempotent by label: a retried or crashed create
finds the machine it rented instead of renting a second one.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from fleet_agent.capacity import proofs_per_hour
from fleet_agent.fleet.guardrails import gpu_allowed, offer_refusal, rent_refusal
from fleet_agent.fleet.labels import create_label, is_ours, label_prefix
from fleet_agent.fleet.snapshot import FleetSnapshot, summarize
from fleet_agent.models import AgentConfig, FleetToolRequest, PollRequest, ToolResult
from fleet_agent.settings import ProverSpec
from fleet_agent.tools import (
    CreateInstanceInput,
    DestroyInstanceInput,
    SearchOffersInput,
    parse_tool_input,
)
from fleet_agent.vast import VastClient
from fleet_agent.vast.errors import VastError, VastNotFound
from fleet_agent.vast.models import Instance, Offer

__all__ = ["FleetActivities", "PollRequest", "ProverSpec"]

# After an ambiguous create (timeout, 5xx, unreadable answer), look for the
# label this many times before concluding nothing was rented.
_ADOPT_ATTEMPTS = 3
_ADOPT_DELAY_SECONDS = 1.0
_SEARCH_POOL = 200


def _result(
    req: FleetToolRequest, content: str, *, error: bool = False, mutating: bool = False
) -> ToolResult:
    return ToolResult(
        tool_use_id=req.tool_use_id,
        name=req.name,
        content=content,
        is_error=error,
        mutating=mutating,
    )


def _transient(exc: VastError) -> ApplicationError:
    """vast.ai failed in a way worth retrying (Temporal's retry policy decides)."""
    return ApplicationError(f"vast.ai: {exc}", type="VastTransient")


def _permanent(exc: VastError) -> bool:
    return exc.status in (400, 401, 403, 404, 422) and not exc.ambiguous


def _offer_row(offer: Offer) -> dict[str, Any]:
    rate = proofs_per_hour(offer.gpu_name, offer.num_gpus, offer.cpu_ram)
    return {
        "offer_id": offer.id,
        "gpu": offer.gpu_name,
        "num_gpus": offer.num_gpus,
        "host_ram_gb": round(offer.cpu_ram / 1024),
        "dph": round(offer.dph_total, 4),
        "reliability": offer.reliability2,
        "est_proofs_per_hour": round(rate, 1),
        "usd_per_100_proofs": round(100 * offer.dph_total / rate, 3) if rate else None,
        "where": offer.geolocation,
    }


class FleetActivities:
    """Holds the vast.ai client (and its key, which stays in this process)."""

    def __init__(
        self,
        vast: VastClient,
        prover: ProverSpec | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._vast = vast
        self._prover = prover or ProverSpec()
        self._clock = clock

    # ------------------------------------------------------------ reads

    async def _ours(self, agent_id: str) -> list[Instance]:
        return await self._vast.list_instances(label_prefix=label_prefix(agent_id))

    async def _summary(self, agent_id: str, target: float) -> FleetSnapshot:
        try:
            instances = await self._ours(agent_id)
        except VastError as exc:
            raise _transient(exc) from None
        return summarize(instances, target=target, now_epoch=self._clock())

    async def snapshot(self, agent_id: str, target: float) -> FleetSnapshot:
        """The fleet, or a snapshot that says why it could not be read."""
        try:
            return await self._summary(agent_id, target)
        except ApplicationError as exc:
            return FleetSnapshot(target_proofs_per_hour=target, error=exc.message)

    async def snapshot_text(self, agent_id: str, config: AgentConfig) -> str:
        """The fleet view of a run's context (see activities.runlog.FleetView)."""
        return (await self.snapshot(agent_id, config.target_proofs_per_hour)).to_text()

    @activity.defn
    async def poll_fleet(self, req: PollRequest) -> FleetSnapshot:
        """List this agent's instances on vast.ai (read only), for the monitor."""
        return await self._summary(req.agent_id, req.target_proofs_per_hour)

    @activity.defn
    async def get_fleet_status(self, req: FleetToolRequest) -> ToolResult:
        """Tool: this agent's instances and capacity against target (vast.ai, read only)."""
        snap = await self._summary(req.agent_id, req.config.target_proofs_per_hour)
        return _result(req, snap.to_text())

    @activity.defn
    async def search_offers(self, req: FleetToolRequest) -> ToolResult:
        """Tool: rentable offers that pass the guardrails, cheapest per proof first
        (vast.ai, read only)."""
        args = parse_tool_input(SearchOffersInput, req.tool_use_id, req.name, req.input)
        if isinstance(args, ToolResult):
            return args
        config = req.config
        if args.gpu_name and not gpu_allowed(args.gpu_name, config.allowed_gpus):
            return _result(
                req,
                f"GPU {args.gpu_name!r} is not allowed (allowed: {', '.join(config.allowed_gpus)})",
                error=True,
            )
        max_dph = min(args.max_dph or config.max_instance_dph, config.max_instance_dph)
        min_rel = max(args.min_reliability or 0.0, config.min_reliability)
        filters: dict[str, Any] = {
            "rentable": {"eq": True},
            "dph_total": {"lte": max_dph},
            "reliability2": {"gte": min_rel},
        }
        if args.gpu_name:
            filters["gpu_name"] = {"eq": args.gpu_name}
        try:
            offers = await self._vast.search_offers(filters, order="dph_total", limit=_SEARCH_POOL)
        except VastError as exc:
            if _permanent(exc):
                return _result(req, f"search failed: {exc}", error=True)
            raise _transient(exc) from None
        rows = [_offer_row(o) for o in offers if offer_refusal(o, config) is None]
        rows = [r for r in rows if r["usd_per_100_proofs"] is not None]
        rows.sort(key=lambda r: (r["usd_per_100_proofs"], r["dph"]))
        if not rows:
            return _result(req, "No offer passes the guardrails right now.")
        shown = rows[: args.limit]
        return _result(
            req,
            f"{len(rows)} offers pass the guardrails; cheapest per proof first:\n"
            + json.dumps(shown, separators=(",", ":")),
        )

    # ------------------------------------------------------------ writes

    async def _find_offer(self, offer_id: int) -> Offer | None:
        offers = await self._vast.search_offers({"id": {"eq": offer_id}}, limit=1)
        return next((o for o in offers if o.id == offer_id), None)

    async def _adopt(self, label: str) -> Instance | None:
        for attempt in range(_ADOPT_ATTEMPTS):
            found = await self._vast.list_instances(label=label)
            if found:
                return min(found, key=lambda i: i.id)
            if attempt + 1 < _ADOPT_ATTEMPTS:
                await asyncio.sleep(_ADOPT_DELAY_SECONDS)
        return None

    @activity.defn
    async def create_instance(self, req: FleetToolRequest) -> ToolResult:
        """Tool: rent one offer on vast.ai, at most once per tool call (by label)."""
        args = parse_tool_input(CreateInstanceInput, req.tool_use_id, req.name, req.input)
        if isinstance(args, ToolResult):
            return args
        label = create_label(req.agent_id, req.run, req.tool_use_id)
        try:
            # A previous attempt of this very call may have rented it already.
            existing = await self._vast.list_instances(label=label)
            if existing:
                inst = min(existing, key=lambda i: i.id)
                return _result(
                    req,
                    f"Rented instance {inst.id} (label {label}; found after a retry).",
                    mutating=True,
                )
            offer = await self._find_offer(args.offer_id)
            if offer is None:
                return _result(
                    req,
                    f"Offer {args.offer_id} is not available any more; search again.",
                    error=True,
                )
            fleet = await self._ours(req.agent_id)
        except VastError as exc:
            raise _transient(exc) from None
        refusal = rent_refusal(offer, fleet, req.config)
        if refusal is not None:
            return _result(req, f"Refused by guardrail: {refusal}. Nothing was rented.", error=True)
        if req.config.dry_run:
            return _result(
                req,
                f"DRY RUN: would rent offer {offer.id} ({offer.num_gpus}x {offer.gpu_name}, "
                f"${offer.dph_total:.3f}/h). Nothing was rented.",
            )
        try:
            new_id = await self._vast.create_instance(
                offer.id,
                image=self._prover.image,
                disk=self._prover.disk_gb,
                label=label,
                onstart=self._prover.onstart,
            )
        except VastNotFound as exc:
            return _result(
                req,
                f"Offer {offer.id} was taken before it could be rented ({exc.error or 'gone'}); "
                "search again.",
                error=True,
            )
        except VastError as exc:
            if not exc.ambiguous:
                if _permanent(exc):
                    return _result(req, f"vast.ai refused the rental: {exc}", error=True)
                raise _transient(exc) from None
            adopted = await self._adopt(label)
            if adopted is None:
                # Nothing with our label exists: safe to retry the whole call.
                raise _transient(exc) from None
            new_id = adopted.id
        return _result(
            req,
            f"Rented instance {new_id}: {offer.num_gpus}x {offer.gpu_name} at "
            f"${offer.dph_total:.3f}/h (label {label}). It loads for a few minutes before proving.",
            mutating=True,
        )

    @activity.defn
    async def destroy_instance(self, req: FleetToolRequest) -> ToolResult:
        """Tool: destroy one of this agent's instances on vast.ai (others are refused)."""
        args = parse_tool_input(DestroyInstanceInput, req.tool_use_id, req.name, req.input)
        if isinstance(args, ToolResult):
            return args
        try:
            inst = await self._vast.show_instance(args.instance_id)
        except VastError as exc:
            raise _transient(exc) from None
        if inst is None:
            return _result(req, f"Instance {args.instance_id} does not exist (already destroyed?).")
        if not is_ours(inst.label, req.agent_id):
            return _result(
                req,
                f"Refused: instance {inst.id} is not this agent's (label {inst.label!r}).",
                error=True,
            )
        if req.config.dry_run:
            return _result(req, f"DRY RUN: would destroy instance {inst.id}. Nothing changed.")
        try:
            await self._vast.destroy_instance(inst.id)
        except VastError as exc:
            raise _transient(exc) from None
        return _result(
            req,
            f"Destroyed instance {inst.id} ({inst.gpu_name}, was {inst.actual_status}).",
            mutating=True,
        )
