"""The call_llm activity streams its reply into heartbeats (tests/helpers/llm_activity.py):
from the start and as the reply comes in; a reply in the heartbeat details is
stored without asking again; paused, cut and refused replies."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from activities.llm import LlmHeartbeat
from fleet_agent.llm.transcript import PAUSED_TEXT, StoredReply, reply_text
from fleet_agent.models import Verdict
from fleet_agent.store import Store
from fleet_agent.store.messages import Messages
from testkit.fakes.anthropic_server import FakeAnthropic, Reply
from tests.helpers.llm_activity import AGENT, VERDICT_ACTED, VERDICT_NOOP, Rig, _results_for, rig

__all__ = ["rig"]  # the fixture, imported for pytest


class Beats:
    """Heartbeats of the activity under test, with how many requests the fake had seen."""

    def __init__(self, rig: Rig) -> None:
        self.details: list[LlmHeartbeat] = []
        self.requests_seen: list[int] = []
        self._rig = rig
        rig.env.on_heartbeat = self.record

    def record(self, *details: Any) -> None:
        self.details.append(LlmHeartbeat.model_validate(details[0]))
        self.requests_seen.append(len(self._rig.fake.requests))


async def test_heartbeats_from_the_start_and_as_the_reply_streams_in(rig: Rig) -> None:
    text = f"{'Checking every machine. ' * 6}\n{VERDICT_NOOP}"
    # About 60 deltas 50 ms apart: the stream takes 3 s or more.
    rig.script(Reply(text=text, chunk_chars=4, chunk_delay=0.05))
    await rig.open_run(1, "hi")
    beats = Beats(rig)
    result = await rig.call(1, 1)
    assert result.verdict == Verdict(action=False, state_changed=False)
    first, last = beats.details[0], beats.details[-1]
    assert beats.requests_seen[0] == 0, "the first beat comes before the request is sent"
    assert first.output_chars == 0 and first.reply is None
    streaming = [b.output_chars for b in beats.details if b.reply is None]
    assert any(0 < n < len(text) for n in streaming), "progress beats while the reply streams"
    assert streaming == sorted(streaming)
    assert last.reply is not None, "the finished reply is in the last heartbeat"
    stored = rig.store.messages.get_message(AGENT, 1, 1)
    assert stored is not None
    assert last.reply == StoredReply.model_validate_json(stored.content)
    assert reply_text(last.reply.content) == text


async def test_a_reply_in_the_heartbeat_details_is_stored_without_asking_again(
    rig: Rig,
) -> None:
    await rig.open_run(1, "hi")
    earlier = StoredReply(
        content=[{"type": "text", "text": f"Answered before.\n{VERDICT_ACTED}"}],
        stop_reason="end_turn",
        model="claude-x",
        seconds=12.5,
    )
    details = LlmHeartbeat(output_chars=40, reply=earlier).model_dump(mode="json")
    rig.env.info = dataclasses.replace(rig.env.info, heartbeat_details=[details], attempt=2)
    beats = Beats(rig)
    result = await rig.call(1, 1)
    assert rig.fake.requests == [], "paid for once, by the earlier attempt"
    assert result.replayed and result.seconds == 12.5
    assert result.verdict == Verdict(action=True, state_changed=True)
    stored = rig.store.messages.get_message(AGENT, 1, 1)
    assert stored is not None and StoredReply.model_validate_json(stored.content) == earlier
    assert beats.details[-1].reply == earlier, "kept in this attempt's details too"


@pytest.mark.parametrize(
    "details", [[], ["progress of an older worker"], [{"output_chars": 5}], [{"reply": 3}]]
)
async def test_heartbeat_details_without_a_reply_mean_asking_the_model(
    rig: Rig, details: list[Any]
) -> None:
    rig.script(Reply(text=f"Fresh.\n{VERDICT_NOOP}"))
    await rig.open_run(1, "hi")
    rig.env.info = dataclasses.replace(rig.env.info, heartbeat_details=details, attempt=2)
    result = await rig.call(1, 1)
    assert len(rig.fake.requests) == 1 and not result.replayed


class AssistantInsertFails(Messages):
    """Real messages whose first insert of an assistant reply fails (an outage)."""

    failures = 1

    def add_message(self, *args: Any, **kwargs: Any) -> bool:
        if "assistant" in args and self.failures:
            self.failures -= 1
            raise OSError("store unavailable")
        return super().add_message(*args, **kwargs)


async def test_the_reply_is_in_the_heartbeat_before_storing_it_fails(
    tmp_path: Path, fake_llm: FakeAnthropic
) -> None:
    store = Store(f"sqlite:///{tmp_path / 'fleet.db'}")
    store.messages = AssistantInsertFails(store)
    store.create_all()
    rig = Rig(store, fake_llm)
    rig.script(Reply(tool_calls=[("get_fleet_status", {})]))
    await rig.open_run(1, "hi")
    beats = Beats(rig)
    with pytest.raises(OSError, match="store unavailable"):
        await rig.call(1, 1)
    kept = beats.details[-1].reply
    assert kept is not None and kept.stop_reason == "tool_use"
    assert [m.kind for m in store.messages.run_messages(AGENT, 1)] == ["context"]
    store.dispose()


async def test_a_pause_turn_reply_is_continued_after_a_note_never_as_a_prefill(rig: Rig) -> None:
    """Sonnet 5.5 refuses a conversation that ends with an assistant message:
    the paused reply goes back followed by a user note, which stays in place
    in the later rounds."""
    rig.script(
        Reply(text="Looking at the fleet first. ", stop_reason="pause_turn"),
        Reply(text="Now checking.", tool_calls=[("get_fleet_status", {})]),
        Reply(text=f"Done.\n{VERDICT_ACTED}"),
    )
    await rig.open_run(1, "status?")
    paused = await rig.call(1, 1)
    assert paused.stop_reason == "pause_turn" and paused.tool_calls == []
    going_on = await rig.call(1, 2)
    sent = rig.fake.requests[1].plain_messages
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[-1]["content"] == PAUSED_TEXT
    await rig.store_results(1, 2, _results_for(going_on))
    await rig.call(1, 3)
    later = rig.fake.requests[2].plain_messages
    assert [m["role"] for m in later] == ["user", "assistant", "user", "assistant", "user"]
    assert later[:2] == sent[:2], "the paused reply goes back as it was"
    assert later[2]["content"] == [{"type": "text", "text": PAUSED_TEXT}], "the note stays"
    # "Now checking." went back in the thinking block it came in (Sonnet 5.5).
    assert [b["type"] for b in later[3]["content"] if b["type"] != "thinking"] == ["tool_use"]
    assert [m.seq for m in rig.store.messages.run_messages(AGENT, 1)] == [0, 1, 3, 4, 5]


async def test_a_tool_call_cut_by_max_tokens_is_stored_and_returned_as_it_came(
    rig: Rig,
) -> None:
    offer = {"offer_id": 11, "reason": "a long explanation that gets cut"}
    rig.script(
        Reply(
            text="Renting.",
            tool_calls=[("create_instance", offer)],
            stop_reason="max_tokens",
            cut_json_at=len('{"offer_id": 11, "reason": "a long'),
        )
    )
    await rig.open_run(1, "more capacity")
    result = await rig.call(1, 1)
    assert result.stop_reason == "max_tokens"
    assert [(c.name, c.input) for c in result.tool_calls] == [("create_instance", {"offer_id": 11})]
    again = await rig.call(1, 1)
    assert again.replayed and again.tool_calls == result.tool_calls
    assert len(rig.fake.requests) == 1


async def test_a_refusal_is_returned_with_its_stop_reason(rig: Rig) -> None:
    rig.script(Reply(text="I can't help with that.", stop_reason="refusal"))
    await rig.open_run(1, "do something bad")
    result = await rig.call(1, 1)
    assert result.stop_reason == "refusal" and result.tool_calls == []
    assert result.verdict is None and result.verdict_error
