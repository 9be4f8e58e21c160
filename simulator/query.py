"""Server-side filter, sort and keyset pagination, as the service applies them.

Filters are ``{field: {op: value}}``. Values arrive the way clients send them:
the vastai CLI sends numbers as strings (``{"num_gpus": {"eq": "1"}}``), so a
value is coerced to the type of the record's field before comparing. A filter
on a field the records do not have is an error, not a silent match-all.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = [
    "QueryError",
    "after_token",
    "decode_token",
    "encode_token",
    "matches",
    "sort_records",
]

_OPS = frozenset({"eq", "neq", "gt", "gte", "lt", "lte", "in", "notin"})


class QueryError(ValueError):
    """A malformed filter, order or token; the server answers 400 ``invalid_args``."""


def _coerce(actual: Any, value: Any, field: str) -> Any:
    """`value` converted to the type of the record's `actual` field value."""
    if value is None or actual is None:
        return value
    if isinstance(actual, bool):
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "1"):
            return True
        if text in ("false", "0"):
            return False
        raise QueryError(f"{field}: expected a boolean, got {value!r}")
    if isinstance(actual, int | float):
        if isinstance(value, bool):
            return float(value)
        try:
            return float(value)
        except (TypeError, ValueError):
            raise QueryError(f"{field}: expected a number, got {value!r}") from None
    return str(value)


def _candidates(field: str, actual: Any) -> tuple[Any, ...]:
    # geolocation reads "Texas, US" but is filtered by country code ("US"),
    # as in the CLI's `geolocation in [TW,SE]`.
    if field == "geolocation" and isinstance(actual, str) and ", " in actual:
        return (actual, actual.rsplit(", ", 1)[1])
    return (actual,)


def _test(field: str, actual: Any, op: str, value: Any) -> bool:
    if op in ("in", "notin"):
        if not isinstance(value, list):
            raise QueryError(f"{field} {op}: expected a list")
        wanted = [_coerce(actual, v, field) for v in value]
        hit = any(c in wanted for c in _candidates(field, actual))
        return hit if op == "in" else not hit
    expected = _coerce(actual, value, field)
    if op == "eq":
        return any(c == expected for c in _candidates(field, actual))
    if op == "neq":
        return all(c != expected for c in _candidates(field, actual))
    if actual is None or expected is None:
        return False  # like SQL NULL: no order comparison holds
    try:
        if op == "gt":
            return bool(actual > expected)
        if op == "gte":
            return bool(actual >= expected)
        if op == "lt":
            return bool(actual < expected)
        return bool(actual <= expected)
    except TypeError:
        raise QueryError(f"{field} {op}: cannot compare {actual!r} with {value!r}") from None


def matches(
    record: Mapping[str, Any],
    filters: Mapping[str, Any],
    *,
    known_fields: frozenset[str] | None = None,
) -> bool:
    """Whether `record` passes every clause of `filters`."""
    for field, clause in filters.items():
        if not isinstance(clause, Mapping):
            raise QueryError(f"filter for {field!r} must be an object of operators")
        fields = known_fields if known_fields is not None else frozenset(record)
        if field not in fields:
            raise QueryError(f"unknown field {field!r}")
        for op, value in clause.items():
            if op not in _OPS:
                raise QueryError(f"unknown operator {op!r} for {field!r}")
            if not _test(field, record.get(field), op, value):
                return False
    return True


def _cmp_values(a: Any, b: Any) -> int:
    # None sorts first; mixed types compare by their text so sorting never crashes.
    if a is None or b is None:
        return (a is not None) - (b is not None)
    try:
        return int(a > b) - int(a < b)
    except TypeError:
        sa, sb = str(a), str(b)
        return (sa > sb) - (sa < sb)


def _key_cmp(order: Sequence[tuple[str, bool]]) -> Callable[[Sequence[Any], Sequence[Any]], int]:
    def cmp(ka: Sequence[Any], kb: Sequence[Any]) -> int:
        for (_, desc), a, b in zip(order, ka, kb, strict=True):
            c = _cmp_values(a, b)
            if c:
                return -c if desc else c
        return 0

    return cmp


def sort_records(
    records: list[dict[str, Any]], order: Sequence[tuple[str, bool]]
) -> list[dict[str, Any]]:
    """`records` sorted by ``(field, descending)`` pairs."""
    cmp = _key_cmp(order)

    def by_key(a: dict[str, Any], b: dict[str, Any]) -> int:
        return cmp(_key(a, order), _key(b, order))

    return sorted(records, key=functools.cmp_to_key(by_key))


def _key(record: Mapping[str, Any], order: Sequence[tuple[str, bool]]) -> list[Any]:
    return [record.get(field) for field, _ in order]


def encode_token(record: Mapping[str, Any], order: Sequence[tuple[str, bool]]) -> str:
    """An opaque cursor that resumes after `record` in this order."""
    raw = json.dumps({"values": _key(record, order)}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_token(token: str, order: Sequence[tuple[str, bool]]) -> list[Any]:
    """The sort key a cursor resumes after; QueryError if it is not ours."""
    try:
        padded = token + "=" * (-len(token) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode()))
        values = data["values"]
    except (binascii.Error, ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise QueryError("invalid after_token") from None
    if not isinstance(values, list) or len(values) != len(order):
        raise QueryError("after_token does not fit this order_by")
    return values


def after_token(
    records: list[dict[str, Any]], order: Sequence[tuple[str, bool]], token_key: Sequence[Any]
) -> list[dict[str, Any]]:
    """The sorted `records` strictly after the cursor key (keyset pagination)."""
    cmp = _key_cmp(order)
    return [r for r in records if cmp(_key(r, order), token_key) > 0]
