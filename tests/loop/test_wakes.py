"""Wake requests (`fleet_agent.loop.wakes`): clamped delays, merging, the cap,
the heartbeat covering near requests, cancel and due. Pure: no server."""

from __future__ import annotations

from typing import Any

import pytest

from fleet_agent.loop.wakes import MAX_PENDING_WAKES, add_wake, cancel_wake, decide_wake, due_wakes
from fleet_agent.models import Wake
from tests.helpers.loop import T0, at, wake


def decide(
    delay: float, wakes: list[Wake] | None = None, *, heartbeat: int = 3600, reason: str = "why"
) -> Any:
    return decide_wake(
        wakes or [],
        now=T0,
        delay_seconds=delay,
        reason=reason,
        run=7,
        wake_id="w7-1",
        heartbeat_seconds=heartbeat,
    )


@pytest.mark.parametrize(
    ("asked", "effective", "clamped"),
    [
        (90, 90, False),
        (30, 30, False),
        (86_400, 86_400, False),
        (5, 30, True),
        (0, 30, True),
        (-100, 30, True),
        (10**7, 86_400, True),
        (float("inf"), 86_400, True),
    ],
)
def test_delay_is_clamped_to_30s_24h(asked: float, effective: float, clamped: bool) -> None:
    decision = decide(asked, heartbeat=1800)
    assert decision.outcome == "scheduled"
    assert decision.wake == Wake(id="w7-1", due_at=at(effective), reason="why", requested_by_run=7)
    assert ("clamped" in decision.message) is clamped


@pytest.mark.parametrize(
    ("delay", "outcome"),
    [
        (239, "scheduled"),
        (240, "heartbeat_covers"),
        (300, "heartbeat_covers"),
        (360, "heartbeat_covers"),
        (361, "scheduled"),
    ],
)
def test_requests_near_the_heartbeat_are_covered(delay: float, outcome: str) -> None:
    decision = decide(delay, heartbeat=300)
    assert decision.outcome == outcome
    assert (decision.wake is None) is (outcome == "heartbeat_covers")


def test_heartbeat_check_uses_the_clamped_delay() -> None:
    # 1 s is clamped to 30 s, which is within 60 s of a 60 s heartbeat.
    assert decide(1, heartbeat=60).outcome == "heartbeat_covers"


@pytest.mark.parametrize(
    ("delay", "outcome"),
    [(970, "merged"), (1030, "merged"), (1031, "scheduled"), (969, "scheduled")],
)
def test_requests_within_30s_of_a_wake_are_merged(delay: float, outcome: str) -> None:
    existing = wake("w1-1", 1000)
    decision = decide(delay, [existing])
    assert decision.outcome == outcome
    if outcome == "merged":
        assert decision.wake == existing
        assert "w1-1" in decision.message


def test_the_51st_wake_is_refused_but_merging_still_works() -> None:
    wakes = [wake(f"w{i}", 1000 + 100 * i) for i in range(MAX_PENDING_WAKES)]
    assert decide(50_000, wakes).outcome == "refused"
    assert decide(50_000, wakes[:-1]).outcome == "scheduled"
    assert decide(1010, wakes).outcome == "merged"


def test_reason_is_trimmed_and_defaulted() -> None:
    assert decide(900, reason="  recheck  ").wake.reason == "recheck"
    assert decide(900, reason="   ").wake.reason == "check"
    assert len(decide(900, reason="x" * 5000).wake.reason) == 500


def test_decide_wake_leaves_the_list_alone() -> None:
    wakes = [wake("w1", 5000)]
    decide(900, wakes)
    assert wakes == [wake("w1", 5000)]


def test_nan_delay_is_refused() -> None:
    # A NaN used to raise inside the workflow task and hang the run (±inf clamp).
    assert decide(float("nan")).outcome == "refused"


def test_add_wake_is_idempotent_and_sorted() -> None:
    late, early = wake("w1-1", 5000), wake("w2-1", 1000)
    once = add_wake(add_wake([], late), early)
    assert once == [early, late]
    assert add_wake(once, early) == once
    assert add_wake(add_wake(once, late), early) == once


def test_add_wake_rechecks_merge_and_cap() -> None:
    assert add_wake([wake("a", 1000)], wake("b", 1020)) == [wake("a", 1000)]
    full = [wake(f"w{i}", 1000 + 100 * i) for i in range(MAX_PENDING_WAKES)]
    assert add_wake(full, wake("extra", 90_000)) == full


def test_cancel_wake_reports_whether_it_existed_and_is_idempotent() -> None:
    wakes = [wake("a", 100), wake("b", 200)]
    kept, existed = cancel_wake(wakes, "a")
    assert kept == [wake("b", 200)] and existed
    again, existed_again = cancel_wake(kept, "a")
    assert again == kept and not existed_again


def test_due_wakes_splits_at_now_inclusive_and_fires_once() -> None:
    wakes = [wake("a", 100), wake("b", 200), wake("c", 300)]
    due, pending = due_wakes(wakes, at(200))
    assert [w.id for w in due] == ["a", "b"]
    assert [w.id for w in pending] == ["c"]
    assert due_wakes(pending, at(200)) == ([], pending)
