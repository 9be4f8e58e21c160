"""The LLM's tools: names, JSON schemas and which of them change the fleet.

Names and required parameters are part of the public contract.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, TypeVar

from pydantic import ConfigDict, Field, ValidationError, field_validator

from fleet_agent.demand.events import MAX_EVENTS, MODEL_SHARE
from fleet_agent.demand.forecast import MAX_EVENT_DAYS, DemandEvent
from fleet_agent.fleet.temporary import TEMPORARY_MIN_AGE_MINUTES
from fleet_agent.models import ToolResult
from fleet_agent.validation import describe_validation_error
from fleet_agent.wire import Wire

__all__ = [
    "FLEET_TOOLS",
    "LOCAL_TOOLS",
    "MARKET_TOOLS",
    "MUTATING_TOOLS",
    "TOOL_SCHEMAS",
    "CancelWakeInput",
    "CreateInstanceInput",
    "DestroyInstanceInput",
    "ExpectDemandInput",
    "ScheduleNextCheckInput",
    "SearchOffersInput",
    "offered_tools",
    "parse_tool_input",
    "tool_schemas",
]

# Decided in the run workflow: no activity, no fleet.
LOCAL_TOOLS = frozenset({"schedule_next_check", "cancel_wake", "expect_demand"})
#: How far ahead a known event may start (a wrong year is an error, not a slot).
EXPECT_HORIZON_DAYS = 31
#: The Snark Market's levers: offered only with AgentConfig.market_mode "snark".
MARKET_TOOLS = frozenset({"set_ask_price", "set_requests"})
FLEET_TOOLS = frozenset(
    {"get_fleet_status", "search_offers", "create_instance", "destroy_instance"} | MARKET_TOOLS
)
# A run that called one of these counts as action=true whatever its verdict says.
MUTATING_TOOLS = frozenset({"create_instance", "destroy_instance"} | MARKET_TOOLS)

_REASON = {"type": "string", "description": "Why, in one sentence (kept in the audit log)."}

TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    "get_fleet_status": {
        "description": (
            "The fleet right now: every instance of this agent with state, GPU, $/h and "
            "proofs/h, the total capacity against the target, and spend."
        ),
        "input_schema": {"type": "object", "properties": {}, "additionalProperties": False},
    },
    "search_offers": {
        "description": (
            "Search rentable GPU offers, cheapest per proof first. Only offers that pass the "
            "guardrails and fit the prover are returned: allowed GPUs, max $/h per instance "
            "(disk included), min reliability, verified hosts, enough RAM, disk, bandwidth and "
            "CUDA, a free status port."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "gpu_name": {"type": "string", "description": "e.g. 'RTX 4090'"},
                "max_dph": {"type": "number", "description": "maximum $/hour"},
                "min_reliability": {"type": "number", "minimum": 0, "maximum": 1},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50},
            },
            "additionalProperties": False,
        },
    },
    "create_instance": {
        "description": (
            "Rent the machine of one offer and start the prover on it. Idempotent within a "
            "run; refused when it would break a guardrail."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "offer_id": {"type": "integer"},
                "reason": _REASON,
                "temporary": {
                    "type": "boolean",
                    "description": (
                        "A bridge that proves while slower rentals load: not counted as "
                        "cover for the target, releasable from "
                        f"{TEMPORARY_MIN_AGE_MINUTES:g} min once the rest proves it."
                    ),
                },
            },
            "required": ["offer_id", "reason"],
            "additionalProperties": False,
        },
    },
    "destroy_instance": {
        "description": (
            "Release one of this agent's instances (others are never touched). A healthy "
            "machine with proofs in flight is drained: it takes no new work and is destroyed "
            "once they finish."
        ),
        "input_schema": {
            "type": "object",
            "properties": {"instance_id": {"type": "integer"}, "reason": _REASON},
            "required": ["instance_id", "reason"],
            "additionalProperties": False,
        },
    },
    "set_ask_price": {
        "description": (
            "Set the Curio node's ask price on the Snark Market, in nFIL per proof "
            "(1 FIL = 10^9 nFIL; per ~130M constraints). New asks take it; with "
            "reprice_open the open asks are withdrawn so new ones take it, at 1 challenge "
            "proof each. Refused outside the operator's price range, or past the hour's "
            "withdrawals, or when it would cost a slot in use."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "price_nfil": {"type": "integer", "minimum": 1, "maximum": 1_000_000_000},
                "reprice_open": {"type": "boolean"},
                "reason": _REASON,
            },
            "required": ["price_nfil", "reason"],
            "additionalProperties": False,
        },
    },
    "set_requests": {
        "description": (
            "Turn the Curio node's requests for market work on or off. Off asks for no new "
            "work; the open asks stay unless withdraw_open (1 challenge proof each). Turn "
            "requests off, and let the queue drain, before shrinking the fleet below what "
            "the open work needs."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "enabled": {"type": "boolean"},
                "withdraw_open": {"type": "boolean"},
                "reason": _REASON,
            },
            "required": ["enabled", "reason"],
            "additionalProperties": False,
        },
    },
    "schedule_next_check": {
        "description": (
            "Ask for an extra run later (30 s to 24 h). Not for routine follow-up: the "
            "heartbeat already runs you regularly, so a request near the heartbeat interval "
            "is ignored. Requests within 30 s of a pending wake are merged into it."
        ),
        "input_schema": {
            "type": "object",
            "properties": {"delay_seconds": {"type": "number"}, "reason": _REASON},
            "required": ["delay_seconds", "reason"],
            "additionalProperties": False,
        },
    },
    "cancel_wake": {
        "description": "Cancel one pending wake by its id (see the wakes in your context).",
        "input_schema": {
            "type": "object",
            "properties": {"wake_id": {"type": "string"}},
            "required": ["wake_id"],
            "additionalProperties": False,
        },
    },
    "expect_demand": {
        "description": (
            'Record a known change of demand an operator tells you of ("expect 3x from '
            '14:00 to 16:00"): from start to end, demand is `multiplier` times the '
            "forecast. In demand mode the target rises a lead time before it starts; in "
            f"fixed mode it is only recorded. At most {MAX_EVENT_DAYS} days long, starting "
            f"within {EXPECT_HORIZON_DAYS} days; ended events are dropped. You may hold at "
            f"most {MODEL_SHARE} events of your own (your oldest-ending one makes room); "
            f"an operator's events are never removed or displaced by yours, and when theirs "
            f"fill the list ({MAX_EVENTS}) yours is refused."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "start": {
                    "type": "string",
                    "description": "RFC 3339 with its offset, UTC: 2026-12-06T14:00:00Z",
                },
                "end": {"type": "string", "description": "RFC 3339, UTC; after start"},
                "multiplier": {"type": "number", "exclusiveMinimum": 0, "maximum": 100},
                "note": {
                    "type": "string",
                    "maxLength": 200,
                    "description": "what the event is (e.g. 'launch')",
                },
            },
            "required": ["start", "end", "multiplier"],
            "additionalProperties": False,
        },
    },
}


def offered_tools(names: frozenset[str] | None, market: bool) -> frozenset[str]:
    """The tools a run is offered: the market's levers only with the market on."""
    every = frozenset(TOOL_SCHEMAS) if names is None else names
    return every if market else every - MARKET_TOOLS


