"""The offline `autopilot` provider: a deterministic policy behind the LLM interface.

Used when no Anthropic key is set (the local demo, CI). It speaks the same
content-block protocol as the real model — tool calls, final text, verdict — and
reads only what the model would read (the run's context message and tool
results), so the whole loop, store, guardrails and prompt machinery run
unchanged without a network.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from typing import Any

from fleet_agent.autopilot.bridges import BRIDGE_SEARCH_LIMIT, bridge_room, bridges, wants_bridges
from fleet_agent.autopilot.fast_cover import faster_cover, under_meanwhile
from fleet_agent.autopilot.market import market_calls, market_view
from fleet_agent.autopilot.open_gap import gap_check_reason, gap_checked, leaves_gap_open
from fleet_agent.autopilot.policy import FleetPlan, choose_offers, plan_fleet
from fleet_agent.autopilot.run_view import (
    CREATES,
    INSTANCES,
    MESSAGE,
    RESULT_JSON,
    Run,
    text_of,
    tool_use,
    verdict,
)
from fleet_agent.autopilot.swap import swap_offers
from fleet_agent.autopilot.trade import trade_offers
from fleet_agent.fleet.spare import BAND
from fleet_agent.fleet.temporary import TEMPORARY_MIN_AGE_MINUTES
from fleet_agent.llm.base import LlmOptions, LlmReply, ProgressCallback, SystemPrompt
from fleet_agent.llm.tools import MARKET_TOOLS
from fleet_agent.models import TokenUsage
from fleet_agent.policy.band import TOP_MARGIN
from fleet_agent.policy.checks import (
    BRIDGE_CHECK_SECONDS,
    GAP_CHECK_SECONDS,
    SWAP_CHECK_REASON,
    SWAP_CHECK_SECONDS,
    TRADE_CHECK_REASON,
    TRADE_CHECK_SECONDS,
)

__all__ = ["AutopilotProvider"]

_SWAP = (
    "a swap: the fleet is past the band and no release brings it back; "
    "a machine this one makes unneeded goes once it proves"
)
_TRADE = (
    "a trade: a much cheaper machine of the size of a dear one, which goes once this one proves"
)
_BRIDGE = "a temporary bridge that loads fast and proves while the cover loads"
# The reason of the bridges' checks (schedule_next_check), as pending wakes show it.
_BRIDGE_CHECK = "release bridges as soon as the cover proves"


def _named(content: list[dict[str, Any]], messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`content` with each tool call's id drawn from the conversation so far
    and its place in the reply: the same run decides with the same ids, so
    its create labels (fleet_agent/fleet/labels.py) and everything ordered
    by them are the same each time a benchmark's day is run again. Unique
    as a random id is: the run's own message names the run (`[run #N`), each
    round adds to the messages, and a reply's calls differ in place."""
    seen = hashlib.sha256(json.dumps(messages, sort_keys=True, default=str).encode()).hexdigest()
    named = []
    for i, block in enumerate(content):
        if block.get("type") == "tool_use":
            digest = hashlib.sha256(f"{seen}:{i}".encode()).hexdigest()[:20]
            block = {**block, "id": f"toolu_{digest}"}
        named.append(block)
    return named


def _check(delay_seconds: int, reason: str) -> dict[str, Any]:
    """A schedule_next_check: the run the agent asks for, with the reason its
    later runs find among the pending wakes (and the Web UI shows)."""
    return tool_use("schedule_next_check", {"delay_seconds": delay_seconds, "reason": reason})


def _gap_waits(run: Run, gap: float, expected: float) -> bool:
    """A gap left open that a pending check covers (open_gap.py): no search
    on this run."""
    target = run.target()
    return leaves_gap_open(expected, target) and gap_checked(run.pending_wakes(), gap, target)


def _room(run: Run, rows: list[dict[str, Any]], picks: list[dict[str, Any]]) -> int:
    """Bridges that fit under the hour's create limit (the fleet's machines
    younger than an hour stand for the hour's rentals) and the instance cap."""
    recent = sum(1 for r in rows if r.get("age_minutes") is not None and r["age_minutes"] < 60)
    creates = bridge_room(run.limit(CREATES), recent, len(picks))
    return min(creates, run.limit(INSTANCES) - len(rows) - len(picks))


