"""The LLM models fleet-agent knows: prices, limits and what each request may carry.

A worker refuses to start on a model that is not in this table (or in the
operator's `FLEET_LLM_PRICES`), so a typo in `FLEET_LLM_MODEL` is an error at
start, not a failed first run, and every model it runs on has a price.

Prices are USD per million tokens, as Anthropic publishes them, read on
2026-12-06 from:

- the pricing page, https://platform.claude.com/docs/en/about-claude/pricing
  (cache writes: 1.25 × input for the 5-minute TTL, 2 × for the 1-hour TTL;
  reads 0.1 × input unless a model page says otherwise);
- each model's page, https://platform.claude.com/docs/en/models/<model>/overview
  (context window, maximum output, thinking, default effort);
- Sonnet 5.5's migration guide,
  https://platform.claude.com/docs/en/models/sonnet-5-5/migration-guide: "the
  same prices as Claude Sonnet 5, except for prompt cache reads, which cost
  $0.10 USD per million tokens, half the Claude Sonnet 5 rate". Its model
  page still showed $0.20, the price at launch; the cut took effect on
  2026-10-07, so the guide's figure is taken (docs/DECISIONS.md, "The model
  table").

The minimum cacheable prompt (shorter prefixes are silently not cached) is
the prompt-caching page's figure per model; for the 5.x models no stored copy
of that table was readable, and the figures (512 for Sonnet 5.5 and the
Opus models, 1,024 for Sonnet 5) are those the migration notes quote.

What a request may carry differs by model: `adaptive_thinking` models think
by default (Sonnet 5.5 runs adaptive thinking when a request has no
`thinking` field) and take a `thinking.display`; `efforts` are the
`output_config.effort` levels the model accepts (none: the field is not
sent). fleet_agent/llm/request.py builds every request from these, and never
sends what any model refuses (sampling parameters, thinking budgets or
`disabled`, a forced tool choice, an assistant prefill).

Prices change: override or extend them with `FLEET_LLM_PRICES`, a JSON object
of model name → fields of `ModelInfo` (a known model may give only the fields
that differ; a new one must give its prices and cache minimum, and gets no
thinking or effort unless it says so), e.g.

    FLEET_LLM_PRICES='{"claude-sonnet-5-5": {"cache_read": 0.1}}'
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fleet_agent.models import Effort, TokenUsage

__all__ = [
    "DEFAULT_MODEL",
    "EFFORTS",
    "KNOWN_MODELS",
    "PRICES_ENV",
    "ModelInfo",
    "UnknownModel",
    "context_window",
    "cost_usd",
    "known_info",
    "model_info",
    "model_table",
]

DEFAULT_MODEL = "claude-sonnet-5-5"
"""The model when FLEET_LLM_MODEL names none.

Pinned, not read from the SDK: the order of the SDK's `Model` Literal is no
promise, and an SDK upgrade must not change the model (and the bill) silently.
Changing it is a decision recorded in docs/DECISIONS.md.
"""

PRICES_ENV = "FLEET_LLM_PRICES"

EFFORTS: tuple[Effort, ...] = ("low", "medium", "high", "xhigh", "max")
"""Every effort level of the Messages API, lowest first."""

_Usd = Annotated[float, Field(ge=0, le=10_000)]


class ModelInfo(BaseModel):
    """Prices in USD per million tokens, the shortest prefix the API caches,
    the model's limits, and the thinking and effort settings it takes."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    input: _Usd
    output: _Usd
    cache_write_5m: _Usd
    cache_write_1h: _Usd
    cache_read: _Usd
    min_cacheable_tokens: Annotated[int, Field(ge=0, le=1_000_000)]
    # The most input + output tokens a request may have.
    context_window_tokens: Annotated[int, Field(ge=1_000, le=10_000_000)] = 200_000
    # The most output tokens (thinking included) one reply may have.
    max_output_tokens: Annotated[int, Field(ge=256, le=1_000_000)] = 64_000
    # Thinks adaptively by default and takes `thinking: {"type": "adaptive",
    # "display": ...}`; False: the request carries no `thinking` field.
    adaptive_thinking: bool = False
    # The `output_config.effort` levels the model accepts; empty: none.
    efforts: list[Effort] = Field(default_factory=list)


def _list_price(
    input_usd: float,
    output_usd: float,
    min_cacheable: int,
    *,
    cache_read: float | None = None,
    window: int = 200_000,
    max_output: int = 64_000,
    adaptive_thinking: bool = False,
    efforts: tuple[Effort, ...] = (),
) -> ModelInfo:
    """A model priced with the documented cache multipliers (1.25 ×, 2 ×, 0.1 ×)."""
    return ModelInfo(
        input=input_usd,
        output=output_usd,
        cache_write_5m=round(input_usd * 1.25, 6),
        cache_write_1h=round(input_usd * 2, 6),
        cache_read=round(input_usd * 0.1, 6) if cache_read is None else cache_read,
        min_cacheable_tokens=min_cacheable,
        context_window_tokens=window,
        max_output_tokens=max_output,
        adaptive_thinking=adaptive_thinking,
        efforts=list(efforts),
    )


