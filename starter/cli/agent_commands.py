"""What each agent-facing CLI command does, given a connected `AgentClient`:
the requests themselves are in starter/actions.py and starter/answers.py
(shared with the web console), printing the outcome is here."""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

from fleet_agent.models import AskResult, FreezeRequest, RunStatus, UnfreezeRequest
from starter import actions, answers
from starter.agent_client import AgentClient
from starter.answers import SentMessage, checked_ask, send_message
from starter.cli.config_args import checked_changes, parse_assignments, patch_from
from starter.hints import CLI
from starter.views.demand import stored_demand
from starter.views.fleet import ledger_spend, stored_suspects
from starter.views.market import stored_market
from starter.views.notify import stored_failures, with_stored_failures
from starter.views.render import (
    approvals_table,
    config_text,
    decision_text,
    freeze_text,
    status_text,
    verdict_text,
    wakes_table,
)
from starter.watchdog_schedule import setup_watchdog

__all__ = [
    "ask",
    "cancel_wake",
    "config",
    "reset",
    "say",
    "start",
    "status",
    "trigger",
    "wakes",
]


def _started_note(agent: AgentClient, started: bool) -> str:
    if started:
        return f"agent {agent.agent_id!r} was not running: started it on {agent.task_queue!r}"
    return f"agent {agent.agent_id!r} is running"


def _dump(data: Any) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False))


async def start(
    agent: AgentClient,
    target: float | None,
    paused: bool,
    sets: list[str],
    watchdog_every: timedelta,
) -> int:
    changes = parse_assignments(sets)
    if target is not None:
        changes["target_proofs_per_hour"] = target
    if paused:
        changes["paused"] = True
    started = await agent.start(patch_from(changes))
    if started:
        print(f"started agent {agent.agent_id!r} on task queue {agent.task_queue!r}")
    else:
        print(f"agent {agent.agent_id!r} is already running: attached to it")
        if changes:
            keys = " ".join(f"--set {k}=…" for k in changes)
            print(f"config options were not applied; use `{CLI} config {keys}`")
    await setup_watchdog(agent, watchdog_every)
    return 0


def _held_note(sent: SentMessage) -> str:
    """Why the answer may be long in coming: the LLM spend cap holds runs."""
    if sent.held_until is None:
        return ""
    return (
        f"; runs are held by the LLM spend cap until {sent.held_until:%Y-%m-%d %H:%M:%S}Z "
        f"(max_llm_usd_per_hour; `{CLI} status`): the message waits for that run"
    )


async def say(agent: AgentClient, text: str, author: str) -> int:
    sent = await send_message(agent, text, author)
    print(
        f"{_started_note(agent, sent.started)}; message sent (answered in the next run; "
        f"`{CLI} ask` or `say --wait` waits for the answer){_held_note(sent)}"
        f"{_unconfirmed_note(sent, agent.query_timeout)}"
    )
    return 0


def _unconfirmed_note(sent: SentMessage, within: float) -> str:
    """The agent did not show in time that it took the message: say so, and
    where a refusal would show, rather than claim it was taken."""
    if sent.confirmed:
        return ""
    return (
        f"; not yet confirmed: the agent did not answer within {within:g}s "
        f"(busy with earlier signals, or no worker runs it); `{CLI} status` lists "
        "refused messages"
    )


async def ask(agent: AgentClient, text: str, author: str, within: float, as_json: bool) -> int:
    """`ask` (= `say --wait`): the agent's `ask` update, which takes the
    message and answers once the run that took it has ended. Exit 0 with the
    answer, 1 if that run failed or the agent refused the message,
    ANSWER_TIMEOUT_EXIT when `within` seconds pass first. Needs no store."""
    checked_ask(text, author, within)  # a typo fails before anything is sent
    print(
        f"asking agent {agent.agent_id!r}, waiting up to {within:g}s for the answer",
        file=sys.stderr,
    )
    result, started = await answers.ask(agent, text, author, within)
    if started:
        print(_started_note(agent, started), file=sys.stderr)
    if as_json:
        _dump(result.model_dump(mode="json"))
    else:
        print(answer_text(result))
    return 0 if result.run_status == RunStatus.OK else 1