def _faster(
    offers: list[dict[str, Any]], picks: list[dict[str, Any]], plan: FleetPlan, target: float
) -> list[dict[str, Any]] | None:
    """The gap's cover of fast offers (fast_cover.py), or None."""
    return faster_cover(
        offers,
        picks,
        lambda pool: choose_offers(
            pool, plan.gap, target, hold=plan.hold, held=plan.held, held_dph=plan.held_dph
        ),
        held_dph=plan.held_dph,
        room=(1 + BAND - TOP_MARGIN) * target - plan.expected_after,
    )


def _bridge_check(run: Run, rows: list[dict[str, Any]], offered: set[str]) -> dict[str, Any] | None:
    """A schedule_next_check for when the oldest bridge still too young to
    go (TEMPORARY_MIN_AGE_MINUTES) may go: a bridge coming of age is no
    state change, while a cover machine starting to prove is (the monitor
    signals `running → proving`, workflows/monitor.py) and wakes its own
    run. Once per run, and not while such a check is pending (each run that
    scheduled one besides the check's own started a chain of its own);
    at least BRIDGE_CHECK_SECONDS ahead. None once every bridge may go: a
    bridge still needed then goes at the run of the next arrival, or the
    heartbeat, like any release."""
    if "schedule_next_check" not in offered or "schedule_next_check" in run.calls.values():
        return None
    if _BRIDGE_CHECK in run.pending_wakes():
        return None
    gone = {a.get("instance_id") for n, a in run.inputs if n == "destroy_instance"}
    live = [r for r in rows if r.get("id") not in gone]
    ages = [float(r.get("age_minutes") or 0.0) for r in live if r.get("temporary")]
    created = [a for n, a in run.inputs if n == "create_instance"]
    if any(a.get("temporary") for a in created):
        ages.append(0.0)
    young = [a for a in ages if a < TEMPORARY_MIN_AGE_MINUTES]
    if not young:
        return None
    delay = max(BRIDGE_CHECK_SECONDS, round((TEMPORARY_MIN_AGE_MINUTES - max(young)) * 60))
    return _check(delay, _BRIDGE_CHECK)