# The 5.x models: 1M tokens of context, 128K of output, adaptive thinking on
# by default, all five effort levels.
_FIVE = {"window": 1_000_000, "max_output": 128_000, "adaptive_thinking": True, "efforts": EFFORTS}
_SONNET_4 = _list_price(3.0, 15.0, 1024)
_HAIKU_4_5 = _list_price(1.0, 5.0, 4096)

KNOWN_MODELS: Mapping[str, ModelInfo] = {
    "claude-sonnet-5-5": _list_price(2.0, 10.0, 512, cache_read=0.1, **_FIVE),  # type: ignore[arg-type]
    "claude-sonnet-5": _list_price(2.0, 10.0, 1024, **_FIVE),  # type: ignore[arg-type]
    "claude-opus-5-5": _list_price(4.0, 20.0, 512, cache_read=0.2, **_FIVE),  # type: ignore[arg-type]
    "claude-opus-5": _list_price(5.0, 25.0, 512, **_FIVE),  # type: ignore[arg-type]
    # Sonnet 4.6 thinks only when asked and has no "xhigh" effort.
    "claude-sonnet-4-6": _list_price(
        3.0, 15.0, 1024, window=1_000_000, max_output=128_000,
        efforts=("low", "medium", "high", "max"),
    ),
    # Sonnet 4.5 and Haiku 4.5 take neither adaptive thinking nor effort.
    "claude-sonnet-4-5": _SONNET_4,
    "claude-sonnet-4-5-20250929": _SONNET_4,
    "claude-haiku-4-5": _HAIKU_4_5,
    "claude-haiku-4-5-20251001": _HAIKU_4_5,
}  # fmt: skip


class UnknownModel(ValueError):
    """A model with no entry in the table: no price, no cache minimum."""


def model_table(prices_json: str | None = None) -> dict[str, ModelInfo]:
    """The known models, with `prices_json` (the FLEET_LLM_PRICES text) applied.

    Raises `ValueError` with a one-line reason when the JSON is malformed, an
    entry has unknown or invalid fields, or a new model lacks a field.
    """
    table = dict(KNOWN_MODELS)
    if not prices_json or not prices_json.strip():
        return table
    try:
        raw = json.loads(prices_json)
    except ValueError as exc:
        raise ValueError(f"{PRICES_ENV} is not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{PRICES_ENV} must be a JSON object of model name → prices")
    for name, fields in raw.items():
        if not isinstance(fields, dict) or not name.strip():
            raise ValueError(f"{PRICES_ENV}: {name!r} must map to an object of prices")
        base = table[name].model_dump() if name in table else {}
        try:
            table[name] = ModelInfo.model_validate({**base, **fields})
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "entry"
            raise ValueError(f"{PRICES_ENV}: {name}: {where}: {first['msg']}") from None
    return table


def model_info(name: str, table: Mapping[str, ModelInfo]) -> ModelInfo:
    """The entry of `name`; `UnknownModel` naming the known ones when there is none."""
    info = table.get(name)
    if info is None:
        known = ", ".join(sorted(table))
        raise UnknownModel(
            f"FLEET_LLM_MODEL {name!r} is not a known model (known: {known}); "
            f"name one of them, or give its prices in {PRICES_ENV}"
        )
    return info


_UNPRICED = ModelInfo(
    input=0, output=0, cache_write_5m=0, cache_write_1h=0, cache_read=0, min_cacheable_tokens=0
)


def known_info(name: str | None) -> ModelInfo:
    """The table's entry of `name`, or, for a model it does not know (a test's,
    or one the worker was given without FLEET_LLM_PRICES), one that asks
    nothing optional of it: no thinking field, no effort, a 200,000-token
    window and 64,000 output tokens, no price."""
    return KNOWN_MODELS.get(name or "", _UNPRICED)


def context_window(name: str | None) -> int:
    """The context window of model `name`; 200,000 for a model the table does
    not know (e.g. one added by FLEET_LLM_PRICES)."""
    return known_info(name).context_window_tokens


def cost_usd(usage: TokenUsage, info: ModelInfo) -> float:
    """What `usage` costs at `info`'s prices. Output tokens include thinking
    (the API counts and bills them as output). Cache writes without a TTL
    split count as 5-minute writes."""
    written_1h = min(usage.cache_creation_1h_input_tokens, usage.cache_creation_input_tokens)
    written_5m = usage.cache_creation_input_tokens - written_1h
    micro = (
        usage.input_tokens * info.input
        + usage.output_tokens * info.output
        + written_5m * info.cache_write_5m
        + written_1h * info.cache_write_1h
        + usage.cache_read_input_tokens * info.cache_read
    )
    return micro / 1_000_000
