"""The search_offers tool: the guardrails as the search's filters, then checked again.

The allowed GPU families are expanded against the market's GPU catalogue, and
every guardrail and every need of the prover becomes a filter of the search
(fleet_agent/fleet/offer_query.py), priced with the disk the prover rents.
Pages are read cheapest $/h first until the matches end or the page budget
is spent; each offer is checked again locally and the survivors are ranked
by cost per proof. Machines and hosts that failed for this agent (read from
the store, fleet_agent/fleet/failed_hosts.py) are left out of the query and
dropped again from what comes back.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime

from fleet_agent.fleet.failed_hosts import Exclusions, exclusions
from fleet_agent.fleet.guardrails import gpu_allowed, offer_refusal
from fleet_agent.fleet.offer_cost import offer_dph
from fleet_agent.fleet.offer_query import allowed_gpu_names, offer_filters
from fleet_agent.fleet.prover import ProverSpec
from fleet_agent.llm.tools import SearchOffersInput
from fleet_agent.models import AgentConfig, FleetToolRequest, ToolResult
from fleet_agent.store import FailedHost, FailedHosts, Store
from fleet_agent.vast.client import VastClient
from fleet_agent.vast.errors import VastError

from .fleet_results import is_refusal, offer_row, tool_result, vast_failure, vast_text

__all__ = ["PAGES", "PAGE_SIZE", "OfferSearch"]

#: Offers per search request, and requests per tool call: each request is
#: one of the ten searches vast.ai allows a minute.
PAGE_SIZE = 500
PAGES = 3


class OfferSearch:
    """Runs the search_offers tool against vast.ai; reads the agent's failed
    hosts from `store` (none without one)."""

    def __init__(
        self,
        vast: VastClient,
        prover: ProverSpec,
        *,
        store: Store | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._vast = vast
        self._prover = prover
        self._failed = FailedHosts(store) if store is not None else None
        self._clock = clock

    async def remembered(self, agent_id: str) -> list[FailedHost]:
        """The failed hosts `agent_id` remembers now (a store read, off the
        event loop; none without a store). Create refuses them too."""
        if self._failed is None:
            return []
        now = datetime.fromtimestamp(self._clock(), UTC)
        return await asyncio.to_thread(self._failed.active, agent_id, now)

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
        left_out = exclusions(await self.remembered(req.agent_id))
        try:
            names = allowed_gpu_names(allowed, await self._vast.gpu_names(), args.gpu_name)
            filters = offer_filters(
                config,
                self._prover,
                names,
                max_dph=args.max_dph,
                min_reliability=args.min_reliability,
                exclude_machines=left_out.machines,
                exclude_hosts=left_out.hosts,
            )
            found = await self._vast.search_offers_paged(
                filters,
                page_size=PAGE_SIZE,
                max_pages=PAGES,
                allocated_storage=self._prover.disk_gb,
            )
        except VastError as exc:
            if is_refusal(exc):
                return tool_result(req, f"search failed: {vast_text(exc)}", error=True)
            raise vast_failure(exc) from None
        # Checked again here: the service may ignore a filter.
        rows = [
            offer_row(o, self._prover)
            for o in found.offers
            if offer_refusal(o, config, self._prover) is None and not left_out.excludes(o)
        ]
        rows = [r for r in rows if r["usd_per_100_proofs"] is not None]
        rows.sort(key=lambda r: (r["usd_per_100_proofs"], offer_dph(r)))
        note = _left_out_note(left_out)
        if not rows:
            return tool_result(req, f"No offer passes the guardrails right now{note}.")
        shown = rows[: args.limit]
        # One line, then the JSON list: readers (the autopilot) rely on that shape.
        head = f"{len(rows)} offers pass the guardrails; cheapest per proof first"
        if not found.complete:
            head += (
                f" (among the {len(found.offers)} cheapest per hour of more matches; "
                "name a gpu_name to see more of one family)"
            )
        head += note
        # Unescaped: the fences of the rows' text (fleet_agent/untrusted.py) read as « and ».
        rows_json = json.dumps(shown, separators=(",", ":"), ensure_ascii=False)
        return tool_result(req, f"{head}:\n{rows_json}")


def _left_out_note(left_out: Exclusions) -> str:
    """The first line's tail naming what the failed-host memory left out."""
    if not left_out:
        return ""
    n = len(left_out.machines)
    note = f"; {n} failed host{'' if n == 1 else 's'} left out"
    if left_out.hosts:
        h = len(left_out.hosts)
        note += f" (and every machine of {h} host{'' if h == 1 else 's'} with repeated failures)"
    return note
