"""One-line and one-screen summaries of an agent, shared by the Web UI (the
workflow's current details and child summaries) and the CLI.

Pure: the workflow calls it with its state.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from fleet_agent.loop.schedule import Due
from fleet_agent.models import AgentState, LastRun, Phase, RunResult, Trigger

__all__ = ["agent_details", "last_run_line", "run_details", "trigger_summary"]

_MAX_WAKES_SHOWN = 5


def trigger_summary(triggers: Sequence[Trigger]) -> str:
    """`3× state_changed, human_message`: coalesced triggers count for all they hold."""
    counts: dict[str, int] = {}
    for t in triggers:
        counts[t.kind.value] = counts.get(t.kind.value, 0) + t.count
    return ", ".join(f"{n}× {kind}" if n > 1 else kind for kind, n in counts.items()) or "none"


def _hms(at: datetime) -> str:
    return at.strftime("%H:%M:%S")


def _arguments(arguments: dict[str, object]) -> str:
    return " ".join(f"{k}={v}" for k, v in list(arguments.items())[:4])[:80]


def agent_details(state: AgentState, phase: Phase, current_run: int | None, due: Due | None) -> str:
    """The agent at a glance, in markdown, for the Web UI's current details.

    What needs an operator comes first (a freeze, approvals), then one status
    line (phase, target, $/h now), then the last run's verdict and answer,
    then what waits; spend and LLM cost close it.
    """
    now_dph = f" · ${state.spend.current_dph:.2f}/h now" if state.spend is not None else ""
    lines = [
        f"**{phase.value}** · target {state.config.target_proofs_per_hour:g} proofs/h{now_dph}"
        f" · session {state.session} · {state.run_count} runs"
    ]
    if state.last_run is not None:
        lines.append(last_run_line(state.last_run))
    if state.freeze is not None:
        # At the top: an operator looking at the Web UI must see it first.
        f = state.freeze
        lines.insert(
            0,
            f"**FROZEN** by {f.author} at {_hms(f.at)}"
            + (f": {f.reason[:120]}" if f.reason else "")
            + " — no runs, no monitor, every fleet change refused; "
            "`.venv/bin/fleet-agent unfreeze` resumes",
        )
    for pending in reversed(state.pending_approvals):
        # Also at the top: a run waits for exactly this, and nothing else moves.
        lines.insert(
            1 if state.freeze is not None else 0,
            f"**APPROVAL NEEDED** {pending.id}: run #{pending.run} {pending.tool} "
            f"{_arguments(pending.arguments)} ({pending.dph:+.3f} $/h) — {pending.reason[:160]}; "
            f"expires {_hms(pending.expires_at)} — `.venv/bin/fleet-agent approve {pending.id}` "
            f"or `.venv/bin/fleet-agent deny {pending.id}`",
        )
    if state.llm_held_since is not None and current_run is None:
        # Nothing runs until the hour allows it: say so where an operator looks first.
        until = f" until {_hms(due.at)}" if due is not None else ""
        lines.insert(
            0,
            f"**RUNS HELD**{until} (since {_hms(state.llm_held_since)}): the LLM cost of the "
            f"last hour reached max_llm_usd_per_hour ${state.config.max_llm_usd_per_hour:g}; "
            "`.venv/bin/fleet-agent config --set max_llm_usd_per_hour=...` resumes sooner",
        )
    if state.demand_held is not None:
        held = state.demand_held
        lines.append(
            f"demand target {held.change.target_per_h:g} proofs/h held since "
            f"{_hms(held.since)}: max_demand_changes_per_hour "
            f"{state.config.max_demand_changes_per_hour}"
        )
    if state.restarted is not None:
        lines.append(f"{state.restarted.text()} (`.venv/bin/fleet-agent status`)")
    if current_run is not None:
        lines.append(f"running: run #{current_run}")
    elif due is not None:
        lines.append(f"next: {due.label} at {_hms(due.at)}")
    if state.pending_triggers:
        lines.append(f"pending triggers: {trigger_summary(state.pending_triggers)}")
    if state.wakes:
        shown = state.wakes[:_MAX_WAKES_SHOWN]
        lines.append(
            "wakes: " + ", ".join(f"{w.id} {_hms(w.due_at)} ({w.reason[:40]})" for w in shown)
        )
    if state.rejected_total:
        latest = state.rejected[-1]
        lines.append(
            f"rejected inputs: {state.rejected_total} (latest {latest.signal}: {latest.error[:80]})"
        )
    if state.spend is not None:
        lines.append(state.spend.line(state.config.daily_budget_usd))
    if state.llm_cost is not None:
        lines.append(state.llm_cost.line())
    return "\n\n".join(lines)


def _verdict_words(acted: bool | None, noop: bool) -> str:
    if noop:
        return "no-op"
    return "verdict unknown" if acted is None else "acted" if acted else "no action"


def last_run_line(last: LastRun) -> str:
    """`last run #41: ok, acted — answer: …` (the answer's preview, quoted)."""
    acted = None if last.verdict is None else last.verdict.action
    line = f"last run #{last.run}: {last.status.value}, {_verdict_words(acted, last.noop)}"
    if last.error:
        line += f" — {last.error[:80]}"
    if last.answer:
        line += f" — answer: “{last.answer}”"
    return line


def run_details(result: RunResult) -> str:
    """A finished run for the Web UI's current details: outcome, then the
    start of its answer (the full text is in the store: `fleet-agent show-run`)."""
    acted = None if result.verdict is None else result.verdict.action or result.mutating_calls > 0
    head = (
        f"**{result.status.value}** · {_verdict_words(acted, result.noop)} · "
        f"{result.rounds} round(s) · {result.tool_calls} tool call(s)"
    )
    lines = [head]
    if result.error or result.verdict_error:
        lines.append((result.error or result.verdict_error)[:160])
    if result.answer:
        lines.append(f"answer: “{result.answer}”")
    return "\n\n".join(lines)
