"""The router's witness as the monitor's reads (issue 52, router mode).

In router mode no host is asked how it does: the cuzk router saw every
proof it sent a machine and what came back, on its own clock
(`MachineWitness`, fleet_agent/cuzk/witness.py). Each witness becomes the
`ProverRead` the status reads made (fleet_agent/fleet/provers.py), so the
rate, the stall and the replacement rules stay one set of rules:

* ``proofs_completed`` = proofs the router saw done, ``last_proof_at`` =
  when the last came back, ``busy_seconds`` = time the machine had work from
  the router; the rate is counted on that busy clock. The busy clock at the
  last proof is known exactly when no job was sent after it (then the
  machine's busy time since is the in-flight time after the last send, or
  none), and is an estimate otherwise (`_busy_at_last_done`).
* ``serving``, ``draining`` and ``drained`` prove; one with nothing in
  flight and nothing waiting at the router is idle: healthy, nothing to do.
  ``joining`` starts (its cuzk does not answer yet or has not loaded the
  circuit; counted as progress for `joining_grace_s`: the parameters come
  down first). ``failing`` and ``dead`` are ``error`` with the router's
  reason: not proving, replaced, its host remembered.
* A machine `REJECTIONS_TO_REPLACE` of whose proofs Curio rejected (the same request sent again
  after our answer: docs/decisions/router-and-market.md, "A request id is the idempotency
  key, and its return is a rejection") is no capacity and is
  replaced, its host remembered under ``rejected`` (`rejected_reason`).
* Counters that go back (a router restart, a member removed and added)
  start a new process in the track's terms: the anchors drop.
* A witness older than `WITNESS_STALE_S` (the router has not written) is
  unknown, not dead: the track keeps what it knew, the unwatched time is
  not held against the machine, and no failure is recorded
  (activities/fleet_router.py).

Pure: no I/O, no clock.
"""

from __future__ import annotations

from datetime import datetime

from fleet_agent.cuzk.witness import REJECTIONS_TO_REPLACE, MachineWitness, RouterQueue
from fleet_agent.fleet.load_time import est_load_minutes

from .provers import ProverRead, ProverTrack

__all__ = [
    "JOINING_MAX_S",
    "WITNESS_STALE_S",
    "joining_grace_s",
    "rejected_reason",
    "router_pending",
    "unwatched",
    "witness_read",
]

#: The router writes every 5 s (router/store_sync.py): a witness older than
#: this says nothing of the machines, only that the router is not writing.
WITNESS_STALE_S = 30.0
#: The longest a machine may join (download and load its parameters) before
#: the usual not-proving time starts, when its link's speed is not known.
JOINING_MAX_S = 2 * 3600.0

_PROVING = frozenset({"serving", "draining", "drained"})
_MAX_DETAIL = 200


def router_pending(queue: RouterQueue | None) -> int:
    """Jobs waiting at the router for any machine."""
    return sum(queue.pending.values()) if queue is not None else 0


def _epoch(at: datetime | None) -> float | None:
    return at.timestamp() if at is not None else None


def _busy_at_last_done(w: MachineWitness, at: float) -> float | None:
    """The busy clock when the last proof came back: exact when nothing was
    sent since (busy since = the time the jobs still in flight ran, all of
    it after that proof, or none), else at most `at` - last send before
    now: the machine was busy at least since the last send."""
    done = _epoch(w.last_done_at)
    if done is None:
        return None
    sent = _epoch(w.last_sent_at)
    if w.in_flight == 0:
        # Nothing in flight: the machine has had no work since its last
        # proof (unless a job sent since failed or was taken back).
        return w.busy_seconds
    # Busy at least since the later of the last proof and the last send.
    start = sent if sent is not None and sent > done else done
    return max(0.0, w.busy_seconds - max(0.0, at - start))


def witness_read(
    w: MachineWitness,
    queue: RouterQueue | None,
    at: float,
    track: ProverTrack | None,
) -> ProverRead:
    """The read a status would have given for what the router saw of one
    machine at `at` (the router's clock, epoch seconds); `track` is the
    monitor's last (a counter that went back starts a new process)."""
    restarted = track is not None and (
        w.done < track.proofs_completed or w.busy_seconds < (track.busy_seconds or 0.0)
    )
    started = at if restarted else (track.started_at if track is not None else None)
    counts = f"{w.done} done, {w.rejected} rejected, {w.failed} failed, {w.in_flight} in flight"
    why = f" ({w.reason})" if w.reason else ""
    if w.phase in _PROVING:
        phase = "proving"
    elif w.phase == "joining":
        phase = "starting"
    else:  # failing, dead
        phase = "error"
    serving = w.phase == "serving"
    return ProverRead(
        ok=True,
        phase=phase,
        detail=f"router: {w.phase}{why}; {counts}"[:_MAX_DETAIL],
        proofs_completed=w.done,
        last_proof_at=_epoch(w.last_done_at),
        started_at=started,
        time=at,
        proofs_in_flight=w.in_flight,
        # What waits at the router is this machine's to take only while it
        # serves: a draining one is idle once its own jobs are done.
        work_queued=router_pending(queue) if serving else 0,
        busy_seconds=w.busy_seconds,
        last_proof_busy_seconds=_busy_at_last_done(w, at),
        draining=w.phase in ("draining", "drained"),
    )


def joining_grace_s(inet_down_mbps: float | None) -> float:
    """How long a machine's joining counts as progress: twice its download
    of the parameters at its listed speed (fleet_agent/fleet/load_time.py),
    at most `JOINING_MAX_S`; after it, the agent's not-proving time runs."""
    minutes = est_load_minutes(inet_down_mbps)
    return JOINING_MAX_S if minutes is None else min(JOINING_MAX_S, 2 * minutes * 60)


def rejected_reason(w: MachineWitness) -> str | None:
    """Why a machine is not believed because Curio rejected its proofs, or None."""
    if w.rejected < REJECTIONS_TO_REPLACE:
        return None
    return (
        f"Curio rejected {w.rejected} of its proofs (sent again after the router answered "
        "them: its answers failed verification)"
    )


def unwatched(track: ProverTrack, now: float, written_ago: float | None) -> ProverTrack:
    """`track` at `now` while the router's witness is stale (last written
    `written_ago` seconds ago, None: never): what it knew is kept, the time
    nobody watched moves `progress_at` on, so it is not held against the
    machine."""
    gap = max(0.0, now - track.last_read_at)
    when = "has never written" if written_ago is None else f"last wrote {written_ago:.0f} s ago"
    return track.model_copy(
        update={
            "last_read_at": now,
            "progress_at": track.progress_at + gap,
            "busy_at_progress": track.busy_seconds,
            "detail": f"unknown: the router {when}"[:_MAX_DETAIL],
        }
    )
