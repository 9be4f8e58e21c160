"""Fleet activities: the model's fleet tools, the monitor's poll and its reconcile.

Every tool heartbeats while it waits on vast.ai, reads the agent's live
config at the moment of the call (activities/live_config.py), and journals
its result by tool_use_id in the store (fleet_agent/store/journal.py): a call
that already has a result, e.g. replayed after `temporal workflow reset`,
returns that result and never touches the fleet again. A refusal (guardrail,
paused, bad input, offer gone) is an error result for the model; transient
vast.ai failures raise retryable ApplicationErrors, a rejected API key a
non-retryable one. Creates keep at most one machine per tool call, even with
a zombie attempt (activities/fleet_create.py); searches push the guardrails
into the query (activities/fleet_search.py). Every vast.ai request waits for
its slot in the client's pacing, inside the heartbeat.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime

from temporalio import activity

from fleet_agent.fleet.approvals import create_gate
from fleet_agent.fleet.failed_hosts import failed_host_refusal
from fleet_agent.fleet.guardrails import (
    above_approved,
    beyond_ledger_dph,
    fleet_dph,
    offer_cost_dph,
    rent_refusal,
)
from fleet_agent.fleet.labels import LabelTooLong, create_label
from fleet_agent.fleet.prover import ProverSpec
from fleet_agent.fleet.reconcile import ReconcileReport, ReconcileRequest, duplicate_labels
from fleet_agent.fleet.settle import settle_label
from fleet_agent.fleet.snapshot import FleetSnapshot
from fleet_agent.llm.tools import (
    CreateInstanceInput,
    SearchOffersInput,
    parse_tool_input,
)
from fleet_agent.models import (
    AgentConfig,
    FleetToolRequest,
    PollRequest,
    SpendSummary,
    StopFleetReport,
    StopFleetRequest,
    ToolResult,
)
from fleet_agent.store import FleetSnapshots, Store, ToolCallRecord, ToolJournal
from fleet_agent.untrusted import fence
from fleet_agent.vast.client import VastClient
from fleet_agent.vast.errors import VastError
from fleet_agent.vast.models import Offer

from .fleet_calls import ToolCalls, paused_result
from .fleet_create import Renter, offer_unavailable
from .fleet_credentials import MachineEnv
from .fleet_destroy import Destroyer
from .fleet_provers import ProverWatch
from .fleet_results import GPU_CHARS, approval_needed, tool_result, vast_failure
from .fleet_search import OfferSearch
from .fleet_spend import SpendBook
from .fleet_stop import CREATE_MAY_RUN_S, FleetStopper
from .fleet_views import FleetViews, rules_of
from .heartbeat import heartbeating
from .live_config import ConfigSource, WorkflowConfigSource
from .market_guard import MarketGuard
from .shield import finish_despite_cancellation
from .temporal import agent_open_or_unknown

__all__ = ["FleetActivities", "ProverSpec"]

_log = logging.getLogger(__name__)


class FleetActivities:
    """Holds the vast.ai client (and its key, which stays in this process), the
    store (the tool-call journal, the failed hosts) and where live configs come
    from. `clock` (epoch seconds) dates snapshots and the failed hosts' memory.
    `machine_env` makes each machine's credential for a router-mode create
    (activities/fleet_credentials.py); router mode needs one."""

    def __init__(
        self,
        vast: VastClient,
        prover: ProverSpec | None = None,
        *,
        store: Store,
        configs: ConfigSource | None = None,
        clock: Callable[[], float] = time.time,
        machine_env: MachineEnv | None = None,
    ) -> None:
        self._vast = vast
        self._clock = clock
        self._snapshots = FleetSnapshots(store)
        self._prover = prover or ProverSpec()
        self._spend = SpendBook(store, clock)
        self._renter = Renter(vast, self._prover, self._spend, machine_env)
        self._search_tool = OfferSearch(vast, self._prover, store=store, clock=clock)
        self._calls = ToolCalls(store, configs or WorkflowConfigSource(), clock)
        self._market = MarketGuard(store)
        self._stopper = FleetStopper(
            vast, lambda agent_id: self._views.ours(agent_id), self._spend.close, self._flying
        )
        self._views = FleetViews(
            vast, ProverWatch(store, self._prover, clock), self._spend, clock, ToolJournal(store)
        )
        self._destroyer = Destroyer(
            vast,
            self._views,
            self._calls,
            self._spend,
            self._prover.status_port,
            allow_loopback=self._prover.allow_loopback,
            market=self._market,
        )

    async def _flying(self, agent_id: str) -> int:
        """How many of the agent's creates may still be renting: journalled
        as started, no result, younger than their activity's timeout."""
        since = self._clock() - CREATE_MAY_RUN_S
        calls = await self._calls.creates_in_flight(agent_id)
        return sum(1 for c in calls if c.started_at.timestamp() >= since)

    # ------------------------------------------------------------ reads

    async def snapshot(
        self, agent_id: str, target: float, config: AgentConfig | None = None
    ) -> FleetSnapshot:
        """The fleet, or a snapshot that says why it could not be read."""
        return await self._views.snapshot(agent_id, target, config)

    async def snapshot_text(self, agent_id: str, config: AgentConfig) -> str:
        """The fleet view of a run's context (see activities.runlog.FleetView),
        from a recent listing when one is at hand (activities/fleet_views.py);
        a fresh one is accrued in the spend ledger."""
        snap = await self._views.snapshot(agent_id, config.target_proofs_per_hour, config)
        return snap.to_text()

    async def spend_summary(self, agent_id: str) -> SpendSummary:
        """The agent's spend as the ledger has it now (see activities.runlog.FleetView)."""
        return await self._spend.summary(agent_id)

    @activity.defn
    async def poll_fleet(self, req: PollRequest) -> FleetSnapshot:
        """List this agent's instances on vast.ai (read only) and read each
        running machine's prover status (HTTP to the machine), for the monitor.
        Updates the prover tracks, the failed hosts, the spend ledger (every
        listed machine accrued up to now) and the agent's fleet snapshot (what
        `fleet-agent fleet` shows) in the store.
        `duplicate_labels` names create labels that carry more than one machine.
        Meanwhile it describes the agent workflow (Temporal, as `agent_is_open`
        does) for `agent_open`, so the monitor needs no activity of its own
        for that; None when Temporal could not say, never a failed poll."""
        async with heartbeating():
            open_check = asyncio.ensure_future(agent_open_or_unknown(req.agent_id))
            try:
                snap = await self._views.summary(req, observe=True)
                snap.agent_open = await open_check
            finally:
                open_check.cancel()  # the listing failed (or was cancelled): no one waits
            at = datetime.fromtimestamp(self._clock(), UTC)
            try:
                await asyncio.to_thread(self._snapshots.save, req.agent_id, snap, at)
            except Exception as exc:  # only a view: the monitor's signals matter more
                _log.warning("fleet snapshot of %s not stored: %s", req.agent_id, exc)
            return snap

    @activity.defn
    async def get_fleet_status(self, req: FleetToolRequest) -> ToolResult:
        """Tool: this agent's instances, capacity against target and spend (vast.ai,
        read only, from a recent listing when one is at hand; the agent's live
        config for the target and the budget; journalled in the store, where
        a freshly listed fleet is also accrued in the spend ledger)."""
        return await self._calls.journaled(req, self._status)

    async def _status(self, req: FleetToolRequest, _: ToolCallRecord | None) -> ToolResult:
        config = await self._calls.config(req, mutating=False)
        snap = await self._views.summary(rules_of(req.agent_id, config), recent=True)
        spend = await self._spend.summary(req.agent_id)
        return tool_result(req, f"{snap.to_text()}\n{spend.line(config.daily_budget_usd)}")

    @activity.defn
    async def search_offers(self, req: FleetToolRequest) -> ToolResult:
        """Tool: offers that pass the live config's guardrails and the prover's
        needs, cheapest per proof first. Reads vast.ai (the GPU catalogue and up
        to three search pages, the guardrails as filters) and the store (failed
        hosts, left out of the search); journalled in the store."""
        return await self._calls.journaled(req, self._search)

    async def _search(self, req: FleetToolRequest, _: ToolCallRecord | None) -> ToolResult:
        args = parse_tool_input(SearchOffersInput, req.tool_use_id, req.name, req.input)
        if isinstance(args, ToolResult):
            return args
        config = await self._calls.config(req, mutating=False)
        return await self._search_tool.run(req, args, config)

    # ------------------------------------------------------------ writes

    @activity.defn
    async def create_instance(self, req: FleetToolRequest) -> ToolResult:
        """Tool: rent one offer on vast.ai; at most one machine per tool call survives.

        Touches the agent workflow (live_config query), the store (tool-call
        journal; failed hosts, whose offers are refused; the spend ledger: the
        listed fleet accrued for the daily budget, the rented machine opened)
        and vast.ai: label and offer look-ups, the rental, and the destruction
        of duplicates of this call left by overlapping attempts.
        Once the rental is sent, it is finished and settled even if the
        attempt is cancelled.
        """
        return await self._calls.journaled(req, self._create)

    async def _create(self, req: FleetToolRequest, earlier: ToolCallRecord | None) -> ToolResult:
        args = parse_tool_input(CreateInstanceInput, req.tool_use_id, req.name, req.input)
        if isinstance(args, ToolResult):
            return args
        config = await self._calls.config(req, mutating=True)
        try:
            label = create_label(req.agent_id, req.run, req.tool_use_id)
        except LabelTooLong as exc:
            return tool_result(req, f"Refused: {exc}. Nothing was rented.", error=True)
        sent_before = earlier is not None  # an earlier attempt reached the rental
        approved = req.approval.approved_dph if req.approval is not None else None
        try:
            # Another attempt of this very call may have rented it already:
            # that is the truth to tell, held to the rules as they are now.
            if await self._vast.list_instances(label=label):
                return await self._settle_and_hold(req, label, approved)
            if config.paused or config.frozen:
                return paused_result(req, config, "rented")
            offer = await self._renter.find_offer(args.offer_id)
            if offer is None:
                if sent_before and await self._renter.label_appears(label):
                    return await self._settle_and_hold(req, label, approved)
                return offer_unavailable(req, args.offer_id, label, sent_before)
            # A machine (or host) that failed for this agent is not rented
            # again while remembered, whatever the search showed before.
            failed = failed_host_refusal(offer, await self._search_tool.remembered(req.agent_id))
            if failed is not None:
                return tool_result(
                    req, f"Refused: {failed}. Nothing was rented; pick another offer.", error=True
                )
            # Fresh: the caps must count a machine another worker rented
            # a moment ago, which this worker's shared listing may not show.
            fleet = await self._views.ours(req.agent_id, fresh=True)
        except VastError as exc:
            raise vast_failure(exc) from None
        # Creates in flight whose machines are not listed yet hold their price.
        listed = {i.label for i in fleet}
        reserved = [
            c.reserved_dph if c.reserved_dph is not None else config.max_instance_dph
            for c in await self._calls.creates_in_flight(req.agent_id, req.tool_use_id)
            if create_label(req.agent_id, c.run, c.tool_use_id) not in listed
        ]
        refusal = rent_refusal(offer, fleet, config, self._prover, reserved=reserved)
        if refusal is None:
            # The Snark Market's work slots (market mode only).
            refusal = await self._market.create_refusal(
                req.agent_id, config, fleet, len(reserved), offer.num_gpus
            )
        if refusal is not None:
            return tool_result(
                req, f"Refused by guardrail: {refusal}. Nothing was rented.", error=True
            )
        # Downloads count in the budget as in max_fleet_dph (offer_cost.py).
        cost = offer_cost_dph(offer, self._prover)
        over = await self._spend.budget_refusal(
            req.agent_id,
            fleet,
            cost,
            config,
            in_flight_dph=sum(reserved),
            beyond_ledger_dph=beyond_ledger_dph(fleet, config, self._prover),
        )
        if over is not None:
            return tool_result(req, over, error=True)
        limited = await self._calls.rate_refusal(req, config.max_creates_per_hour)
        if limited is not None:
            return tool_result(req, limited, error=True)
        if config.dry_run:
            return tool_result(
                req,
                f"DRY RUN: would rent offer {offer.id} ({offer.num_gpus}x "
                f"{fence(offer.gpu_name, GPU_CHARS)}, "
                f"${offer.dph_total:.3f}/h). Nothing was rented.",
            )
        if req.approval is None:
            gate = create_gate(
                config,
                offer_dph=offer.dph_total,
                fleet_dph=fleet_dph(fleet, unpriced=config.max_instance_dph) + sum(reserved),
                fleet_dph_hour_ago=await self._spend.dph_hour_ago(req.agent_id),
            )
            if gate.ask:
                return approval_needed(req, gate.ask, offer.dph_total)
        elif approved is not None and above_approved(offer.dph_total, approved):
            # Approved at one price, offered now at another: the operator decides again.
            return approval_needed(
                req,
                f"the offer's price rose from the ${approved:.3f}/h approved to "
                f"${offer.dph_total:.3f}/h",
                offer.dph_total,
            )
        await self._calls.start(req, reserved_dph=cost)
        # From here the machine may exist: rent, settle the label and journal
        # the outcome even if Temporal cancels this attempt meanwhile.
        return await finish_despite_cancellation(
            self._rent_and_record(req, offer, label, sent_before, approved)
        )

    async def _rent_and_record(
        self,
        req: FleetToolRequest,
        offer: Offer,
        label: str,
        sent_before: bool,
        approved: float | None,
    ) -> ToolResult:
        # The config again, at the last moment before the rental: a freeze
        # that came during the checks above stops it here. One that comes
        # after is seen by `stop_fleet`, which waits for this journalled call,
        # and by `_settle_and_hold`'s look at the config once it is rented.
        config = await self._calls.config(req, mutating=True)
        if config.paused or config.frozen:
            result = paused_result(req, config, "rented")
        else:
            result = await self._renter.rent(req, offer, label, sent_before=sent_before)
            result = await self._hold(req, result, label, approved)
        # Recorded here, inside the shield, so a cancelled attempt leaves the
        # outcome in the journal; `journaled` then only reads the row back.
        return await self._calls.finish(req, result)

    async def _settle_and_hold(
        self, req: FleetToolRequest, label: str, approved: float | None
    ) -> ToolResult:
        """The machine another attempt of this call rented, settled and held
        to the rules as they are now."""
        result = await self._renter.settle(req, label, origin="other")
        return await self._hold(req, result, label, approved)

    async def _hold(
        self, req: FleetToolRequest, result: ToolResult, label: str, approved: float | None
    ) -> ToolResult:
        if not result.mutating:
            return result
        config = await self._calls.config(req, mutating=True)
        try:
            fleet = await self._views.ours(req.agent_id, fresh=True)
        except VastError as exc:
            raise vast_failure(exc) from None
        return await self._renter.hold(
            req, result, label, config=config, fleet=fleet, approved_dph=approved
        )

    @activity.defn
    async def destroy_instance(self, req: FleetToolRequest) -> ToolResult:
        """Tool: destroy one of this agent's instances on vast.ai (others are
        refused). Reads the live config (paused, dry_run) from the agent
        workflow; journals the call in the store and closes the machine in the
        spend ledger at the time of the destroy."""
        return await self._calls.journaled(req, self._destroyer.run)

    # ------------------------------------------------------------ kill switch

    @activity.defn
    async def stop_fleet(self, req: StopFleetRequest) -> StopFleetReport:
        """The freeze's side at vast.ai: list this agent's machines and, with
        `destroy_all`, destroy every one and list again until none is left
        (activities/fleet_stop.py), closing each in the spend ledger (the
        store) as it is destroyed. Whatever the config: the operator's order."""
        return await self._stopper.stop(req)

    # ------------------------------------------------------------ monitor

    @activity.defn
    async def reconcile_labels(self, req: ReconcileRequest) -> ReconcileReport:
        """Destroy all but the oldest machine of every create label of this agent
        on vast.ai (a zombie create that landed after every attempt finished),
        and confirm they are gone. Whatever the config: a duplicate is the
        system's own double rental, never a decision of the model."""
        async with heartbeating():
            try:
                duplicates = duplicate_labels(await self._views.ours(req.agent_id))
                report = ReconcileReport()
                for label in duplicates:
                    settled = await settle_label(self._vast, label)
                    report.labels.append(settled.report())
            except VastError as exc:
                raise vast_failure(exc) from None
            return report
