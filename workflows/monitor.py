"""FleetMonitorWorkflow (`<agent-id>/monitor`): turns fleet changes into signals.

Polls this agent's instances on vast.ai, diffs each poll against the last one
and signals `state_changed` to the agent for every transition, including
instances that appear or vanish, and once per machine `running → proving`
when its prover starts proving (its vast.ai state stays "running"). The
agent's debounce turns a burst of them into one run.
"""

from __future__ import annotations

import contextlib
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, FailureError

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models only.
    from pydantic import ValidationError

    from fleet_agent.fleet.reconcile import ReconcileRequest
    from fleet_agent.fleet.snapshot import PROVING, FleetSnapshot
    from fleet_agent.models import MonitorConfig, MonitorInput, PollRequest, StateChanged
    from workflows import stubs
    from workflows.metrics import record_fleet
    from workflows.monitor_band import MONITOR_NOTIFY_PATCH, Band
    from workflows.monitor_demand import MONITOR_DEMAND_PATCH, DemandFollower
    from workflows.monitor_market import MONITOR_MARKET_PATCH, MarketFollower
    from workflows.policies import FLEET_HEARTBEAT_TIMEOUT, STORE_TIMEOUT

__all__ = [
    "FIRST_PROOF_PATCH",
    "OPEN_IN_POLL_PATCH",
    "SAME_CONFIG_PATCH",
    "FleetMonitorWorkflow",
    "diff_states",
    "state_change",
]

_POLL_TIMEOUT = timedelta(seconds=60)
# A failed poll is tried again at the next interval: no long retries.
_POLL_RETRY = RetryPolicy(maximum_attempts=3, initial_interval=timedelta(seconds=2))
_CHECK_RETRY = RetryPolicy(maximum_attempts=2, initial_interval=timedelta(seconds=1))
_POLLS_PER_EXECUTION = 500
GONE = "destroyed"
# With it the monitor learns whether its agent runs from the poll
# (`FleetSnapshot.agent_open`), not from an `agent_is_open` before each poll.
OPEN_IN_POLL_PATCH = "monitor-open-in-poll"
# With it the monitor signals `running → proving` once per machine when its
# prover starts proving (`_first_proofs`); histories without it replay without.
FIRST_PROOF_PATCH = "monitor-first-proof"
# With it the monitor signals a machine whose offline grace ended while it
# is still down (`_grace_over`); histories without it replay without.
GRACE_OVER_PATCH = "monitor-grace-over"
# With it a `configure` that changes nothing does not end the wait for the
# next poll; histories without it replay with the extra poll.
SAME_CONFIG_PATCH = "monitor-same-config-waits"


def diff_states(old: dict[int, str], new: dict[int, str]) -> list[tuple[int, str | None, str]]:
    """(instance, old state or None if new, new state or 'destroyed' if gone)."""
    changes: list[tuple[int, str | None, str]] = []
    for iid in sorted(set(old) | set(new)):
        before, after = old.get(iid), new.get(iid, GONE)
        if before != after:
            changes.append((iid, before, after))
    return changes


def state_change(iid: int, before: str | None, after: str, detail: str) -> StateChanged | None:
    """The `state_changed` signal for one change, its texts cut to the
    signal's limits: they come from hosts and vast.ai (a status message, a
    prover's detail) and are checked when read, but a value over a limit
    here would fail the workflow task at every retry (the poll's result is
    in history) and stop the monitor for good. None if it still does not
    validate (an empty state): the monitor drops the change, logs it and
    goes on (`FleetMonitorWorkflow._change`)."""
    limits = StateChanged.model_fields
    try:
        return StateChanged(
            instance_id=str(iid),
            old_state=before[: _max_length(limits["new_state"])] if before is not None else None,
            new_state=after[: _max_length(limits["new_state"])],
            detail=detail[: _max_length(limits["detail"])],
        )
    except ValidationError:
        return None


def _max_length(field: Any) -> int:
    """A string field's `max_length` (its `Field` metadata)."""
    return int(next(m.max_length for m in field.metadata if hasattr(m, "max_length")))


def _keep_old(new: dict[int, str], old: dict[int, str], iid: int) -> None:
    """Make the next diff report `iid`'s change again (it was not delivered)."""
    if iid in old:
        new[iid] = old[iid]
    else:
        new.pop(iid, None)


