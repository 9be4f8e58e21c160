"""The search_offers tool: the guardrails as the search's filters, then checked again.

The allowed GPU families are expanded against the market's GPU catalogue, and
every guardrail and every need of the prover becomes a filter of the search
(fleet_agent/fleet/offer_query.py), priced with the disk the prover rents.
Pages are read cheapest $/h first until the matches end or the page budget
is spent; each offer is checked again locally and the survivors are ranked
by cost per proof.
"""

from __future__ import annotations

import json

from fleet_agent.fleet.guardrails import gpu_allowed, offer_refusal
from fleet_agent.fleet.offer_query import allowed_gpu_names, offer_filters
from fleet_agent.models import AgentConfig, FleetToolRequest, ToolResult
from fleet_agent.prover import ProverSpec
from fleet_agent.tools import SearchOffersInput
from fleet_agent.vast.client import VastClient
from fleet_agent.vast.errors import VastError

from .fleet_results import is_refusal, offer_row, tool_result, vast_failure

__all__ = ["PAGES", "PAGE_SIZE", "OfferSearch"]

#: Offers per search request, and requests per tool call: each request is
#: one of the ten searches vast.ai allows a minute.
PAGE_SIZE = 500
PAGES = 3


class OfferSearch:
    """Runs the search_offers tool against vast.ai."""

    def __init__(self, vast: VastClient, prover: ProverSpec) -> None:
        self._vast = vast
        self._prover = prover

    async def run(
        self, req: FleetToolRequest, args: SearchOffersInput, config: AgentConfig
    ) -> ToolResult:
        allowed = config.allowed_gpus
        if args.gpu_name and not gpu_allowed(args.gpu_name, allowed):
            return tool_result(
                req,
                f"GPU {args.gpu_name!r} is not allowed (allowed: {', '.join(allowed)})",
                error=True,
            )
        try:
            names = allowed_gpu_names(allowed, await self._vast.gpu_names(), args.gpu_name)
            filters = offer_filters(
                config,
                self._prover,
                names,
                max_dph=args.max_dph,
                min_reliability=args.min_reliability,
            )
            found = await self._vast.search_offers_paged(
                filters,
                page_size=PAGE_SIZE,
                max_pages=PAGES,
                allocated_storage=self._prover.disk_gb,
            )
        except VastError as exc:
            if is_refusal(exc):
                return tool_result(req, f"search failed: {exc}", error=True)
            raise vast_failure(exc) from None
        rows = [
            offer_row(o) for o in found.offers if offer_refusal(o, config, self._prover) is None
        ]
        rows = [r for r in rows if r["usd_per_100_proofs"] is not None]
        rows.sort(key=lambda r: (r["usd_per_100_proofs"], r["dph"]))
        if not rows:
            return tool_result(req, "No offer passes the guardrails right now.")
        shown = rows[: args.limit]
        # One line, then the JSON list: readers (the autopilot) rely on that shape.
        head = f"{len(rows)} offers pass the guardrails; cheapest per proof first"
        if not found.complete:
            head += (
                f" (among the {len(found.offers)} cheapest per hour of more matches; "
                "name a gpu_name to see more of one family)"
            )
        return tool_result(req, f"{head}:\n" + json.dumps(shown, separators=(",", ":")))
