"""What the router saw of one machine, by its own clock, and the health rules.

Pure bookkeeping (no I/O, no asyncio): `WitnessBook` counts what the router
sent a machine and what came back, the time it had work (busy seconds) and
the measured rate; `failing_reason` and `phase_of` turn those facts into
the machine's phase (fleet_agent/cuzk/witness.py `WitnessPhase`). Nothing
here reads what a host says about itself: only when it answered, and
whether it lists the circuit loaded.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from fleet_agent.cuzk.witness import WitnessPhase

__all__ = ["MAX_RATE", "WitnessBook", "failing_reason", "phase_of"]

#: Proofs per busy hour we ever report: a clock step of a microsecond must
#: not make a rate the workflow's `Wire` refuses (its bound is 1e15).
MAX_RATE = 1e9


@dataclass
class _Sample:
    at: float
    busy: float
    done: int


class WitnessBook:
    """Counts and busy time of one machine; times are the router's clock (seconds)."""

    def __init__(self, rate_window_s: float) -> None:
        self.window = rate_window_s
        self.sent = 0
        self.done = 0
        self.failed = 0
        self.rejected = 0
        self.lost = 0
        self.in_flight = 0
        #: Failures and timeouts since the last proof that came back.
        self.streak = 0
        self.last_sent_at: float | None = None
        self.last_done_at: float | None = None
        self._busy = 0.0
        self._busy_since: float | None = None
        self._samples: deque[_Sample] = deque()

    def busy_seconds(self, now: float) -> float:
        """Seconds with at least one job in flight, up to `now`."""
        extra = max(0.0, now - self._busy_since) if self._busy_since is not None else 0.0
        return self._busy + extra

    def on_send(self, now: float) -> None:
        """A job was sent to the machine."""
        if not self._samples:
            self._samples.append(_Sample(now, self.busy_seconds(now), self.done))
        self.sent += 1
        self.last_sent_at = now
        if self.in_flight == 0:
            self._busy_since = now
        self.in_flight += 1

    def _end(self, now: float) -> None:
        self.in_flight = max(0, self.in_flight - 1)
        if self.in_flight == 0 and self._busy_since is not None:
            self._busy += max(0.0, now - self._busy_since)
            self._busy_since = None

    def on_done(self, now: float) -> None:
        """The machine answered a job COMPLETED with a proof."""
        self._end(now)
        self.done += 1
        self.streak = 0
        self.last_done_at = now
        self._samples.append(_Sample(now, self.busy_seconds(now), self.done))
        # Keep one sample older than the window: the rate's baseline.
        while len(self._samples) > 2 and self._samples[1].at <= now - self.window:
            self._samples.popleft()

    def on_failed(self, now: float) -> None:
        """The machine answered a job FAILED (or CANCELLED, TIMEOUT, no proof)."""
        self._end(now)
        self.failed += 1
        self.streak += 1

    def on_lost(self, now: float, *, counts_against: bool) -> None:
        """A job came back unanswered: timed out, connection lost, or taken back.

        `counts_against`: the machine's fault (timeout, dropped call), which
        adds to its failure streak; not so when the router took the job back
        (drain bound, removal, the caller's deadline)."""
        self._end(now)
        self.lost += 1
        if counts_against:
            self.streak += 1

    def on_rejected(self) -> None:
        """Curio rejected an answer this machine gave (sent the request again)."""
        self.rejected += 1

    def rate(self, now: float) -> float | None:
        """Proofs per busy hour over the window; None until one proof came back."""
        if not self._samples:
            return None
        base = self._samples[0]
        proofs = self.done - base.done
        busy = self.busy_seconds(now) - base.busy
        if proofs <= 0 or busy <= 0:
            return None
        return min(MAX_RATE, proofs * 3600.0 / busy)


def failing_reason(book: WitnessBook, *, fail_streak: int, reject_limit: int) -> str | None:
    """Why the machine should get no new work, or None if it may."""
    if book.rejected >= reject_limit:
        return f"{book.rejected} answers rejected by Curio"
    if book.streak >= fail_streak:
        return f"{book.streak} jobs failed or timed out in a row"
    return None


def phase_of(
    *,
    now: float,
    failing: str | None,
    added_at: float,
    answered_at: float | None,
    dead_after_s: float,
    draining: bool,
    joined: bool,
    in_flight: int,
) -> tuple[WitnessPhase, str]:
    """The machine's phase and why, from facts the router measured."""
    if failing is not None:
        return "failing", failing
    # Dead is silence after an answer. A machine that never answered is still
    # joining however long it takes: its image fetches ~47 GiB of parameters
    # before cuzk and its front start (prover_image/params.py), and the agent
    # judges how long joining may take from the host's download speed
    # (fleet_agent/fleet/witness_reads.py, `joining_grace_s`).
    if answered_at is not None and now - answered_at >= dead_after_s:
        return "dead", f"no answer to GetStatus for {now - answered_at:.0f} s"
    if draining:
        if in_flight > 0:
            return "draining", f"{in_flight} jobs in flight"
        return "drained", ""
    if not joined:
        if answered_at is None:
            return "joining", f"its cuzk has not answered in {now - added_at:.0f} s"
        return "joining", "no circuit loaded yet"
    return "serving", ""
