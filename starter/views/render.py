"""Plain-text views of the agent's status, wakes and config for the terminal.

Pure functions of their inputs and `now`, so they are easy to test and never
touch the network. Times are shown in UTC with a relative hint ("in 4m 10s").
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from fleet_agent.demand.point import DemandPoint
from fleet_agent.fleet.snapshot import FleetInstance
from fleet_agent.market.point import MarketPoint
from fleet_agent.models import (
    AgentConfig,
    AgentStatus,
    ApprovalOutcome,
    FreezeReport,
    LastRun,
    PendingApproval,
    SpendSummary,
    Verdict,
    Wake,
)
from fleet_agent.visibility.details import trigger_summary
from starter.hints import CLI
from starter.views.market_render import market_rows

__all__ = [
    "approvals_table",
    "config_text",
    "decision_text",
    "demand_text",
    "fmt_duration",
    "fmt_time",
    "fmt_when",
    "freeze_text",
    "last_run_text",
    "llm_spend_text",
    "status_text",
    "table",
    "trigger_summary",
    "verdict_text",
    "wakes_table",
]


def fmt_duration(seconds: float) -> str:
    """`4.2s`, `3m 05s`, `2h 10m`, `3d 4h`."""
    seconds = abs(seconds)
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h {minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d {hours}h"


def fmt_time(at: datetime | None) -> str:
    return "—" if at is None else at.strftime("%Y-%m-%d %H:%M:%SZ")


def fmt_when(at: datetime | None, now: datetime) -> str:
    """`2026-11-29 10:05:00Z (in 4m 10s)` or `(... ago)` for the past."""
    if at is None:
        return "—"
    delta = (at - now).total_seconds()
    rel = f"in {fmt_duration(delta)}" if delta >= 0 else f"{fmt_duration(delta)} ago"
    return f"{fmt_time(at)} ({rel})"


def verdict_text(verdict: Verdict | None, verdict_error: str = "") -> str:
    """The verdict as the run log shows it; a missing one is never made up."""
    if verdict is None and verdict_error:
        return f"no verdict ({verdict_error})"
    if verdict_error:
        return f"invalid ({verdict_error})"
    if verdict is None:
        return "—"
    action = "action" if verdict.action else "no action"
    change = "state changed" if verdict.state_changed else "no change"
    return f"{action}, {change}"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns separated by two spaces; the last column is not padded."""
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        padded = [c.ljust(w) for c, w in zip(cells[:-1], widths[:-1], strict=True)]
        return "  ".join([*padded, cells[-1]]).rstrip()

    return "\n".join([line(headers), *(line(r) for r in rows)])


def wakes_table(wakes: Sequence[Wake], now: datetime) -> str:
    if not wakes:
        return "no pending wakes"
    rows = [
        [
            w.id,
            ("in " if w.due_at >= now else "overdue ")
            + fmt_duration((w.due_at - now).total_seconds()),
            fmt_time(w.due_at),
            w.reason,
            f"#{w.requested_by_run}",
        ]
        for w in sorted(wakes, key=lambda w: (w.due_at, w.id))
    ]
    return table(["ID", "DUE IN", "DUE AT", "REASON", "REQUESTED BY"], rows)


def last_run_text(last: LastRun | None) -> str:
    if last is None:
        return "none yet"
    parts = [f"#{last.run} {last.status.value}", verdict_text(last.verdict, last.verdict_error)]
    if last.noop:
        parts.append("[no-op]")
    if not last.in_prompt:
        parts.append("[skipped in prompt]")
    if last.dph_added or last.dph_removed:
        parts.append(dph_change_text(last.dph_added, last.dph_removed))
    if last.started_at is not None and last.ended_at is not None:
        parts.append(f"took {fmt_duration((last.ended_at - last.started_at).total_seconds())}")
    if last.ended_at is not None:
        parts.append(f"ended {fmt_time(last.ended_at)}")
    text = " · ".join(parts)
    return f"{text}\n{'':16}error: {last.error}" if last.error else text


