"""The trigger block a run starts with (`fleet_agent.llm.prompt.render_trigger_block`):
every kind rendered, floods of state changes summarised. Pure: no server."""

from __future__ import annotations

import pytest

from fleet_agent.llm.prompt import estimate_tokens, render_trigger_block
from fleet_agent.models import TriggerKind
from tests.helpers.loop import trig


def test_empty_trigger_list_is_a_heartbeat() -> None:
    assert render_trigger_block([]) == "Trigger: heartbeat (nothing else happened)."
    assert render_trigger_block([trig(TriggerKind.HEARTBEAT)]) == (
        "Trigger: heartbeat (nothing else happened)."
    )


def test_every_kind_is_rendered() -> None:
    block = render_trigger_block(
        [
            trig(TriggerKind.TRIGGER_NOW, reason="ops asked"),
            trig(TriggerKind.WAKE, wake_id="w3-1", reason="loading check"),
            trig(TriggerKind.STATE_CHANGED, instance_id="9", new_state="loading"),
            trig(
                TriggerKind.STATE_CHANGED,
                instance_id="9",
                old_state="loading",
                new_state="running",
                detail="ready",
            ),
            trig(TriggerKind.AGENT_STARTED, reason="fresh start"),
            trig(TriggerKind.SESSION_RESET, reason="too long"),
            trig(TriggerKind.CONFIG_CHANGED, reason="target_proofs_per_hour: 0 → 5"),
            trig(TriggerKind.HEARTBEAT),
        ]
    )
    assert block.splitlines() == [
        "Run requested at 2026-03-01 12:00:00Z: ops asked",
        "Scheduled wake w3-1 (asked for: loading check)",
        "Instance 9: new → loading",
        "Instance 9: loading → running — ready",
        "The agent started: fresh start.",
        "A new session started (the conversation was reset): too long.",
        "The operator changed the configuration: target_proofs_per_hour: 0 → 5.",
    ]


def test_1000_state_changes_are_summarised_and_human_messages_kept_verbatim() -> None:
    messages = [
        "Why is #12 down?\n  Please check — ünïcödé <b>ok</b>",
        "second question " + "q" * 5_000,
    ]
    triggers = [
        trig(
            TriggerKind.STATE_CHANGED,
            i * 0.01,
            instance_id=str(i % 37),
            old_state="loading",
            new_state="exited" if i == 965 else "running",  # the last change of "3"
            detail=f"detail-{i} " + "d" * 100,
        )
        for i in range(1_000)
    ]
    triggers += [trig(TriggerKind.HUMAN_MESSAGE, 5, text=t, author="ops") for t in messages]
    block = render_trigger_block(triggers)
    for text in messages:
        assert f"Message from ops at 2026-03-01 12:00:05Z:\n{text}" in block
    changes = block.replace(messages[0], "").replace(messages[1], "")
    assert estimate_tokens(changes) < 100, changes
    assert "1000 state changes on 37 instances (1 now exited, 36 now running)" in block
    assert "detail-" not in block


@pytest.mark.parametrize(("count", "lines"), [(40, 40), (41, 1)])
def test_state_changes_are_listed_up_to_40(count: int, lines: int) -> None:
    block = render_trigger_block(
        [trig(TriggerKind.STATE_CHANGED, instance_id=str(i), new_state="up") for i in range(count)]
    )
    assert len(block.splitlines()) == lines
