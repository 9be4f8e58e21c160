"""Runs and messages written the short way, for the tests of `fleet_agent.store`:
two agents, a fixed start time, a trigger, a run begun and finished, a message."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fleet_agent.models import RunStatus, TokenUsage, Trigger, TriggerKind, Verdict
from fleet_agent.store import Store

AGENT = "agent-a"
OTHER = "agent-b"
T0 = datetime(2025, 3, 4, 5, 6, 7, 891011, tzinfo=UTC)


def _trigger(seq: int, text_: str = "scale up") -> Trigger:
    return Trigger(seq=seq, kind=TriggerKind.HUMAN_MESSAGE, received_at=T0, text=text_, author="op")


def _begin(store: Store, run: int, session: int = 1, agent: str = AGENT) -> None:
    store.run_writes.begin_run(
        agent,
        run,
        session,
        [_trigger(run)],
        f"block {run}",
        T0 + timedelta(minutes=run),
    )


def _finish(
    store: Store,
    run: int,
    *,
    status: RunStatus = RunStatus.OK,
    in_prompt: bool = True,
    agent: str = AGENT,
    verdict: Verdict | None = None,
) -> None:
    store.run_writes.finish_run(
        agent,
        run,
        status=status,
        verdict=verdict,
        verdict_error="",
        noop=False,
        in_prompt=in_prompt,
        error="",
        final_text=f"final {run}",
        actions_digest=f"digest {run}",
        mutating_calls=0,
        tool_calls=0,
        rounds=1,
        usage=TokenUsage(),
        llm_seconds=0.5,
        ended_at=T0 + timedelta(minutes=run, seconds=30),
    )


def _message(
    store: Store, run: int, seq: int, role: str = "assistant", in_prompt: bool = False
) -> bool:
    return store.messages.add_message(
        AGENT,
        run,
        seq,
        round=seq // 2,
        role=role,  # type: ignore[arg-type]  # tests pass plain strings on purpose
        kind="assistant" if role == "assistant" else "context",
        content=f'[{{"type": "text", "text": "msg {seq}"}}]',
        created_at=T0,
        in_prompt=in_prompt,
    )
