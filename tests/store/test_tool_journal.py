"""The fleet tool-call journal (`fa_tool_calls`) on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import inspect, text

from fleet_agent.models import AgentConfig, FleetToolRequest, ToolResult
from fleet_agent.store import Store, ToolJournal
from tests.helpers.store_backends import in_threads, store_on_both_backends  # noqa: F401  (a fixture)

AGENT = "agent-j"
T0 = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)


@pytest.fixture
def journal(store: Store) -> ToolJournal:
    return ToolJournal(store)


def _call(tool_use_id: str = "toolu_1", name: str = "create_instance") -> FleetToolRequest:
    return FleetToolRequest(
        agent_id=AGENT,
        run=3,
        round=2,
        tool_use_id=tool_use_id,
        name=name,
        input={"offer_id": 42, "reason": "more capacity"},
        config=AgentConfig(),
    )


def _result(content: str, call: FleetToolRequest | None = None) -> ToolResult:
    call = call or _call()
    return ToolResult(tool_use_id=call.tool_use_id, name=call.name, content=content, mutating=True)


def test_start_twice_keeps_the_first_row(journal: ToolJournal) -> None:
    first = journal.start(_call(), T0)
    again = journal.start(_call(), T0 + timedelta(seconds=30))
    assert first == again
    assert again.status == "started" and again.result is None
    assert again.started_at == T0 and again.finished_at is None
    assert (again.run, again.round, again.name) == (3, 2, "create_instance")
    assert again.input == {"offer_id": 42, "reason": "more capacity"}


def test_first_result_wins(journal: ToolJournal) -> None:
    journal.start(_call(), T0)
    done = journal.finish(_call(), _result("Rented instance 7"), T0 + timedelta(seconds=5))
    assert done.status == "done" and done.result == _result("Rented instance 7")
    assert done.started_at == T0 and done.finished_at == T0 + timedelta(seconds=5)
    # An overlapping attempt finishing later gets the stored result back.
    late = journal.finish(_call(), _result("Rented instance 8"), T0 + timedelta(seconds=9))
    assert late == done
    assert journal.get(AGENT, "toolu_1") == done


def test_finish_without_start_records_a_done_call(journal: ToolJournal) -> None:
    call = _call("toolu_read", "get_fleet_status")
    done = journal.finish(call, _result("3 instances", call), T0)
    assert done.status == "done" and done.result is not None
    assert done.result.content == "3 instances"
    assert done.started_at == done.finished_at == T0


def test_a_late_start_never_reopens_a_finished_call(journal: ToolJournal) -> None:
    done = journal.finish(_call(), _result("Rented instance 7"), T0)
    assert journal.start(_call(), T0 + timedelta(minutes=1)) == done


def test_get_of_an_unknown_call_is_none(journal: ToolJournal) -> None:
    journal.start(_call(), T0)
    assert journal.get(AGENT, "toolu_other") is None
    assert journal.get("another-agent", "toolu_1") is None


def test_calls_are_keyed_per_agent(journal: ToolJournal) -> None:
    mine = journal.finish(_call(), _result("mine"), T0)
    other = _call().model_copy(update={"agent_id": "agent-k"})
    theirs = journal.finish(other, _result("theirs"), T0)
    assert mine.result is not None and mine.result.content == "mine"
    assert theirs.result is not None and theirs.result.content == "theirs"


def test_concurrent_finishes_agree_on_one_result(journal: ToolJournal) -> None:
    journal.start(_call(), T0)
    records = in_threads(8, lambda i: journal.finish(_call(), _result(f"attempt {i}"), T0))
    assert len({r.model_dump_json() for r in records}) == 1
    assert records[0].status == "done"


def test_naive_times_are_refused(journal: ToolJournal) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        journal.start(_call(), datetime(2025, 6, 1, 12, 0, 0))
    assert journal.get(AGENT, "toolu_1") is None


def test_delete_agent_removes_its_journal(store: Store, journal: ToolJournal) -> None:
    journal.finish(_call(), _result("x"), T0)
    other = _call().model_copy(update={"agent_id": "agent-k"})
    journal.finish(other, _result("y", other), T0)
    store.delete_agent(AGENT)
    assert journal.get(AGENT, "toolu_1") is None
    assert journal.get("agent-k", "toolu_1") is not None


def test_create_all_adds_the_table_to_an_existing_database(store: Store) -> None:
    """A database created before the journal existed gets the table, data kept."""
    store.run_writes.begin_run(AGENT, 1, 1, [], "block", T0)
    with store.engine.begin() as conn:
        conn.execute(text("DROP TABLE fa_tool_calls"))
    assert "fa_tool_calls" not in inspect(store.engine).get_table_names()
    store.create_all()
    assert "fa_tool_calls" in inspect(store.engine).get_table_names()
    assert store.run_reads.get_run(AGENT, 1) is not None
    assert ToolJournal(store).finish(_call(), _result("x"), T0).status == "done"


WRITES = ("create_instance", "destroy_instance")


def test_last_change_is_the_latest_end_of_a_fleet_write(journal: ToolJournal) -> None:
    now = T0 + timedelta(minutes=10)
    assert journal.last_change(AGENT, WRITES, now) is None
    journal.finish(_call("toolu_r", name="get_fleet_status"), _result("3 machines"), T0)
    assert journal.last_change(AGENT, WRITES, now) is None  # a read changes nothing
    create, destroy = _call("toolu_c"), _call("toolu_d", name="destroy_instance")
    journal.start(create, T0)
    journal.finish(create, _result("Rented", create), T0 + timedelta(seconds=5))
    journal.start(destroy, T0 + timedelta(seconds=20))
    journal.finish(destroy, _result("Destroyed", destroy), T0 + timedelta(seconds=21))
    assert journal.last_change(AGENT, WRITES, now) == T0 + timedelta(seconds=21)
    assert journal.last_change(AGENT, ("create_instance",), now) == T0 + timedelta(seconds=5)
    assert journal.last_change("another-agent", WRITES, now) is None


def test_a_write_in_flight_is_a_change_now_until_it_is_taken_for_dead(
    journal: ToolJournal,
) -> None:
    done = _call("toolu_done")
    journal.start(done, T0)
    journal.finish(done, _result("Rented", done), T0 + timedelta(seconds=3))
    journal.start(_call("toolu_open"), T0 + timedelta(seconds=10))
    # Its outcome is unknown yet: no listing from before now may hide it.
    soon = T0 + timedelta(seconds=40)
    assert journal.last_change(AGENT, WRITES, soon) == soon
    # A call started over an hour ago with no result: its worker died.
    late = T0 + timedelta(hours=2)
    assert journal.last_change(AGENT, WRITES, late) == T0 + timedelta(seconds=3)


def test_temporary_creates_are_read_by_run_and_by_the_parsed_input(journal: ToolJournal) -> None:
    """Only create calls of the runs asked for whose input says temporary:
    a reason that merely mentions it, another agent's or another run's call,
    and another tool are left out."""
    calls = [
        (3, "toolu_a", "create_instance", {"offer_id": 1, "reason": "r", "temporary": True}),
        (3, "toolu_b", "create_instance", {"offer_id": 2, "reason": '"temporary": true'}),
        (3, "toolu_c", "create_instance", {"offer_id": 3, "reason": "r", "temporary": False}),
        (4, "toolu_d", "create_instance", {"offer_id": 4, "reason": "r", "temporary": True}),
        (3, "toolu_e", "destroy_instance", {"instance_id": 5, "reason": "r", "temporary": True}),
    ]
    for run, use_id, name, args in calls:
        journal.start(_call(use_id, name).model_copy(update={"run": run, "input": args}), T0)
    other = _call("toolu_f").model_copy(
        update={"agent_id": "agent-k", "input": {"offer_id": 6, "reason": "r", "temporary": True}}
    )
    journal.start(other, T0)
    assert journal.temporary_creates(AGENT, [3]) == [
        (3, "toolu_a", {"offer_id": 1, "reason": "r", "temporary": True})
    ]
    assert sorted(u for _, u, _ in journal.temporary_creates(AGENT, [3, 4, 9])) == [
        "toolu_a",
        "toolu_d",
    ]
    assert journal.temporary_creates(AGENT, []) == []
    # Every create of the runs asked for, whatever its input (the benchmark's
    # rentals by reason).
    assert sorted(u for _, u, _ in journal.creates(AGENT, [3])) == ["toolu_a", "toolu_b", "toolu_c"]
    assert journal.creates(AGENT, []) == []


def test_releases_since_are_the_machines_destroy_calls_released_or_are_releasing(
    journal: ToolJournal,
) -> None:
    def destroy(use_id: str, iid: object) -> FleetToolRequest:
        call = _call(use_id, "destroy_instance")
        return call.model_copy(update={"input": {"instance_id": iid, "reason": "r"}})

    journal.finish(destroy("d-old", 1), _result("Destroyed", destroy("d-old", 1)), T0)
    later = T0 + timedelta(minutes=30)
    journal.finish(destroy("d-drain", 2), _result("Draining", destroy("d-drain", 2)), later)
    journal.start(destroy("d-flight", 3), later)  # no result yet: may be releasing
    refused = ToolResult(tool_use_id="d-refused", name="destroy_instance", content="Refused")
    journal.finish(destroy("d-refused", 4), refused, later)
    journal.finish(destroy("d-odd", "5"), _result("Destroyed", destroy("d-odd", "5")), later)
    journal.finish(_call("c-1"), _result("Rented instance 6"), later)
    since = T0 + timedelta(minutes=1)
    assert journal.releases_since(AGENT, since) == {2, 3}
    assert journal.releases_since(AGENT, since, except_call="d-flight") == {2}
    assert journal.releases_since(AGENT, T0) == {1, 2, 3}
    assert journal.releases_since("another-agent", T0) == set()
