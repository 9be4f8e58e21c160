"""Error text shared by every place that rejects input: a pydantic
validation error as one short line. Below every package (it imports only
pydantic), so the domain packages and the models alike can use it."""

from __future__ import annotations

from pydantic import ValidationError

__all__ = ["describe_validation_error"]


def describe_validation_error(exc: ValidationError) -> str:
    """'field: problem; other: problem' — short enough for a tool result or a CLI line."""
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}" for e in exc.errors()
    )