@workflow.defn
class FleetMonitorWorkflow:
    """Polls the fleet (activity poll_fleet → vast.ai, read only), signals
    `state_changed` to the agent workflow, for transitions and for a
    machine's first proving (`FIRST_PROOF_PATCH`); destroys duplicate rentals of one
    create (activity reconcile_labels → vast.ai). Every poll also says whether
    its agent still runs (`agent_open`: poll_fleet describes it through
    Temporal), and the monitor ends at the first poll after its agent closed,
    or when the agent disables it; a `configure` signal takes effect at once.
    The activity agent_is_open (→ Temporal) is asked only after a failed poll
    or a failed signal, and before every poll by monitors started before
    `OPEN_IN_POLL_PATCH`. Tells a human when the fleet stays below target and
    when it is back (activity send_notification, `MONITOR_NOTIFY_PATCH`:
    workflows/monitor_band.py). In demand mode, sets the agent's target from
    the demand source (activity observe_demand → the source and the store;
    signal `demand_target`; `MONITOR_DEMAND_PATCH`: workflows/monitor_demand.py).
    With the Snark Market, reads the business and acts on a loss (activity
    observe_market; workflows/monitor_market.py).
    Continues as new to keep its history short."""

    @workflow.init
    def __init__(self, inp: MonitorInput) -> None:
        self._config = inp.config
        self._last: FleetSnapshot | None = None
        self._signalled = 0
        self._reconfigured = False
        # Instances whose first proving was signalled (or seen at the start).
        self._proving = set(inp.proving) if inp.proving is not None else None
        # Instances waited out at the last poll (offline or unknown, in grace).
        self._waiting = set(inp.waiting)
        # The fleet below target, for notifications (workflows/monitor_band.py).
        self._band = Band(inp.under_since, inp.under_notified)
        # Demand mode's memory (workflows/monitor_demand.py).
        self._demand = DemandFollower(inp.demand_below_since, inp.demand_below_peak)
        # The Snark Market's (workflows/monitor_market.py).
        self._market = MarketFollower(inp.market_acted_on)

    @workflow.signal
    def configure(self, config: MonitorConfig) -> None:
        """The agent's config changed (poll interval, target, enabled): applied
        at once. The same config again (the agent sends it at each
        continue-as-new, agent_monitor.py) leaves the next poll where it was:
        polled at once, the monitor moved its polls onto the instants of the
        agent's runs, and a run and a poll at one instant went in whatever
        order the worker took them (a benchmark's day parted there)."""
        same = config == self._config
        self._config = config
        if same and workflow.patched(SAME_CONFIG_PATCH):
            return
        self._reconfigured = True

    async def _follow(self, agent: Any, agent_id: str, snap: FleetSnapshot) -> None:
        """Demand mode's and the market's steps; a target the agent took is held."""
        targets = []
        if workflow.patched(MONITOR_DEMAND_PATCH):
            targets.append(await self._demand.after_poll(agent, agent_id, self._config, snap))
        if self._config.market_mode == "snark" and workflow.patched(MONITOR_MARKET_PATCH):
            targets.append(await self._market.after_poll(agent, agent_id, self._config, snap))
        for target in targets:
            if target is not None:
                self._config = self._config.model_copy(update={"target_proofs_per_hour": target})

    @workflow.query
    def snapshot(self) -> FleetSnapshot | None:
        """The last poll: instances, capacity against target."""
        return self._last

    @workflow.run
    async def run(self, inp: MonitorInput) -> None:
        states = inp.last_states
        agent = workflow.get_external_workflow_handle(inp.agent_id)
        polls = inp.polls
        while self._config.enabled:
            open_in_poll = workflow.patched(OPEN_IN_POLL_PATCH)
            if not open_in_poll and not await self._agent_is_open(inp.agent_id):
                workflow.logger.info("agent %s is closed or gone; monitor ends", inp.agent_id)
                return
            try:
                snap = await workflow.execute_activity(
                    stubs.poll_fleet,
                    PollRequest(
                        agent_id=inp.agent_id,
                        target_proofs_per_hour=self._config.target_proofs_per_hour,
                        not_proving_minutes=self._config.not_proving_minutes,
                        offline_grace_minutes=self._config.offline_grace_minutes,
                        min_release_age_minutes=self._config.min_release_age_minutes,
                        failed_host_ttl_hours=self._config.failed_host_ttl_hours,
                        spare_one_machine=self._config.spare_one_machine,
                    ),
                    start_to_close_timeout=_POLL_TIMEOUT,
                    heartbeat_timeout=FLEET_HEARTBEAT_TIMEOUT,
                    retry_policy=_POLL_RETRY,
                    summary="poll fleet",
                )
            except ActivityError as exc:
                workflow.logger.warning("fleet poll failed: %s", exc.cause or exc)
                if workflow.patched(MONITOR_NOTIFY_PATCH):
                    await self._band.after_failed_poll(inp.agent_id, self._config, exc.cause)
                # No answer from the poll: ask on its own, or a monitor whose
                # polls all fail would outlive its agent.
                if open_in_poll and not await self._agent_is_open(inp.agent_id):
                    workflow.logger.info("agent %s is closed or gone; monitor ends", inp.agent_id)
                    return
            else:
                # None (Temporal could not say, or an older worker's poll): assume it runs.
                if open_in_poll and snap.agent_open is False:
                    workflow.logger.info("agent %s is closed or gone; monitor ends", inp.agent_id)
                    return
                self._last = snap
                record_fleet(inp.agent_id, snap)
                if workflow.patched(MONITOR_NOTIFY_PATCH):
                    await self._band.after_poll(inp.agent_id, self._config, snap)
                await self._follow(agent, inp.agent_id, snap)
                if snap.duplicate_labels:
                    await self._reconcile(inp.agent_id, snap.duplicate_labels)
                new = snap.states()
                if states is not None:
                    msgs = {i.id: i.change_detail() for i in snap.instances}
                    for iid, before, after in diff_states(states, new):
                        change = self._change(iid, before, after, msgs.get(iid, ""))
                        if change is None:
                            continue
                        delivered = await self._deliver(agent, inp.agent_id, change)
                        if delivered is None:
                            return
                        if not delivered:
                            _keep_old(new, states, iid)
                if workflow.patched(FIRST_PROOF_PATCH) and not await self._first_proofs(
                    agent, inp.agent_id, snap
                ):
                    return
                if workflow.patched(GRACE_OVER_PATCH) and not await self._grace_over(
                    agent, inp.agent_id, snap
                ):
                    return
                states = new
                workflow.set_current_details(
                    f"{len(snap.instances)} instances · {snap.capacity_proofs_per_hour:.0f} of "
                    f"{snap.target_proofs_per_hour:.0f} proofs/h · ${snap.fleet_dph:.2f}/h · "
                    f"{self._signalled} changes signalled"
                    + (f"\n{self._demand.last}" if self._demand.last else "")
                    + (f"\n{self._market.last}" if self._market.last else "")
                )
            polls += 1
            if polls % _POLLS_PER_EXECUTION == 0 or workflow.info().is_continue_as_new_suggested():
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(
                    MonitorInput(
                        agent_id=inp.agent_id,
                        config=self._config,
                        last_states=states,
                        polls=polls,
                        proving=sorted(self._proving) if self._proving is not None else None,
                        waiting=sorted(self._waiting),
                        under_since=self._band.under_since,
                        under_notified=self._band.notified,
                        demand_below_since=self._demand.below_since,
                        demand_below_peak=self._demand.below_peak,
                        market_acted_on=self._market.acted_on,
                    )
                )
            self._reconfigured = False
            # A configure signal ends the wait: a new interval or a disable
            # applies now, not after the old interval.
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(
                    lambda: self._reconfigured,
                    timeout=timedelta(seconds=self._config.poll_seconds),
                    timeout_summary="next fleet poll",
                )

    def _change(self, iid: int, before: str | None, after: str, detail: str) -> StateChanged | None:
        """`state_change`, a dropped change logged."""
        change = state_change(iid, before, after, detail)
        if change is None:
            workflow.logger.warning(
                "state change of instance %s dropped: not a valid signal (%r → %r)",
                iid,
                (before or "")[:40],
                after[:40],
            )
        return change

    async def _deliver(
        self, agent: workflow.ExternalWorkflowHandle[Any], agent_id: str, change: StateChanged
    ) -> bool | None:
        """Signal `change` to the agent: True if delivered, False if the agent
        runs but refused it for now (a full history, say: report it again next
        poll), None if the agent is gone (the monitor ends)."""
        try:
            await agent.signal("state_changed", change)
        except FailureError as exc:
            if not await self._agent_is_open(agent_id):
                workflow.logger.info("agent %s is gone; monitor ends", agent_id)
                return None
            workflow.logger.warning("state change not delivered: %s", exc)
            return False
        self._signalled += 1
        return True

    async def _grace_over(
        self, agent: workflow.ExternalWorkflowHandle[Any], agent_id: str, snap: FleetSnapshot
    ) -> bool:
        """Signal each machine whose offline grace ended while it is still
        offline or unknown (`offline_grace_minutes`): its state did not
        change, so without this the run that replaces it waited for the
        heartbeat. A refused signal is sent again next poll. False if the
        agent is gone."""
        rows = {i.id: i for i in snap.instances}
        waiting = {i.id for i in snap.instances if i.in_grace}
        for iid in sorted(self._waiting - waiting):
            row = rows.get(iid)
            if row is None or row.down_minutes is None:
                continue  # gone, or back up: nothing to replace
            change = self._change(
                iid,
                row.state,
                f"{row.state} past grace",
                f"{row.state} for {row.down_minutes:.0f} min, past offline_grace_minutes",
            )
            if change is None:
                continue
            delivered = await self._deliver(agent, agent_id, change)
            if delivered is None:
                return False
            if not delivered:
                waiting.add(iid)
        self._waiting = waiting
        return True

    async def _first_proofs(
        self, agent: workflow.ExternalWorkflowHandle[Any], agent_id: str, snap: FleetSnapshot
    ) -> bool:
        """Signal `running → proving` once for each machine whose prover
        started proving since the last poll: the vast.ai state stays
        "running", and without it a run that releases what the machine makes
        unneeded (a bridge, a traded machine) waited for the heartbeat. The
        first poll of a monitor (or of an execution continued from one
        without the set) only records the machines proving; a signal the
        agent refused is sent again next poll. False if the agent is gone."""
        now = snap.proving_ids()
        if self._proving is None:
            self._proving = now
            return True
        rows = {i.id: i for i in snap.instances}
        for iid in sorted(now - self._proving):
            row = rows[iid]
            change = self._change(
                iid,
                row.state,
                PROVING,
                f"its prover started proving ({row.proofs_per_hour:g} proofs/h counted)",
            )
            delivered = await self._deliver(agent, agent_id, change) if change else True
            if delivered is None:
                return False
            if delivered:
                self._proving.add(iid)
        # Gone machines leave the set, so it stays the size of the fleet.
        self._proving &= set(rows)
        return True

    async def _reconcile(self, agent_id: str, duplicates: dict[str, list[int]]) -> None:
        """A create label with several machines: an attempt of a create that
        was thought dead rented too. Keep the oldest, destroy the others."""
        extra = sum(len(ids) - 1 for ids in duplicates.values())
        try:
            report = await workflow.execute_activity(
                stubs.reconcile_labels,
                ReconcileRequest(agent_id=agent_id),
                start_to_close_timeout=_POLL_TIMEOUT,
                heartbeat_timeout=FLEET_HEARTBEAT_TIMEOUT,
                retry_policy=_POLL_RETRY,
                summary=f"destroy {extra} duplicate rental(s)",
            )
        except ActivityError as exc:
            workflow.logger.error("duplicate rentals not settled: %s", exc.cause or exc)
            return
        workflow.logger.warning(
            "duplicate rentals destroyed: %s (still there: %s)", report.destroyed, report.remaining
        )

    async def _agent_is_open(self, agent_id: str) -> bool:
        """Whether the agent runs; when Temporal cannot say, assume it does."""
        try:
            return await workflow.execute_activity(
                stubs.agent_is_open,
                agent_id,
                start_to_close_timeout=STORE_TIMEOUT,
                retry_policy=_CHECK_RETRY,
                summary="is the agent still running?",
            )
        except ActivityError as exc:
            workflow.logger.warning("could not check agent %s: %s", agent_id, exc.cause or exc)
            return True
