"""Rows of the service's answers as our models: untrusted input, parsed here.

`parse_rows` reads a list: a row that does not parse (no id, a price that is
missing, negative or not a number, a field of the wrong type) is skipped and
logged with its id, so one bad row never fails a search, a poll, an activity
or a workflow task. `parse_row` reads the one row a call asked for: there a
bad row is a `VastProtocolError` (the caller's error path), naming the
field.
"""

from __future__ import annotations

import logging
from typing import Any, TypeVar

from pydantic import ValidationError

from .errors import VastProtocolError
from .models import Instance, Offer

__all__ = ["parse_row", "parse_rows"]

log = logging.getLogger(__name__)

_M = TypeVar("_M", Offer, Instance)


def _first_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "row"
    return f"{where}: {first['msg']}"


def parse_row(model: type[_M], row: Any, method: str, path: str) -> _M:
    try:
        return model.model_validate(row)
    except ValidationError as exc:
        raise VastProtocolError(
            f"unexpected {model.__name__} shape: {exc.error_count()} error(s), "
            f"first: {_first_error(exc)}",
            status=200,
            method=method,
            path=path,
        ) from None


def parse_rows(model: type[_M], rows: list[Any], method: str, path: str) -> list[_M]:
    """The rows that parse; each one that does not is logged and left out."""
    parsed: list[_M] = []
    for row in rows:
        try:
            parsed.append(model.model_validate(row))
        except ValidationError as exc:
            rid = row.get("id") if isinstance(row, dict) else None
            log.warning(
                "%s %s: %s row %r skipped (%s)",
                method,
                path,
                model.__name__,
                rid,
                _first_error(exc)[:200],
            )
    return parsed
