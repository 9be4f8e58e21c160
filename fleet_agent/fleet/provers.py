"""Proofs measured, not assumed: what each machine's prover status says over time.

The monitor reads every running machine's prover status at each poll
(``GET /status`` on the mapped status port: docs/operations/prover-image.md, "The prover
image") and folds the read into a `ProverTrack`, one per instance, kept in
the store between polls. A track is O(1): two anchors for the rate, the last
read, and when progress was last seen.

* **Measured rate.** Proofs between two anchors over the time between their
  last finished proofs (``last_proof_at``): counted between completion
  instants, the figure has no rounding error of a whole proof. The first
  anchor is the first read after this process finished a proof, never the
  read's own time: a prover that began proving between two polls would
  otherwise be credited a whole interval it did not spend (a machine at
  25 proofs/h read 60 s into its first proof measured 11 % fast until the
  anchor moved, half an hour later, and the fleet released a machine on
  it, then rented one back). The older
  anchor moves up every half window, so the rate covers the last half to
  whole `WINDOW_S`. A process restart (a new ``started_at``) or a phase other
  than ``proving`` drops the anchors: its counter began again at 0.
* **A rate is believed within bounds.** The host writes both the count and
  the clock, so two anchors less than `MIN_RATE_GAP_S` apart give no rate
  (a busy-seconds step of 5e-324 made ``inf``, which no payload carries, and
  a step of a microsecond 3.6e18 proofs/h), and a rate over
  `SUSPECT_FACTOR` times the capacity model's estimate for the machine makes
  it **suspect** (`ProverTrack.suspect`, kept for the machine's life): its
  figure is not believed, it is no capacity, and it is replaced like a
  machine that is not proving (docs/decisions/hostile-hosts.md, "A measured rate is
  believed within twice the model").
* **Idle is not stalled.** Curio's provers are demand-limited: the node
  hands out work, and cuzk holds back when its queue is full (Curio's
  ``lib/cuzk/client.go``, ``HasCapacity``). A prover that says it has no
  work (``proofs_in_flight`` and ``work_queued`` both 0) is healthy capacity
  with nothing to do: that counts as progress. Where the status gives
  ``busy_seconds`` (seconds this process had work in flight), the rate and
  the time without progress are counted on that clock, not the wall's: a
  prover busy a third of the time proves at its full rate while it has work,
  and takes three times as long between proofs on the wall.
* **Progress.** A proof finished, a parameter byte fetched, a new prover
  process, or no work to do. A running machine with no progress for the configured time, or
  whose prover reports ``error``, is not proving (`not_proving_reason`); a
  measured prover sooner, once it misses `STALL_INTERVALS` of its proofs,
  and so does one that has finished a proof but is not measured yet, at
  the capacity model's estimate of its rate (a machine that hangs between
  its first proof and its fifth waited the whole configured time).
  Time nobody watched (a worker down for an hour) is not counted against a
  machine: a gap between reads moves `progress_at` on by the gap.

Clocks: rates use the machine's own ``time`` and ``last_proof_at`` (never
the reader's); progress durations use the reader's clock, against which
"not proving for 20 minutes" is judged.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from fleet_agent.untrusted import fence

__all__ = [
    "MIN_PROOFS_MEASURED",
    "MIN_RATE_GAP_S",
    "MIN_STALL_S",
    "STALL_INTERVALS",
    "SUSPECT_FACTOR",
    "WINDOW_S",
    "ProverRead",
    "ProverTrack",
    "advance",
    "not_proving_reason",
    "suspect_reason",
]

#: The measured rate covers between half of this and all of it.
WINDOW_S = 3600.0
#: Proofs between the anchors before a rate counts as measured.
MIN_PROOFS_MEASURED = 4
#: A measured prover that misses this many of its proof intervals has stalled
#: (but never judged in less than `MIN_STALL_S`).
STALL_INTERVALS = 5
MIN_STALL_S = 300.0
#: The least time between a rate's two anchors, on the clock the rate is
#: counted on (busy seconds, else the machine's wall clock). A 32 GiB proof
#: takes 1-5 minutes of a GPU (capacity.py), so no honest rate needs less,
#: and n proofs finishing together (one per GPU) are never a rate alone.
MIN_RATE_GAP_S = 60.0
#: A measured rate over this multiple of the capacity model's estimate for
#: the machine is not believed: the machine is suspect. The model is right
#: within a few per cent on the machines it knows (the simulator draws rates
#: 0.93-1.04 of it), and an honest machine whose n proofs finish together
#: reads at most (2n - 1) / n of its rate on its first figure (counted from
#: the first of a batch to the end of the next): under twice. A liar gains
#: at most this multiple of one machine.
SUSPECT_FACTOR = 2.0


class ProverRead(BaseModel):
    """One read of a prover's status: its answer, or why there was none."""

    model_config = ConfigDict(frozen=True)

    ok: bool
    error: str = ""  # why it could not be read (closed, timeout, not mapped, bad body)
    phase: str = ""  # fetching_params, starting, proving, error
    detail: str = ""
    proofs_completed: int = 0
    last_proof_at: float | None = None
    started_at: float | None = None
    bytes_fetched: int = 0
    time: float | None = None  # the machine's clock
    #: Work the prover holds (None: its status does not say).
    proofs_in_flight: int | None = None
    work_queued: int | None = None
    #: Seconds this process had work in flight, now and at its last proof.
    busy_seconds: float | None = None
    last_proof_busy_seconds: float | None = None
    #: It takes no new work (a drain was asked: fleet_agent/fleet/drain.py).
    draining: bool = False

    @property
    def idle(self) -> bool:
        """Proving with no work in flight or queued: capacity waiting for work."""
        return (
            self.phase == "proving"
            and self.proofs_in_flight == 0
            and not self.work_queued
            and self.work_queued is not None
        )

    @property
    def on_busy_clock(self) -> bool:
        """Whether rates and stalls are counted on `busy_seconds`."""
        return self.busy_seconds is not None