def tool_schemas(names: frozenset[str] | None = None) -> list[dict[str, Any]]:
    """Anthropic tool definitions, in a stable order (stable prompts cache better)."""
    return [
        {"name": name, **schema}
        for name, schema in TOOL_SCHEMAS.items()
        if names is None or name in names
    ]


# ---------------------------------------------------------------- inputs
# What the model may pass, checked wherever a tool runs (workflow or activity):
# the same rules as the schemas above, so a bad call gets one clear error.

_Reason = Annotated[str, Field(max_length=1000)]


class _ToolInput(Wire):
    """A tool's input, checked in the workflow that runs the tool: bounded
    like every value a workflow holds (fleet_agent/wire.py)."""

    model_config = ConfigDict(extra="forbid")


class SearchOffersInput(_ToolInput):
    gpu_name: str | None = None
    max_dph: Annotated[float, Field(gt=0)] | None = None
    min_reliability: Annotated[float, Field(ge=0, le=1)] | None = None
    limit: Annotated[int, Field(ge=1, le=50)] = 10


class CreateInstanceInput(_ToolInput):
    offer_id: int
    reason: Annotated[str, Field(min_length=1, max_length=1000)]
    temporary: bool = False


class DestroyInstanceInput(_ToolInput):
    instance_id: int
    reason: Annotated[str, Field(min_length=1, max_length=1000)]


class ScheduleNextCheckInput(_ToolInput):
    delay_seconds: float
    reason: _Reason = ""


class CancelWakeInput(_ToolInput):
    wake_id: str


class ExpectDemandInput(_ToolInput):
    """`expect_demand`: times as RFC 3339 text with an offset (a bare date, a
    time without an offset or a number is refused: the model must say when)."""

    start: datetime
    end: datetime
    multiplier: Annotated[float, Field(gt=0, le=100)]
    note: Annotated[str, Field(max_length=200)] = ""

    @field_validator("start", "end", mode="before")
    @classmethod
    def _rfc3339(cls, raw: Any) -> datetime:
        if not isinstance(raw, str) or len(raw) > 40:
            raise ValueError("expected an RFC 3339 time, e.g. 2026-12-06T14:00:00Z")
        text = raw.strip()
        try:
            at = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"{text[:40]!r} is not an RFC 3339 time") from None
        if len(text) < 16 or text[10] not in "Tt ":
            raise ValueError("give a date and a time, e.g. 2026-12-06T14:00:00Z")
        if at.tzinfo is None:
            raise ValueError("needs a UTC offset, e.g. 2026-12-06T14:00:00Z")
        return at

    def event(self) -> DemandEvent | str:
        """The model's event, or why it is not one (end before start, too long)."""
        try:
            return DemandEvent(
                start=self.start,
                end=self.end,
                multiplier=self.multiplier,
                note=self.note,
                set_by="model",
            )
        except ValidationError as exc:
            return "; ".join(str(e["msg"]).removeprefix("Value error, ") for e in exc.errors())
        except Exception as exc:  # whatever a time can raise: an answer, never a failed task
            return f"not a valid event ({type(exc).__name__})"


_I = TypeVar("_I", bound=_ToolInput)


def parse_tool_input(model: type[_I], tool_use_id: str, name: str, raw: Any) -> _I | ToolResult:
    """The validated input, or the error result to hand back to the model."""
    try:
        return model.model_validate(raw)
    except Exception as exc:  # any input, any validator: an answer, never a failed task
        why = (
            describe_validation_error(exc)
            if isinstance(exc, ValidationError)
            else f"{type(exc).__name__}: {str(exc)[:200]}"
        )
        return ToolResult(
            tool_use_id=tool_use_id,
            name=name,
            content=f"Invalid input for {name}: {why}",
            is_error=True,
        )