def answer_text(result: AskResult) -> str:
    """The run's answer, headed by the run that gave it and followed by its
    verdict and cost."""
    head = f"run #{result.run}"
    status = result.run_status.value if result.run_status else "unknown"
    if result.run_status == RunStatus.OK:
        lines = [f"{head} answered:", result.answer or "(no text)"]
    else:
        lines = [f"{head} ended {status}: {result.error or 'no error recorded'}"]
        if result.answer:
            lines.append(result.answer)
    if result.answer_cut:
        lines.append("[… cut: the whole answer is in the run log]")
    lines.append(
        f"(verdict: {verdict_text(result.verdict, result.verdict_error)}; "
        f"LLM cost ${result.cost_usd:.4f}; details: "
        f"`{CLI} show-run {result.run} --agent {result.agent_id}`)"
    )
    return "\n".join(lines)


async def trigger(agent: AgentClient, reason: str | None) -> int:
    started = await actions.request_trigger(agent, reason)
    print(f"{_started_note(agent, started)}; run requested")
    return 0


async def reset(agent: AgentClient, reason: str | None) -> int:
    await actions.request_reset(agent, reason)
    print(
        f"reset requested: agent {agent.agent_id!r} starts a new session after the current run "
        "(run numbers, wakes and pending triggers carry over)"
    )
    return 0


async def cancel_wake(agent: AgentClient, wake_id: str) -> int:
    await actions.cancel_wake(agent, wake_id)
    print(f"cancelled wake {wake_id}")
    return 0


async def wakes(agent: AgentClient, as_json: bool) -> int:
    st = await agent.status()
    if as_json:
        _dump([w.model_dump(mode="json") for w in st.wakes])
    else:
        print(wakes_table(st.wakes, datetime.now(UTC)))
    return 0


async def status(agent: AgentClient, as_json: bool) -> int:
    """The agent's status, as text or JSON; both show the spend as of now,
    from the ledger (the query's is as of the last run's start: after a
    rental it says $0 until the next run), and the store's failed
    deliveries, when the store can be read (else the query's)."""
    st = await agent.status()
    ledger = await asyncio.to_thread(ledger_spend, agent.agent_id)
    failures = await asyncio.to_thread(stored_failures, agent.agent_id)
    shown = with_stored_failures(st, failures)
    if as_json:
        if ledger is not None:
            shown = shown.model_copy(update={"spend": ledger})
        print(shown.model_dump_json(indent=2))
    else:
        demand = await asyncio.to_thread(stored_demand, st)
        suspects = await asyncio.to_thread(stored_suspects, agent.agent_id)
        market = await asyncio.to_thread(stored_market, st)
        print(status_text(shown, datetime.now(UTC), ledger, demand, suspects, market))
    return 0


async def config(agent: AgentClient, sets: list[str], as_json: bool) -> int:
    """Show the config, or change it (the workflow validates and answers the result)."""
    if sets:
        result = await agent.update_config(checked_changes(sets))
    else:
        result = (await agent.status()).config
    if as_json:
        print(result.model_dump_json(indent=2))
    else:
        print(config_text(result))
    return 0


async def freeze(
    agent: AgentClient, reason: str | None, destroy_all: bool, author: str, wait: float
) -> int:
    """The kill switch. Exit 0 once frozen (and, with --destroy-all, once vast.ai
    lists no machine of the agent); 1 if the fleet could not be read or destroyed."""
    request = actions.payload(
        FreezeRequest,
        "freeze",
        reason=reason or "",
        destroy_all=destroy_all,
        author=author,
    )
    report = await agent.freeze(request, wait=wait)
    print(freeze_text(report))
    return 1 if report.error else 0


async def approvals(agent: AgentClient, as_json: bool) -> int:
    """The approvals the agent's run waits for (the `status` query)."""
    pending = (await agent.status()).pending_approvals
    if as_json:
        print(json.dumps([p.model_dump(mode="json") for p in pending], indent=2))
    else:
        print(approvals_table(pending))
    return 0


async def decide(
    agent: AgentClient, approval_id: str, approve: bool, note: str | None, author: str
) -> int:
    """`approve` / `deny`: exit 0 once the agent took the decision (and told the
    run); 1 if the run could not be told; a refused ID is a clear error."""
    outcome = await actions.decide_approval(agent, approval_id, approve, note, author)
    print(decision_text(outcome))
    return 1 if outcome.error else 0


async def unfreeze(agent: AgentClient, reason: str | None, author: str) -> int:
    request = actions.payload(
        UnfreezeRequest,
        "unfreeze",
        reason=reason or "",
        author=author,
    )
    config = await agent.unfreeze(request)
    print(
        "unfrozen: runs and the monitor resume; the next run re-plans the fleet"
        if not config.frozen
        else "still frozen"
    )
    return 0
