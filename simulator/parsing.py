"""Request bodies and query parameters, checked as the service checks them."""

from __future__ import annotations

from typing import Any

from .errors import ApiError

__all__ = ["number", "parse_rent_body", "parse_search_order", "parse_v1_order"]


def number(value: Any, name: str) -> float:
    try:
        if isinstance(value, bool):
            raise TypeError
        return float(value)
    except (TypeError, ValueError):
        raise ApiError(400, "invalid_args", f"{name} must be a number") from None


def parse_search_order(raw: Any) -> list[tuple[str, bool]]:
    if not isinstance(raw, list):
        raise ApiError(400, "invalid_args", "order must be a list of [field, direction]")
    order: list[tuple[str, bool]] = []
    for item in raw:
        if (
            not isinstance(item, list | tuple)
            or len(item) != 2
            or not isinstance(item[0], str)
            or item[1] not in ("asc", "desc")
        ):
            raise ApiError(400, "invalid_args", f"bad order item {item!r}")
        order.append((item[0], item[1] == "desc"))
    return order


def parse_v1_order(raw: list[dict[str, Any]]) -> list[tuple[str, bool]]:
    order: list[tuple[str, bool]] = []
    for item in raw:
        if not isinstance(item, dict) or not isinstance(item.get("col"), str):
            raise ApiError(400, "invalid_args", f"bad order_by item {item!r}")
        direction = str(item.get("dir", "asc")).lower()
        if direction not in ("asc", "desc"):
            raise ApiError(400, "invalid_args", f"bad order_by direction {direction!r}")
        order.append((item["col"], direction == "desc"))
    if not any(col == "id" for col, _ in order):
        order.append(("id", False))  # a total order, so the cursor is exact
    return order


def parse_rent_body(body: dict[str, Any]) -> dict[str, Any]:
    image = body.get("image")
    if not body.get("template_hash_id") and (not isinstance(image, str) or not image.strip()):
        raise ApiError(400, "invalid_args", "image is required")
    disk = number(body.get("disk", 8.0), "disk")
    if disk <= 0:
        raise ApiError(400, "invalid_args", "disk must be > 0")
    label = body.get("label")
    if label is not None and not isinstance(label, str):
        raise ApiError(400, "invalid_args", "label must be a string")
    onstart = body.get("onstart")
    if onstart is not None and not isinstance(onstart, str):
        raise ApiError(400, "invalid_args", "onstart must be a string")
    env = body.get("env") or {}
    if not isinstance(env, dict):
        raise ApiError(400, "invalid_args", "env must be an object")
    runtype = body.get("runtype")
    price = body.get("price")
    return {
        "image": image if isinstance(image, str) else f"template:{body.get('template_hash_id')}",
        "disk": disk,
        "label": label,
        "onstart": onstart,
        "env": {str(k): str(v) for k, v in env.items()},
        "runtype": runtype if isinstance(runtype, str) else None,
        "price": None if price is None else number(price, "price"),
    }
