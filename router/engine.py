"""The router: one ProvingEngine in front of the fleet's machines.

`Router` admits proofs (jobs.py), sends each to a member (dispatch.py) with
a per-attempt timeout inside the caller's deadline, takes it back and sends
it elsewhere when the machine fails, times out, drops the call, is drained
past its bound or leaves; it polls each member's GetStatus (answers? which
circuits? how many GPUs?) and asks it to load the circuits the router needs;
it keeps each machine's witness (members.py, witness.py). Everything runs on
one asyncio loop; the witness uses the injected `clock` (Unix seconds),
deadlines and timeouts the loop's own time.

Memory: a job holds its input once (`Job.payload`, router/inputs.py) and
every attempt sends those bytes as they are (`ProveRaw`); after inputs
arrive, the allocator's free memory is returned at the next tick
(router/memory.py), so the RSS follows the held bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from datetime import datetime
from typing import Any, Literal

import grpc
import grpc.aio

from fleet_agent.cuzk.service import pb
from fleet_agent.cuzk.witness import MachineWitness, MemberSpec, RouterQueue

from .config import RouterConfig
from .dispatch import attempt_budget, choose_member
from .inputs import ProofInput
from .jobs import Admission, Attempt, Job, JobTable, TakeBack
from .members import Connect, Member, MemberClient, MemberSet, SupportsClose, utc
from .memory import release_free_memory

__all__ = ["Router"]

log = logging.getLogger(__name__)
_Status = pb.AwaitProofResponse.Status
_Outcome = Literal["done", "failed", "timeout", "dropped", "taken"]


class Router:
    """Routes proofs to members; see the module docstring."""

    def __init__(
        self,
        config: RouterConfig,
        connect: Connect,
        clock: Callable[[], float] = time.time,
        report_speed: float = 1.0,
    ) -> None:
        self.config = config
        self.clock = clock
        #: Simulated seconds per second of `clock` for what the router reports
        #: (`witness`, `queue`): members that are simulated machines prove on
        #: the simulator's clock, and the agent judges their rates against the
        #: capacity model's simulated hours (and names each member's expected
        #: rate in them: attempt budgets divide by it). 1 for real machines.
        self.report_speed = report_speed
        self._connect = connect
        self.members = MemberSet()
        self.jobs = JobTable(config)
        self.started_at = clock()
        #: Circuits asked for by PreloadSRS on the router, beyond the config's.
        self.extra_circuits: set[str] = set()
        self.attempts = 0
        self.attempt_outcomes: dict[str, int] = {}
        self._wake = asyncio.Event()
        self._pollers: dict[int, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._loops: list[asyncio.Task[None]] = []
        self._closing = False
        #: An input arrived since the last trim: gRPC freed its receive buffers.
        self._trim_due = False
        self.trims = 0

    # -- lifecycle --------------------------------------------------------

    async def start(self) -> None:
        """Start dispatching and the periodic checks (drain bounds, phases)."""
        self._loops = [asyncio.create_task(self._pump()), asyncio.create_task(self._tick())]

    async def close(self) -> None:
        """Stop everything: jobs still live fail, member channels close."""
        self._closing = True
        for job in list(self.jobs.live.values()):
            self._take_back(job, "closing")
            self._fail(job, _Status.CANCELLED, "router shutting down")
        tasks = [*self._loops, *self._pollers.values(), *self._tasks]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for m in self.members:
            await _close(m.client)

    # -- membership -------------------------------------------------------

    def set_members(self, specs: list[MemberSpec]) -> None:
        """Make `specs` the members: new ones are polled, gone ones' jobs go elsewhere."""
        changes = self.members.apply(specs, self.clock(), self._connect, self.config)
        for m in changes.removed:
            for job in self._jobs_on(m):
                self._take_back(job, "removed")
            poller = self._pollers.pop(m.instance_id, None)
            if poller is not None:
                poller.cancel()
        for m in changes.readdressed:
            for job in self._jobs_on(m):
                self._take_back(job, "readdressed")
        for m in changes.added:
            self._pollers[m.instance_id] = asyncio.create_task(self._poll_loop(m))
        for client in changes.stale:
            self._spawn(_close(client))
        self._wake.set()

    def witness(self) -> list[MachineWitness]:
        """Each member's witness row, by the router's clock (at `report_speed`)."""
        now = self.clock()
        out = []
        for m in self.members:
            m.refresh(now, self.config)
            out.append(self._reported(m.witness(now)))
        return out

    def _report_t(self, t: float) -> float:
        """The router clock's `t` on the reporting clock: the same at its start,
        `report_speed` times as fast since."""
        return self.started_at + (t - self.started_at) * self.report_speed

    def _reported(self, w: MachineWitness) -> MachineWitness:
        s = self.report_speed
        if s == 1.0:
            return w

        def moved(at: datetime | None) -> datetime | None:
            return None if at is None else utc(self._report_t(at.timestamp()))

        rate = w.proofs_per_busy_hour
        return w.model_copy(
            update={
                "since": utc(self._report_t(w.since.timestamp())),
                "last_sent_at": moved(w.last_sent_at),
                "last_done_at": moved(w.last_done_at),
                "busy_seconds": w.busy_seconds * s,
                "proofs_per_busy_hour": None if rate is None else rate / s,
            }
        )

    def queue(self) -> RouterQueue:
        """What waits at the router, for the agent's demand reading."""
        pending: dict[str, int] = {}
        seconds = 0.0
        for job in self.jobs.pending():
            pending[job.kind] = pending.get(job.kind, 0) + 1
            seconds += self.config.expected(job.kind)
        return RouterQueue(
            at=utc(self._report_t(self.clock())),
            pending=pending,
            in_flight=len(self.jobs.running()),
            pending_proving_seconds=seconds * self.report_speed,
            held_bytes=self.jobs.held_bytes,
            completed=self.jobs.completed,
            failed=self.jobs.failed,
        )

    def wanted_circuits(self) -> set[str]:
        """Circuits members are asked to load: the config's, PreloadSRS's, and
        those of waiting jobs that no serving member has."""
        loaded = {c for m in self.members if m.phase == "serving" for c in m.circuits}
        waiting = {j.circuit for j in self.jobs.pending()} - loaded
        return set(self.config.circuits) | self.extra_circuits | waiting

    # -- admitting and answering ------------------------------------------

    def admit(
        self, req: ProofInput | pb.SubmitProofRequest, time_remaining: float | None
    ) -> Admission:
        """Join, answer again or start the job for `req` (raises HeldBytesFull,
        InvalidRequest). `time_remaining`: the caller's deadline, if any."""
        loop_now = asyncio.get_running_loop().time()
        allowed = self.config.default_deadline_s if time_remaining is None else time_remaining
        deadline = loop_now + max(0.0, allowed - self.config.answer_margin_s)
        adm = self.jobs.admit(req, deadline, self.clock())
        if adm.rejected_member is not None:
            m = self.members.get(adm.rejected_member)
            if m is not None:
                m.book.on_rejected()
                m.refresh(self.clock(), self.config)
        job = adm.job
        if job is not None:
            if job.timer is not None:
                job.timer.cancel()
            job.timer = asyncio.get_running_loop().call_at(job.deadline, self._expire, job)
            if not adm.joined:
                self._trim_due = True
                self._wake.set()
        return adm

    async def prove(
        self, req: ProofInput | pb.SubmitProofRequest, time_remaining: float | None
    ) -> pb.AwaitProofResponse:
        """Admit `req` and wait for its answer (the Prove RPC)."""
        return await self.wait(self.admit(req, time_remaining))

    async def wait(self, adm: Admission) -> pb.AwaitProofResponse:
        """The answer of an admission, once it has one; marks it delivered."""
        if adm.answer is not None:
            result, job_id = adm.result, adm.answer.job_id
        else:
            assert adm.job is not None
            await adm.job.done.wait()
            result, job_id = adm.job.result, adm.job.job_id
        assert result is not None
        self.jobs.delivered(job_id)
        return result

    def find(self, job_id: str) -> Admission | None:
        """The live job or kept answer for `job_id` (AwaitProof)."""
        job = self.jobs.live.get(job_id)
        if job is not None:
            return Admission(job=job, joined=True)
        answer, result = self.jobs.answers.get(job_id), self.jobs.results.get(job_id)
        if answer is None or result is None:
            return None
        return Admission(answer=answer, result=result)

    def cancel(self, job_id: str) -> bool:
        """Cancel a live job (CancelProof); True if a machine was working on it."""
        job = self.jobs.live.get(job_id)
        if job is None:
            return False
        running = job.state == "running"
        self._take_back(job, "cancelled")
        self._fail(job, _Status.CANCELLED, "cancelled")
        return running

    # -- dispatching ------------------------------------------------------

    async def _pump(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            self._dispatch()

    def _dispatch(self) -> None:
        now, loop_now = self.clock(), asyncio.get_running_loop().time()
        members = list(self.members)
        for m in members:
            m.refresh(now, self.config)
        # Only members with room matter; with none, nothing below can be sent
        # (a wake comes at every poll: thousands of waiting jobs are not scanned).
        open_ = [m for m in members if m.phase == "serving" and m.reachable]
        open_ = [m for m in open_ if m.book.in_flight < m.capacity(self.config)]
        for job in self.jobs.pending():
            if job.attempts >= self.config.max_attempts:
                self._fail(job, _Status.FAILED, f"no machine proved it in {job.attempts} sends")
                continue
            if attempt_budget(job, loop_now, self.config) is None:
                self._fail(job, _Status.TIMEOUT, "no machine was free before the deadline")
                continue
            if not open_:
                continue  # keep sweeping deadlines, send nothing
            member = choose_member(job, open_, now, self.config)
            if member is None:
                continue
            budget = attempt_budget(job, loop_now, self.config, member, self.report_speed)
            assert budget is not None  # the same deadline, checked above
            self._send(job, member, *budget)
            if member.book.in_flight >= member.capacity(self.config):
                open_.remove(member)

    def _send(self, job: Job, member: Member, budget_s: float, bounded: bool) -> None:
        now = self.clock()
        attempt = Attempt(member.instance_id, now, budget_s, bounded)
        job.state, job.attempt = "running", attempt
        job.attempts += 1
        job.tried.add(member.instance_id)
        member.jobs.add(job.job_id)
        member.book.on_send(now)
        self.attempts += 1
        attempt.task = asyncio.create_task(self._attempt(job, member, attempt))

    async def _attempt(self, job: Job, member: Member, attempt: Attempt) -> None:
        outcome: _Outcome
        result: pb.AwaitProofResponse | None = None
        try:
            # The job's own bytes, sent as they are: no message, no copy per attempt.
            resp = await member.client.ProveRaw(job.payload, timeout=attempt.budget_s)
            result = resp.result
            completed = result.status == _Status.COMPLETED and len(result.proof) > 0
            outcome = "done" if completed else "failed"
        except asyncio.CancelledError:
            if attempt.take_back is None or self._closing:
                raise
            outcome = "taken"
        except grpc.aio.AioRpcError as err:
            outcome = "timeout" if err.code() == grpc.StatusCode.DEADLINE_EXCEEDED else "dropped"
            log.info("attempt of %s on %s: %s", job.job_id, member.instance_id, err.code())
        self._settle(job, member, attempt, outcome, result)

    def _settle(
        self,
        job: Job,
        member: Member,
        attempt: Attempt,
        outcome: _Outcome,
        result: pb.AwaitProofResponse | None,
    ) -> None:
        now = self.clock()
        self.attempt_outcomes[outcome] = self.attempt_outcomes.get(outcome, 0) + 1
        member.jobs.discard(job.job_id)
        book = member.book
        if outcome == "done":
            book.on_done(now)
        elif outcome == "failed":
            book.on_failed(now)
        elif outcome == "timeout":
            book.on_lost(now, counts_against=not attempt.bounded)
        elif outcome == "dropped":
            book.on_lost(now, counts_against=True)
            member.observe_silence()
        else:
            book.on_lost(now, counts_against=False)
        member.refresh(now, self.config)
        self._wake.set()
        if job.attempt is not attempt or job.state == "done":
            return  # taken back and already re-sent, or finished another way
        job.attempt = None
        if outcome == "done" and result is not None:
            self.jobs.finish(job, result, member.instance_id, now)
            return
        job.state = "pending"
        if asyncio.get_running_loop().time() >= job.deadline:
            self._fail(job, _Status.TIMEOUT, f"deadline passed ({outcome} on the last machine)")

    def _take_back(self, job: Job, why: TakeBack) -> None:
        """Cancel `job`'s attempt (it settles as lost, not the machine's fault)."""
        attempt = job.attempt
        if attempt is None or attempt.task is None or attempt.task.done():
            return
        attempt.take_back = why
        attempt.task.cancel()
        job.attempts -= 1  # not the job's failure: it does not use up its sends
        member = self.members.get(attempt.member_id)
        if member is not None and why != "closing":
            # cuzk's CancelProof does nothing yet (service.rs); a later one may.
            self._spawn(_cancel_on(member.client, job.job_id))
        job.attempt, job.state = None, "pending"

    def _fail(self, job: Job, status: pb.AwaitProofResponse.Status, message: str) -> None:
        self.jobs.finish(
            job, pb.AwaitProofResponse(status=status, error_message=message), None, self.clock()
        )

    def _expire(self, job: Job) -> None:
        # A running job ends by its attempt's budget, which the deadline bounds;
        # if it comes back pending, the next dispatch (every tick) fails it.
        if job.state == "pending":
            self._fail(job, _Status.TIMEOUT, "no machine was free before the deadline")

    def _jobs_on(self, member: Member) -> list[Job]:
        return [
            j
            for j in self.jobs.running()
            if j.attempt and j.attempt.member_id == member.instance_id
        ]

    # -- periodic checks and polling --------------------------------------

    async def _tick(self) -> None:
        while True:
            now = self.clock()
            for m in self.members:
                if m.drain_overdue(now):
                    for job in self._jobs_on(m):
                        self._take_back(job, "drain bound")
                m.refresh(now, self.config)
            self._wake.set()
            if self._trim_due and self.config.trim_memory:
                # At most once a tick: what gRPC freed receiving inputs goes
                # back. In a thread (ctypes drops the GIL): a trim of a
                # fragmented heap takes tens of ms, the loop does not wait.
                self._trim_due = False
                self.trims += await asyncio.to_thread(release_free_memory)
            await asyncio.sleep(self.config.tick_s)

    async def _poll_loop(self, member: Member) -> None:
        while True:
            await self._poll(member)
            await asyncio.sleep(self.config.poll_s)

    async def _poll(self, member: Member) -> None:
        try:
            status = await member.client.GetStatus(
                pb.GetStatusRequest(), timeout=self.config.status_timeout_s
            )
        except grpc.aio.AioRpcError:
            member.observe_silence()
        else:
            member.observe_status(self.clock(), status, self.config)
            for circuit in sorted(self.wanted_circuits() - member.circuits - member.preloading):
                member.preloading.add(circuit)
                self._spawn(self._preload(member, circuit))
        member.refresh(self.clock(), self.config)
        self._wake.set()

    async def _preload(self, member: Member, circuit: str) -> None:
        try:
            await member.client.PreloadSRS(
                pb.PreloadSrsRequest(circuit_id=circuit), timeout=self.config.preload_timeout_s
            )
        except grpc.aio.AioRpcError as err:
            log.info("PreloadSRS %s on %s: %s", circuit, member.instance_id, err.code())
        finally:
            member.preloading.discard(circuit)
        if self.members.get(member.instance_id) is member:
            await self._poll(member)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


async def _close(client: MemberClient) -> None:
    if isinstance(client, SupportsClose):
        with contextlib.suppress(Exception):
            await client.close()


async def _cancel_on(client: MemberClient, job_id: str) -> None:
    with contextlib.suppress(grpc.aio.AioRpcError):
        await client.CancelProof(pb.CancelProofRequest(job_id=job_id), timeout=5.0)
