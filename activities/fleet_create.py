"""Renting for one create call: at most one machine per create label survives.

`Renter.rent` sends the rental and then settles the label (keep the oldest
machine carrying it, destroy the others, confirm), whatever the rental's own
answer was: a duplicate left by an overlapping attempt of the same call is
removed here, and the model is told which machine it has, whether another
attempt of the same call rented it, and which duplicates were destroyed.
The machine kept is opened in the spend ledger at once, and the result
carries its $/hour (`dph_delta`).

`Renter.hold` then holds the machine to the rules as they are once it
exists: the prices vast.ai bills it at (which may not be the offer's: a host
may reprice between the search and the rental), its $/h and its downloads'
$/TB, against the caps and the price an operator approved, and a freeze
that came while the rental was in flight. A machine that breaks them is
destroyed at once, the model is told, and the worker's log and metrics
alert the operator.

What the create carries is `ProverSpec.create_env`'s: in router mode the
operator's `env`, the front's port and the machine's own credential, made
here for the label (activities/fleet_credentials.py); in curio_on_host mode
the status port and the machine's drain token.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Literal

from temporalio import activity
from temporalio.exceptions import ApplicationError

from fleet_agent.fleet.drain import DRAIN_KEY_PURPOSE, drain_token
from fleet_agent.fleet.guardrails import rented_refusal
from fleet_agent.fleet.prover import ProverSpec
from fleet_agent.fleet.settle import Settled, settle_label
from fleet_agent.models import AgentConfig, FleetToolRequest, ToolResult
from fleet_agent.untrusted import fence
from fleet_agent.vast.client import VastClient
from fleet_agent.vast.errors import VastError, VastNotFound
from fleet_agent.vast.models import Instance, Offer

from .fleet_credentials import MachineEnv
from .fleet_results import (
    GPU_CHARS,
    describe_machine,
    is_refusal,
    tool_result,
    vast_failure,
    vast_text,
)
from .fleet_spend import SpendBook

__all__ = ["Origin", "Renter", "offer_unavailable"]

_log = logging.getLogger(__name__)

#: How an attempt came to its label's machine (see `Renter.settle`).
Origin = Literal["self", "lost_answer", "other"]

# After an ambiguous create (timeout, 5xx, unreadable answer) or an offer that
# vanished under a call that already sent a rental, look for the label this
# many times before concluding nothing was rented.
_ADOPT_ATTEMPTS = 3
_ADOPT_DELAY_SECONDS = 1.0


class Renter:
    """Rents offers on vast.ai for create calls and settles their labels."""

    def __init__(
        self,
        vast: VastClient,
        prover: ProverSpec,
        spend: SpendBook,
        machine_env: MachineEnv | None = None,
    ) -> None:
        if prover.mode == "router" and machine_env is None:
            raise ValueError("router mode: creates need the machines' credentials (machine_env)")
        self._vast = vast
        self._prover = prover
        self._spend = spend
        self._machine_env = machine_env

    async def create_env(self, label: str) -> dict[str, str]:
        """The env the create of `label` carries (`ProverSpec.create_env`):
        router mode, the machine's credential made now (disk and key
        generation, in a thread); curio_on_host, the machine's drain token."""
        prover = self._prover
        if prover.mode == "router":
            assert self._machine_env is not None  # checked at construction
            own = await asyncio.to_thread(self._machine_env, label)
            return prover.create_env(machine_env=own)
        return prover.create_env(drain_token(self._vast.derived_key(DRAIN_KEY_PURPOSE), label))

    async def find_offer(self, offer_id: int) -> Offer | None:
        """The offer as listed now, priced with the disk the prover rents, so
        the guardrails check the price the machine will cost."""
        offers = await self._vast.search_offers(
            {"id": {"eq": offer_id}}, limit=1, allocated_storage=self._prover.disk_gb
        )
        return next((o for o in offers if o.id == offer_id), None)

    async def label_appears(self, label: str) -> bool:
        """Whether a machine carries `label`, looking a few times (a rental in
        flight shows up within moments of being processed)."""
        for attempt in range(_ADOPT_ATTEMPTS):
            if await self._vast.list_instances(label=label):
                return True
            if attempt + 1 < _ADOPT_ATTEMPTS:
                await asyncio.sleep(_ADOPT_DELAY_SECONDS)
        return False

    async def rent(
        self, req: FleetToolRequest, offer: Offer, label: str, *, sent_before: bool
    ) -> ToolResult:
        """Rent `offer` under `label`, then settle the label.

        `sent_before`: an earlier attempt of this call already sent a rental
        (the journal says so), which may still land.
        """
        rented: int | None = None
        origin: Origin = "self"
        prover = self._prover
        try:
            rented = await self._vast.create_instance(
                offer.id,
                image=prover.image,
                disk=prover.disk_gb,
                label=label,
                runtype=prover.runtype,
                onstart=prover.onstart,
                args=prover.args,
                env=await self.create_env(label),
            )
        except VastNotFound as exc:
            # Gone (410/404 no_such_ask): taken by someone else, expired, or
            # taken by an overlapping attempt of this very call, whose machine
            # then carries our label. Never retried: the model searches again.
            if not await self._label_appears(label):
                return _offer_gone(req, offer.id, label, sent_before, fence(exc.error or "gone"))
            origin = "other"
        except VastError as exc:
            if not exc.ambiguous:
                if is_refusal(exc):
                    return tool_result(
                        req, f"vast.ai refused the rental: {vast_text(exc)}", error=True
                    )
                raise vast_failure(exc) from None
            if not await self._label_appears(label):
                # Nothing carries our label: safe to retry the whole call.
                raise vast_failure(exc) from None
            origin = "lost_answer"
        return await self.settle(req, label, origin=origin, rented=rented, offer=offer)

    async def settle(
        self,
        req: FleetToolRequest,
        label: str,
        *,
        origin: Origin,
        rented: int | None = None,
        offer: Offer | None = None,
    ) -> ToolResult:
        """Keep the oldest machine of `label`, destroy the others, and say so;
        the machine kept is opened in the spend ledger (the store).

        `origin` is how this attempt came to the label: it rented `rented`
        itself ("self"), its rental's answer was lost ("lost_answer"), or
        another attempt of the same call rented the machine ("other").
        """
        try:
            settled = await settle_label(self._vast, label)
        except VastError as exc:
            raise vast_failure(exc) from None
        if settled.remaining:
            # Retried by Temporal; the next attempt finds the label and settles again.
            raise ApplicationError(
                f"duplicates of create label {label} are still listed after destroying them: "
                f"{settled.remaining}",
                type="DuplicateNotDestroyed",
            )
        if settled.kept is not None:
            await self._spend.open(req.agent_id, settled.kept)
        result = _settled_result(req, settled, origin, rented, offer)
        if not result.mutating:
            return result
        # The machine this call has: billed at its dph_total while it loads and runs.
        dph = settled.kept.dph_total if settled.kept is not None else None
        if dph is None and offer is not None:
            dph = offer.dph_total
        return result.model_copy(update={"dph_delta": round(dph or 0.0, 6)})

    async def hold(
        self,
        req: FleetToolRequest,
        result: ToolResult,
        label: str,
        *,
        config: AgentConfig,
        fleet: Sequence[Instance],
        approved_dph: float | None = None,
    ) -> ToolResult:
        """`result` if the call's machine may stay under `config` (the live
        one, read after the rental) in `fleet` (listed after it); otherwise
        the machine is destroyed and closed in the ledger, and the result
        says why. A result that rented nothing is returned as it is."""
        kept = next((i for i in fleet if i.label == label and not i.is_gone and i.has_id), None)
        if not result.mutating or kept is None:
            return result
        if config.frozen:
            why = "the agent was frozen while the rental was in flight"
            kind = "frozen"
        else:
            why = rented_refusal(kept, fleet, config, approved_dph, self._prover) or ""
            kind = "price"
        if not why:
            return result
        try:
            # A machine already gone counts as destroyed (missing_ok).
            await self._vast.destroy_instance(kept.id)
        except VastError as exc:
            # Retried: the next attempt finds the label and holds it again.
            raise vast_failure(exc) from None
        await self._spend.close(req.agent_id, kept.id, kept)
        _log.error(
            "operator alert: %s rented instance %s (label %s) and destroyed it at once: %s",
            req.agent_id,
            kept.id,
            label,
            why,
        )
        _count_undone(req.agent_id, kind)
        return tool_result(
            req,
            f"Rented instance {kept.id} ({describe_machine(kept)}, label {label}), but {why}: "
            "it was destroyed at once, and nothing of this call is left running. The "
            "operator is alerted. Do not rent it again; search again if the fleet still "
            "needs a machine.",
            error=True,
            mutating=True,
        )

    async def _label_appears(self, label: str) -> bool:
        try:
            return await self.label_appears(label)
        except VastError as exc:
            raise vast_failure(exc) from None


