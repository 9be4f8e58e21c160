"""What the operator's Curio node and the market say, read as hostile input.

Each answer is checked at the edge the way demand readings are
(fleet_agent/demand/reading.py): numbers whole, finite, non-negative and
bounded; times RFC 3339 with an offset; text only where a field is text,
and then of a known form (a CID, an address, an amount). A bad field
refuses the whole reading with one line that names it; nothing raises, and
no text of the source passes through (the refusals are our words).

The shapes, each from its source (filecoin-project/curio unless named):

- **JSON-RPC** at the GUI's ``/api/webrpc/v0`` (go-jsonrpc): ``{"id",
  "jsonrpc": "2.0", "result"}``, or ``"error"`` for a method's failure.
- **PSGetMeta** (web/api/webrpcporep/proofshare.go ``ProofShareMeta``):
  ``{"enabled", "wallet", "request_task_id", "price"}``; a NULL wallet is
  ``""`` and a NULL task id ``0`` (web/api/webrpctypes/nulljson.go); the
  price is FIL as lotus ``FIL.Unitless`` writes it (chain/types/fil.go:
  18 decimals, trailing zeros trimmed, ``"0"`` for zero). Curio keeps it in
  attoFIL; the market prices asks in whole nFIL (lib/proofsvc/common/
  types.go ``PriceResolution`` 1 nFIL, ``MaxPrice`` 1 FIL), so a price that
  is not whole nFIL or above 1 FIL is refused.
- **PSListAsks**: the wallet's open asks as ``WorkAsk`` (lib/proofsvc/
  common/types.go: ``id``, ``min_price_nfil``, ``created_at``, the UI's
  ``min_price_fil``); ``null`` without a wallet or without asks (Go's nil
  slice).
- **PSListQueue**: ``ProofShareQueueItem`` rows, the 15 newest, newest
  first (``ORDER BY obtained_at DESC LIMIT 15``): ``service_id`` (the
  request CID), ``obtained_at``, ``compute_task_id`` / ``submit_task_id``
  (0 for NULL), ``compute_done``, ``submit_done``, ``was_pow`` and
  ``payment_amount``: ``""`` until submitted, or for a challenge proof;
  ``"n/a"`` without a payment row (or at nonce 0); else this voucher's
  cumulative amount less the one before it as lotus ``FIL.Short``.
- **PSProviderLastPaymentsSummary** (``ProviderLastPaymentSummary``): per
  wallet id with payments, ``unsettled_amount_fil`` always and, once
  settled, ``last_settled_amount_fil``, both ``FIL.Short``; the unsettled
  amount is the latest voucher's cumulative amount less the settled one
  (clamped at 0), so their sum is every voucher's cumulative amount;
  ``null`` without payments.
- **FIL.Short** (lotus chain/types/fil.go): ``"0"``, or the amount in the
  largest of ``a f p n μ m`` (μ is U+03BC) it reaches, else in FIL, with at
  most 3 decimals (``big.Rat.FloatString(3)``, rounded half away from
  zero), trailing zeros trimmed, then ``" <prefix>FIL"``: ``"4 mFIL"``,
  ``"12.5 μFIL"``, ``"1500 FIL"``. Three decimals of the unit: an amount
  read from it is right to 0.05 % of itself or better, and amounts under
  1 nFIL round to whole nFIL here.
- **The metrics** (``/debug/metrics``): ``curio_psvc_proofshare_queue_count``,
  rows waiting for a machine (fleet_agent/demand/sources.py).
- **The market's price**: ``GET .../v0/proofs/client/current-price``
  answers lib/proofsvc/clientctl.go ``PriceResponse``: ``{"price_nfil",
  "price_nfil_base", "price_nfil_service_fee"}`` (int64; Curio refuses a
  price <= 0).
- **FIL in dollars**: CoinGecko's simple-price shape,
  ``{"filecoin": {"usd": 2.5}}`` (``/api/v3/simple/price?ids=filecoin&
  vs_currencies=usd``).

Pure: no I/O, no clock (activities/market.py fetches).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from pydantic import ValidationError

from fleet_agent.demand.reading import Refused, parse_count, parse_time
from fleet_agent.demand.sources import CURIO_QUEUE_COUNT, metric_sum

from .point import MAX_NFIL, MAX_PRICE_NFIL, MarketReading, QueueRow

__all__ = [
    "ATTO_PER_NFIL",
    "MAX_ASKS",
    "Ask",
    "Meta",
    "fil_text",
    "market_reading",
    "parse_asks",
    "parse_fil_short",
    "parse_fil_unitless",
    "parse_fil_usd",
    "parse_market_price",
    "parse_meta",
    "parse_payments",
    "parse_queue",
    "rpc_result",
]

#: lib/proofsvc/clientctl.go ``attoPerNano``.
ATTO_PER_NFIL = 10**9
_ATTO_PER_FIL = 10**18
#: Rows, asks or wallets read from one answer (Curio sends 15 rows, a few asks).
MAX_ASKS = 1000
_MAX_ITEMS = 1000
_MAX_TASK_ID = 2**63 - 1
#: FIL.Unitless: at most 18 decimals; 10 whole digits is far past any price.
_UNITLESS = re.compile(r"([0-9]{1,10})(?:\.([0-9]{1,18}))?")
#: FIL.Short: 3 decimals at most; 16 whole digits is past any amount we hold.
_SHORT = re.compile(r"([0-9]{1,16})(?:\.([0-9]{1,3}))? ([afpnμm]?)FIL")
_SHORT_EXP = {"a": 0, "f": 3, "p": 6, "n": 9, "μ": 12, "m": 15, "": 18}
#: A CID as Curio lists it (base32 or base58btc: letters and digits only).
_CID = re.compile(r"[A-Za-z0-9]{1,128}")
#: A Filecoin address (go-address: network f/t, protocol 0-4, base32 lower).
_ADDRESS = re.compile(r"[ft][0-4][a-z0-9]{1,117}")
_MAX_USD = 100_000.0


@dataclass(frozen=True, slots=True)
class Meta:
    """PSGetMeta: requests on, the wallet (``""``: none), the ask price."""

    enabled: bool
    wallet: str
    price_nfil: int


@dataclass(frozen=True, slots=True)
class Ask:
    """One of the wallet's open asks (PSListAsks)."""

    id: int
    price_nfil: int


