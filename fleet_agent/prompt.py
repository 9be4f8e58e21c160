"""Assemble the prompt: system text, the trimmed history, and this run's context.

The store keeps every message; the prompt gets less. Each earlier run of the
session contributes its trigger block and its final message (plus a digest of
its actions); no-op runs are not in the history at all (the store marks them
``in_prompt = false``). A hard token budget is enforced here, deterministically:
oldest runs are dropped first, and a single oversized entry is cut in the
middle, so the prompt can never overflow the way a failed compaction let it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from fleet_agent.models import AgentConfig, Trigger, TriggerKind, Wake
from fleet_agent.verdict import VERDICT_INSTRUCTIONS

__all__ = [
    "HistoryLike",
    "TrimmedHistory",
    "context_message",
    "estimate_tokens",
    "history_messages",
    "render_trigger_block",
    "system_prompt",
]

# Beyond this many state-change lines the block summarises by instance, so a
# storm of 1,000 signals costs a few hundred tokens, not 30,000.
_MAX_STATE_LINES = 40
_CUT_MARK = "\n[… cut to fit the history budget …]\n"


class HistoryLike(Protocol):
    """What the prompt needs of an earlier run (the store's HistoryEntry)."""

    @property
    def run(self) -> int: ...
    @property
    def started_at(self) -> datetime: ...
    @property
    def status(self) -> str: ...
    @property
    def trigger_block(self) -> str: ...
    @property
    def final_text(self) -> str: ...
    @property
    def actions_digest(self) -> str: ...


def estimate_tokens(text: str) -> int:
    """A deterministic, conservative estimate (≈ 4 characters a token)."""
    return math.ceil(len(text) / 3.5)


def _ts(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M:%SZ")


def render_trigger_block(triggers: Sequence[Trigger]) -> str:
    """Why this run happens, for the model and for the run log."""
    if not triggers:
        return "Trigger: heartbeat (nothing else happened)."
    lines: list[str] = []
    by_kind: dict[TriggerKind, list[Trigger]] = {}
    for t in triggers:
        by_kind.setdefault(t.kind, []).append(t)
    for t in by_kind.get(TriggerKind.HUMAN_MESSAGE, []):
        lines.append(f"Message from {t.author} at {_ts(t.received_at)}:\n{t.text}")
    for t in by_kind.get(TriggerKind.TRIGGER_NOW, []):
        lines.append(f"Run requested at {_ts(t.received_at)}: {t.reason}")
    for t in by_kind.get(TriggerKind.WAKE, []):
        lines.append(f"Scheduled wake {t.wake_id} (asked for: {t.reason})")
    changes = by_kind.get(TriggerKind.STATE_CHANGED, [])
    if len(changes) <= _MAX_STATE_LINES:
        for t in changes:
            detail = f" — {t.detail}" if t.detail else ""
            lines.append(
                f"Instance {t.instance_id}: {t.old_state or 'new'} → {t.new_state}{detail}"
            )
    else:
        latest: dict[str, Trigger] = {}
        for t in changes:
            latest[t.instance_id] = t
        counts = Counter(t.new_state for t in latest.values())
        summary = ", ".join(f"{n} now {state}" for state, n in sorted(counts.items()))
        lines.append(
            f"{len(changes)} state changes on {len(latest)} instances ({summary}); "
            "call get_fleet_status for details."
        )
    for kind, text in (
        (TriggerKind.AGENT_STARTED, "The agent started"),
        (TriggerKind.SESSION_RESET, "A new session started (the conversation was reset)"),
        (TriggerKind.CONFIG_CHANGED, "The operator changed the configuration"),
    ):
        for t in by_kind.get(kind, []):
            lines.append(f"{text}{': ' + t.reason if t.reason else ''}.")
    if TriggerKind.HEARTBEAT in by_kind and len(by_kind) == 1:
        lines.append("Trigger: heartbeat (nothing else happened).")
    return "\n".join(lines)


def system_prompt(agent_id: str, config: AgentConfig) -> str:
    """The fixed instructions; stable across runs so providers can cache them."""
    gpus = ", ".join(config.allowed_gpus) or "none"
    dry_run = ", DRY RUN (nothing is rented)" if config.dry_run else ""
    return f"""You are {agent_id}, the autonomous manager of a fleet of rented GPU machines \
(vast.ai) that run Filecoin SNARK proving. The operator sets a target capacity in proofs per \
hour; you hold it at the lowest cost and answer the operator.

How you are run: every run starts from triggers (operator messages, instance state changes, \
wakes you scheduled, the heartbeat). Your earlier runs of this session appear as their \
triggers and your final answer only. Tool results are not kept between runs: call \
get_fleet_status when you need facts.

Rules:
- Rent with create_instance only after search_offers, and prefer the lowest $ per proof.
- Destroy instances that exited, went offline, are stuck or are not_proving (running, but \
their prover finished nothing for {config.not_proving_minutes:g} min), and replace them.
- Capacity is measured from each prover's finished proofs (measured_proofs_per_hour); an \
estimate counts only while a machine loads or fetches its parameters.
- Keep the expected capacity (running + loading) at or just above the target; release\
 machines the target does not need, most expensive per proof first, only when the fleet \
stays at or above the target without them, and never a healthy machine younger than \
{config.min_release_age_minutes:g} min (releasable: false). Release a machine only when the \
machines proving now still meet the target without it.
- Hard limits are enforced by the system, not by you: at most {config.max_instances} \
instances, ${config.max_fleet_dph:g}/h for the fleet, ${config.max_instance_dph:g}/h per \
instance, GPUs {gpus}, reliability ≥ {config.min_reliability:g}, at most \
{config.max_creates_per_hour} machines rented and {config.max_destroys_per_hour} released in \
any hour, and a daily budget of ${config.daily_budget_usd:g} (spend today plus the fleet's \
$/h until midnight UTC){dry_run}. \
A refused call tells you why; do not retry it unchanged.
- The heartbeat runs you every {config.heartbeat_seconds}s. Use schedule_next_check only for \
a specific later moment (e.g. an instance still loading in 15 min), never for routine checks.
- Answer operator messages directly and briefly.

{VERDICT_INSTRUCTIONS}"""


def context_message(
    *,
    run: int,
    session: int,
    now: datetime,
    trigger_block: str,
    fleet_text: str,
    config: AgentConfig,
    wakes: Sequence[Wake],
    next_heartbeat_at: datetime | None,
) -> str:
    """The first user message of a run: why it runs and what the fleet looks like."""
    wake_lines = "\n".join(f"- {w.id} due {_ts(w.due_at)}: {w.reason}" for w in wakes) or "- none"
    heartbeat = _ts(next_heartbeat_at) if next_heartbeat_at else "n/a"
    return (
        f"[run #{run} · session {session} · {_ts(now)}]\n"
        f"## Triggers\n{trigger_block}\n\n"
        f"## Target\n{config.target_proofs_per_hour:g} proofs/hour"
        f"{' (agent paused)' if config.paused else ''}\n\n"
        f"## Fleet\n{fleet_text}\n\n"
        f"## Pending wakes\n{wake_lines}\n(next heartbeat about {heartbeat})"
    )


@dataclass(frozen=True)
class TrimmedHistory:
    messages: list[dict[str, Any]]
    included: int
    dropped: int
    tokens: int


def _entry_texts(entry: HistoryLike) -> tuple[str, str]:
    user = f"[run #{entry.run} · {_ts(entry.started_at)}]\n{entry.trigger_block}"
    if entry.status == "failed":
        answer = "(this run failed before it could answer)"
    else:
        answer = entry.final_text.strip() or "(no final message)"
    if entry.actions_digest:
        answer += f"\n\nActions taken:\n{entry.actions_digest}"
    return user, answer


def _cut(text: str, max_tokens: int) -> str:
    keep = max(int(max_tokens * 3.5) - len(_CUT_MARK), 0)
    if len(text) <= keep:
        return text
    head = keep // 2
    return text[:head] + _CUT_MARK + text[len(text) - (keep - head) :]


def history_messages(entries: Sequence[HistoryLike], budget_tokens: int) -> TrimmedHistory:
    """Alternating user/assistant messages for earlier runs, within the budget.

    Keeps the newest runs that fit; the oldest go first. If even the newest run
    alone is over budget it is cut in the middle instead of dropped, so the
    model always sees what it last said.
    """
    pairs = [_entry_texts(e) for e in entries]
    costs = [estimate_tokens(u) + estimate_tokens(a) for u, a in pairs]
    kept: list[tuple[str, str]] = []
    total = 0
    for (user, answer), cost in zip(reversed(pairs), reversed(costs), strict=True):
        if total + cost > budget_tokens:
            if not kept:
                half = budget_tokens // 2
                user, answer = _cut(user, half), _cut(answer, budget_tokens - half)
                kept.append((user, answer))
                total = estimate_tokens(user) + estimate_tokens(answer)
            break
        kept.append((user, answer))
        total += cost
    kept.reverse()
    messages: list[dict[str, Any]] = []
    for user, answer in kept:
        messages.append({"role": "user", "content": user})
        messages.append({"role": "assistant", "content": answer})
    return TrimmedHistory(messages, len(kept), len(pairs) - len(kept), total)
