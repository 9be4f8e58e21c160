"""Rows of the service's answers as our models: untrusted input, parsed here.

`parse_rows` reads a list: a row that does not parse (no id, a price that is
missing, negative or not a number, a field of the wrong type) is skipped and
logged with its id, so one bad row never fails a search, a poll, an activity
or a workflow task. `parse_row` reads the one row a call asked for: there a
bad row is a `VastProtocolError` (the caller's error path), naming the
field.

Instance rows are the exception (`parse_instances`, `parse_instance`): a
machine still bills whether or not its row parses, so a row that does not
but carries a label is kept as an unreadable machine
(`Instance.unreadable_row`) and logged; the fleet layer counts the ones
whose label is an agent's own against every cap at the cap's value
(fleet_agent/fleet/guardrails.py). A row without a label is nobody's fleet
and is skipped as any other.
"""

from __future__ import annotations

import logging
from typing import Any, TypeVar

from pydantic import ValidationError

from .errors import VastProtocolError
from .models import Instance, Offer

__all__ = ["parse_instance", "parse_instances", "parse_row", "parse_rows"]

log = logging.getLogger(__name__)

_M = TypeVar("_M", Offer, Instance)


def _first_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "row"
    return f"{where}: {first['msg']}"


def _protocol_error(model: type[Any], exc: ValidationError, method: str, path: str) -> Exception:
    return VastProtocolError(
        f"unexpected {model.__name__} shape: {exc.error_count()} error(s), "
        f"first: {_first_error(exc)}",
        status=200,
        method=method,
        path=path,
    )


def parse_row(model: type[_M], row: Any, method: str, path: str) -> _M:
    try:
        return model.model_validate(row)
    except ValidationError as exc:
        raise _protocol_error(model, exc, method, path) from None


def parse_rows(model: type[_M], rows: list[Any], method: str, path: str) -> list[_M]:
    """The rows that parse; each one that does not is logged and left out."""
    parsed: list[_M] = []
    for row in rows:
        try:
            parsed.append(model.model_validate(row))
        except ValidationError as exc:
            _skipped(model.__name__, row, exc, method, path)
    return parsed


def parse_instances(rows: list[Any], method: str, path: str) -> list[Instance]:
    """The instance rows that parse, and those that do not but carry a
    label, kept as unreadable machines; each row that does not parse is
    logged."""
    parsed: list[Instance] = []
    for row in rows:
        try:
            parsed.append(Instance.model_validate(row))
        except ValidationError as exc:
            kept = Instance.unreadable_row(row, _first_error(exc))
            if kept is None:
                _skipped("Instance", row, exc, method, path)
                continue
            log.warning(
                "%s %s: Instance row %r (label %r) does not parse (%s): kept as unreadable, "
                "counted at its agent's caps",
                method,
                path,
                kept.id,
                kept.label,
                kept.unreadable,
            )
            parsed.append(kept)
    return parsed


def parse_instance(row: Any, instance_id: int, method: str, path: str) -> Instance:
    """The one instance row a call asked for (`instance_id`): a row that does
    not parse but carries a label is that machine, unreadable; any other is
    a `VastProtocolError`."""
    try:
        return Instance.model_validate(row)
    except ValidationError as exc:
        kept = Instance.unreadable_row(row, _first_error(exc), instance_id)
        if kept is None:
            raise _protocol_error(Instance, exc, method, path) from None
        log.warning(
            "%s %s: instance %s does not parse (%s): read as unreadable",
            method,
            path,
            instance_id,
            kept.unreadable,
        )
        return kept


def _skipped(name: str, row: Any, exc: ValidationError, method: str, path: str) -> None:
    rid = row.get("id") if isinstance(row, dict) else None
    log.warning("%s %s: %s row %r skipped (%s)", method, path, name, rid, _first_error(exc)[:200])
