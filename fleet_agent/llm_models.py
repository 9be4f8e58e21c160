"""The LLM models fleet-agent knows: prices and minimum cacheable prompt lengths.

A worker refuses to start on a model that is not in this table (or in the
operator's `FLEET_LLM_PRICES`), so a typo in `FLEET_LLM_MODEL` is an error at
start, not a failed first run, and every model it runs on has a price.

Figures (USD per million tokens) are Anthropic's published list prices, from
the model pages and the prompt-caching page of platform.claude.com: a 5-minute
cache write costs 1.25 × input, a 1-hour write 2 ×, a cache read 0.1 ×. The
minimum cacheable prefix is per model (shorter prefixes are silently not
cached). Prices change: override or extend them with `FLEET_LLM_PRICES`, a JSON
object of model name → fields of `ModelInfo` (a known model may give only the
fields that differ; a new one must give them all), e.g.

    FLEET_LLM_PRICES='{"claude-sonnet-5-5": {"cache_read": 0.1}}'
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fleet_agent.models import TokenUsage

__all__ = [
    "DEFAULT_MODEL",
    "KNOWN_MODELS",
    "PRICES_ENV",
    "ModelInfo",
    "UnknownModel",
    "context_window",
    "cost_usd",
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

_Usd = Annotated[float, Field(ge=0, le=10_000)]


class ModelInfo(BaseModel):
    """Prices in USD per million tokens, and the shortest prefix the API caches."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    input: _Usd
    output: _Usd
    cache_write_5m: _Usd
    cache_write_1h: _Usd
    cache_read: _Usd
    min_cacheable_tokens: Annotated[int, Field(ge=0, le=1_000_000)]
    # The most input + output tokens a request may have. 200k is the window
    # of every model in the table (without the long-context beta).
    context_window_tokens: Annotated[int, Field(ge=1_000, le=10_000_000)] = 200_000


def _list_price(
    input_usd: float, output_usd: float, min_cacheable: int, cache_read: float | None = None
) -> ModelInfo:
    """A model priced with the documented cache multipliers (1.25 ×, 2 ×, 0.1 ×)."""
    return ModelInfo(
        input=input_usd,
        output=output_usd,
        cache_write_5m=round(input_usd * 1.25, 6),
        cache_write_1h=round(input_usd * 2, 6),
        cache_read=round(input_usd * 0.1, 6) if cache_read is None else cache_read,
        min_cacheable_tokens=min_cacheable,
    )


_SONNET_5 = _list_price(2.0, 10.0, 1024)
_SONNET_4 = _list_price(3.0, 15.0, 1024)
_HAIKU_4_5 = _list_price(1.0, 5.0, 4096)

KNOWN_MODELS: Mapping[str, ModelInfo] = {
    # Sonnet 5.5 is priced as Sonnet 5 on its model page; its cache minimum is
    # taken to be Sonnet 5's (1,024), the Sonnet-class figure.
    "claude-sonnet-5-5": _SONNET_5,
    "claude-sonnet-5": _SONNET_5,
    "claude-opus-5": _list_price(5.0, 25.0, 512),
    "claude-sonnet-4-6": _SONNET_4,
    "claude-sonnet-4-5": _SONNET_4,
    "claude-sonnet-4-5-20250929": _SONNET_4,
    "claude-haiku-4-5": _HAIKU_4_5,
    "claude-haiku-4-5-20251001": _HAIKU_4_5,
}


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


def context_window(name: str | None) -> int:
    """The context window of model `name`; 200,000 (every model's in the table)
    for a model the table does not know (e.g. one added by FLEET_LLM_PRICES)."""
    info = KNOWN_MODELS.get(name or "")
    return info.context_window_tokens if info is not None else 200_000


def cost_usd(usage: TokenUsage, info: ModelInfo) -> float:
    """What `usage` costs at `info`'s prices. Cache writes without a TTL split
    count as 5-minute writes."""
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