def rpc_result(answer: Any, method: str) -> Any:
    """The ``result`` of a JSON-RPC 2.0 answer to `method`; `Refused`
    naming the method when it is not one, or is an error."""
    if not isinstance(answer, dict) or answer.get("jsonrpc") != "2.0":
        raise Refused(f"{method}: not a JSON-RPC 2.0 answer")
    if answer.get("error") is not None:
        raise Refused(f"{method} answered an error")
    return answer.get("result")


def _bool(body: dict[str, Any], key: str) -> bool:
    value = body.get(key)
    if not isinstance(value, bool):
        raise Refused(f"{key} is not true or false")
    return value


def _list(result: Any, method: str) -> list[Any]:
    if result is None:
        return []  # Go's nil slice
    if not isinstance(result, list):
        raise Refused(f"{method}: result is not a list")
    if len(result) > _MAX_ITEMS:
        raise Refused(f"{method}: more than {_MAX_ITEMS} items")
    return result


def parse_fil_unitless(value: Any, what: str) -> int:
    """A ``FIL.Unitless`` price as whole nFIL in [0, 1 FIL]; `Refused` naming `what`."""
    if not isinstance(value, str):
        raise Refused(f"{what} is not a FIL amount")
    match = _UNITLESS.fullmatch(value)
    if match is None:
        raise Refused(f"{what} is not a FIL amount")
    whole, frac = match.group(1), match.group(2) or ""
    atto = int(whole) * _ATTO_PER_FIL + int(frac.ljust(18, "0") or "0")
    if atto % ATTO_PER_NFIL:
        raise Refused(f"{what} is not a whole number of nFIL")
    nfil = atto // ATTO_PER_NFIL
    if nfil > MAX_PRICE_NFIL:
        raise Refused(f"{what} is above 1 FIL")
    return nfil


