"""CurioWeb's provider-side ``PS*`` methods and ``curio_psvc_*`` metrics over the simulated node.

Touches a `SnarkMarket` (simulator/snark_market/), under its lock and run up
to now for each call. Each method answers what curio's
web/api/webrpcporep/proofshare.go answers, in its shapes (the JSON value;
simulator/curio/jsonrpc.py wraps it in go-jsonrpc's envelope):

- ``PSGetMeta`` → ``{"enabled", "wallet", "request_task_id", "price"}``
  (``ProofShareMeta``): a NULL wallet is ``""``, a NULL task id ``0``
  (web/api/webrpctypes/nulljson.go), the price in FIL (``FIL.Unitless``).
- ``PSSetMeta(enabled, wallet, price)`` → ``null``: the price parsed as
  FIL (``types.ParseFIL``), the wallet parsed (go-address) and resolved to
  its key address (``StateAccountKey``: an ``f0`` id of a known account is
  its key; an unknown id, an actor or the empty address is an error).
- ``PSListAsks`` → the wallet's open asks from the service (``PollWork``),
  oldest first, as ``WorkAsk`` (lib/proofsvc/common/types.go) with
  ``min_price_fil`` = ``FIL(nfil x 10^9).Short()``; ``null`` without a
  wallet or without asks.
- ``PSAskWithdraw(askID)`` → ``null``; the service's answer other than 200
  is the error ``failed to withdraw ask: <status> - <body>``
  (lib/proofsvc/provictl.go).
- ``PSListQueue`` → the 15 newest rows, newest first, ``[]`` when empty;
  ``payment_amount`` as the method computes it: ``""`` unless submitted and
  paid; else this voucher's cumulative amount less the one before it
  (``Short``), or ``"n/a"`` without a payment row or at nonce 0.
- ``PSProviderLastPaymentsSummary`` → per wallet id with payments
  (ascending): the last nonce, the key address, the unsettled amount, and
  after a settlement its amount, time and age (``time.Duration.String``);
  the router contract's redeemed amount and nonce; ``null`` with no payments.

Errors are the methods' own messages (xerrors chains) where Curio's are
known; the chain's and the database's inner texts are ours.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from simulator.snark_market import SnarkMarket
from simulator.snark_market.node import Payment
from simulator.snark_market.service import ServiceError

from .address import AddressError, parse_address
from .fil import ATTO_PER_NFIL, FilError, fil_short, fil_unitless, parse_fil
from .jsonrpc import Method, MethodError
from .webrpc import LIST_QUEUE_LIMIT, Family, exposition, go_time, queue_row

__all__ = ["ProofshareRpc", "go_duration", "payment_amount"]

_PSVC = "curio_psvc_proofshare_"


def _time(t: float) -> datetime:
    return datetime.fromtimestamp(t, UTC)


def go_duration(seconds: float) -> str:
    """``time.Duration.String()`` of whole seconds: ``"1h2m3s"``, ``"2m0s"``, ``"0s"``."""
    total = int(seconds)
    if total <= 0:
        return "0s"
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


class ProofshareRpc:
    """The methods (module doc) and the metrics page of one market's node."""

    def __init__(self, market: SnarkMarket) -> None:
        self.market = market

    def methods(self) -> dict[str, Method]:
        """go-jsonrpc's table: ``CurioWeb.<GoMethodName>`` (method_formatter.go)."""
        return {
            "CurioWeb.PSGetMeta": Method((), self.get_meta),
            "CurioWeb.PSSetMeta": Method(("bool", "string", "string"), self.set_meta),
            "CurioWeb.PSListAsks": Method((), self.list_asks),
            "CurioWeb.PSAskWithdraw": Method(("int64",), self.ask_withdraw),
            "CurioWeb.PSListQueue": Method((), self.list_queue),
            "CurioWeb.PSProviderLastPaymentsSummary": Method((), self.payments_summary),
        }

    # ------------------------------------------------------------ methods

    def get_meta(self) -> dict[str, Any]:
        with self.market.session() as m:
            meta = m.node.meta
            return {
                "enabled": meta.enabled,
                "wallet": meta.wallet or "",
                "request_task_id": meta.request_task_id or 0,
                "price": fil_unitless(meta.pprice_atto),
            }

    def set_meta(self, enabled: bool, wallet: str, price: str) -> None:
        try:
            atto = parse_fil(price)
        except FilError as exc:
            raise MethodError(f"PSSetMeta: invalid price: {exc}") from None
        try:
            key = self._account_key(wallet)
        except AddressError as exc:
            raise MethodError(f"PSSetMeta: invalid wallet address: {exc}") from None
        except LookupError as exc:
            raise MethodError(f"PSSetMeta: failed to get account key: {exc.args[0]}") from None
        self.market.set_meta(enabled, key, atto)

    def _account_key(self, text: str) -> str:
        """StateAccountKey on the simulated chain; LookupError when it has none."""
        addr = parse_address(text)
        if addr is None:
            raise LookupError("resolve address <empty>: actor not found")
        if addr.protocol in (1, 3):
            return addr.text
        if addr.protocol == 0 and addr.id is not None:
            with self.market.session() as m:
                acc = m.service.by_provider_id(addr.id)
            if acc is not None:
                return acc.wallet
            raise LookupError(f"resolve address {text}: actor not found")
        raise LookupError(f"address {text} is not an account actor")

    def list_asks(self) -> list[dict[str, Any]] | None:
        with self.market.session() as m:
            wallet = m.node.meta.wallet
            if wallet is None:
                return None
            asks = sorted(m.service.poll_work(wallet).active_asks, key=lambda a: a.created_at)
        out = [
            {
                "id": ask.id,
                "min_price_nfil": ask.price_nfil,
                "created_at": go_time(_time(ask.created_at)),
                "min_price_fil": fil_short(ask.price_nfil * ATTO_PER_NFIL),
            }
            for ask in asks
        ]
        return out or None

    def ask_withdraw(self, ask_id: int) -> None:
        with self.market.session() as m:
            wallet = m.node.meta.wallet
            if wallet is None:
                raise MethodError(
                    "PSAskWithdraw: failed to get wallet: can't scan into dest[0] "
                    "(col: wallet): cannot scan NULL into *string"
                )
            try:
                m.service.withdraw_ask(wallet, ask_id)
            except ServiceError as exc:
                raise MethodError(
                    f"PSAskWithdraw: failed to withdraw ask: failed to withdraw ask: {exc}"
                ) from None

    def list_queue(self) -> list[dict[str, Any]]:
        with self.market.session() as m:
            rows = sorted(reversed(m.node.rows), key=lambda r: r.obtained_at, reverse=True)
            payments = m.node.payments
            return [
                queue_row(
                    r.request_cid,
                    _time(r.obtained_at),
                    compute_task_id=r.compute_task_id,
                    compute_done=r.compute_done,
                    submit_task_id=r.submit_task_id,
                    submit_done=r.submit_done,
                    was_pow=r.was_pow,
                    payment_amount=(
                        payment_amount(r.request_cid, payments)
                        if r.submit_done and not r.was_pow
                        else ""
                    ),
                )
                for r in rows[:LIST_QUEUE_LIMIT]
            ]

    def payments_summary(self) -> list[dict[str, Any]] | None:
        with self.market.session() as m:
            now = m.sched.now
            out = []
            for pid in sorted({p.provider_id for p in m.node.payments}):
                latest = max(
                    (p for p in m.node.payments if p.provider_id == pid), key=lambda p: p.nonce
                )
                settled = [s for s in m.node.settlements if s.provider_id == pid]
                last = max(settled, key=lambda s: s.nonce) if settled else None
                acc = m.service.by_provider_id(pid)
                item: dict[str, Any] = {
                    "wallet_id": pid,
                    "last_payment_nonce": latest.nonce,
                    "address": acc.wallet if acc is not None else f"f0{pid}",
                }
                settled_atto = 0 if last is None else last.cumulative_atto
                if last is not None:
                    item["last_settled_amount_fil"] = fil_short(settled_atto)
                item["unsettled_amount_fil"] = fil_short(
                    max(0, latest.cumulative_atto - settled_atto)
                )
                if last is not None:
                    item["time_since_last_settlement"] = go_duration(round(now - last.settled_at))
                    item["last_settled_at"] = go_time(_time(last.settled_at))
                state = m.service.provider_state(pid)
                if state is not None:
                    item["contract_settled_fil"] = fil_short(state[0])
                    item["contract_last_nonce"] = state[1]
                out.append(item)
            return out or None

    # ------------------------------------------------------------ metrics

    def metrics(self) -> str:
        """The node's ``curio_psvc_proofshare_*`` exposition (tasks/proofshare/metrics.go):
        five series from start-up (``initProofshareMetricRows`` records 0),
        the hold decisions once the Adder has made one."""
        with self.market.session() as m:
            c = m.node.counters
            hold = [((("hold", k),), float(v)) for k, v in sorted(c.hold.items())]
            return exposition(
                [
                    Family(_PSVC + "adder_commits_total", [((), c.adder_commits)]),
                    Family(_PSVC + "adder_hold_decisions_total", hold),
                    Family(_PSVC + "need_asks", [((), c.need_asks)]),
                    Family(_PSVC + "newly_added_total", [((), c.asks_created)]),
                    Family(_PSVC + "queue_count", [((), c.queue_count)]),
                    Family(_PSVC + "to_request_remaining", [((), c.to_request_remaining)]),
                ]
            )


def payment_amount(cid: str, payments: list[Payment]) -> str:
    """PSListQueue's ``payment_amount`` of a submitted, paid row: its
    voucher's cumulative amount less the previous nonce's (0 if missing),
    ``Short``; ``"n/a"`` without a payment row or at nonce 0."""
    paid = next((p for p in payments if p.request_cid == cid), None)
    if paid is None or paid.nonce <= 0:
        return "n/a"
    before = next(
        (
            p.cumulative_atto
            for p in payments
            if p.provider_id == paid.provider_id and p.nonce == paid.nonce - 1
        ),
        0,
    )
    return fil_short(paid.cumulative_atto - before)