def dph_change_text(added: float, removed: float) -> str:
    """`[+$0.412/h −$0.300/h]`: the $/hour a run's tool calls rented and released."""
    parts = [f"+${added:.3f}/h"] if added else []
    parts += [f"−${removed:.3f}/h"] if removed else []
    return f"[{' '.join(parts)}]"


def spend_text(st: AgentStatus, ledger: SpendSummary | None = None) -> str:
    """The status's spend line: the ledger's figures as of now when it could be
    read (`ledger`), else the ones the last run read, and when."""
    s = ledger or st.spend
    if s is None:
        return f"— (no run has read it yet) · budget ${st.config.daily_budget_usd:.2f}/day"
    if ledger is not None:
        until = f"accrued to {fmt_time(s.accrued_until)}" if s.accrued_until else "no poll yet"
        when = f"as of {fmt_time(s.as_of)} from the ledger ({until})"
    else:
        when = f"as of {fmt_time(s.as_of)}, when the last run read it"
    return (
        f"today ${s.today_usd:.2f} of ${st.config.daily_budget_usd:.2f} budget · "
        f"24 h ${s.last_24h_usd:.2f} · month ${s.month_usd:.2f} · now ${s.current_dph:.3f}/h"
        f" ({s.open_instances} machine(s)) · {when}"
    )


def llm_spend_text(st: AgentStatus, now: datetime) -> str:
    """The last hour's LLM cost against `max_llm_usd_per_hour`, and the hold:
    `RUNS HELD until 10:42:00Z (in 12m 00s), since 10:03:10Z: last hour
    $2.13 of $2.00/h cap` ("" from an agent that keeps no such figure)."""
    p = st.llm_spend
    if p is None:
        return ""
    figure = f"last hour ${p.last_hour_usd:.2f} of ${p.cap_usd:g}/h cap"
    if p.held_until is None:
        return figure
    since = f", since {fmt_time(p.held_since)}" if p.held_since is not None else ""
    return f"RUNS HELD until {fmt_when(p.held_until, now)}{since}: {figure}"


def llm_cost_text(st: AgentStatus) -> str:
    """The status's LLM cost line: today and 24 h as the last run read them, and when."""
    c = st.llm_cost
    if c is None:
        return "— (no run has read it yet)"
    t = c.today
    return (
        f"today ${t.cost_usd:.2f} ({t.runs} run(s), {t.usage.prompt_tokens:,} prompt tokens, "
        f"{t.cached_share:.0%} cached, {t.usage.output_tokens:,} out"
        + (f" ({t.usage.thinking_tokens:,} thinking)" if t.usage.thinking_tokens else "")
        + f"; LLM {t.llm_seconds:.0f}s, "
        f"tools {t.tool_seconds:.0f}s) · 24 h ${c.last_24h.cost_usd:.2f} "
        f"({c.last_24h.runs} run(s)) · as of {fmt_time(c.as_of)}, when the last run read it"
    )


def demand_text(st: AgentStatus, latest: DemandPoint | None, now: datetime) -> str:
    """The status's demand line: the mode, the latest reading (`latest`, the
    store's, else the one the last change was decided on) and the last
    change's reason. Fixed mode: just that."""
    cfg = st.config
    if cfg.target_mode != "demand":
        return "fixed"
    change = st.demand
    point = latest or (change.point if change is not None else None)
    parts = [f"demand within [{cfg.min_target:g}, {cfg.max_target:g}] proofs/h"]
    if point is None:
        parts.append("no reading yet")
    else:
        age = max(0, round((now - point.at).total_seconds() / 60))
        parts.append(f"as of {point.at:%H:%M}Z ({age} min ago): {point.line()}")
    if change is not None:
        when = f" at {change.point.at:%H:%M}Z" if change.point is not None else ""
        parts.append(
            f"last change{when} {change.previous_per_h:g} → {change.target_per_h:g}: "
            f"{change.reason or change.action}"
        )
    pace = st.demand_pace
    if pace is not None:
        parts.append(f"{pace.changes_last_hour} of {pace.max_per_hour} changes in the last hour")
        if pace.held is not None:
            until = f" until {fmt_when(pace.release_at, now)}" if pace.release_at else ""
            parts.append(
                f"HELD {pace.held.change.target_per_h:g} proofs/h{until} "
                f"(since {pace.held.since:%H:%M}Z; max_demand_changes_per_hour)"
            )
    return " · ".join(parts)


