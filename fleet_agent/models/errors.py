"""Error text shared by every place that rejects input."""

from __future__ import annotations

from pydantic import ValidationError

__all__ = ["describe_validation_error"]


def describe_validation_error(exc: ValidationError) -> str:
    """'field: problem; other: problem' — short enough for a tool result or a CLI line."""
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}" for e in exc.errors()
    )
