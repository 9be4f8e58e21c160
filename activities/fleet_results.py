"""What the fleet tools tell the model, and how vast.ai failures map to Temporal's.

Every tool returns a compact ToolResult; a refusal (guardrail, bad input,
offer gone, paused) is an error result for the model, never an exception.
Other vast.ai failures become ApplicationErrors (`vast_failure`): retryable,
except a rejected API key, which no retry can fix.
"""

from __future__ import annotations

from typing import Any

from temporalio.exceptions import ApplicationError

from fleet_agent.fleet.capacity import proofs_per_hour
from fleet_agent.fleet.load_time import est_load_minutes
from fleet_agent.fleet.offer_cost import transfer_dph
from fleet_agent.fleet.prover import ProverSpec
from fleet_agent.models import ApprovalAsk, FleetToolRequest, ToolResult
from fleet_agent.store import ToolCallRecord
from fleet_agent.untrusted import fence
from fleet_agent.vast.errors import VastAuthError, VastError
from fleet_agent.vast.models import Instance, Offer

__all__ = [
    "GPU_CHARS",
    "approval_needed",
    "describe_machine",
    "is_refusal",
    "offer_row",
    "replay_note",
    "replayed",
    "slim",
    "tool_result",
    "vast_failure",
    "vast_text",
]

#: A GPU's name or a host's location: a few words.
GPU_CHARS = 60


def tool_result(
    req: FleetToolRequest, content: str, *, error: bool = False, mutating: bool = False
) -> ToolResult:
    return ToolResult(
        tool_use_id=req.tool_use_id,
        name=req.name,
        content=content,
        is_error=error,
        mutating=mutating,
    )


def approval_needed(req: FleetToolRequest, reason: str, dph: float) -> ToolResult:
    """Instead of acting: the change waits for an operator (workflows/run_approvals.py)."""
    return ToolResult(
        tool_use_id=req.tool_use_id,
        name=req.name,
        content=f"Waiting for an operator's approval: {reason}. Nothing was done yet.",
        approval=ApprovalAsk(reason=reason, dph=dph),
    )


def replay_note(record: ToolCallRecord) -> str:
    """What the model reads before the recorded result of a replayed call."""
    when = record.finished_at or record.started_at
    return (
        f"[Replayed: this tool call already ran in run {record.run} "
        f"(finished {when:%Y-%m-%d %H:%M:%S} UTC). Its recorded result follows; "
        "nothing was done again.]"
    )


def replayed(record: ToolCallRecord) -> ToolResult:
    """The recorded result of a call that already ran, marked so the model
    (and the run log) can tell that nothing was done this time."""
    assert record.result is not None
    return record.result.model_copy(
        update={"replayed": True, "content": f"{replay_note(record)}\n{record.result.content}"}
    )


_STATUS_CHARS = 120


def slim(result: ToolResult) -> ToolResult:
    """`result` as the run workflow's history carries it: a one-line status
    (the start of its first line) instead of the text, which stays in the
    journal. The figures the workflow decides on stay."""
    first = result.content.strip().splitlines()[0] if result.content.strip() else ""
    if result.replayed:
        first = "replayed: " + (result.content.splitlines()[1:2] or [""])[0]
    line = first if len(first) <= _STATUS_CHARS else first[: _STATUS_CHARS - 1] + "…"
    return result.model_copy(update={"content": line, "stored": True})


#: How much of a vast.ai error the model reads: the service's own words end it.
VAST_TEXT_CHARS = 300


def vast_text(exc: VastError) -> str:
    """A vast.ai failure as the model reads it: the service's words (and our
    method, path and status around them) on one line, capped and fenced as
    data (fleet_agent/untrusted.py): an error text may be anything."""
    return fence(str(exc), VAST_TEXT_CHARS)


def vast_failure(exc: VastError) -> ApplicationError:
    """How a vast.ai failure ends an attempt. A rejected API key is permanent
    (non-retryable, and says what to fix); anything else is worth retrying
    (Temporal's retry policy decides). The message reaches the model when the
    retries give up (workflows/run.py), so vast.ai's words in it are fenced."""
    if isinstance(exc, VastAuthError):
        said = fence(exc.msg or exc.error or f"HTTP {exc.status}")
        return ApplicationError(
            f"vast.ai rejected the worker's API key ({said}, {exc.method} {exc.path}): "
            "an operator must set a valid VAST_API_KEY and restart the worker",
            type="VastAuthFailed",
            non_retryable=True,
        )
    return ApplicationError(f"vast.ai: {vast_text(exc)}", type="VastTransient")


def is_refusal(exc: VastError) -> bool:
    """vast.ai refused this request for a reason the model can act on (bad
    arguments, an offer gone): an error result, not a retry. A rejected key is
    not one (see `vast_failure`)."""
    if isinstance(exc, VastAuthError) or exc.ambiguous:
        return False
    return exc.permanent or exc.status in (400, 404, 422)


def offer_row(offer: Offer, prover: ProverSpec) -> dict[str, Any]:
    """One offer as search_offers shows it: the capacity model's rate for the
    RAM the rental gets, the price, what its downloads add
    (fleet_agent/fleet/offer_cost.py) and the cost per proof of both."""
    # The CPU bound counts: an 8-GPU host with few cores cannot feed its GPUs.
    rate = proofs_per_hour(offer.gpu_name, offer.num_gpus, offer.ram_mb, offer.cpu_cores_effective)
    load = est_load_minutes(offer.inet_down)
    transfer = transfer_dph(offer.inet_down_cost, rate, prover)
    return {
        "offer_id": offer.id,
        # The row's text (a host's hardware as vast.ai lists it): fenced as data.
        "gpu": fence(offer.gpu_name, GPU_CHARS),
        "num_gpus": offer.num_gpus,
        "ram_gb": round(offer.ram_mb / 1024),
        "cpu_cores": offer.cpu_cores_effective,
        "dph": round(offer.dph_total, 4),
        "transfer_dph": round(transfer, 4),
        "reliability": offer.reliability2,
        "est_proofs_per_hour": round(rate, 1),
        "usd_per_100_proofs": round(100 * (offer.dph_total + transfer) / rate, 3) if rate else None,
        "inet_down_mbps": offer.inet_down,
        "est_load_minutes": None if load is None else round(load),
        # The host's location as the row gives it: text, fenced too.
        "where": fence(offer.geolocation, GPU_CHARS) if offer.geolocation else None,
    }


def describe_machine(inst: Instance) -> str:
    """'1x «RTX 4090» at $0.412/h' for an instance as vast.ai lists it (the
    GPU's name is the row's text: fenced)."""
    gpu = fence(inst.gpu_name or "?", GPU_CHARS)
    return f"{inst.num_gpus or 1}x {gpu} at ${inst.dph_total or 0.0:.3f}/h"
