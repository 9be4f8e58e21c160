"""The filter and order grammar vast.ai uses for offers and instance lists.

A filter is ``{field: {op: value}}`` with op one of `FILTER_OPS`; several ops on
one field are ANDed, as are fields. ``in``/``notin`` take a list. The same
grammar serves ``POST /api/v0/bundles/`` (fields at the top level of the body)
and the ``select_filters`` query parameter of ``GET /api/v1/instances/``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

__all__ = [
    "FILTER_OPS",
    "Filters",
    "OrderSpec",
    "normalize_order",
    "validate_filters",
]

FILTER_OPS: frozenset[str] = frozenset({"eq", "neq", "gt", "gte", "lt", "lte", "in", "notin"})

Filters = Mapping[str, Mapping[str, Any]]

#: ``"dph_total"`` / ``"dph_total-"`` / ``"-dph_total"`` (a ``-`` means descending,
#: as in the vastai CLI), or explicit ``[("dph_total", "asc"), ...]`` pairs.
OrderSpec = str | Sequence[tuple[str, Literal["asc", "desc"]]]

# Keys of the search body that are not field filters; a filter must not use them.
_RESERVED_KEYS = frozenset({"order", "type", "limit", "allocated_storage", "q"})


def validate_filters(filters: Filters) -> dict[str, dict[str, Any]]:
    """Return a plain-dict copy of `filters`, or raise ValueError if malformed.

    Checked here rather than left to the service so that a typo in an operator
    fails loudly instead of silently matching everything.
    """
    out: dict[str, dict[str, Any]] = {}
    for field, clause in filters.items():
        if not isinstance(field, str) or not field:
            raise ValueError(f"filter field must be a non-empty string, got {field!r}")
        if field in _RESERVED_KEYS:
            raise ValueError(f"{field!r} is not a filter field; pass it as an argument")
        if not isinstance(clause, Mapping) or not clause:
            raise ValueError(f"filter for {field!r} must be a non-empty {{op: value}} mapping")
        ops: dict[str, Any] = {}
        for op, value in clause.items():
            if op not in FILTER_OPS:
                raise ValueError(f"unknown operator {op!r} for {field!r}; use {sorted(FILTER_OPS)}")
            if op in ("in", "notin") and (
                isinstance(value, str | bytes) or not isinstance(value, Sequence)
            ):
                raise ValueError(f"{field!r} {op} needs a list, got {value!r}")
            ops[op] = list(value) if op in ("in", "notin") else value
        out[field] = ops
    return out


def normalize_order(order: OrderSpec) -> list[list[str]]:
    """Turn an `OrderSpec` into the body's ``[[field, "asc"|"desc"], ...]`` form."""
    pairs: list[list[str]] = []
    if isinstance(order, str):
        for raw in order.split(","):
            name = raw.strip()
            if not name:
                continue
            direction = "desc" if name.startswith("-") or name.endswith("-") else "asc"
            field = name.strip("-+")
            if not field:
                raise ValueError(f"empty field in order {order!r}")
            pairs.append([field, direction])
        return pairs
    for field, direction in order:
        if direction not in ("asc", "desc"):
            raise ValueError(f"order direction must be 'asc' or 'desc', got {direction!r}")
        pairs.append([field, direction])
    return pairs
