"""How the fleet tools and the run's context see this agent's fleet.

This agent's machines from vast.ai (labels parsed exactly), judged by the
agent's rules: the prover tracks the monitor's last poll left in the store
(activities/fleet_provers.py), not proving after `not_proving_minutes`, and
the hysteresis of `min_release_age_minutes`. Every summary accrues the fleet
it listed in the spend ledger (activities/fleet_spend.py).
"""

from __future__ import annotations

from collections.abc import Callable

from temporalio.exceptions import ApplicationError

from fleet_agent.fleet.labels import is_ours, label_prefix
from fleet_agent.fleet.snapshot import FleetInstance, FleetSnapshot, summarize
from fleet_agent.models import AgentConfig, PollRequest
from fleet_agent.vast.client import VastClient
from fleet_agent.vast.errors import VastError
from fleet_agent.vast.models import Instance

from .fleet_provers import ProverWatch
from .fleet_results import vast_failure
from .fleet_spend import SpendBook

__all__ = ["FleetViews", "rules_of"]


class FleetViews:
    """Reads the fleet (vast.ai) and the prover tracks (the store)."""

    def __init__(
        self, vast: VastClient, watch: ProverWatch, spend: SpendBook, clock: Callable[[], float]
    ) -> None:
        self._vast = vast
        self._watch = watch
        self._spend = spend
        self._clock = clock

    async def ours(self, agent_id: str, *, fresh: bool = False) -> list[Instance]:
        """This agent's machines: labels parsed exactly (agent `a` never owns
        `a/b`'s), destroyed rows left out. From the worker's shared listing
        (a few seconds old at most, begun after this worker's last write), or
        `fresh`: a walk of its own, for a decision that must also see another
        worker's writes (a rental's guardrails)."""
        listed = await self._vast.list_instances(
            label_prefix=label_prefix(agent_id), shared=not fresh
        )
        return [i for i in listed if is_ours(i.label, agent_id)]

    async def summary(self, req: PollRequest, *, observe: bool = False) -> FleetSnapshot:
        """The fleet against `req`'s rules: the provers read now (`observe`, the
        monitor's poll) or as the last poll left them (every other view). The
        listed fleet is accrued in the spend ledger either way."""
        try:
            instances = await self.ours(req.agent_id)
        except VastError as exc:
            raise vast_failure(exc) from None
        members = [i for i in instances if not i.is_gone]
        await self._spend.accrue(req.agent_id, members)
        if observe:
            tracks = await self._watch.observe(req, members)
        else:
            tracks = await self._watch.tracks(req.agent_id)
        return summarize(
            members,
            target=req.target_proofs_per_hour,
            now_epoch=self._clock(),
            tracks=tracks,
            not_proving_minutes=req.not_proving_minutes,
            min_release_age_minutes=req.min_release_age_minutes,
            image_gb=self._watch.image_gb,
            spare=req.spare_one_machine,
        )

    async def snapshot(
        self, agent_id: str, target: float, config: AgentConfig | None = None
    ) -> FleetSnapshot:
        """The fleet, or a snapshot that says why it could not be read."""
        try:
            return await self.summary(rules_of(agent_id, config or AgentConfig(), target))
        except ApplicationError as exc:
            return FleetSnapshot(target_proofs_per_hour=target, error=exc.message)

    async def row(self, agent_id: str, inst: Instance, config: AgentConfig) -> FleetInstance:
        """One machine as the snapshot shows it, judged by the agent's rules."""
        tracks = await self._watch.tracks(agent_id)
        rules = rules_of(agent_id, config)
        return summarize(
            [inst],
            target=config.target_proofs_per_hour,
            now_epoch=self._clock(),
            tracks=tracks,
            not_proving_minutes=rules.not_proving_minutes,
            min_release_age_minutes=rules.min_release_age_minutes,
            image_gb=self._watch.image_gb,
        ).instances[0]

    @staticmethod
    def too_young(inst: Instance, row: FleetInstance, config: AgentConfig) -> str | None:
        """Hysteresis: why a healthy machine may not be released yet, or None.
        A dead, idle, stuck or not-proving machine may always go."""
        if row.releasable:
            return None
        return (
            f"Refused: instance {inst.id} is healthy and only {row.age_minutes:.0f} min old; "
            f"machines are kept at least {config.min_release_age_minutes:g} min "
            "(min_release_age_minutes) so that a target change or a passing surplus "
            "does not rent and release the same capacity. Nothing was destroyed."
        )


def rules_of(agent_id: str, config: AgentConfig, target: float | None = None) -> PollRequest:
    """The rules a view of `agent_id`'s fleet is judged by, from its config."""
    return PollRequest(
        agent_id=agent_id,
        target_proofs_per_hour=config.target_proofs_per_hour if target is None else target,
        not_proving_minutes=config.not_proving_minutes,
        min_release_age_minutes=config.min_release_age_minutes,
        failed_host_ttl_hours=config.failed_host_ttl_hours,
        spare_one_machine=config.spare_one_machine,
    )
