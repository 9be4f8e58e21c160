"""The answer to a message, found by its id (starter/answers.py), on both store backends.

The id travels from the `human_message` payload into the trigger (the
buffer), then into the run's record (the store), where `find_answer` looks
it up for the web console. The CLI's `ask` and `say --wait` use the agent's
`ask` update instead (tests/agent/test_ask_update.py, tests/cli/test_cli_answers.py).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fleet_agent.loop.triggers import TriggerBuffer
from fleet_agent.models import HumanMessage, RunStatus, Trigger, TriggerKind, Verdict
from fleet_agent.store import Store
from starter.agent_client import UsageError
from starter.answers import checked_message, find_answer, new_message_id
from tests.helpers import finish_ok
from tests.helpers.store_backends import store_on_both_backends  # noqa: F401  (a fixture)

AGENT = "agent-a"
T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _message(seq: int, message_id: str = "") -> Trigger:
    return Trigger(
        seq=seq,
        kind=TriggerKind.HUMAN_MESSAGE,
        received_at=T0,
        text=f"message {seq}",
        author="op",
        message_id=message_id,
    )


def _begin(store: Store, run: int, *triggers: Trigger, agent: str = AGENT) -> None:
    store.run_writes.begin_run(agent, run, 1, list(triggers), "block", T0 + timedelta(minutes=run))


def test_the_buffer_keeps_the_message_id_and_old_triggers_read_without_one() -> None:
    buffer = TriggerBuffer([], [])
    assert buffer.add_message(1, T0, "hello", "op", "m-1") is None
    assert buffer.add_message(2, T0, "no id", "op") is None
    taken = buffer.pending
    assert [t.message_id for t in taken] == ["m-1", ""]
    # A trigger stored by older code has no such key; one without an id leaves it out.
    old = Trigger.model_validate_json(
        '{"seq":1,"kind":"human_message","received_at":"2026-01-02T03:04:05Z","text":"x"}'
    )
    assert old.message_id == ""
    assert "message_id" not in taken[1].model_dump()


@pytest.mark.parametrize(
    ("message_id", "problem"),
    [
        ('a"b', "message_id"),
        ("x" * 65, "message_id"),
        ("with space", "message_id"),
    ],
)
def test_a_bad_message_id_is_refused(message_id: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        HumanMessage.model_validate({"text": "hi", "message_id": message_id})
    with pytest.raises(UsageError, match=f"invalid message: {problem}") as caught:
        checked_message("hi", "op", message_id)
    assert caught.value.exit_code == 2


def test_a_blank_message_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="text must not be blank"):
        checked_message("   ", "op", new_message_id())


def test_new_ids_are_valid_and_distinct() -> None:
    ids = {new_message_id() for _ in range(100)}
    assert len(ids) == 100
    for message_id in ids:
        HumanMessage.model_validate({"text": "hi", "message_id": message_id})


def test_find_answer_follows_the_run_that_took_the_message_in(store: Store) -> None:
    assert find_answer(store, AGENT, "m-1") is None
    _begin(store, 1, _message(1, "m-0"))
    # An id that is a prefix of another, or differs by a LIKE wildcard, is another id.
    _begin(store, 2, _message(2, "m-1x"), _message(3, "m_1"))
    assert find_answer(store, AGENT, "m-1") is None

    _begin(store, 3, _message(4), _message(5, "m-1"))
    running = find_answer(store, AGENT, "m-1")
    assert running is not None and not running.finished
    assert (running.run, running.status, running.text) == (3, RunStatus.RUNNING, "")

    final = 'Two more machines.\n<verdict>{"action": true, "state_changed": false}</verdict>'
    verdict = Verdict(action=True, state_changed=False)
    finish_ok(store, AGENT, 3, T0 + timedelta(minutes=4), final_text=final, verdict=verdict)
    done = find_answer(store, AGENT, "m-1")
    assert done is not None and done.finished and done.ok
    assert (done.run, done.text, done.verdict) == (3, "Two more machines.", verdict)
    # Another agent's run log does not answer for this one.
    assert find_answer(store, "agent-b", "m-1") is None
    assert find_answer(store, AGENT, "") is None


def test_a_failed_run_is_an_answer_with_its_error(store: Store) -> None:
    _begin(store, 1, _message(1, "m-9"))
    finish_ok(store, AGENT, 1, T0 + timedelta(minutes=2), status=RunStatus.FAILED, error="LLM down")
    answer = find_answer(store, AGENT, "m-9")
    assert answer is not None and answer.finished and not answer.ok
    assert answer.error == "LLM down"