def parse_fil_short(value: Any, what: str) -> int:
    """A ``FIL.Short`` amount (``"0"``, ``"4 mFIL"``, ``"12.5 μFIL"``) in
    nFIL, rounded half up to whole nFIL; `Refused` naming `what`."""
    if value == "0":
        return 0
    if not isinstance(value, str) or len(value) > 32:
        raise Refused(f"{what} is not a FIL amount")
    match = _SHORT.fullmatch(value)
    if match is None:
        raise Refused(f"{what} is not a FIL amount")
    amount = Decimal(f"{match.group(1)}.{match.group(2) or '0'}")
    nfil = (amount.scaleb(_SHORT_EXP[match.group(3)] - 9)).to_integral_value(ROUND_HALF_UP)
    if nfil > MAX_NFIL:
        raise Refused(f"{what} is out of range (at most {MAX_NFIL} nFIL)")
    return int(nfil)


def fil_text(nfil: int) -> str:
    """Whole nFIL as the decimal FIL text ``types.ParseFIL`` reads (PSSetMeta's price)."""
    whole, frac = divmod(nfil, ATTO_PER_NFIL)
    return f"{whole}.{frac:09d}".rstrip("0").rstrip(".")


def parse_meta(answer: Any) -> Meta:
    """PSGetMeta's answer; `Refused` naming the field."""
    body = rpc_result(answer, "PSGetMeta")
    if not isinstance(body, dict):
        raise Refused("PSGetMeta: result is not an object")
    enabled = _bool(body, "enabled")
    wallet = body.get("wallet")
    if wallet is None:
        wallet = ""
    if not isinstance(wallet, str) or (wallet and _ADDRESS.fullmatch(wallet) is None):
        raise Refused("wallet is not a Filecoin address")
    parse_count(body, "request_task_id", _MAX_TASK_ID, required=False)
    return Meta(enabled, wallet, parse_fil_unitless(body.get("price"), "price"))


def parse_asks(answer: Any) -> list[Ask]:
    """PSListAsks's answer (``null``: none); `Refused` naming the field."""
    asks = []
    for item in _list(rpc_result(answer, "PSListAsks"), "PSListAsks"):
        if not isinstance(item, dict):
            raise Refused("PSListAsks: an ask is not an object")
        ask_id = parse_count(item, "id", _MAX_TASK_ID)
        asks.append(Ask(ask_id, parse_count(item, "min_price_nfil", MAX_PRICE_NFIL)))
    return asks


def _payment(value: Any) -> int | None:
    if value == "" or value == "n/a":
        return None  # not submitted, a challenge proof, or no payment row
    return parse_fil_short(value, "payment_amount")


def parse_queue(answer: Any) -> list[QueueRow]:
    """PSListQueue's rows, as sent (newest first); `Refused` naming the field."""
    rows = []
    for item in _list(rpc_result(answer, "PSListQueue"), "PSListQueue"):
        if not isinstance(item, dict):
            raise Refused("PSListQueue: a row is not an object")
        service_id = item.get("service_id")
        if not isinstance(service_id, str) or _CID.fullmatch(service_id) is None:
            raise Refused("service_id is not a CID")
        # Read for their bounds only: a task id says nothing the flags do not.
        parse_count(item, "compute_task_id", _MAX_TASK_ID, required=False)
        parse_count(item, "submit_task_id", _MAX_TASK_ID, required=False)
        rows.append(
            QueueRow(
                service_id=service_id,
                obtained_at=parse_time(item.get("obtained_at"), "obtained_at"),
                computed=_bool(item, "compute_done"),
                submitted=_bool(item, "submit_done"),
                was_pow=_bool(item, "was_pow"),
                payment_nfil=_payment(item.get("payment_amount")),
            )
        )
    return rows


