"""Turn whatever arrives at the agent workflow into models, or a clear refusal.

Signals, updates and the start input reach the workflow as loose JSON, so a
malformed payload never fails a workflow task (which Temporal would retry
forever, leaving the agent hung): it becomes a one-line refusal for
`status.rejected`, the update's error or the CLI. Nothing here raises on
a payload: a value that makes a validator raise something other than a
`ValidationError` (an `OverflowError` from a time near year 1, say) is a
refusal too. Pure: safe in workflows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from fleet_agent.models import AgentConfig, AgentState, ConfigPatch
from fleet_agent.validation import describe_validation_error

__all__ = [
    "MAX_ERROR_CHARS",
    "Parsed",
    "StartInput",
    "apply_patch",
    "parse_config_patch",
    "parse_payload",
    "parse_start",
    "payload_preview",
]

MAX_ERROR_CHARS = 300
_PREVIEW_CHARS = 80
_M = TypeVar("_M", bound=BaseModel)


def _clip(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _refusal(exc: Exception) -> str:
    """One line for whatever validating a payload raised."""
    if isinstance(exc, ValidationError):
        return _clip(describe_validation_error(exc), MAX_ERROR_CHARS)
    return _clip(f"{type(exc).__name__}: {exc}", MAX_ERROR_CHARS)


def _shape(raw: Any) -> str:
    return "null" if raw is None else type(raw).__name__


def payload_preview(raw: Any) -> str:
    """The start of a payload's text, so a sender can recognise its refused signal."""
    if isinstance(raw, str):
        return _clip(raw, _PREVIEW_CHARS)
    if isinstance(raw, dict):
        for key in ("text", "reason", "instance_id", "wake_id"):
            value = raw.get(key)
            if isinstance(value, str):
                return _clip(value, _PREVIEW_CHARS)
    return ""


@dataclass(frozen=True)
class Parsed(Generic[_M]):
    """A payload as a model, or why it was refused (exactly one is set)."""

    value: _M | None
    error: str = ""


def parse_payload(
    model: type[_M], raw: Any, *, bare: str | None = None, optional: bool = False
) -> Parsed[_M]:
    """`raw` as `model`. A bare string fills the field `bare`; `optional`
    payloads may be absent (null). Errors are one short line."""
    if raw is None and optional:
        raw = {}
    elif isinstance(raw, str) and bare is not None:
        raw = {bare: raw}
    if not isinstance(raw, dict):
        names = list(model.model_fields)
        fields = ", ".join(names[:4]) + (", …" if len(names) > 4 else "")
        accepted = "a JSON object" + (" or a string" if bare is not None else "")
        return Parsed(None, f"expected {accepted} ({fields}), got {_shape(raw)}"[:MAX_ERROR_CHARS])
    try:
        return Parsed(model.model_validate(raw))
    except Exception as exc:  # any value, any validator: a refusal, never a failed task
        return Parsed(None, _refusal(exc))


def parse_config_patch(raw: Any) -> Parsed[ConfigPatch]:
    """A partial config, validated field by field (strict: `true` is not a number)."""
    parsed = parse_payload(ConfigPatch, raw)
    if parsed.value is not None and parsed.value.is_empty():
        return Parsed(None, "the update changes nothing")
    return parsed


def apply_patch(patch: ConfigPatch, config: AgentConfig) -> Parsed[AgentConfig]:
    """`config` with `patch` applied and validated as a whole (a patch valid
    field by field can still break a rule between fields, such as
    `min_target` over `max_target`), or why not. Never raises: a start config
    or a recalled one that does not apply must not fail the agent's task."""
    try:
        return Parsed(patch.apply(config))
    except Exception as exc:
        return Parsed(None, _refusal(exc))


@dataclass(frozen=True)
class StartInput:
    """What the agent workflow starts from."""

    state: AgentState | None
    config: ConfigPatch | None
    problem: str = ""  # a refused start config: the agent starts on defaults
    started_by: str = ""  # "watchdog" when its schedule started it


def _thinking_as_before(state: Any) -> Any:
    """A handed-over state written before `llm_thinking_display` existed
    ran on the API's default, "omitted": it keeps it, where the field's
    default is now "summarized" (a running agent keeps its config). Every
    state written since names the display."""
    if isinstance(state, dict) and isinstance(state.get("config"), dict):
        return {**state, "config": {"llm_thinking_display": "omitted", **state["config"]}}
    return state


def parse_start(raw: Any) -> StartInput:
    """The workflow's input: nothing, `{"config": {...}}` or `{"state": {...}}`.

    A bad config is refused visibly (the agent starts with defaults). A state
    that does not validate raises: it only ever comes from our own
    continue-as-new, and starting afresh would lose wakes and triggers, so the
    workflow task fails (and is retried) until fixed code is deployed.
    """
    if raw is None:
        return StartInput(None, None)
    if not isinstance(raw, dict):
        return StartInput(None, None, f"expected a JSON object, got {_shape(raw)}")
    unknown = sorted(set(raw) - {"config", "state", "started_by"})
    state = (
        AgentState.model_validate(_thinking_as_before(raw["state"]))
        if raw.get("state") is not None
        else None
    )
    problem = f"unknown field(s): {', '.join(unknown)}"[:MAX_ERROR_CHARS] if unknown else ""
    config: ConfigPatch | None = None
    if raw.get("config") is not None:
        parsed = parse_payload(ConfigPatch, raw["config"])
        config, error = parsed.value, parsed.error
        problem = "; ".join(p for p in (problem, error) if p)
    started_by = raw.get("started_by")
    return StartInput(state, config, problem, started_by if isinstance(started_by, str) else "")