class _Anchor(BaseModel):
    model_config = ConfigDict(frozen=True)

    count: int
    at: float  # last_proof_at (or the machine's time when no proof yet)


class ProverTrack(BaseModel):
    """What the monitor knows of one instance's prover, between polls."""

    instance_id: int
    first_seen_at: float  # reader's clock: first read while running
    last_read_at: float  # reader's clock
    progress_at: float  # reader's clock: last progress seen
    phase: str = ""  # the last read's phase, or "unreachable"
    detail: str = ""
    started_at: float | None = None
    proofs_completed: int = 0
    bytes_fetched: int = 0
    #: The last read's work: idle (proving, nothing in flight or queued), and
    #: its busy clock now and when progress was last seen (None: no busy clock).
    idle: bool = False
    in_flight: int | None = None
    queued: int | None = None
    busy_seconds: float | None = None
    busy_at_progress: float | None = None
    #: Reader's clock when the instance was first seen offline or unknown in
    #: this spell (None: it is not); a blip shorter than the grace is waited out.
    down_since: float | None = None
    #: Reader's clock when its status first said it drains (kept once seen:
    #: the machine is on its way out, fleet_agent/fleet/drain.py).
    draining_since: float | None = None
    base: _Anchor | None = None
    mid: _Anchor | None = None
    measured_proofs_per_hour: float | None = None
    #: Why its measured rate is not believed (over `SUSPECT_FACTOR` times the
    #: capacity model's estimate), "" while it is. Kept for the machine's life,
    #: a restart included: the host wrote the figure.
    suspect: str = ""
    #: Proofs of this machine Curio rejected, as the router witnessed them
    #: (router mode: fleet_agent/fleet/witness_reads.py); any makes it suspect.
    rejected: int = 0
    #: Set once the failure of this machine was recorded (FailedHosts), so it is
    #: recorded once per failure, not at every poll.
    failure_recorded: str = ""


def _anchor(read: ProverRead) -> _Anchor | None:
    """A completion instant of this process to count from: None before its
    first proof. A prover that does not give ``last_proof_at`` (the status
    contract asks for it) is anchored at the read's time, late by up to a
    poll."""
    if read.proofs_completed < 1:
        return None
    if read.on_busy_clock:
        # Counted on the busy clock: at the last proof if the status says,
        # else now (late by up to a poll's busy time).
        at = read.last_proof_busy_seconds
        return _Anchor(
            count=read.proofs_completed, at=at if at is not None else read.busy_seconds or 0.0
        )
    if read.last_proof_at is None:
        return _Anchor(count=read.proofs_completed, at=read.time or 0.0)
    return _Anchor(count=read.proofs_completed, at=read.last_proof_at)


def _rate(base: _Anchor | None, now: _Anchor) -> float | None:
    """Proofs/h between two anchors: None with too few proofs between them or
    less than `MIN_RATE_GAP_S` (the comparison is False for NaN too). Finite:
    the gap is bounded below and a count above (prover_status.py, 10^9)."""
    if base is None or now.count - base.count < MIN_PROOFS_MEASURED:
        return None
    gap = now.at - base.at
    if not gap >= MIN_RATE_GAP_S:
        return None
    return (now.count - base.count) * 3600.0 / gap


def suspect_reason(rate: float, expected: float) -> str | None:
    """Why a measured `rate` is not believed of a machine the capacity model
    puts at `expected` proofs/h, or None when it is. A machine the model
    says cannot prove (0) is believed in nothing."""
    if rate <= SUSPECT_FACTOR * expected:
        return None
    return (
        f"its prover claims {rate:.3g} proofs/h, over {SUSPECT_FACTOR:g}x the capacity "
        f"model's {expected:.1f} for this machine"
    )


