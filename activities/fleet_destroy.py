"""The destroy tool's work: one of this agent's machines, released on vast.ai.

Refused for a machine that is not this agent's, a healthy machine younger
than `min_release_age_minutes`, past `max_destroys_per_hour` (releasing a
machine that is not capacity is never limited), or below the capacity floor
with approvals off (machines other destroy calls released in the last hour
count as gone, listed or not); paused or frozen agents change nothing. A change that
needs an operator's approval answers with an ask instead of acting
(fleet_agent/fleet/approvals.py). A healthy machine with work in flight is
drained instead, and destroyed by the monitor's poll once its work is done
(fleet_agent/fleet/drain.py). A machine already gone counts as destroyed. What was
destroyed is closed in the spend ledger at the time of the destroy, and the
result carries the $/hour it stopped (`dph_delta`). A machine whose row does
not parse may be destroyed like any other (`VastClient.show_instance` reads
it as unreadable), unless the row has no usable id: then only vast.ai's
console can, and the operator is alerted.
"""

from __future__ import annotations

import logging

from fleet_agent.fleet.approvals import destroy_gate
from fleet_agent.fleet.billing import billed_dph
from fleet_agent.fleet.drain import DRAIN_KEY_PURPOSE, DRAIN_LIMIT_S, drain_token
from fleet_agent.fleet.labels import is_ours
from fleet_agent.fleet.prover_status import send_drain
from fleet_agent.fleet.snapshot import FleetInstance
from fleet_agent.llm.tools import DestroyInstanceInput, parse_tool_input
from fleet_agent.models import FleetToolRequest, ToolResult
from fleet_agent.store import ToolCallRecord
from fleet_agent.untrusted import fence
from fleet_agent.vast.client import VastClient
from fleet_agent.vast.errors import VastError
from fleet_agent.vast.models import Instance

from .fleet_calls import ToolCalls, paused_result
from .fleet_results import GPU_CHARS, approval_needed, tool_result, vast_failure
from .fleet_spend import SpendBook
from .fleet_views import FleetViews, rules_of
from .market_guard import MarketGuard

__all__ = ["Destroyer"]

log = logging.getLogger(__name__)