def _offer_gone(
    req: FleetToolRequest, offer_id: int, label: str, sent_before: bool, why: str
) -> ToolResult:
    text = (
        f"Offer {offer_id} is gone: vast.ai no longer offers it ({why}; taken by someone "
        "else or withdrawn). Nothing was rented; do not retry this offer, search again."
    )
    if sent_before:
        text += _in_flight_note(label)
    return tool_result(req, text, error=True)


def _in_flight_note(label: str) -> str:
    return (
        f" Note: an earlier attempt of this call sent a rental request whose outcome is "
        f"unknown; if it still lands, the machine carries label {label} and shows up in "
        "get_fleet_status (at most one machine per create call is ever kept)."
    )


def offer_unavailable(
    req: FleetToolRequest, offer_id: int, label: str, sent_before: bool
) -> ToolResult:
    """The offer is not listed (any more) and nothing carries the call's label."""
    text = f"Offer {offer_id} is not available any more; search again."
    if sent_before:
        text += _in_flight_note(label)
    return tool_result(req, text, error=True)


def _settled_result(
    req: FleetToolRequest,
    settled: Settled,
    origin: Origin,
    rented: int | None,
    offer: Offer | None,
) -> ToolResult:
    label, kept = settled.label, settled.kept
    others = [i for i in settled.destroyed if i != rented]
    dup_note = (
        f" Duplicates of this call rented by an overlapping attempt were destroyed: "
        f"{', '.join(map(str, others))}."
        if others
        else ""
    )
    boot = " It loads for a few minutes before proving."
    if kept is None:
        if rented is None:
            return tool_result(
                req,
                f"The machine rented for this call (label {label}) is gone already; "
                "nothing is rented for this call.",
                error=True,
            )
        # Rented just now but not listed yet: report what vast.ai answered.
        what = (
            f"{offer.num_gpus}x {fence(offer.gpu_name, GPU_CHARS)} at ${offer.dph_total:.3f}/h"
            if offer is not None
            else "details not listed yet"
        )
        return tool_result(
            req, f"Rented instance {rented}: {what} (label {label}).{boot}", mutating=True
        )
    machine = f"instance {kept.id}: {describe_machine(kept)} (label {label})"
    if origin == "self" and rented == kept.id:
        text = f"Rented {machine}.{boot}{dup_note}"
    elif origin == "self":
        text = (
            f"This call's machine is {machine}, rented first by another attempt of this "
            f"same call. This attempt's own rental, instance {rented}, duplicated it and "
            f"was destroyed.{dup_note} Nothing else was rented.{boot}"
        )
    elif origin == "lost_answer":
        text = (
            f"Rented {machine}; vast.ai's answer was lost, so the machine was found by "
            f"its label.{boot}{dup_note}"
        )
    else:
        text = (
            f"This call's machine is {machine}, rented by another attempt of this same "
            f"call (found after a retry); nothing more was rented.{dup_note}"
        )
    return tool_result(req, text, mutating=True)


def _count_undone(agent_id: str, kind: str) -> None:
    """`fleet_rentals_undone_total`: rentals destroyed at once by `Renter.hold`
    (`reason`: price or frozen), counted after the destroy."""
    if not activity.in_activity():
        return
    activity.metric_meter().with_additional_attributes(
        {"agent_id": agent_id, "reason": kind}
    ).create_counter(
        "fleet_rentals_undone", "rentals destroyed at once: over a price or under a freeze"
    ).add(1)
