"""What a notification says: a title, a short body and a link where one helps.

Rendered in the worker (activities/notify.py) from the event's facts, with
the console's address (`FLEET_CONSOLE_URL`) for links: the workflow never
needs to know it. An approval's link opens the console's approval page,
which works from a phone (docs/operations/alerts.md, "Alerts: Slack, e-mail and more").
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fleet_agent.models.notify import NotifyEvent

__all__ = ["Rendered", "approval_link", "render"]


@dataclass(frozen=True, slots=True)
class Rendered:
    title: str
    body: str
    link: str = ""


def approval_link(console_url: str | None, approval_id: str) -> str:
    """The console's page for one approval, or "" without a console address."""
    return f"{console_url.rstrip('/')}/approvals/{approval_id}" if console_url else ""


def _when(value: Any) -> str:
    if isinstance(value, datetime):
        return f"{value:%Y-%m-%d %H:%M} UTC"
    if isinstance(value, str) and len(value) >= 16:
        return value[:16].replace("T", " ") + " UTC"
    return str(value)


def _money(value: Any) -> str:
    return f"${float(value or 0):.2f}"


def render(agent_id: str, event: NotifyEvent, console_url: str | None = None) -> Rendered:
    """The title, body and link of `event` for agent `agent_id`."""
    f = event.facts
    s = event.subject
    k = event.kind
    tag = f"[{agent_id}]"
    if k in ("approval_requested", "approval_expiring", "approval_expired"):
        link = approval_link(console_url, s)
        lines = [
            f"Approval {s}: {f.get('tool', 'change')} at {float(f.get('dph', 0)):+.3f} $/h",
            f"Why: {f.get('reason', '')}",
            f"Expires: {_when(f.get('expires_at', ''))}",
        ]
        if k == "approval_expired":
            return Rendered(
                f"{tag} approval {s} expired",
                "\n".join([*lines[:2], "Nobody decided in time: the change was not made."]),
                link,
            )
        lines += [
            f"Open: {link}" if link else "Open the console's dashboard to decide.",
            f"Or: fleet-agent approve {s} --agent-id {agent_id}",
            f"    fleet-agent deny {s} --agent-id {agent_id} --note 'why'",
        ]
        title = (
            f"{tag} approval {s} needed"
            if k == "approval_requested"
            else f"{tag} approval {s} expires soon"
        )
        return Rendered(title, "\n".join(lines), link)
    if k == "under_target":
        return Rendered(
            f"{tag} fleet below target for {f.get('minutes', '?')} min",
            f"Capacity {f.get('capacity', 0):.0f} proofs/h, target {f.get('target', 0):.0f} "
            f"proofs/h, since {_when(f.get('since', ''))}.",
        )
    if k == "back_in_band":
        return Rendered(
            f"{tag} fleet back at target",
            f"Capacity {f.get('capacity', 0):.0f} proofs/h, target {f.get('target', 0):.0f}.",
        )
    if k == "create_refused":
        return Rendered(
            f"{tag} a create was refused ({s})", f"{f.get('reason', '')} (run #{f.get('run')})"
        )
    if k == "frozen":
        destroy = " Every machine is being destroyed." if f.get("destroy_all") else ""
        return Rendered(
            f"{tag} frozen by {f.get('author', '?')}",
            f"Reason: {f.get('reason') or '(none given)'}. No runs, no fleet changes.{destroy}",
        )
    if k == "unfrozen":
        return Rendered(
            f"{tag} unfrozen by {f.get('author', '?')}",
            f"Reason: {f.get('reason') or '(none given)'}. Fleet changes are allowed again.",
        )
    if k == "runs_failing":
        return Rendered(
            f"{tag} {f.get('count', '?')} runs failed in a row",
            f"Last: run #{f.get('run')}: {f.get('error', '')[:400]}",
        )
    if k == "auth_failing":
        where = f.get("where") or f"Run #{f.get('run')}"
        return Rendered(
            f"{tag} {s} authentication failing",
            f"{where}: {f.get('error', '')[:400]}\nCheck the worker's key for {s}.",
        )
    if k == "agent_restarted":
        return Rendered(
            f"{tag} agent restarted by {f.get('by') or 'the watchdog'}",
            f"It had ended: {f.get('how_ended') or 'unknown'}. "
            f"Runs continue from #{f.get('next_run', '?')}.",
        )
    if k == "llm_spend_capped":
        return Rendered(
            f"{tag} runs held: LLM spend cap reached",
            f"The runs of the last hour cost {_money(f.get('last_hour_usd'))}, the cap is "
            f"{_money(f.get('cap_usd'))}/h (max_llm_usd_per_hour). No run starts until "
            f"{_when(f.get('until', ''))}; its {f.get('pending', 0)} trigger(s), wakes and "
            "messages wait. To resume sooner: fleet-agent config --set "
            f"max_llm_usd_per_hour=<more> --agent-id {agent_id}",
        )
    if k == "market_loss":
        return Rendered(
            f"{tag} proving at a loss on the Snark Market",
            f"{f.get('alert', '')[:600]}\nSetting market_on_loss={f.get('on_loss', 'notify')}: "
            f"{f.get('action', '')[:300]}",
        )
    if k == "daily_digest":
        return Rendered(
            f"{tag} daily digest {s}",
            f"Spend today {_money(f.get('spend_today'))}, last 24 h {_money(f.get('spend_24h'))}; "
            f"proofs done {f.get('proofs', 'n/a')}; runs {f.get('runs', 0)} "
            f"({f.get('failed_runs', 0)} failed); approvals {f.get('approvals', 0)}.",
        )
    return Rendered(f"{tag} test notification", str(f.get("text", "fleet-agent can reach you.")))
