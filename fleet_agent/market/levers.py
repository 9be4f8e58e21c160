"""The market's levers as the model calls them: the tools' inputs.

- ``set_ask_price`` ``{"price_nfil": int, "reprice_open": bool, "reason": str}``:
  the node's ask price in **whole nFIL per P** (0.005 FIL is 5000000), the
  unit of the market's asks (``WorkAsk.min_price_nfil``) and of the
  operator's range (`market_min_price_nfil`, `market_max_price_nfil`), so
  no decimal is rounded on the way; a FIL amount (0.005) is not a whole
  number and is refused. `reprice_open` also withdraws the open asks at
  another price (1 challenge proof each) so the node asks again at the new
  one; without it they keep their price until assigned.
- ``set_requests`` ``{"enabled": bool, "withdraw_open": bool, "reason": str}``:
  the node asks the market for work or stops; off with `withdraw_open`
  also withdraws the open asks (1 challenge proof each), which Curio's
  switch alone leaves open.

`price_change` and `requests_change` make the levers' requests
(`PriceChange`, `RequestsChange`) from a validated input and the agent's
policy. Pure.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from pydantic import ConfigDict, Field, ValidationError

from fleet_agent.validation import describe_validation_error
from fleet_agent.wire import Wire

from .point import MAX_PRICE_NFIL, MarketPolicy, PriceChange, RequestsChange

__all__ = [
    "SetAskPriceInput",
    "SetRequestsInput",
    "lever_input",
    "price_change",
    "requests_change",
]

_Reason = Annotated[str, Field(min_length=1, max_length=600)]


class _LeverInput(Wire):
    model_config = ConfigDict(extra="forbid")


class SetAskPriceInput(_LeverInput):
    price_nfil: Annotated[int, Field(ge=1, le=MAX_PRICE_NFIL)]
    reprice_open: bool = False
    reason: _Reason


class SetRequestsInput(_LeverInput):
    enabled: bool
    withdraw_open: bool = False
    reason: _Reason


_I = TypeVar("_I", bound="_LeverInput")


def lever_input(model: type[_I], raw: Any) -> _I | str:
    """The validated input, or what is wrong with it (one line for the model)."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        return describe_validation_error(exc)
    except Exception as exc:  # any input, any validator: an answer, never a failed task
        return f"{type(exc).__name__}"


def price_change(args: SetAskPriceInput, agent_id: str, policy: MarketPolicy) -> PriceChange:
    return PriceChange(
        agent_id=agent_id,
        price_nfil=args.price_nfil,
        reprice_open=args.reprice_open,
        reason=args.reason,
        policy=policy,
    )


def requests_change(args: SetRequestsInput, agent_id: str, policy: MarketPolicy) -> RequestsChange:
    return RequestsChange(
        agent_id=agent_id,
        enabled=args.enabled,
        withdraw_open=args.withdraw_open,
        reason=args.reason,
        policy=policy,
    )
