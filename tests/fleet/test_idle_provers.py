"""A prover with no work is idle capacity, not a broken machine (issue 41).

Curio's provers are demand-limited: the node hands out work and cuzk holds
back when its queue is full (curio ``lib/cuzk/client.go``, ``HasCapacity``;
``tasks/proofshare/task_request.go``: the market adder is held back while
local tasks wait). A status that says it has nothing in flight and nothing
queued is healthy; one with work in flight and no proof for several proof
times has stalled; rates and stalls count on the prover's busy clock
(``busy_seconds``). And a host vast.ai shows ``offline`` or ``unknown`` for
a minute is waited out, not replaced and banned.
"""

from __future__ import annotations

import pytest

from activities.fleet_provers import failure_of
from fleet_agent.fleet.prover_status import parse_status
from fleet_agent.fleet.provers import (
    STALL_INTERVALS,
    ProverRead,
    ProverTrack,
    advance,
    not_proving_reason,
)
from fleet_agent.fleet.snapshot import summarize
from fleet_agent.fleet.triage import triage
from fleet_agent.vast.models import Instance

LIMIT = 20.0  # not_proving_minutes
RATE = 30.0  # proofs/h while it has work: one every 2 min


def _follow(
    share_by_minute: list[float], *, stuck_from: int | None = None, busy_clock: bool = True
) -> list[ProverTrack]:
    """A prover at RATE while it has work, given work a `share` of each minute
    (0: none at all), read every minute; stuck (work held, nothing finished)
    from minute `stuck_from`; a status with or without `busy_seconds`. The
    tracks after each read."""
    track: ProverTrack | None = None
    out = []
    busy = proofs = 0.0
    last_busy: float | None = None
    last_at: float | None = None
    for minute, share in enumerate(share_by_minute):
        stuck = stuck_from is not None and minute >= stuck_from
        busy += 60.0 if stuck else 60.0 * share
        if not stuck:
            before = proofs
            proofs += RATE * 60.0 * share / 3600.0
            if int(proofs) > int(before):
                last_busy = busy - (proofs - int(proofs)) * 3600.0 / RATE
                last_at = minute * 60.0
        read = ProverRead(
            ok=True,
            phase="proving",
            proofs_completed=int(proofs),
            started_at=0.0,
            time=minute * 60.0,
            proofs_in_flight=1 if (share > 0 or stuck) else 0,
            work_queued=0,
            last_proof_at=last_at,
            busy_seconds=busy if busy_clock else None,
            last_proof_busy_seconds=last_busy if busy_clock else None,
        )
        track = advance(track, read, 7, minute * 60.0, LIMIT)
        out.append(track)
    return out


def _judged(tracks: list[ProverTrack]) -> list[str | None]:
    return [not_proving_reason(t, i * 60.0, LIMIT, RATE) for i, t in enumerate(tracks)]


@pytest.mark.parametrize("busy_clock", [True, False])
def test_a_prover_with_no_work_for_hours_is_never_judged_stalled(busy_clock: bool) -> None:
    # An hour of work, then three hours with none: the old rule (no proof in
    # max(300 s, 5 proof times)) destroyed it 10 minutes into the quiet.
    tracks = _follow([1.0] * 60 + [0.0] * 180, busy_clock=busy_clock)
    assert _judged(tracks) == [None] * 240
    assert tracks[-1].idle and tracks[-1].measured_proofs_per_hour == pytest.approx(RATE)


def test_a_prover_busy_a_tenth_of_the_time_is_measured_at_its_full_rate_and_not_stalled() -> None:
    tracks = _follow([1.0] * 30 + [0.1] * 300)
    assert _judged(tracks) == [None] * 330
    assert tracks[-1].measured_proofs_per_hour == pytest.approx(RATE, rel=0.02)