def advance(
    track: ProverTrack | None,
    read: ProverRead,
    iid: int,
    now: float,
    limit_minutes: float,
    expected: float | None = None,
) -> ProverTrack:
    """The track after `read`, taken at the reader's time `now`; `limit_minutes`
    is the agent's `not_proving_minutes`, `expected` the capacity model's
    proofs/h for the machine: a rate over `SUSPECT_FACTOR` times it makes the
    track suspect (None: not checked, for callers without a machine)."""
    if track is None:
        track = ProverTrack(instance_id=iid, first_seen_at=now, last_read_at=now, progress_at=now)
    gap = now - track.last_read_at
    progress_at = track.progress_at
    if gap > limit_minutes * 60 / 2:
        # Nobody watched for that long (see the module doc): not held against it.
        progress_at += gap
    update: dict[str, object] = {"last_read_at": now, "progress_at": progress_at}
    if not read.ok:
        update.update(phase="unreachable", detail=read.error)
        return track.model_copy(update=update)
    restarted = read.started_at != track.started_at
    progressed = (
        restarted
        or read.idle
        or read.proofs_completed > track.proofs_completed
        or read.bytes_fetched > track.bytes_fetched
        or (read.phase != track.phase and read.phase in ("starting", "proving"))
    )
    busy_at_progress = track.busy_at_progress
    if progressed or busy_at_progress is None or read.busy_seconds is None:
        busy_at_progress = read.busy_seconds
    update.update(
        phase=read.phase,
        detail=read.detail,
        started_at=read.started_at,
        proofs_completed=read.proofs_completed,
        bytes_fetched=read.bytes_fetched,
        progress_at=now if progressed else progress_at,
        idle=read.idle,
        in_flight=read.proofs_in_flight,
        queued=read.work_queued,
        draining_since=track.draining_since or (now if read.draining else None),
        busy_seconds=read.busy_seconds,
        busy_at_progress=busy_at_progress,
    )
    if restarted and not track.suspect:
        # A new process may fail anew; a suspect host's failure is recorded once.
        update["failure_recorded"] = ""
    if read.phase != "proving" or restarted or track.base is None:
        anchor = _anchor(read) if read.phase == "proving" else None
        update.update(base=anchor, mid=anchor, measured_proofs_per_hour=None)
        return track.model_copy(update=update)
    here = _anchor(read)
    if here is None:  # a count back at 0 with the same started_at: a broken status
        return track.model_copy(update=update)
    base, mid = track.base, track.mid
    clock = read.busy_seconds if read.on_busy_clock else read.time
    if mid is not None and (clock or here.at) - mid.at >= WINDOW_S / 2:
        base, mid = mid, here
    rate = _rate(base, here) or _rate(track.base, here)
    if rate is None:
        rate = track.measured_proofs_per_hour
    elif expected is not None and not track.suspect:
        update["suspect"] = suspect_reason(rate, expected) or ""
    if track.suspect or update.get("suspect"):
        rate = None  # not believed, now or later
    update.update(base=base, mid=mid, measured_proofs_per_hour=rate)
    return track.model_copy(update=update)


def _limit_s(track: ProverTrack, limit_minutes: float, expected: float | None) -> float:
    """How long without progress is too long: `limit_minutes`, or sooner for a
    proving prover whose rate is known, which should finish a proof every
    3600/rate seconds (`STALL_INTERVALS` of them, never under `MIN_STALL_S`).
    The rate is the measured one, or `expected` (the capacity model's
    estimate) once the process has finished a proof: the first proof after a
    start may take longer than the rest, and five intervals leave a machine
    proving at a fifth of its estimate its time."""
    limit = limit_minutes * 60
    rate = track.measured_proofs_per_hour
    if rate is None and track.proofs_completed >= 1:
        rate = expected
    if track.phase != "proving" or not rate:
        return limit
    return min(limit, max(MIN_STALL_S, STALL_INTERVALS * 3600.0 / rate))


def not_proving_reason(
    track: ProverTrack, now: float, limit_minutes: float, expected: float | None = None
) -> str | None:
    """Why this running machine counts as not proving, or None while it is fine.
    `expected`: the capacity model's proofs/h for the machine (`_limit_s`)."""
    # The phase and detail are the host's words: fenced (fleet_agent/untrusted.py),
    # since this reason reaches the model as a machine's note and a state change.
    if track.phase == "error":
        return f"prover error: {fence(track.detail) if track.detail else 'no detail'}"
    if track.idle:
        return None  # no work to do: capacity waiting, not a stall
    idle = now - track.progress_at
    if (
        track.phase == "proving"
        and track.busy_seconds is not None
        and track.busy_at_progress is not None
    ):
        # Only time with work in flight counts against a proving prover.
        idle = min(idle, track.busy_seconds - track.busy_at_progress)
    if idle < _limit_s(track, limit_minutes, expected):
        return None
    what = {
        "unreachable": f"prover status unreachable ({fence(track.detail)})",
        "proving": "prover has work in flight but finished no proof",
        "fetching_params": "parameter download stalled",
        "starting": "prover stuck starting",
    }.get(track.phase, f"prover in phase {fence(track.phase, 40)}")
    return f"{what} for {idle / 60:.0f} min"