class Destroyer:
    """Destroys this agent's machines for the destroy tool."""

    def __init__(
        self,
        vast: VastClient,
        views: FleetViews,
        calls: ToolCalls,
        spend: SpendBook,
        status_port: int | None = None,
        *,
        allow_loopback: bool = False,
        market: MarketGuard | None = None,
    ) -> None:
        self._vast = vast
        self._views = views
        self._calls = calls
        self._spend = spend
        self._port = status_port
        self._allow_loopback = allow_loopback
        self._market = market

    async def run(self, req: FleetToolRequest, earlier: ToolCallRecord | None) -> ToolResult:
        """Destroy the machine `req` names, unless a rule refuses it (`earlier`:
        the unfinished journal record of an earlier attempt of this call)."""
        args = parse_tool_input(DestroyInstanceInput, req.tool_use_id, req.name, req.input)
        if isinstance(args, ToolResult):
            return args
        config = await self._calls.config(req, mutating=True)
        if config.paused or config.frozen:
            return paused_result(req, config, "destroyed")
        if args.instance_id <= 0:
            # A row of ours that lists no usable id (Instance.unreadable_row).
            log.error(
                "operator alert: %s asked to destroy instance %s, whose vast.ai row has no "
                "usable id: only vast.ai's console can destroy it",
                req.agent_id,
                args.instance_id,
            )
            return tool_result(
                req,
                f"Refused: instance {args.instance_id} is a vast.ai row without a usable id "
                "(its id here is derived from its label), so the API cannot destroy it. The "
                "operator is alerted; tell them its label (get_fleet_status) so they destroy "
                "it in vast.ai's console. Nothing was destroyed.",
                error=True,
            )
        try:
            inst = await self._vast.show_instance(args.instance_id)
        except VastError as exc:
            raise vast_failure(exc) from None
        if inst is None or inst.is_gone:
            if earlier is not None:
                # An earlier attempt of this call sent the destroy; it worked.
                # (Closed at most a retry late, if that attempt could not.)
                await self._spend.close(req.agent_id, args.instance_id)
                return tool_result(
                    req, f"Destroyed instance {args.instance_id} (confirmed gone).", mutating=True
                )
            return tool_result(
                req, f"Instance {args.instance_id} does not exist (already destroyed?)."
            )
        if not is_ours(inst.label, req.agent_id):
            return tool_result(
                req,
                f"Refused: instance {inst.id} is not this agent's (label {fence(inst.label)}).",
                error=True,
            )
        snap = await self._views.summary(rules_of(req.agent_id, config))
        row = next((r for r in snap.instances if r.id == inst.id), None)
        if row is None:  # listed a moment ago, not now: judge it alone
            row = await self._views.row(req.agent_id, inst, config)
        refusal = self._views.too_young(inst, row, config)
        if refusal is None and row.expected_proofs_per_hour > 0:
            # Only releasing capacity is rate-limited: a dead machine may always go.
            refusal = await self._calls.rate_refusal(req, config.max_destroys_per_hour)
        # The capacity floor: a machine that is not capacity (failed) may always go.
        # Machines other calls released a moment ago may still be listed as
        # capacity (a drain until the monitor's next poll reads it): counted
        # gone, or one reply that releases the whole fleet, one machine at a
        # time, would pass the floor with every call.
        released = await self._calls.released(req)
        gone = sum(
            r.expected_proofs_per_hour
            for r in snap.instances
            if r.id in released and r.id != inst.id
        )
        gate = destroy_gate(
            config,
            machine_capacity=row.expected_proofs_per_hour,
            fleet_capacity=snap.expected_proofs_per_hour - gone,
        )
        if refusal is None and gate.refuse:
            refusal = f"Refused: {gate.refuse}. Nothing was destroyed."
        if refusal is None and self._market is not None:
            # The Snark Market: the queue drains before the fleet shrinks under it.
            drain = await self._market.destroy_refusal(
                req.agent_id,
                config,
                snap.expected_proofs_per_hour - gone - row.expected_proofs_per_hour,
                releases=row.expected_proofs_per_hour > 0,
            )
            if drain is not None:
                refusal = f"Refused: {drain}. Nothing was destroyed."
        if refusal is not None:
            return tool_result(req, refusal, error=True)
        if config.dry_run:
            return tool_result(req, f"DRY RUN: would destroy instance {inst.id}. Nothing changed.")
        if gate.ask and req.approval is None:
            return approval_needed(req, gate.ask, -round(billed_dph(inst), 6))
        await self._calls.start(req)
        drained = await self._drain(req, inst, row, args.reason)
        if drained is not None:
            return drained.model_copy(update={"dph_delta": -round(billed_dph(inst), 6)})
        try:
            # A machine already gone by now counts as destroyed (missing_ok).
            await self._vast.destroy_instance(inst.id)
        except VastError as exc:
            raise vast_failure(exc) from None
        await self._spend.close(req.agent_id, inst.id, inst)
        await self._views.forget_member(req.agent_id, inst.id)
        result = tool_result(
            req,
            # The reason given rides along, so the run log says why it went.
            f"Destroyed instance {inst.id} ({fence(inst.gpu_name, GPU_CHARS)}, was "
            f"{fence(inst.actual_status, 40)}). "
            f"Reason given: {args.reason[:200]}",
            mutating=True,
        )
        return result.model_copy(update={"dph_delta": -round(billed_dph(inst), 6)})

    async def _drain(
        self, req: FleetToolRequest, inst: Instance, row: FleetInstance, reason: str
    ) -> ToolResult | None:
        """Drain a healthy machine with work in flight instead of destroying
        it (fleet_agent/fleet/drain.py): the monitor's poll destroys it once
        its work is done. None when it is to be destroyed now: it failed,
        holds no work, drains already, or its prover would not drain.
        In router mode the drain is the router's (`_drain_at_router`)."""
        if self._views.routed:
            return await self._drain_at_router(req, inst, row, reason)
        if self._port is None or row.expected_proofs_per_hour <= 0 or not inst.label:
            return None
        track = await self._views.track(req.agent_id, inst.id)
        if track is None or track.draining_since is not None:
            return None
        if not track.in_flight and not track.queued:
            return None
        token = drain_token(self._vast.derived_key(DRAIN_KEY_PURPOSE), inst.label)
        refused = await send_drain(inst, self._port, token, allow_loopback=self._allow_loopback)
        if refused is not None:
            log.warning("instance %s would not drain (%s): destroyed at once", inst.id, refused)
            return None
        return tool_result(
            req,
            f"Draining instance {inst.id} ({fence(inst.gpu_name, GPU_CHARS)}): it takes no new "
            "work and is "
            f"destroyed once its {track.in_flight or 0} proof(s) in flight finish, within "
            f"{DRAIN_LIMIT_S / 60:.0f} min; it no longer counts as capacity. "
            f"Reason given: {reason[:200]}",
            mutating=True,
        )

    async def _drain_at_router(
        self, req: FleetToolRequest, inst: Instance, row: FleetInstance, reason: str
    ) -> ToolResult | None:
        """Router mode: the member is marked ``drain`` with its ``drain_by``
        (activities/fleet_router.py), no word to the host: the router sends
        it no new work, and the monitor's poll destroys it once the router's
        witness says it holds none, or at ``drain_by``. Only a machine with
        work of its own in flight is drained (what waits at the router is
        any machine's); None: destroyed now."""
        if row.expected_proofs_per_hour <= 0 or not inst.label:
            return None
        track = await self._views.track(req.agent_id, inst.id)
        if track is None or track.draining_since is not None or not track.in_flight:
            return None
        refused = await self._views.drain_via_router(req.agent_id, inst)
        if refused is not None:
            log.warning("instance %s not drained (%s): destroyed at once", inst.id, refused)
            return None
        return tool_result(
            req,
            f"Draining instance {inst.id} ({fence(inst.gpu_name, GPU_CHARS)}) at the router: it "
            f"gets no new work and is destroyed once its {track.in_flight} proof(s) in flight "
            f"finish, within {DRAIN_LIMIT_S / 60:.0f} min (then the router sends them "
            f"elsewhere); it no longer counts as capacity. Reason given: {reason[:200]}",
            mutating=True,
        )
