"""The pure rules of compaction (fleet_agent/llm/compaction.py): the digest, its
cap, and the fold point agreeing with the history window."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fleet_agent.llm.compaction import (
    FoldedAction,
    FoldedMessage,
    FoldedRun,
    digest,
    fold_point,
    history_share,
    summary_body_cap,
    summary_cap,
)
from fleet_agent.llm.history import history_messages
from fleet_agent.llm.prompt import estimate_tokens, format_time
from fleet_agent.models import RunStatus
from fleet_agent.store import HistoryEntry

T0 = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)


def runs(n: int, words: int = 30) -> list[FoldedRun]:
    out = []
    for i in range(1, n + 1):
        at = T0 + timedelta(minutes=5 * i)
        text = f"Message {i}: " + " ".join(f"w{i}.{k}" for k in range(words))
        actions = (
            [FoldedAction("create_instance", {"offer_id": 100 + i, "reason": "capacity"}, "ok")]
            if i % 4 == 0
            else []
        )
        out.append(FoldedRun(i, at, messages=[FoldedMessage(f"op{i}", at, text)], actions=actions))
    return out


def test_the_digest_keeps_every_human_messages_gist_author_and_time() -> None:
    folded = runs(12)
    body = digest("", folded, summary_body_cap(24_000))
    for run in folded:
        m = run.messages[0]
        assert f"run #{run.run} {format_time(m.at)}: {m.author} said: Message {run.run}:" in body
    assert body.count("create_instance(") == 3
    assert '"offer_id":104' in body and "→ ok" in body


def test_the_digest_shortens_gists_before_dropping_lines_then_drops_the_oldest() -> None:
    folded = runs(12, words=200)
    cap = 400
    body = digest("", folded, cap)
    assert estimate_tokens(body) <= cap
    assert "said: Message 12:" in body  # the newest is kept
    if "said: Message 1:" not in body:
        assert "earlier lines omitted" in body.splitlines()[0]


def test_the_digest_rolls_the_previous_summary_forward_within_its_cap() -> None:
    first = digest("", runs(3), 2_000)
    second = digest(first, runs(6)[3:], 2_000)
    assert second.startswith(first)
    assert "said: Message 6:" in second
    tiny = digest(first * 20, runs(6)[3:], 300)
    assert estimate_tokens(tiny) <= 300


def test_a_run_with_no_message_and_no_action_leaves_one_line() -> None:
    quiet = [FoldedRun(7, T0), FoldedRun(8, T0)]
    assert digest("", quiet, 500) == (
        "- runs #7–#8: no operator message and no change to the fleet"
    )


def entries(n: int, chars: int) -> list[HistoryEntry]:
    return [
        HistoryEntry(
            run=i,
            started_at=T0,
            ended_at=T0,
            status=RunStatus.OK,
            trigger_block="x" * chars,
            final_text="y" * 100,
            actions_digest="",
            noop=False,
        )
        for i in range(1, n + 1)
    ]


def test_the_fold_point_is_where_the_window_starts_and_the_rest_fits() -> None:
    budget = 4_000
    assert summary_cap(budget) + history_share(budget) == budget
    for n in (1, 5, 12, 30):
        session = entries(n, 1_000)
        k = fold_point(session, budget)
        window = history_messages(session, history_share(budget))
        assert k == n - window.included
        # After folding, what is left fits: the next fold point is 0.
        assert fold_point(session[k:], budget) == 0


def test_under_a_tight_cap_actions_go_before_operator_messages() -> None:
    folded = runs(8)  # runs 4 and 8 also rented a machine
    body = digest("- an older line of the model's summary", folded, 240)
    assert estimate_tokens(body) <= 240
    assert "create_instance" not in body and "older line" not in body
    for run in folded:
        assert f"said: Message {run.run}:" in body
