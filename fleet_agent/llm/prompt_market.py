"""The `## Market` section of a run's message in market mode
(AgentConfig.market_mode = "snark"): the monitor's latest reading of the
business on the Snark Market and its age, the levers the model has, and the
rules of the business in one paragraph.

With the market off there is no section, so the message's bytes are those
of before market mode. The system prompt is not touched either way: it
opens the cached prefix (fleet_agent/llm/prompt.py). Pure: the point is read
from the store by `load_context` (activities/runlog.py).
"""

from __future__ import annotations

from datetime import datetime

from fleet_agent.market.point import (
    PENALTY_CHALLENGES,
    WITHDRAW_CHALLENGES,
    MarketPoint,
    data_line,
)
from fleet_agent.models import AgentConfig
from fleet_agent.untrusted import single_line

__all__ = ["market_section"]

#: The point's note as the model reads it: ours, one line, bounded.
_NOTE_CHARS = 600


def _age(point: MarketPoint, now: datetime) -> str:
    """`as of 14:05, 3 min ago` (`now` of the run, not of the worker's clock)."""
    minutes = max(0, round((now - point.at).total_seconds() / 60))
    return f"as of {point.at:%H:%M}, {minutes} min ago"


def _price_lever(config: AgentConfig) -> str:
    if config.market_max_price_nfil == 0:
        return (
            "set_ask_price(price_nfil, reprice_open, reason): not yours to pull "
            "(market_max_price_nfil is 0)"
        )
    return (
        f"set_ask_price(price_nfil, reprice_open, reason): the ask price in whole nFIL "
        f"within [{config.market_min_price_nfil}, {config.market_max_price_nfil}]; "
        "reprice_open also withdraws the open asks so new ones take it"
    )


def market_section(config: AgentConfig, point: MarketPoint | None, now: datetime) -> str:
    """The section's text with its heading; "" with the market off."""
    if config.market_mode != "snark":
        return ""
    lines = [
        "## Market",
        "The fleet proves for the operator's Curio node, which sells proofs on the "
        "Snark Market; the monitor reads its business every poll.",
    ]
    if point is None:
        lines.append("- latest reading: none yet")
    else:
        lines.append(f"- latest reading ({_age(point, now)}): {point.line()}")
        lines.append(f"- GPUs rented: {point.gpus} of {point.slots_total} slots")
        if point.loss_since is not None:
            lines.append(
                f"- at a loss since {point.loss_since:%H:%M} (revenue per proof under "
                f"cost per proof; after {config.market_loss_minutes:g} min: "
                f"{config.market_on_loss})"
            )
        if point.note:
            lines.append(f"- note: {single_line(point.note, _NOTE_CHARS)}")
        # The same figures as one JSON line: what the autopilot's rules read
        # (fleet_agent/autopilot/market.py).
        lines.append(data_line(point, config.market_policy()))
    lines += [
        f"- levers: {_price_lever(config)}; set_requests(enabled, withdraw_open, reason): "
        "the node asks the market for work or stops; withdraw_open also withdraws the "
        f"open asks (at most {config.market_max_withdrawals_per_hour} withdrawals an hour)",
        "Rules: a request pays the market's price when it came and goes to the cheapest "
        "ask at or under it, so the ask sets your place in the line, not your pay: never "
        "over the market's price (it takes nothing); lower it while GPUs idle and asks wait, "
        "raise it while every GPU is busy and work waits (your cheap asks may be what sets "
        "the market's price); "
        "never rent GPUs beyond the slots; before shrinking the fleet below what "
        "the open rows need, turn requests off and let the queue drain; a withdrawal "
        f"costs {WITHDRAW_CHALLENGES} challenge proof, a late proof {PENALTY_CHALLENGES}.",
    ]
    return "\n".join(lines)
