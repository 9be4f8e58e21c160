"""Rows of the service's answers as our models, or a typed protocol error."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import ValidationError

from .errors import VastProtocolError
from .models import Instance, Offer

__all__ = ["parse_row"]

_M = TypeVar("_M", Offer, Instance)


def parse_row(model: type[_M], row: Any, method: str, path: str) -> _M:
    try:
        return model.model_validate(row)
    except ValidationError as exc:
        raise VastProtocolError(
            f"unexpected {model.__name__} shape: {exc.error_count()} error(s), "
            f"first: {exc.errors()[0]['loc']} {exc.errors()[0]['msg']}",
            status=200,
            method=method,
            path=path,
        ) from None