def status_text(
    st: AgentStatus,
    now: datetime,
    ledger: SpendSummary | None = None,
    demand: DemandPoint | None = None,
    suspects: Sequence[FleetInstance] = (),
    market: MarketPoint | None = None,
) -> str:
    """The human-readable `fleet-agent status`; its spend is `ledger`'s (the
    store's, as of now) when given, else the query's (as of the last run);
    its demand reading `demand` (the store's latest) when given; a SUSPECT
    line for each machine of `suspects` (the monitor's latest snapshot); in
    market mode a `market` block from `market` (the store's latest point)."""
    cfg = st.config
    rows: list[tuple[str, str]] = [
        ("phase", st.phase.value + (" (config: paused)" if cfg.paused else "")),
        *(
            [("frozen", f"by {st.frozen.author} at {st.frozen.at:%H:%M:%S}Z: {st.frozen.reason}")]
            if st.frozen is not None
            else []
        ),
        *(
            [
                (
                    "APPROVAL",
                    f"{p.id}: run #{p.run} {p.tool} ({p.dph:+.3f} $/h), expires "
                    f"{fmt_when(p.expires_at, now)} — `{CLI} approvals`",
                )
                for p in st.pending_approvals
            ]
        ),
        *(
            (
                "SUSPECT",
                f"instance {i.id} (m{i.machine_id or '?'}/h{i.host_id or '?'}): {i.note} "
                f"— `{CLI} fleet`",
            )
            for i in suspects
        ),
        *(
            [("restarted", f"{fmt_time(st.restarted.at)}: {st.restarted.text()}")]
            if st.restarted is not None
            else []
        ),
        ("session", str(st.session)),
        ("runs", f"{st.run_count} (execution {st.executions}, history {st.history_length} events)"),
        ("current run", "—" if st.current_run is None else f"#{st.current_run}"),
        ("next run due", fmt_when(st.next_run_due_at, now)),
        ("next heartbeat", fmt_when(st.next_heartbeat_at, now)),
        ("pending", trigger_summary(st.pending_triggers)),
        ("wakes", _wakes_line(st.wakes, now)),
        ("last run", last_run_text(st.last_run)),
        ("rejected inputs", _rejected_line(st)),
        (
            "target",
            f"{cfg.target_proofs_per_hour:g} proofs/h · max {cfg.max_instances} instances · "
            f"max ${cfg.max_fleet_dph:g}/h fleet" + (" · dry run" if cfg.dry_run else ""),
        ),
        ("target mode", demand_text(st, demand, now)),
        *(_market_block(market, now) if cfg.market_mode == "snark" else []),
        ("spend", spend_text(st, ledger)),
        (
            "LLM",
            f"effort {cfg.llm_effort} · thinking {cfg.llm_thinking_display} · "
            f"{cfg.max_output_tokens:,} output tokens for the answer",
        ),
        *([("LLM spend", spent)] if (spent := llm_spend_text(st, now)) else []),
        ("LLM cost", llm_cost_text(st)),
        ("notifications", notify_text(st)),
    ]
    lines = [f"agent {st.agent_id}"]
    lines += [f"  {label + ':':<15} {value}" for label, value in rows]
    return "\n".join(lines)


def _market_block(point: MarketPoint | None, now: datetime) -> list[tuple[str, str]]:
    """`market` and, indented under it, the point's other rows."""
    return [(k if k == "market" else f"  {k}", v) for k, v in market_rows(point, now)]


