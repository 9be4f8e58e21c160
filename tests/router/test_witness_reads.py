"""The router's witness as the monitor's reads (fleet_agent/fleet/witness_reads.py):
phases, idleness, the busy clock at the last proof, a counter that goes back,
a joining machine's grace and a stale witness's unwatched time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from activities.fleet_router import RouterLook
from fleet_agent.cuzk.witness import MachineWitness, RouterQueue, WitnessPhase
from fleet_agent.fleet.provers import ProverTrack, advance, not_proving_reason
from fleet_agent.fleet.witness_reads import (
    joining_grace_s,
    unwatched,
    witness_read,
)
from fleet_agent.vast.models import Instance

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
AT = T0.timestamp() + 600


def _w(phase: WitnessPhase = "serving", **fields: Any) -> MachineWitness:
    return MachineWitness.model_validate({"instance_id": 1, "phase": phase, "since": T0, **fields})


def test_phases_become_the_reads_phases() -> None:
    queue = RouterQueue(at=T0, pending={"porep": 2})
    for phase, want in [
        ("serving", "proving"),
        ("draining", "proving"),
        ("drained", "proving"),
        ("joining", "starting"),
        ("failing", "error"),
        ("dead", "error"),
    ]:
        read = witness_read(_w(phase, reason="why"), queue, AT, None)  # type: ignore[arg-type]
        assert read.ok and read.phase == want, (phase, read)
        assert read.detail.startswith(f"router: {phase} (why)")
    # Idle: serving, nothing in flight, nothing waiting at the router.
    assert witness_read(_w(), RouterQueue(at=T0), AT, None).idle
    assert not witness_read(_w(), queue, AT, None).idle, "work waits: not idle"
    # A draining machine is idle once its own jobs are done, whatever waits.
    assert witness_read(_w("drained"), queue, AT, None).idle


def test_the_busy_clock_at_the_last_proof() -> None:
    done = T0 + timedelta(seconds=500)
    # Nothing in flight: no work since the last proof.
    read = witness_read(_w(busy_seconds=400.0, last_done_at=done), None, AT, None)
    assert read.last_proof_busy_seconds == 400.0
    # In flight, sent before the last proof: busy all the 100 s since.
    busy = _w(busy_seconds=400.0, in_flight=1, last_done_at=done, last_sent_at=T0)
    assert witness_read(busy, None, AT, None).last_proof_busy_seconds == 300.0
    # Sent after it (an idle gap maybe): busy at least since the send.
    later = busy.model_copy(update={"last_sent_at": done + timedelta(seconds=40)})
    assert witness_read(later, None, AT, None).last_proof_busy_seconds == 340.0


def test_a_counter_that_goes_back_is_a_new_process() -> None:
    track = advance(None, witness_read(_w(done=9, busy_seconds=900.0), None, AT, None), 1, AT, 20)
    same = witness_read(_w(done=10, busy_seconds=960.0), None, AT + 60, track)
    assert same.started_at == track.started_at
    again = witness_read(_w(done=1, busy_seconds=60.0), None, AT + 60, track)
    assert again.started_at == AT + 60, "the router restarted: the anchors drop"
    assert advance(track, again, 1, AT + 60, 20).proofs_completed == 1


def test_a_joining_machine_has_its_download_as_grace() -> None:
    inst = Instance.model_validate({"id": 1, "actual_status": "running", "inet_down": 1000.0})
    grace = joining_grace_s(1000.0)
    assert 20 * 60 < grace < 25 * 60  # twice 4 + 6.7 min
    assert joining_grace_s(None) == 2 * 3600.0
    look = RouterLook(witnesses={1: _w("joining")}, queue=None, written_at=AT, now=AT)
    track = ProverTrack(instance_id=1, first_seen_at=AT, last_read_at=AT, progress_at=AT)
    now = AT
    while now < AT + grace + 21 * 60:
        now += 60
        read = look.reads([inst], {1: track})[1]
        track = look.settle(inst, advance(track, read, 1, now, 20), now)
        reason = not_proving_reason(track, now, 20)
        if now - AT < grace + 19 * 60:  # judged within a poll of grace + 20 min
            assert reason is None, (now - AT, reason)
    assert reason is not None and "stuck starting" in reason


def test_unwatched_time_is_not_held_against_a_machine() -> None:
    track = ProverTrack(
        instance_id=1,
        first_seen_at=AT,
        last_read_at=AT,
        progress_at=AT,
        phase="proving",
        in_flight=1,
        busy_seconds=50.0,
        busy_at_progress=0.0,
    )
    later = unwatched(track, AT + 3600, 3500.0)
    assert later.progress_at == AT + 3600 and later.busy_at_progress == 50.0
    assert later.phase == "proving" and later.in_flight == 1, "what it knew is kept"
    assert not_proving_reason(later, AT + 3600, 20) is None
    assert "unknown: the router last wrote 3500 s ago" in later.detail
