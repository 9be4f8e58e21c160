"""The API's request and answer types, shared by its route modules."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from .errors import ApiError

__all__ = ["Handler", "Headers", "Reply", "Request", "json_param", "no_such_instance"]


@dataclass(frozen=True, slots=True)
class Reply:
    """One answer: JSON `body`, or plain `text`; sent after `delay_s` real seconds."""

    status: int
    body: Any = None
    text: str | None = None
    delay_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    params: dict[str, str]
    body: Any
    match: re.Match[str]


#: A route's handler: the API object (any class of it) and the request.
Handler = Callable[[Any, Request], Reply]


class Headers(Protocol):
    """What the API reads from request headers (``http.client.HTTPMessage`` fits)."""

    def get(self, name: str, /) -> str | None:
        """The header's value, or None."""


def json_param(params: Mapping[str, str], name: str, default: Any) -> Any:
    raw = params.get(name)
    if raw is None or raw == "":
        return default
    try:
        return json.loads(raw)
    except ValueError:
        raise ApiError(400, "invalid_args", f"{name} must be JSON") from None


def no_such_instance(req: Request) -> ApiError:
    return ApiError(404, "no_such_instance", f"Instance {req.match['id']} not found.")