def notify_text(st: AgentStatus) -> str:
    """Deliveries so far and the latest that failed (its destination redacted)."""
    sent = f"{st.notify_delivered} delivered"
    if not st.notify_failures:
        return f"{sent}, none failed"
    last = st.notify_failures[-1]
    what = f"{last.kind} {last.subject}".strip()
    return (
        f"{sent}; {len(st.notify_failures)} FAILED, latest {fmt_time(last.at)} {what}: {last.error}"
    )


def _wakes_line(wakes: Sequence[Wake], now: datetime) -> str:
    if not wakes:
        return "none"
    first = min(wakes, key=lambda w: (w.due_at, w.id))
    more = f" (+{len(wakes) - 1} more: `{CLI} wakes`)" if len(wakes) > 1 else ""
    return f"{first.id} {fmt_when(first.due_at, now)} — {first.reason}{more}"


def _rejected_line(st: AgentStatus) -> str:
    if not st.rejected:
        return "none"
    latest = st.rejected[-1]
    return f"{len(st.rejected)} (latest {fmt_time(latest.at)} {latest.signal}: {latest.error})"


def config_text(config: AgentConfig) -> str:
    values = config.model_dump(mode="json")
    width = max(len(k) for k in values)
    return "\n".join(
        f"{key:<{width}}  {', '.join(v) if isinstance(v, list) else v}" for key, v in values.items()
    )


def approvals_table(pending: Sequence[PendingApproval]) -> str:
    """What `fleet-agent approvals` prints: one block per pending approval."""
    if not pending:
        return "no pending approvals"
    lines = []
    for p in pending:
        args = " ".join(f"{k}={v}" for k, v in p.arguments.items())
        lines += [
            f"{p.id}  run #{p.run}  {p.tool} {args}",
            f"  {p.dph:+.3f} $/h  asked {p.asked_at:%Y-%m-%d %H:%M:%S}Z, "
            f"expires {p.expires_at:%H:%M:%S}Z",
            f"  why: {p.reason}",
            f"  {CLI} approve {p.id} [--note TEXT]  |  {CLI} deny {p.id} [--note TEXT]",
        ]
    return "\n".join(lines)


def decision_text(outcome: ApprovalOutcome) -> str:
    """What `fleet-agent approve` / `deny` prints."""
    d, p = outcome.decision, outcome.approval
    verdict = "approved" if d.approve else "denied"
    line = f"{verdict} {p.id} ({p.tool}, run #{p.run}) as {d.author}" + (
        f": {d.note}" if d.note else ""
    )
    if outcome.error:
        return f"{line}\n  error: {outcome.error}"
    return f"{line}\n  the run was told; it goes on now"


def freeze_text(report: FreezeReport) -> str:
    """What `fleet-agent freeze` prints."""
    info = report.info
    head = "already frozen" if report.already_frozen else "frozen"
    lines = [
        f"{head} by {info.author} at {info.at:%Y-%m-%d %H:%M:%S}Z"
        + (f": {info.reason}" if info.reason else ""),
        "  no runs, no monitor triggers; every create and destroy by the agent is refused",
    ]
    fleet = report.fleet
    if fleet is not None:
        if fleet.destroyed or (fleet.dph_stopped and not fleet.instances):
            lines.append(
                f"  destroyed {len(fleet.destroyed)} machine(s), confirmed gone at vast.ai: "
                f"${fleet.dph_stopped:.2f}/h stopped"
            )
        elif fleet.instances:
            lines.append(
                f"  {len(fleet.instances)} machine(s) still rented, ${fleet.fleet_dph:.2f}/h "
                "(add --destroy-all to destroy them)"
            )
        else:
            lines.append("  no machine is rented: $0.00/h")
    if report.error:
        lines.append(f"  error: {report.error}")
    return "\n".join(lines)