def parse_payments(answer: Any) -> int:
    """Every voucher's cumulative amount, settled or not, summed over the
    wallets of PSProviderLastPaymentsSummary, in nFIL; `Refused` naming the field."""
    total = 0
    for item in _list(
        rpc_result(answer, "PSProviderLastPaymentsSummary"), "PSProviderLastPaymentsSummary"
    ):
        if not isinstance(item, dict):
            raise Refused("PSProviderLastPaymentsSummary: an item is not an object")
        parse_count(item, "wallet_id", _MAX_TASK_ID)
        settled = item.get("last_settled_amount_fil")
        if settled is not None:
            total += parse_fil_short(settled, "last_settled_amount_fil")
        total += parse_fil_short(item.get("unsettled_amount_fil"), "unsettled_amount_fil")
        if total > MAX_NFIL:
            raise Refused(f"the payments sum to more than {MAX_NFIL} nFIL")
    return total


def parse_market_price(body: Any) -> int | str:
    """The market's current price (``PriceResponse.price_nfil``), or why none."""
    if not isinstance(body, dict):
        return "the price answer is not a JSON object"
    try:
        price = parse_count(body, "price_nfil", MAX_PRICE_NFIL)
        for key in ("price_nfil_base", "price_nfil_service_fee"):
            parse_count(body, key, MAX_PRICE_NFIL, required=False)
    except Refused as exc:
        return str(exc)
    if price <= 0:
        return "price_nfil is 0"  # Curio refuses it too (clientctl.go)
    return price


def parse_fil_usd(body: Any) -> float | str:
    """Dollars per FIL from a CoinGecko simple-price answer, or why none."""
    coin = body.get("filecoin") if isinstance(body, dict) else None
    if not isinstance(coin, dict):
        return "the FIL/USD answer has no filecoin object"
    usd = coin.get("usd")
    if isinstance(usd, bool) or not isinstance(usd, int | float):
        return "filecoin.usd is not a number"
    if not (math.isfinite(usd) and 0 < usd <= _MAX_USD):
        return f"filecoin.usd is out of range (0 to {_MAX_USD:g})"
    return float(usd)


def market_reading(
    meta: Any,
    asks: Any,
    queue: Any,
    payments: Any,
    metric_lines: list[str],
    price_answer: Any,
    fil_usd_answer: Any,
    now: datetime,
) -> MarketReading | str:
    """The reading in the node's four answers (the JSON-RPC envelopes) and
    its metric lines, with the market's price and FIL/USD when read (None:
    not read; an answer that does not parse leaves its field None too),
    taken at `now`; or why there is none, in one line."""
    try:
        m = parse_meta(meta)
        open_asks = parse_asks(asks)
        rows = parse_queue(queue)
        paid = parse_payments(payments)
        gauge = metric_sum(metric_lines, CURIO_QUEUE_COUNT)
        queued = None
        if gauge is not None:
            queued = parse_count({CURIO_QUEUE_COUNT: math.floor(gauge)}, CURIO_QUEUE_COUNT, 10**7)
    except Refused as exc:
        return str(exc)
    price = parse_market_price(price_answer) if price_answer is not None else None
    usd = parse_fil_usd(fil_usd_answer) if fil_usd_answer is not None else None
    try:
        return _reading(m, open_asks, rows, paid, queued, price, usd, now)
    except ValidationError:  # every field was bounded above: a bug, not an exception out
        return "the reading is out of range"


def _reading(
    m: Meta,
    open_asks: list[Ask],
    rows: list[QueueRow],
    paid: int,
    queued: int | None,
    price: int | str | None,
    usd: float | str | None,
    now: datetime,
) -> MarketReading:
    return MarketReading(
        as_of=now,
        enabled=m.enabled,
        wallet=m.wallet,
        price_nfil=m.price_nfil,
        asks_open=len(open_asks),
        asks_min_price_nfil=min((a.price_nfil for a in open_asks), default=None),
        rows=rows,
        queue_count=queued,
        paid_total_nfil=paid,
        market_price_nfil=price if isinstance(price, int) else None,
        fil_usd=usd if isinstance(usd, float) else None,
    )
