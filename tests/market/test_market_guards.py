"""The rules the market's levers are held to, and what the fleet's size
means for the market (fleet_agent/market/guards.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleet_agent.market.guards import (
    price_refusal,
    requests_refusal,
    withdraw_allowance,
    withdraw_refusal,
    withdrawals_last_hour,
)
from fleet_agent.market.point import ChallengeLedger, MarketPoint, MarketPolicy, PriceChange

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
RANGE = MarketPolicy(
    min_price_nfil=2_000_000, max_price_nfil=10_000_000, max_withdrawals_per_hour=4
)


def _change(price: int, policy: MarketPolicy = RANGE) -> PriceChange:
    return PriceChange(price_nfil=price, policy=policy, reason="test")


def _point(**over: Any) -> MarketPoint:
    ledger = over.pop("ledger", ChallengeLedger(challenges=500))
    body: dict[str, Any] = {
        "at": NOW,
        "enabled": True,
        "price_nfil": 5_000_000,
        "gpus": 4,
        "gpus_proving": 4,
    }
    return MarketPoint.model_validate({**body, "ledger": ledger, **over})


def test_the_agent_sets_no_price_unless_the_operator_gives_a_range() -> None:
    refusal = price_refusal(_change(5_000_000, MarketPolicy()), 5_000_000)
    assert refusal is not None and refusal.startswith("market_max_price_nfil is 0")


@pytest.mark.parametrize(
    ("price", "current", "ok"),
    [
        (5_000_000, 5_000_000, True),
        (7_500_000, 5_000_000, True),  # +50 %
        (7_500_001, 5_000_000, False),
        (2_500_000, 5_000_000, True),  # -50 %
        (2_499_999, 5_000_000, False),
        (10_000_000, 0, True),  # a fresh node at 0: no step
        (10_000_001, 0, False),  # past the range
        (1_999_999, 0, False),
        (2_000_000, 3, False),  # a unit slip the step catches
    ],
)
def test_a_price_change_stays_in_the_range_and_within_half_the_current(
    price: int, current: int, ok: bool
) -> None:
    refusal = price_refusal(_change(price), current)
    assert (refusal is None) == ok, refusal
    if refusal is not None:
        assert "\n" not in refusal and ("market_m" in refusal or "50%" in refusal)


@given(st.integers(1, 10**9), st.integers(0, 10**9))
def test_an_allowed_change_moves_at_most_half(price: int, current: int) -> None:
    policy = MarketPolicy(min_price_nfil=1, max_price_nfil=10**9)
    if price_refusal(_change(price, policy), current) is None and current > 0:
        assert abs(price - current) <= current / 2


def test_withdrawals_are_counted_over_the_last_hour_by_the_ledger() -> None:
    latest = _point(ledger=ChallengeLedger(challenges=500, withdrawals_total=7))
    hour_ago = _point(at=NOW - timedelta(hours=1), ledger=ChallengeLedger(withdrawals_total=5))
    assert withdrawals_last_hour(latest, hour_ago) == 2
    assert withdrawals_last_hour(latest, None) == 7, "every one counted is within the hour"
    assert withdrawals_last_hour(None, None) == 0
    assert withdraw_allowance(RANGE, 3) == 1 and withdraw_allowance(RANGE, 9) == 0


def test_re_pricing_withdraws_within_the_hourly_limit_and_the_slots_in_use() -> None:
    point = _point(asks_open=2, rows_open=3, slots_used=5)
    assert withdraw_refusal(0, None, 0, RANGE) is None, "nothing to withdraw"
    assert withdraw_refusal(2, point, 2, RANGE) is None
    over = withdraw_refusal(3, point, 2, RANGE)
    assert over is not None and "market_max_withdrawals_per_hour=4" in over
    assert withdraw_refusal(1, None, 0, RANGE) == (
        "no market reading yet, so the challenge balance is unknown"
    )
    # 251 challenges, 5 slots in use: one withdrawal leaves 250, two leave 248.
    tight = _point(slots_used=5, ledger=ChallengeLedger(challenges=251))
    assert withdraw_refusal(1, tight, 0, RANGE) is None
    short = withdraw_refusal(2, tight, 0, RANGE)
    assert short is not None and "leaves about 249, under the 250" in short


def test_requests_on_needs_gpus_a_wallet_and_a_price_off_always_goes() -> None:
    wallet = "f1abc"
    assert requests_refusal(True, _point(), wallet) is None
    assert requests_refusal(False, None, "") is None, "off always"
    assert requests_refusal(True, None, wallet) is not None
    no_gpus = requests_refusal(True, _point(gpus=0, gpus_proving=0), wallet)
    assert no_gpus is not None and no_gpus.startswith("no machine of the fleet proves yet")
    loading = requests_refusal(True, _point(gpus=4, gpus_proving=0), wallet)
    assert loading is not None, "machines that load do not take work in time"
    assert "no wallet" in (requests_refusal(True, _point(), "") or "")
    assert "price is 0" in (requests_refusal(True, _point(price_nfil=0), wallet) or "")
