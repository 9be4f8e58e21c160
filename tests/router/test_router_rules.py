"""The router's pure rules, without gRPC: witness bookkeeping, health, phases,
choosing a machine, attempt budgets, idempotency and the held-bytes cap, the
members file. Times are plain numbers (the router's clock)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from fleet_agent.cuzk.service import pb
from fleet_agent.cuzk.witness import MemberSpec
from router.__main__ import MIN_DEAD_AFTER_S, at_speed
from router.config import RouterConfig
from router.dispatch import attempt_budget, choose_member
from router.jobs import HeldBytesFull, InvalidRequest, JobTable
from router.members import Member, MemberSet
from router.membership import MembersFile
from router.witness import WitnessBook, failing_reason, phase_of
from simulator.curio import sample_porep
from tests.helpers.router import NoClient, answered_member, member_spec

CFG = RouterConfig()
COMPLETED = pb.AwaitProofResponse.COMPLETED


def _member(i: int, *, gpus: int = 1, in_flight: int = 0, rate_s: float | None = None) -> Member:
    m = answered_member(member_spec(i), gpus, CFG)
    if rate_s is not None:  # one proof that took rate_s seconds
        m.book.on_send(0.0)
        m.book.on_done(rate_s)
    for _ in range(in_flight):
        m.book.on_send(10.0)
    m.refresh(10.0, CFG)
    return m


# -- witness --------------------------------------------------------------


def test_busy_seconds_count_time_with_work_not_jobs() -> None:
    book = WitnessBook(3600)
    book.on_send(100.0)
    book.on_send(101.0)  # two at once: still one busy interval
    book.on_done(110.0)
    assert book.busy_seconds(115.0) == 15.0
    book.on_done(120.0)
    assert book.busy_seconds(500.0) == 20.0  # idle time is not busy
    assert book.rate(500.0) == pytest.approx(2 * 3600 / 20)


def test_rate_is_over_the_window_and_none_before_a_proof() -> None:
    book = WitnessBook(rate_window_s=100)
    assert book.rate(0.0) is None
    book.on_send(0.0)
    assert book.rate(5.0) is None
    book.on_done(10.0)  # 10 s per proof
    for t in range(200, 400, 2):  # then 2 s per proof, for 200 s
        book.on_send(float(t))
        book.on_done(float(t + 2))
    assert book.rate(400.0) == pytest.approx(1800, rel=0.1)


def test_rate_is_bounded_whatever_the_clock_does() -> None:
    book = WitnessBook(3600)
    book.on_send(5.0)
    book.on_done(5.0 + 1e-12)
    rate = book.rate(5.0 + 1e-12)
    assert rate is not None and rate <= 1e9


def test_failing_after_a_streak_or_two_rejections_and_a_proof_resets_the_streak() -> None:
    book = WitnessBook(3600)
    for t in range(2):
        book.on_send(t)
        book.on_failed(t + 0.5)
    assert failing_reason(book, fail_streak=3, reject_limit=2) is None
    book.on_send(3)
    book.on_done(4)
    book.on_send(5)
    book.on_lost(6, counts_against=True)
    assert failing_reason(book, fail_streak=3, reject_limit=2) is None
    book.on_send(7)
    book.on_lost(8, counts_against=False)  # taken back: not its fault
    assert book.streak == 1
    book.on_rejected()
    book.on_rejected()
    assert failing_reason(book, fail_streak=3, reject_limit=2) == "2 answers rejected by Curio"


def _phase(**kw: Any) -> str:
    args: dict[str, Any] = {
        "now": 100.0,
        "failing": None,
        "added_at": 0.0,
        "answered_at": 99.0,
        "dead_after_s": 60.0,
        "draining": False,
        "joined": True,
        "in_flight": 0,
    }
    return phase_of(**(args | kw))[0]


def test_phases() -> None:
    assert _phase() == "serving"
    assert _phase(joined=False) == "joining"
    assert _phase(joined=False, answered_at=None, added_at=90.0) == "joining"
    assert _phase(answered_at=40.0) == "dead"
    # Never answered: joining however long (the image fetches its parameters
    # first); the agent judges how long joining may take.
    assert _phase(answered_at=None, added_at=-7200.0, joined=False) == "joining"
    assert _phase(draining=True, in_flight=1) == "draining"
    assert _phase(draining=True) == "drained"
    assert _phase(failing="x", draining=True) == "failing"


def test_a_hosts_status_counts_only_as_answered_circuits_and_capped_gpus() -> None:
    m = Member(member_spec(1), NoClient(), 0.0, WitnessBook(3600))
    lie = pb.GetStatusResponse(
        gpus=[pb.GPUStatus(ordinal=k) for k in range(500)],
        loaded_srs=[pb.SRSStatus(circuit_id=c) for c in ("porep-32g", "<script>", "x" * 300)],
        total_proofs_completed=10**15,
    )
    m.observe_status(5.0, lie, CFG)
    assert (m.gpus, m.circuits, m.answered_at) == (16, frozenset({"porep-32g"}), 5.0)
    w = m.witness(5.0)
    assert (w.done, w.proofs_per_busy_hour, w.circuits) == (0, None, ["porep-32g"])


# -- dispatch -------------------------------------------------------------


def _job(table: JobTable, n: int) -> Any:
    job = table.admit(sample_porep(n), 1e9, 0.0).job
    assert job is not None
    return job


def test_least_loaded_first_ties_to_the_faster_then_the_lower_id() -> None:
    job = _job(JobTable(CFG), 1)
    busy = _member(1, in_flight=1)
    slow, fast = _member(2, rate_s=100), _member(3, rate_s=50)
    assert choose_member(job, [busy, slow, fast], 10.0, CFG) is fast
    two_gpus = _member(4, gpus=2, in_flight=1)  # 0.5 per GPU
    assert choose_member(job, [busy, two_gpus], 10.0, CFG) is two_gpus
    assert choose_member(job, [_member(6), _member(5)], 10.0, CFG).instance_id == 5  # type: ignore[union-attr]


def test_no_machine_without_room_circuit_serving_or_one_it_was_refused_on() -> None:
    table = JobTable(CFG)
    job = _job(table, 1)
    full = _member(1, in_flight=2)  # 2 per GPU
    snap_only = _member(2)
    snap_only.circuits = frozenset({"snap-32g"})
    drained = _member(3)
    drained.spec = member_spec(3, want="drain")
    drained.refresh(10.0, CFG)
    unreachable = _member(4)
    unreachable.observe_silence()
    refused = _member(5)
    job.refused_by.add(5)
    assert choose_member(job, [full, snap_only, drained, unreachable, refused], 10.0, CFG) is None


def test_a_retry_prefers_a_machine_not_tried_but_takes_a_tried_one_over_none() -> None:
    job = _job(JobTable(CFG), 1)
    a, b = _member(1), _member(2, in_flight=1)
    job.tried.add(1)
    assert choose_member(job, [a, b], 10.0, CFG) is b
    assert choose_member(job, [a], 10.0, CFG) is a


def test_attempt_budget_is_expected_times_factor_cut_at_the_deadline() -> None:
    cfg = replace(CFG, expected_seconds={"porep-c2": 100.0}, attempt_factor=3.0, min_attempt_s=30)
    job = _job(JobTable(cfg), 1)
    job.deadline = 1000.0
    assert attempt_budget(job, 0.0, cfg) == (300.0, False)
    assert attempt_budget(job, 800.0, cfg) == (200.0, True)
    assert attempt_budget(job, 1000.0, cfg) is None


# -- jobs -----------------------------------------------------------------


def test_idempotency_join_reject_and_redeliver() -> None:
    table = JobTable(CFG)
    first = table.admit(sample_porep(1), 10.0, 0.0)
    again = table.admit(sample_porep(1), 20.0, 0.0)
    assert again.joined and again.job is first.job and first.job is not None
    assert first.job.deadline == 20.0
    result = pb.AwaitProofResponse(status=COMPLETED, proof=b"p" * 1920)
    table.finish(first.job, result, member_id=7, now=1.0)
    # Answered but no caller got it: the same answer again, no rejection.
    lost = table.admit(sample_porep(1), 10.0, 2.0)
    assert lost.result is not None and lost.result.proof == result.proof
    assert lost.rejected_member is None
    table.delivered("porep-1000-1")
    # Delivered, then sent again: Curio refused it.
    back = table.admit(sample_porep(1), 10.0, 3.0)
    assert back.rejected_member == 7 and back.job is not None
    assert back.job.refused_by == {7} and table.rejections == 1


def test_a_failed_answer_sent_again_is_a_new_job_not_a_rejection() -> None:
    table = JobTable(CFG)
    job = table.admit(sample_porep(1), 10.0, 0.0).job
    assert job is not None
    table.finish(job, pb.AwaitProofResponse(status=pb.AwaitProofResponse.TIMEOUT), None, 1.0)
    table.delivered(job.job_id)
    again = table.admit(sample_porep(1), 10.0, 2.0)
    assert again.job is not None and again.rejected_member is None and table.rejections == 0


def test_held_bytes_cap_refuses_and_frees() -> None:
    req = sample_porep(1, size=1000)
    table = JobTable(replace(CFG, max_held_bytes=2 * req.ByteSize()))
    jobs = [table.admit(sample_porep(n, size=1000), 10.0, 0.0).job for n in (1, 2)]
    with pytest.raises(HeldBytesFull):
        table.admit(sample_porep(3, size=1000), 10.0, 0.0)
    assert table.full and table.refused == 1
    assert table.admit(sample_porep(1, size=1000), 10.0, 0.0).joined  # joining holds nothing more
    assert jobs[0] is not None
    table.finish(jobs[0], pb.AwaitProofResponse(status=COMPLETED, proof=b"p"), 1, 1.0)
    assert not table.full and table.admit(sample_porep(3, size=1000), 10.0, 0.0).job is not None


def test_a_refused_resubmission_keeps_the_answer_for_the_next_try() -> None:
    req = sample_porep(1, size=1000)
    table = JobTable(replace(CFG, max_held_bytes=req.ByteSize()))
    job = table.admit(req, 10.0, 0.0).job
    assert job is not None
    table.finish(job, pb.AwaitProofResponse(status=COMPLETED, proof=b"p"), 4, 1.0)
    table.delivered(job.job_id)
    table.admit(sample_porep(2, size=1000), 10.0, 1.0)
    with pytest.raises(HeldBytesFull):
        table.admit(req, 10.0, 2.0)
    assert table.rejections == 0 and "porep-1000-1" in table.answers


def test_an_unknown_kind_is_refused_as_cuzk_refuses_it() -> None:
    with pytest.raises(InvalidRequest, match="invalid proof_kind: 9"):
        req = pb.SubmitProofRequest(request_id="x")
        req.MergeFromString(b"\x10\x09")  # proof_kind = 9 on the wire: no such kind
        JobTable(CFG).admit(req, 1.0, 0.0)


# -- members --------------------------------------------------------------


def test_member_set_adds_readdresses_and_removes() -> None:
    made: list[str] = []

    def connect(spec: MemberSpec) -> NoClient:
        made.append(spec.address)
        return NoClient()

    ms = MemberSet()
    ch = ms.apply([member_spec(1), member_spec(2)], 0.0, connect, CFG)
    assert [m.instance_id for m in ch.added] == [1, 2]
    ms.get(1).book.on_send(0.0)  # type: ignore[union-attr]
    moved = member_spec(1).model_copy(update={"address": "10.9.9.9:1"})
    ch = ms.apply([moved], 1.0, connect, CFG)
    assert [m.instance_id for m in ch.removed] == [2]
    assert [m.instance_id for m in ch.readdressed] == [1]
    assert len(ch.stale) == 2 and made[-1] == "10.9.9.9:1"
    assert ms.get(1).book.sent == 1  # type: ignore[union-attr]


def test_members_file_is_read_when_it_changes_and_a_bad_one_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "members.json"
    source = MembersFile(path)
    assert source.read_if_changed() is None  # no file yet
    path.write_text(json.dumps([member_spec(1).model_dump(mode="json")]))
    assert [s.instance_id for s in source.read_if_changed() or []] == [1]
    assert source.read_if_changed() is None  # unchanged
    path.write_text('[{"instance_id": 0}]')
    assert source.read_if_changed() is None
    path.write_text(
        json.dumps([member_spec(1).model_dump(mode="json"), member_spec(2).model_dump(mode="json")])
    )
    assert [s.instance_id for s in source.read_if_changed() or []] == [1, 2]


def test_the_router_loads_no_temporal_simulator_or_agent_code() -> None:
    """A separate process on the operator's host: it needs gRPC and the models only."""
    code = (
        "import sys, json, router.server, router.__main__; "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True
    )
    loaded = set(json.loads(out.stdout))
    assert not loaded & {"temporalio", "simulator", "activities", "workflows", "starter", "tests"}


