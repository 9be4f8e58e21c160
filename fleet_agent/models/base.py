"""The base of every inbound payload model."""

from __future__ import annotations

from pydantic import ConfigDict

from fleet_agent.wire import Wire

__all__ = [
    "Strict",
    "Wire",
]


class Strict(Wire):
    """Base for inbound payloads: unknown fields are an error, not silently
    dropped, and types are strict (`true` is not the number 1, "5" not 5).
    As every model that enters a workflow, it refuses `inf` and `NaN`
    (`allow_inf_nan=False`) and unbounded numbers, times and text
    (fleet_agent/wire.py)."""

    model_config = ConfigDict(extra="forbid", strict=True)
