"""What reaches the agent from outside: signals, the config update, queries.

Every signal takes loose JSON and is parsed into a model or a visible refusal
(`status.rejected`), in O(1): a flood of them costs the workflow task little
and leaves bounded state (fleet_agent/triggers.py). A signal with an unknown
name is recorded too. The update's validator refuses bad values before they
reach history.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models and pure, deterministic helpers.
    from fleet_agent.inputs import parse_config_patch, parse_payload
    from fleet_agent.models import (
        AgentConfig,
        AgentStatus,
        CancelWake,
        HumanMessage,
        InboxItem,
        ResetSession,
        StateChanged,
        TriggerNow,
    )
    from fleet_agent.wakes import cancel_wake as remove_wake
    from workflows.agent_core import AgentCore

__all__ = ["InputsMixin"]

# Config fields whose change is news for the model (it should re-plan); the
# others (pause, heartbeat, budgets) only change how the loop runs.
_FLEET_FIELDS = frozenset(
    {
        "target_proofs_per_hour",
        "max_instances",
        "max_fleet_dph",
        "max_instance_dph",
        "allowed_gpus",
        "min_reliability",
        "dry_run",
        "not_proving_minutes",
        "offline_grace_minutes",
        "min_release_age_minutes",
        "max_creates_per_hour",
        "max_destroys_per_hour",
        "daily_budget_usd",
    }
)
# Config fields the monitor's poll uses (besides monitor_*): sent to it at once.
_MONITOR_FIELDS = frozenset(
    {
        "target_proofs_per_hour",
        "not_proving_minutes",
        "offline_grace_minutes",
        "min_release_age_minutes",
        "failed_host_ttl_hours",
    }
)
_KNOWN_SIGNALS = (
    "human_message, state_changed, trigger_now, reset_session, cancel_wake, "
    "approval_requested, approval_closed"
)


class InputsMixin(AgentCore):
    """Signal, update and query handlers of FleetAgentWorkflow."""

    # ------------------------------------------------------------ signals

    @workflow.signal(
        description='P0: a message from the operator, {"text": str, "author": str, '
        '"message_id": str (optional, the sender\'s)} or a bare string'
    )
    def human_message(self, raw: Any) -> None:
        """P0: the operator talks to the agent. `{"text", "author"}` or a bare string."""
        self._signals += 1
        msg = self._valid(parse_payload(HumanMessage, raw, bare="text"), "human_message", raw)
        if msg is not None:
            refusal = self._buffer.add_message(
                self._state.next_trigger_seq, workflow.now(), msg.text, msg.author, msg.message_id
            )
            self._accepted("human_message", refusal, raw)

    @workflow.signal(
        description='P1: {"instance_id", "old_state", "new_state", "detail"}; sent by the monitor'
    )
    def state_changed(self, raw: Any) -> None:
        """P1: an instance changed state (sent by the fleet monitor); coalesced per instance."""
        self._signals += 1
        change = self._valid(parse_payload(StateChanged, raw), "state_changed", raw)
        if change is not None:
            folded = self._buffer.folds_change_of(change.instance_id)
            refusal = self._buffer.add_state_change(
                self._state.next_trigger_seq,
                workflow.now(),
                instance_id=change.instance_id,
                old_state=change.old_state,
                new_state=change.new_state,
                detail=change.detail,
            )
            # A folded change moves no debounce window: the due time stands,
            # and a flood skips recomputing it for every signal.
            self._accepted("state_changed", refusal, raw, notify=not folded)

    @workflow.signal(
        description='P0: run as soon as the 2 s window allows; {"reason": str} optional'
    )
    def trigger_now(self, raw: Any = None) -> None:
        """P0: run as soon as the P0 window allows. Argument optional."""
        self._signals += 1
        req = self._valid(
            parse_payload(TriggerNow, raw, bare="reason", optional=True), "trigger_now", raw
        )
        if req is not None:
            refusal = self._buffer.add_trigger_now(
                self._state.next_trigger_seq, workflow.now(), req.reason
            )
            self._accepted("trigger_now", refusal, raw)

    @workflow.signal(
        description="new conversation after the current run; counters, wakes, triggers kept"
    )
    def reset_session(self, raw: Any = None) -> None:
        """Start a new conversation after the current run; counters, wakes and
        pending triggers carry over."""
        self._signals += 1
        req = self._valid(
            parse_payload(ResetSession, raw, bare="reason", optional=True), "reset_session", raw
        )
        if req is not None:
            self._state.reset_reason = req.reason
            self._changed = True

    @workflow.signal(description='drop a pending wake: {"wake_id": str}')
    def cancel_wake(self, raw: Any) -> None:
        """Drop one pending wake by id."""
        self._signals += 1
        req = self._valid(parse_payload(CancelWake, raw, bare="wake_id"), "cancel_wake", raw)
        if req is None:
            return
        self._state.wakes, existed = remove_wake(self._state.wakes, req.wake_id)
        if not existed:
            self._reject("cancel_wake", f"no pending wake {req.wake_id!r}", raw)
        self._notify()

    @workflow.signal(dynamic=True)
    def unknown_signal(self, name: str, args: Sequence[RawValue]) -> None:
        """Any other signal name: recorded in status.rejected, never silently lost."""
        self._signals += 1
        raw: Any = None
        if args:
            with contextlib.suppress(Exception):
                raw = workflow.payload_converter().from_payload(args[0].payload)
        self._reject(name, f"unknown signal {name[:100]!r} (known: {_KNOWN_SIGNALS})", raw)

    # ------------------------------------------------------------ update

    # Bare decorator: with arguments the SDK types an async update as returning
    # a coroutine, which breaks execute_update for callers under mypy.
    @workflow.update
    async def update_config(self, raw: Any) -> AgentConfig:
        """Change part of the config; returns the resulting config. Passes the
        monitor its part (poll interval, target, enabled)."""
        patch = parse_config_patch(raw).value
        if patch is None:
            # The validator refused it already; this only guards a replay of
            # an update accepted by older code.
            raise ApplicationError("invalid config", non_retryable=True)
        old = self._state.config
        self._state.config = patch.apply(old)
        changed = sorted(
            k
            for k in patch.model_dump(exclude_none=True)
            if getattr(old, k) != getattr(self._state.config, k)
        )
        fleet_changes = [k for k in changed if k in _FLEET_FIELDS]
        if fleet_changes:
            self._buffer.add_config_change(
                self._state.next_trigger_seq,
                workflow.now(),
                ", ".join(
                    f"{k}: {getattr(old, k)} → {getattr(self._state.config, k)}"
                    for k in fleet_changes
                ),
            )
            self._state.next_trigger_seq += 1
        self._notify()
        self._show()
        if any(k.startswith("monitor_") or k in _MONITOR_FIELDS for k in changed):
            if self._state.config.monitor_enabled and not old.monitor_enabled:
                # (A frozen agent's monitor stays stopped: see _ensure_monitor.)
                await self._ensure_monitor()
            else:
                await self._configure_monitor()
        return self._state.config

    @update_config.validator
    def _validate_config(self, raw: Any) -> None:
        # Runs before the update is written to history: a bad value is refused
        # with a clear message and leaves no trace.
        parsed = parse_config_patch(raw)
        error = parsed.error
        if parsed.value is not None:
            try:
                parsed.value.apply(self._state.config)
            except ValueError as exc:
                error = str(exc).splitlines()[0]
        if error:
            raise ValueError(f"invalid config: {error}")

    # ------------------------------------------------------------ queries

    @workflow.query(
        name="live_config",
        description="the config in force now (fleet tools read it right before acting)",
    )
    def live_config(self) -> AgentConfig:
        """The current config, so a fleet tool call applies guardrails accepted
        after its run started (read-only)."""
        return self._state.config

    @workflow.query(
        description="phase, run count, session, pending triggers, wakes, last run, config"
    )
    def status(self) -> AgentStatus:
        """What the agent is doing now (contract: see docs/ARCHITECTURE.md)."""
        state = self._state
        info = workflow.info()
        heartbeat = (
            None
            if state.config.paused
            else self._heartbeat_from + timedelta(seconds=state.config.heartbeat_seconds)
        )
        return AgentStatus(
            agent_id=self._agent_id,
            session=state.session,
            run_count=state.run_count,
            phase=self._phase,
            current_run=self._current_run,
            pending_triggers=self._buffer.shown(),
            next_heartbeat_at=heartbeat,
            next_run_due_at=None if self._due is None else self._due.at,
            wakes=state.wakes,
            last_run=state.last_run,
            config=state.config,
            rejected=state.rejected,
            rejected_total=state.rejected_total,
            executions=state.executions,
            history_length=info.get_current_history_length(),
            history_bytes=info.get_current_history_size(),
            pending_bytes=self._buffer.bytes,
            unstored_messages=len(self._buffer.unstored_keys),
            frozen=state.freeze,
            pending_approvals=state.pending_approvals,
            spend=state.spend,
            llm_cost=state.llm_cost,
        )

    @workflow.query(description="internal: operator message texts not yet in the store")
    def unstored_messages(self) -> list[InboxItem]:
        """For the store_operator_messages activity (texts cross history once)."""
        return self._buffer.unstored_items()