async def test_a_simulated_fleets_witness_is_reported_on_the_simulators_clock() -> None:
    """Simulated machines prove `speed` times faster than the router's clock:
    the witness reports busy time and times on the simulated clock, so a rate
    reads per simulated hour, as the capacity model counts it (a machine at
    speed 100 read 100 times its model's rate and was made suspect)."""
    from datetime import UTC, datetime

    from fleet_agent.cuzk.witness import MachineWitness
    from router.engine import Router

    t = [1_000.0]
    router = Router(CFG, lambda spec: NoClient(), clock=lambda: t[0], report_speed=100.0)
    at = datetime.fromtimestamp(1_010.0, UTC)
    seen = MachineWitness(
        instance_id=1,
        phase="serving",
        since=at,
        done=6,
        busy_seconds=36.0,
        proofs_per_busy_hour=600.0,
        last_done_at=at,
    )
    t[0] = 1_020.0
    shown = router._reported(seen)
    assert shown.busy_seconds == 3_600.0 and shown.proofs_per_busy_hour == 6.0
    assert shown.last_done_at == datetime.fromtimestamp(1_000.0 + 10 * 100, UTC)
    assert router.queue().at == datetime.fromtimestamp(1_000.0 + 20 * 100, UTC)
    plain = Router(CFG, lambda spec: NoClient(), clock=lambda: t[0])
    assert plain._reported(seen) == seen


def test_at_a_speed_the_deadlines_are_the_members_time_and_the_polls_real() -> None:
    """A stand-in fleet at speed 6: an attempt's budget and the silence that
    makes a member dead are the same span of its time as at speed 1 (60 s
    of silence is 10 s of real time, but never under 15 s: a loaded
    machine's slow answers are not a death); the polls stay real."""
    six = at_speed(CFG, 6)
    assert six.expected("porep-c2") == CFG.expected("porep-c2") / 6
    assert six.min_attempt_s == CFG.min_attempt_s / 6
    assert six.dead_after_s == MIN_DEAD_AFTER_S
    assert at_speed(CFG, 2).dead_after_s == CFG.dead_after_s / 2
    assert at_speed(replace(CFG, dead_after_s=5.0), 6).dead_after_s == 5.0
    assert (six.poll_s, six.status_timeout_s) == (CFG.poll_s, CFG.status_timeout_s)
    assert at_speed(CFG, 1) is CFG
    with pytest.raises(ValueError):
        at_speed(CFG, float("nan"))