def test_a_prover_with_work_in_flight_and_no_proof_has_stalled() -> None:
    tracks = _follow([1.0] * 60 + [0.3] * 60, stuck_from=60)
    reasons = _judged(tracks)
    first = next(i for i, r in enumerate(reasons) if r is not None)
    # Five proof times (2 min each) of busy time after its last progress.
    assert first - 60 == pytest.approx(STALL_INTERVALS * 2, abs=1)
    assert "has work in flight but finished no proof" in str(reasons[first])


def test_a_status_without_work_fields_is_judged_as_before() -> None:
    track = None
    for minute in range(40):
        read = ProverRead(
            ok=True, phase="proving", proofs_completed=0, started_at=0.0, time=minute * 60.0
        )
        track = advance(track, read, 7, minute * 60.0, LIMIT)
    assert track is not None and not track.idle
    assert not_proving_reason(track, 39 * 60.0, LIMIT) is not None


def test_work_fields_are_read_only_when_they_make_sense() -> None:
    read = parse_status(
        {
            "phase": "proving",
            "proofs_completed": 3,
            "proofs_in_flight": 0,
            "work_queued": 0,
            "busy_seconds": 812.5,
            "last_proof_busy_seconds": 800.0,
        }
    )
    assert read.ok and read.idle and read.busy_seconds == 812.5
    odd = parse_status(
        {
            "phase": "proving",
            "proofs_completed": 3,
            "proofs_in_flight": -1,
            "work_queued": "lots",
            "busy_seconds": float("nan"),
            "last_proof_busy_seconds": 5.0,
        }
    )
    assert odd.ok and not odd.idle
    assert (odd.proofs_in_flight, odd.work_queued, odd.busy_seconds) == (None, None, None)
    assert odd.last_proof_busy_seconds is None  # no busy clock to read it on
    long_phase = parse_status({"phase": "p" * 5_800, "proofs_completed": 1})
    assert not long_phase.ok and "not a phase" in long_phase.error


# ------------------------------------------------------------------ offline grace

NOW = 1_750_000_000.0


def _inst(status: str) -> Instance:
    return Instance.model_validate(
        {
            "id": 5,
            "label": "fleet-agent/a/r1-x",
            "actual_status": status,
            "intended_status": "running",
            "cur_state": "running",
            "gpu_name": "RTX 4090",
            "num_gpus": 1,
            "cpu_ram": 128 * 1024,
            "dph_total": 0.4,
            "machine_id": 77,
            "start_date": NOW - 3 * 3600,
        }
    )


@pytest.mark.parametrize("status", ["offline", "unknown"])
def test_a_one_minute_offline_blip_is_waited_out(status: str) -> None:
    inst = _inst(status)
    snap = summarize(
        [inst], target=20.0, now_epoch=NOW, offline_grace_minutes=5.0, down_since={5: NOW - 60}
    )
    row = snap.instances[0]
    assert row.in_grace and row.down_minutes == 1.0 and f"{status} for 1 min" in row.note
    assert snap.capacity_proofs_per_hour == 0 and row.expected_proofs_per_hour > 0
    destroy, alive = triage([r.model_dump() for r in snap.instances])
    assert destroy == [] and [r["id"] for r in alive] == [5]
    assert failure_of(inst, None, NOW, LIMIT, down=(NOW - 60, 5.0)) is None


def test_past_the_grace_it_is_replaced_and_its_host_remembered() -> None:
    inst = _inst("offline")
    snap = summarize(
        [inst], target=20.0, now_epoch=NOW, offline_grace_minutes=5.0, down_since={5: NOW - 300}
    )
    destroy, _ = triage([r.model_dump() for r in snap.instances])
    assert [iid for iid, _ in destroy] == [5]
    failure = failure_of(inst, None, NOW, LIMIT, down=(NOW - 300, 5.0))
    assert failure is not None and failure[0] == "dead"


def test_an_exited_container_is_replaced_at_once() -> None:
    inst = _inst("exited")
    snap = summarize(
        [inst], target=20.0, now_epoch=NOW, offline_grace_minutes=5.0, down_since={5: NOW - 10}
    )
    assert not snap.instances[0].in_grace
    assert [iid for iid, _ in triage([r.model_dump() for r in snap.instances])[0]] == [5]
