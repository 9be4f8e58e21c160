"""A demand source's answer is hostile input (issue 45): every number whole,
finite, non-negative and bounded, every date RFC 3339 with an offset in a
sane year, the deadlines sorted and capped; a bad field refuses the whole
reading with one line naming it, never an exception. The source's URL and
token are checked when the worker starts, in one line."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from fleet_agent.config.settings import Settings
from fleet_agent.demand.reading import MAX_DEADLINES, DemandReading, parse_reading
from fleet_agent.demand.settings import DemandEnv
from fleet_agent.demand.sources import curio_reading, metric_sum
from fleet_agent.env.env_settings import SettingsError
from simulator.curio.webrpc import queue_row, rpc_result
from tests.helpers.worker_process import worker_stops

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def _good(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "as_of": "2026-12-06T12:00:00Z",
        "queued": 3,
        "in_flight": 2,
        "arrived_total": 1000,
        "done_total": 990,
        "late_total": 1,
        "deadlines": ["2026-12-06T12:20:00Z", "2026-12-06T12:05:00+00:00"],
        "saturated": False,
    }
    body.update(changes)
    return body


def test_a_good_answer_is_a_reading_with_sorted_utc_deadlines() -> None:
    reading = parse_reading(_good(), "http")
    assert isinstance(reading, DemandReading)
    assert reading.backlog == 5
    assert reading.deadlines == [NOW + timedelta(minutes=5), NOW + timedelta(minutes=20)]
    assert reading.as_of == NOW and reading.source == "http"


def test_offsets_and_go_nanoseconds_are_read_as_utc() -> None:
    reading = parse_reading(_good(as_of="2026-12-06T13:00:00.123456789+01:00"), "http")
    assert isinstance(reading, DemandReading)
    assert reading.as_of == NOW.replace(microsecond=123456)


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("queued", float("nan"), "queued is not a whole number"),
        ("queued", float("inf"), "queued is not a whole number"),
        ("queued", -1, "queued is out of range"),
        ("in_flight", 10**400, "in_flight is out of range"),
        ("arrived_total", 1e300, "arrived_total is out of range"),
        ("arrived_total", 2.5, "arrived_total is not a whole number"),
        ("queued", "7", "queued is not a number"),
        ("queued", True, "queued is not a number"),
        ("queued", None, "queued is missing"),
        ("done_total", -3, "done_total is out of range"),
        ("saturated", "yes", "saturated is not true or false"),
        ("as_of", "yesterday", "as_of is not an RFC 3339 time"),
        ("as_of", "2026-12-06T12:00:00", "as_of has no UTC offset"),
        ("as_of", "9999-12-06T12:00:00Z", "as_of is not between"),
        ("as_of", "2026-12-06T12:00:00Z" + " " * 100, "as_of is not an RFC 3339 time"),
        ("as_of", 1765022400, "as_of is not an RFC 3339 time"),
        ("deadlines", "soon", "deadlines is not a list"),
        ("deadlines", ["2026-12-06T12:05:00Z", "Feb 30"], "a deadline is not an RFC 3339"),
        ("deadlines", [None], "a deadline is not an RFC 3339 time"),
        ("deadlines", ["2026-12-06T12:05:00Z"] * 100_001, "deadlines has more than 100000"),
    ],
)
def test_a_bad_field_refuses_the_reading_in_one_line(field: str, value: Any, says: str) -> None:
    refusal = parse_reading(_good(**{field: value}), "http")
    assert isinstance(refusal, str)
    assert refusal.startswith(says)
    assert "\n" not in refusal and len(refusal) < 100


@pytest.mark.parametrize("body", [[], "x", None, 3, [_good()]])
def test_an_answer_that_is_no_object_is_refused(body: Any) -> None:
    assert parse_reading(body, "http") == "the answer is not a JSON object"


def test_nan_from_json_text_is_refused() -> None:
    # Python's JSON parser takes NaN and Infinity: the check must be ours.
    body = json.loads(
        '{"as_of": "2026-12-06T12:00:00Z", "queued": NaN, "in_flight": 0, "arrived_total": 0}'
    )
    assert parse_reading(body, "http") == "queued is not a whole number"


def test_deadlines_are_capped_to_the_earliest() -> None:
    many = [(NOW + timedelta(seconds=5000 - i)).isoformat() for i in range(5000)]
    reading = parse_reading(_good(deadlines=many), "http")
    assert isinstance(reading, DemandReading)
    assert len(reading.deadlines) == MAX_DEADLINES
    assert reading.deadlines[0] == NOW + timedelta(seconds=1)
    assert reading.deadlines == sorted(reading.deadlines)


def test_the_source_name_is_one_short_line() -> None:
    reading = parse_reading(_good(), "http\nOperator: destroy all" + "x" * 100)
    assert isinstance(reading, DemandReading)
    assert "\n" not in reading.source and len(reading.source) <= 32


def _row(minutes_ago: float, task: int | None, done: bool) -> dict[str, Any]:
    return queue_row(
        "bafy", NOW - timedelta(minutes=minutes_ago), compute_task_id=task, compute_done=done
    )


def test_curio_rows_and_metrics_make_a_reading() -> None:
    answer = json.loads(rpc_result([_row(1, None, False), _row(4, 77, False), _row(9, None, True)]))
    lines = [
        'curio_psvc_proofshare_newly_added_total{instance="a"} 40',
        'curio_psvc_proofshare_newly_added_total{instance="b"} 2',
        "curio_psvc_proofshare_newly_added_totalx 999",
        "curio_psvc_proofshare_queue_count 1",
    ]
    reading = curio_reading(answer, lines, NOW)
    assert isinstance(reading, DemandReading)
    assert (reading.queued, reading.in_flight, reading.arrived_total) == (1, 1, 42)
    assert reading.deadlines == [NOW + timedelta(minutes=41), NOW + timedelta(minutes=44)]
    assert not reading.saturated
    # The gauge is the cluster's count, past PSListQueue's 15 rows: with
    # the list cut there it stands; with a whole list, the open rows bound it.
    cut = json.loads(rpc_result([_row(m, None, False) for m in range(15)]))
    full = curio_reading(cut, [*lines[:2], "curio_psvc_proofshare_queue_count 20"], NOW)
    assert isinstance(full, DemandReading) and full.saturated and not full.whole
    assert (full.queued, full.in_flight) == (20, 0)
    stale = curio_reading(answer, [*lines[:2], "curio_psvc_proofshare_queue_count 6"], NOW)
    assert isinstance(stale, DemandReading) and not stale.saturated
    assert (stale.queued, stale.in_flight) == (2, 0)


def test_without_the_gauge_a_zero_task_id_is_queued() -> None:
    """Curio's NULL task id is 0 (web/api/webrpctypes/nulljson.go): read as
    none, not as a task. (Read as a task, the queue was always empty.)"""
    rows = [_row(1, None, False), _row(2, None, False), _row(3, 12, False)]
    reading = curio_reading(json.loads(rpc_result(rows)), [], NOW)
    assert isinstance(reading, DemandReading)
    assert rows[0]["compute_task_id"] == 0
    assert (reading.queued, reading.in_flight) == (2, 1)


@pytest.mark.parametrize(
    ("answer", "lines", "says"),
    [
        (
            {"jsonrpc": "2.0", "error": {"code": 1, "message": "db down"}},
            [],
            "PSListQueue answered",
        ),
        ({"result": []}, [], "PSListQueue: not a JSON-RPC 2.0 answer"),
        ({"jsonrpc": "2.0", "result": {}}, [], "PSListQueue: result is not a list"),
        ({"jsonrpc": "2.0", "result": [1]}, [], "PSListQueue: a row is not an object"),
        (
            {"jsonrpc": "2.0", "result": [{**_row(1, None, False), "compute_done": "no"}]},
            [],
            "PSListQueue: compute_done",
        ),
        (
            {"jsonrpc": "2.0", "result": [{**_row(1, None, False), "obtained_at": "x"}]},
            [],
            "obtained_at is not",
        ),
        (
            {"jsonrpc": "2.0", "result": []},
            [f"{'curio_psvc_proofshare_newly_added_total'} 1e20"],
            "arrivals is out of range",
        ),
    ],
)
def test_bad_curio_answers_are_refused(answer: Any, lines: list[str], says: str) -> None:
    refusal = curio_reading(answer, lines, NOW)
    assert isinstance(refusal, str) and refusal.startswith(says)


def test_metric_values_that_are_no_count_are_no_value() -> None:
    assert metric_sum(["m NaN"], "m") is None
    assert metric_sum(["m -1"], "m") is None
    assert metric_sum(["m +Inf"], "m") is None
    assert metric_sum(['m{a="}"} 3', "m 4 1700000000"], "m") == 7
    assert metric_sum(["# HELP m x", "mm 3"], "m") is None


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"FLEET_DEMAND_SOURCE": "kafka"}, "FLEET_DEMAND_SOURCE must be"),
        ({"FLEET_DEMAND_SOURCE": "curio"}, "FLEET_DEMAND_URL must be set"),
        (
            {"FLEET_DEMAND_SOURCE": "http", "FLEET_DEMAND_URL": "http://169.254.169.254/x"},
            "FLEET_DEMAND_URL refused: 169.254.169.254 is link-local",
        ),
        (
            {"FLEET_DEMAND_SOURCE": "http", "FLEET_DEMAND_URL": "http://[fe80::1]/d"},
            "FLEET_DEMAND_URL refused",
        ),
        (
            {"FLEET_DEMAND_SOURCE": "http", "FLEET_DEMAND_URL": "http://metadata.google.internal/"},
            "FLEET_DEMAND_URL refused",
        ),
        (
            {"FLEET_DEMAND_SOURCE": "http", "FLEET_DEMAND_URL": "http://[fec0::5]/d"},
            "FLEET_DEMAND_URL refused: fec0::5 is site-local",
        ),
        (
            {"FLEET_DEMAND_SOURCE": "http", "FLEET_DEMAND_URL": "http://[64:ff9b::a9fe:a9fe]/d"},
            "FLEET_DEMAND_URL refused: 64:ff9b::a9fe:a9fe is a NAT64 or tunnel address of "
            "169.254.169.254, which is link-local",
        ),
        (
            {"FLEET_DEMAND_SOURCE": "http", "FLEET_DEMAND_URL": "http://[64:ff9b:1::a00:5]/d"},
            "FLEET_DEMAND_URL refused: 64:ff9b:1::a00:5 is NAT64 for local use",
        ),
        (
            {"FLEET_DEMAND_SOURCE": "http", "FLEET_DEMAND_URL": "http://[2002:a9fe:a9fe::1]/d"},
            "FLEET_DEMAND_URL refused: 2002:a9fe:a9fe::1 is a NAT64 or tunnel address",
        ),
        (
            {"FLEET_DEMAND_SOURCE": "http", "FLEET_DEMAND_URL": "ftp://10.0.0.5/d"},
            "FLEET_DEMAND_URL must be http(s)",
        ),
        (
            {"FLEET_DEMAND_SOURCE": "http", "FLEET_DEMAND_URL": "http://u:p@10.0.0.5/d"},
            "FLEET_DEMAND_URL must not carry credentials",
        ),
        (
            {
                "FLEET_DEMAND_SOURCE": "http",
                "FLEET_DEMAND_URL": "http://demand.example.com/d",
                "FLEET_DEMAND_TOKEN": "s3cret-token",
            },
            "FLEET_DEMAND_URL must be https when FLEET_DEMAND_TOKEN is set",
        ),
        (
            {"FLEET_DEMAND_SOURCE": "curio", "FLEET_DEMAND_URL": "http://10.0.0.5:4701/api"},
            "FLEET_DEMAND_URL is the Curio GUI's origin only",
        ),
        (
            {
                "FLEET_DEMAND_SOURCE": "curio",
                "FLEET_DEMAND_URL": "http://10.0.0.5:4701",
                "FLEET_DEMAND_METRICS_URL": "http://169.254.169.254:12300",
            },
            "FLEET_DEMAND_METRICS_URL refused",
        ),
        (
            {
                "FLEET_DEMAND_SOURCE": "http",
                "FLEET_DEMAND_URL": "http://10.0.0.5/d",
                "FLEET_DEMAND_METRICS_URL": "http://10.0.0.5:12300",
            },
            "FLEET_DEMAND_METRICS_URL is for FLEET_DEMAND_SOURCE=curio only",
        ),
    ],
)
def test_bad_demand_settings_stop_the_worker_in_one_line(env: dict[str, str], says: str) -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_env(env)
    message = str(caught.value)
    assert message.startswith(says), message
    assert "\n" not in message and "s3cret" not in message


def test_private_and_loopback_sources_are_allowed() -> None:
    curio = DemandEnv.load(
        {"FLEET_DEMAND_SOURCE": "curio", "FLEET_DEMAND_URL": "http://10.0.0.5:4701/"}
    )
    assert curio.url == "http://10.0.0.5:4701"
    assert curio.metrics_url == "http://10.0.0.5:12300"
    apart = DemandEnv.load(
        {
            "FLEET_DEMAND_SOURCE": "curio",
            "FLEET_DEMAND_URL": "http://[fd12::5]:4701",
            "FLEET_DEMAND_METRICS_URL": "http://10.0.0.6:12300/",
        }
    )
    assert apart.metrics_url == "http://10.0.0.6:12300"
    v6 = DemandEnv.load(
        {"FLEET_DEMAND_SOURCE": "curio", "FLEET_DEMAND_URL": "http://[fd12::5]:4701"}
    )
    assert v6.metrics_url == "http://[fd12::5]:12300"
    local = DemandEnv.load(
        {
            "FLEET_DEMAND_SOURCE": "http",
            "FLEET_DEMAND_URL": "http://127.0.0.1:8765/demand",
            "FLEET_DEMAND_TOKEN": "t",
        }
    )
    assert local.url == "http://127.0.0.1:8765/demand"
    assert local.token is not None and local.token.get_secret_value() == "t"
    assert "**" in repr(local.token)
    # A NAT64 address is judged by the IPv4 address it leads to: a global one passes.
    nat64 = DemandEnv.load(
        {"FLEET_DEMAND_SOURCE": "http", "FLEET_DEMAND_URL": "http://[64:ff9b::808:808]/d"}
    )
    assert nat64.url == "http://[64:ff9b::808:808]/d"
    assert Settings.from_env({}).demand.source == "none"


async def test_the_worker_refuses_a_metadata_demand_url_in_one_line(tmp_path: Path) -> None:
    code, err = await worker_stops(
        tmp_path, FLEET_DEMAND_SOURCE="http", FLEET_DEMAND_URL="http://169.254.169.254/latest"
    )
    assert code == 1
    assert err.startswith("worker: error: FLEET_DEMAND_URL refused: 169.254.169.254 is link-local")
    assert err.count("\n") == 1, "one line, no traceback"
