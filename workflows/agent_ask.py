"""The `ask` update's side of the agent: which run took an asked message, and
its answer.

An `ask` is a `human_message` that waits: the workflow takes the message as
the signal does (workflows/agent_inputs.py, `Intake.message`), then
waits here until the run that took it ends, and returns that run's answer,
verdict and cost (fleet_agent/models/ask.py). `AskBook` holds only the asks
that wait; the workflow's run cycle (workflows/agent.py) tells it
which run took which message and how each ended. Nothing of it is durable
state: an ask lives in the execution it was sent to, and the agent's
continue-as-new waits for it (`AgentExecution.continue_as_new` waits for
every handler). When asks wait for a message no run has taken, the loop
runs before it continues as new (`_run_for_asks_first`,
workflows/agent.py); only when history is too long for that, or no run
may start (paused, frozen, the LLM spend cap), does such an ask answer
`pending` at the continue-as-new: the message itself is in the state handed
over, and the next execution's run answers it. Deterministic: runs inside the
workflow sandbox.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models only.
    from fleet_agent.models import (
        AgentConfig,
        AskOutcome,
        AskResult,
        FreezeInfo,
        RunResult,
        RunStatus,
        Trigger,
        TriggerKind,
    )

__all__ = ["AskBook", "no_answer_now", "refused"]

_CLI = "fleet-agent"


@dataclass
class _Waiter:
    """One ask: the seq of its message's trigger, the run that took it."""

    seq: int
    run: int | None = None
    handle: workflow.ChildWorkflowHandle[Any, RunResult] | None = None
    result: RunResult | None = None

    def ended(self) -> bool:
        """Its run has ended: recorded by the loop, or seen on the child's
        handle (the loop may be waiting to continue as new meanwhile)."""
        return self.result is not None or (self.handle is not None and self.handle.done())


def no_answer_now(config: AgentConfig, freeze: FreezeInfo | None) -> str:
    """Why no run would answer an ask now (frozen, paused), or ""."""
    if config.frozen:
        why = f" ({freeze.reason})" if freeze else ""
        return (
            f"the agent is frozen{why}: no run starts until `fleet-agent unfreeze`; "
            "the message was not taken"
        )
    if config.paused:
        return (
            "the agent is paused: no run answers until `fleet-agent config --set "
            "paused=false`; the message was not taken (`fleet-agent say` leaves it "
            "for the next run)"
        )
    return ""


def refused(agent_id: str, reason: str) -> AskResult:
    """The message was not taken: nothing waits for it."""
    return AskResult(agent_id=agent_id, outcome=AskOutcome.REFUSED, reason=reason)


class AskBook:
    """The asks that wait for their run, in this execution."""

    def __init__(self, agent_id: str) -> None:
        self._agent_id = agent_id
        self._waiting: list[_Waiter] = []

    def started(
        self,
        run: int,
        triggers: Sequence[Trigger],
        handle: workflow.ChildWorkflowHandle[Any, RunResult] | None,
    ) -> None:
        """Run `run` took `triggers`: the asks whose message is among them wait for it."""
        if not self._waiting:
            return
        seqs = {t.seq for t in triggers if t.kind == TriggerKind.HUMAN_MESSAGE}
        for waiter in self._waiting:
            if waiter.run is None and waiter.seq in seqs:
                waiter.run, waiter.handle = run, handle

    def untaken(self) -> bool:
        """Some ask waits for a message no run has taken yet."""
        return any(waiter.run is None for waiter in self._waiting)

    def finished(self, result: RunResult) -> None:
        """Run `result.run` ended (its result as the agent took it in)."""
        for waiter in self._waiting:
            if waiter.run == result.run:
                waiter.result = result

    async def answer(
        self, seq: int, wait_seconds: int, continuing: Callable[[], bool]
    ) -> AskResult:
        """Wait up to `wait_seconds` for the run that takes message `seq` to
        end; its answer, or `pending` with the run to follow. `continuing`:
        the agent is about to continue as new (a message no run has taken
        by then waits for the next execution's run)."""
        waiter = _Waiter(seq)
        self._waiting.append(waiter)
        try:
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(
                    lambda: waiter.ended() or (waiter.run is None and continuing()),
                    timeout=timedelta(seconds=wait_seconds),
                    timeout_summary=f"ask: answer to message {seq}",
                )
        finally:
            self._waiting.remove(waiter)
        if waiter.ended():
            return self._answered(waiter)
        return self._pending(waiter, wait_seconds, continuing())

    def _answered(self, waiter: _Waiter) -> AskResult:
        assert waiter.run is not None
        result = waiter.result
        if result is None:
            assert waiter.handle is not None
            try:
                result = waiter.handle.result()
            except ChildWorkflowError as exc:
                result = RunResult(
                    run=waiter.run,
                    status=RunStatus.FAILED,
                    error=f"run workflow did not complete: {exc.cause or exc}",
                )
        cut = " (cut: the whole answer is in the run log)" if result.reply_cut else ""
        return AskResult(
            agent_id=self._agent_id,
            outcome=AskOutcome.ANSWERED,
            run=result.run,
            run_status=result.status,
            verdict=result.verdict,
            verdict_error=result.verdict_error,
            noop=result.noop,
            error=result.error,
            cost_usd=result.cost_usd,
            answer=result.reply,
            answer_cut=result.reply_cut,
            follow=f"`{_CLI} show-run {result.run} --agent {self._agent_id}`{cut}",
        )

    def _pending(self, waiter: _Waiter, wait_seconds: int, continuing: bool) -> AskResult:
        agent = self._agent_id
        if waiter.run is not None:
            reason = f"run #{waiter.run} took the message and had not ended after {wait_seconds}s"
            follow = (
                f"`{_CLI} runs --agent {agent}` (or `temporal workflow describe "
                f"--workflow-id {agent}/run-{waiter.run}`), then `{_CLI} show-run "
                f"{waiter.run} --agent {agent}`"
            )
        else:
            reason = (
                "the agent continued as new before a run took the message; its next run answers it"
                if continuing
                else f"no run took the message within {wait_seconds}s (runs held by the LLM "
                "spend cap, or the agent paused since?); it waits for the next run"
            )
            follow = f"`{_CLI} status --agent {agent}`, then `{_CLI} runs --agent {agent}`"
        return AskResult(
            agent_id=agent,
            outcome=AskOutcome.PENDING,
            reason=reason,
            run=waiter.run,
            follow=follow,
        )
