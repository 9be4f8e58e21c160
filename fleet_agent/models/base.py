"""The base of every inbound payload model."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = [
    "Strict",
]


class Strict(BaseModel):
    """Base for inbound payloads: unknown fields are an error, not silently
    dropped, and types are strict (`true` is not the number 1, "5" not 5)."""

    model_config = ConfigDict(extra="forbid", strict=True)
