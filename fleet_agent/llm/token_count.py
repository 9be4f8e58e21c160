"""Token counts of whole requests: counted by the provider, estimated otherwise.

The Messages API's `count_tokens` endpoint counts a request as the model's
tokenizer does; the local estimate (`estimate_tokens`, characters / 3.5 of the
request's JSON) only approximates it. `RequestTokens`:

- counts with the provider only when the calibrated estimate puts the
  request past `COUNT_FROM_SHARE` of the model's window (`measure`): far
  below it no error of the estimate can make it overflow, and a count is an
  HTTP round trip before every round, on its own rate limit;
- counts with the provider when it can (`TokenCounter`), with a timeout, and
  keeps the counts in an in-process LRU keyed by a hash of the request's
  content, so a retried round (or a second look at the same request) costs no
  second call. In-process rather than in the store: a count is worth a short
  HTTP call, not a table, and a worker restart loses nothing that matters;
- calibrates the estimate from each count: the ratio counted / estimated,
  smoothed, starts at 1.0 (the estimate is conservative for English and JSON)
  and is bounded, so one odd request cannot make it absurd;
- falls back to the calibrated estimate when counting fails or times out, or
  the provider cannot count.

Only the whole-request guard (fleet_agent/llm/request_fit.py) uses these figures.
The history window keeps the plain estimate: its block boundaries must be
the same on every worker and every round, or the cached prefix would move.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fleet_agent.llm.base import LlmError, SystemPrompt, TokenCounter
from fleet_agent.llm.prompt import estimate_tokens

__all__ = [
    "COUNT_FROM_SHARE",
    "COUNT_TIMEOUT_SECONDS",
    "Count",
    "RequestTokens",
    "request_text",
]

log = logging.getLogger(__name__)

COUNT_TIMEOUT_SECONDS = 5.0
_CACHE_SIZE = 512
_SMOOTHING = 0.3  # weight of the newest count in the ratio
_RATIO_BOUNDS = (0.25, 2.0)
#: A request is counted only past this share of the window by the calibrated
#: estimate: below it, the request would have to hold twice the tokens the
#: estimate says (the ratio's upper bound) to overflow.
COUNT_FROM_SHARE = 1 / _RATIO_BOUNDS[1]


def request_text(
    system: SystemPrompt, tools: Sequence[dict[str, Any]], messages: Sequence[dict[str, Any]]
) -> str:
    """The request's content as compact JSON: what the estimate measures and the
    cache's key hashes."""
    return json.dumps(
        {"system": system, "tools": list(tools), "messages": list(messages)},
        separators=(",", ":"),
        ensure_ascii=False,
        sort_keys=True,
    )


@dataclass(frozen=True)
class Count:
    tokens: int
    counted: bool  # False: the calibrated estimate


class RequestTokens:
    """Counts requests for one worker (see the module): thread-unsafe by design,
    used from the worker's event loop only."""

    def __init__(
        self, counter: TokenCounter | None, *, timeout_seconds: float = COUNT_TIMEOUT_SECONDS
    ) -> None:
        self._counter = counter
        self._timeout = timeout_seconds
        self._cache: OrderedDict[str, int] = OrderedDict()
        self.ratio = 1.0
        self.counted = 0
        self.failed = 0

    def estimate(
        self,
        system: SystemPrompt,
        tools: Sequence[dict[str, Any]],
        messages: Sequence[dict[str, Any]],
    ) -> int:
        """The calibrated estimate of a request (or of a part: pass empty others)."""
        return math.ceil(estimate_tokens(request_text(system, tools, messages)) * self.ratio)

    async def measure(
        self,
        system: SystemPrompt,
        tools: Sequence[dict[str, Any]],
        messages: Sequence[dict[str, Any]],
        *,
        window: int,
    ) -> Count:
        """`count` when the request may come near `window`, else the
        calibrated estimate (no HTTP call)."""
        estimate = self.estimate(system, tools, messages)
        if estimate <= window * COUNT_FROM_SHARE:
            return Count(estimate, counted=False)
        return await self.count(system, tools, messages)

    async def count(
        self,
        system: SystemPrompt,
        tools: Sequence[dict[str, Any]],
        messages: Sequence[dict[str, Any]],
    ) -> Count:
        """The request's tokens: cached, counted, or the calibrated estimate."""
        text = request_text(system, tools, messages)
        key = hashlib.sha256(text.encode()).hexdigest()
        if key in self._cache:
            self._cache.move_to_end(key)
            return Count(self._cache[key], counted=True)
        if self._counter is None:
            return Count(self.estimate(system, tools, messages), counted=False)
        try:
            tokens = await asyncio.wait_for(
                self._counter.count_tokens(
                    system=system, messages=list(messages), tools=list(tools)
                ),
                timeout=self._timeout,
            )
        except (LlmError, TimeoutError) as exc:
            self.failed += 1
            log.info("count_tokens failed, using the estimate: %s", exc or "timed out")
            return Count(self.estimate(system, tools, messages), counted=False)
        self.counted += 1
        self._cache[key] = tokens
        if len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)
        raw = estimate_tokens(text)
        if raw > 0 and tokens > 0:
            seen = tokens / raw
            ratio = (1 - _SMOOTHING) * self.ratio + _SMOOTHING * seen
            self.ratio = min(max(ratio, _RATIO_BOUNDS[0]), _RATIO_BOUNDS[1])
        return Count(tokens, counted=True)