class AutopilotProvider:
    """Holds the target with the fleet tools when they are offered; answers operators."""

    name = "autopilot"
    model = "autopilot-1"

    async def complete(
        self,
        *,
        system: SystemPrompt,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        max_tokens: int,
        on_progress: ProgressCallback | None = None,
        options: LlmOptions | None = None,
    ) -> LlmReply:
        # `options` is for models that think; the policy does not.
        run = Run(messages)
        offered = {t["name"] for t in tools}
        content = _named(self._decide(run, offered), messages)
        text = " ".join(b.get("text", "") for b in content)
        if on_progress is not None:
            on_progress(len(text))  # decided at once: one report of the whole reply
        return LlmReply(
            content=content,
            stop_reason="tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn",
            usage=TokenUsage(
                input_tokens=sum(len(text_of(m["content"])) for m in messages) // 4,
                output_tokens=len(text) // 4 + 10,
            ),
            model=self.model,
        )

    def _decide(self, run: Run, offered: set[str]) -> list[dict[str, Any]]:
        rows = run.fleet_rows()
        fleet = rows is not None and {"search_offers", "create_instance"} <= offered
        # The Snark Market's levers (market.py), pulled at a run's first round.
        market = market_view(run) if offered >= MARKET_TOOLS else None
        levers = market_calls(market, run.target()) if market and not run.results else []
        slots_full = market is not None and market.slots_full
        if fleet and rows is not None and not run.results:
            plan = plan_fleet(rows, run.target(), spare=run.spare())
            calls = levers + [
                tool_use("destroy_instance", {"instance_id": iid, "reason": why})
                for iid, why in plan.destroy
            ]
            if slots_full:
                # No rental the slots cannot feed (the create's guard would refuse it).
                plan = replace(plan, gap=0.0, swap=(), trade=())
            if plan.gap > 0 and not _gap_waits(run, plan.gap, plan.expected_after):
                limit = BRIDGE_SEARCH_LIMIT if wants_bridges(plan.gap, run.target()) else 30
                calls.append(tool_use("search_offers", {"limit": limit}))
            elif "create_instance" in offered and (
                (plan.swap and SWAP_CHECK_REASON not in run.pending_wakes())
                or (plan.trade and TRADE_CHECK_REASON not in run.pending_wakes())
            ):
                calls.append(tool_use("search_offers", {"limit": 30}))
            if calls:
                return calls
        if fleet and rows is not None:
            searched = [c for n, c, err in run.results if n == "search_offers" and not err]
            created = any(n == "create_instance" for n, _, _ in run.results)
            checked = "schedule_next_check" in run.calls.values()
            if searched and not created and not checked:
                plan = plan_fleet(rows, run.target(), spare=run.spare())
                found = RESULT_JSON.search(searched[-1])
                offers = json.loads(found.group(1)) if found else []
                if plan.swap:
                    swaps = [
                        tool_use("create_instance", {"offer_id": o["offer_id"], "reason": _SWAP})
                        for o in swap_offers(offers, plan.swap, run.target(), plan.hold)
                    ]
                    if swaps or "schedule_next_check" not in offered:
                        return swaps or [{"type": "text", "text": self._final(run)}]
                    return [_check(SWAP_CHECK_SECONDS, SWAP_CHECK_REASON)]
                if plan.trade:
                    trades = [
                        tool_use("create_instance", {"offer_id": o["offer_id"], "reason": _TRADE})
                        for o in trade_offers(offers, plan.trade, run.target(), spare=run.spare())
                    ]
                    if "schedule_next_check" not in offered:
                        return trades or [{"type": "text", "text": self._final(run)}]
                    return [*trades, _check(TRADE_CHECK_SECONDS, TRADE_CHECK_REASON)]
                picks = choose_offers(
                    offers,
                    plan.gap,
                    run.target(),
                    hold=plan.hold,
                    held=plan.held,
                    held_dph=plan.held_dph,
                )
                why = f"cover a {plan.gap:.0f} proofs/h gap"
                if plan.hold > run.target():
                    why += f", holding {plan.hold:.0f} (a spare for one failure)"
                if (
                    not picks
                    and plan.gap > 0
                    and "schedule_next_check" in offered
                    and leaves_gap_open(plan.expected_after, run.target())
                ):
                    bridge_check = _bridge_check(run, rows, offered)
                    return [
                        _check(GAP_CHECK_SECONDS, gap_check_reason(plan.gap)),
                        *([bridge_check] if bridge_check is not None else []),
                    ]
                extra = (
                    bridges(offers, picks, plan.gap, run.target(), room=_room(run, rows, picks))
                    if picks
                    else []
                )
                if picks and not extra and under_meanwhile(plan.expected_after, run.target()):
                    picks = _faster(offers, picks, plan, run.target()) or picks
                if picks:
                    creates = [
                        tool_use("create_instance", {"offer_id": o["offer_id"], "reason": why})
                        for o in picks
                    ]
                    return creates + [
                        tool_use(
                            "create_instance",
                            {"offer_id": o["offer_id"], "reason": _BRIDGE, "temporary": True},
                        )
                        for o in extra
                    ]
        if levers:
            return levers
        check = _bridge_check(run, rows or [], offered)
        if check is not None:
            return [check]
        return [{"type": "text", "text": self._final(run)}]

    def _final(self, run: Run) -> str:
        lines: list[str] = []
        humans = MESSAGE.findall(run.context)
        for author, text in humans:
            lines.append(f"{author}: noted — “{text.strip()[:200]}”.")
        done = [
            (n, c)
            for n, c, err in run.results
            if not err and (n.endswith("_instance") or n in MARKET_TOOLS)
        ]
        refused = [(n, c) for n, c, err in run.results if err]
        for name, content in done:
            lines.append(f"{name}: {content.splitlines()[0]}")
        for name, content in refused:
            lines.append(f"{name} refused: {content.splitlines()[0]}")
        changed = any(
            not c.startswith(("DRY RUN", "Instance")) for n, c in done if n.endswith("_instance")
        )
        if not lines:
            lines.append("Fleet on target; no action needed.")
        return "\n".join(lines) + "\n" + verdict(bool(humans) or changed, changed)
