"""One-line and one-screen summaries of an agent, shared by the Web UI (the
workflow's current details and child summaries) and the CLI.

Pure: the workflow calls it with its state.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from fleet_agent.models import AgentState, Phase, Trigger
from fleet_agent.schedule import Due

__all__ = ["agent_details", "trigger_summary"]

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
    """The agent at a glance, in markdown, for the Web UI's current details."""
    lines = [f"**{phase.value}** · session {state.session} · {state.run_count} runs"]
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
    if state.last_run is not None:
        last = state.last_run
        lines.append(
            f"last run #{last.run}: {last.status.value}"
            + (" (no-op)" if last.noop else "")
            + (f" — {last.error[:80]}" if last.error else "")
        )
    if state.rejected_total:
        latest = state.rejected[-1]
        lines.append(
            f"rejected inputs: {state.rejected_total} (latest {latest.signal}: {latest.error[:80]})"
        )
    lines.append(f"target: {state.config.target_proofs_per_hour:g} proofs/h")
    if state.spend is not None:
        lines.append(state.spend.line(state.config.daily_budget_usd))
    if state.llm_cost is not None:
        lines.append(state.llm_cost.line())
    return "\n\n".join(lines)
