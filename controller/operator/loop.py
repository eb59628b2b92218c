"""The scheduling loop: queue -> schedule -> write. Every decision is made here, against one
ledger, in the order the queue hands keys out (higher priorities first).

Workers take keys from the queue, controller-runtime's ``processNextWorkItem`` each: ``get``,
process, and ``done`` in a ``finally``, the one place a key is marked done. Processing a key
(kube-scheduler's ``schedule_one``, in miniature)::

    snapshot   the node table (rebuilt only after node changes) and the ledger
    decide     Scheduler.schedule: pure, microseconds to milliseconds; then preemption may
               change the decision (``preemption.consider``: victims booked first)
    compare    the status it implies vs the one the object has: equal -> write nothing
    write      the status-write transaction (``transaction``): assume, the fenced and
               preconditioned write (a PUT of the status), then confirm, forget or hold,
               and the Event
    after      refused or unanswered: retried with back-off (an unanswered write is read
               back before the key is decided again); fenced: dropped, the next leader
               decides; gone: nothing left to decide

A decision has no ``await`` between reading the ledger and assuming in it, so the workers'
decisions never interleave: they are serialized on the one event loop while their writes run
concurrently, as many as there are workers. A key stays *processing* in the queue until its
write settles, so one Workload never has two decisions in flight.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from controller.api.models import Phase, WorkloadStatus, workload_selector
from controller.operator.preemption import Preemption
from controller.operator.priorities import PriorityIndex
from controller.operator.state import ClusterState, WorkloadRecord
from controller.operator.telemetry import metrics
from controller.operator.telemetry.gauges import CelCounters
from controller.operator.transaction import EventSpec, Result, StatusWrite, StatusWrites
from controller.operator.workqueue import QueueShutDown, WorkQueue
from controller.scheduler.decision import Decision
from controller.scheduler.framework import Code
from controller.scheduler.scheduler import Scheduler
from controller.scheduler.status import rfc3339_now, status_from_decision
from controller.scheduler.vocabulary import (
    CONDITION_MOVE_PENDING,
    EVENT_FAILED_SCHEDULING,
    EVENT_MOVE_PENDING,
    EVENT_SCHEDULED,
    REASON_INVALID_SPEC,
)

logger = logging.getLogger("orca.scheduler")

#: Workers, so status writes in flight at once (``orca run --max-in-flight``).
WORKERS = 32
#: A pending move is looked at again this long after it is due, so the clock has passed it.
PENDING_SLACK = 0.05
#: The longest the workers decide between two turns of the event loop, in seconds. A decision
#: that writes nothing never awaits: after a restart or an election every Workload is decided
#: again, and 100,000 of them held the event loop for 11 s, with no watch event read, no
#: probe or /metrics answered and no Lease renewed (a leader steps down past its 10 s
#: ``renew_deadline``, and the next one, deciding every Workload again, would do the same).
TURN = 0.02


@dataclass
class SchedulingLoop:
    """Decides the keys the queue hands out and writes their statuses."""

    state: ClusterState
    queue: WorkQueue
    scheduler: Scheduler
    priorities: PriorityIndex
    writes: StatusWrites
    preemption: Preemption
    ready: asyncio.Event  # set by the start-up gate: every informer has listed once
    is_leader: Callable[[], bool] = lambda: True
    workers: int = WORKERS
    now: Callable[[], str] = rfc3339_now
    clock: Callable[[], float] = time.time  # the scheduler's clock (NoExecute taints' times)
    turn: float = TURN
    cel: CelCounters = field(init=False)
    #: When the event loop last began a turn in which a worker decides (``_take_turn``), and
    #: whether a mark of the next such turn is already scheduled.
    _turn_began: float = field(init=False, default=0.0)
    _marking: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        self.cel = CelCounters(self.scheduler.cel)

    async def run(self) -> None:
        """Process keys until the queue shuts down; nothing is decided before every informer
        has listed once (``handlers.StartupGate`` sets ``ready``)."""
        await self.ready.wait()
        await asyncio.gather(*(self._worker() for _ in range(self.workers)))

    def stop(self) -> None:
        """Decide nothing more: ``run`` returns once every write in flight has settled."""
        self.queue.shut_down()

    async def _worker(self) -> None:
        try:
            while True:
                if time.perf_counter() - self._turn_began >= self.turn:
                    await self._take_turn()
                await self.process_next()
        except QueueShutDown:
            return

    async def _take_turn(self) -> None:
        """Let the event loop run once (its I/O, its timers) before deciding on. The turn's
        start is marked by a callback scheduled ahead of the workers that yield, so that of
        the workers resumed in that turn only the first decides until ``turn`` has passed;
        the others decide one key each, find it passed and yield again, instead of each
        taking a slice of its own (32 slices between two reads of the sockets)."""
        if not self._marking:
            self._marking = True
            asyncio.get_running_loop().call_soon(self._mark_turn)
        await asyncio.sleep(0)

    def _mark_turn(self) -> None:
        self._marking = False
        self._turn_began = time.perf_counter()

    async def process_next(self) -> None:
        """controller-runtime's ``processNextWorkItem``: one key, marked done here only."""
        key = await self.queue.get()
        try:
            await self.process(key)
        except Exception:
            logger.exception("reconcile of %s failed; retrying with backoff", key)
            metrics.SCHEDULE_ATTEMPTS.labels(
                kind=self._kind(key), result=metrics.RESULT_ERROR
            ).inc()
            self.queue.add_rate_limited(key)
        finally:
            self.queue.done(key)

    async def process(self, key: str) -> bool:
        """Decide ``key`` and write what it implies; True when a status write was sent."""
        record = self.state.records.get(key)
        if record is None or not self.is_leader():
            return False
        if key in self.writes.unsure:
            await self.writes.reread(record)
            return False
        self.state.table()
        started = time.perf_counter()
        clock = self.clock()
        decision, victims = self.preemption.consider(record, self._decide(record, clock), clock)
        again = decision.look_again_at  # a move due, a gang's timeout: one timer per key
        if again is not None:
            self.queue.add_after(key, again - clock + PENDING_SLACK)
        try:
            return await self._write(record, decision, victims, started)
        finally:
            self.preemption.release(victims)  # those not handed to write_victims (a bug)

    async def _write(
        self,
        record: WorkloadRecord,
        decision: Decision,
        victims: list[StatusWrite],
        started: float,
    ) -> bool:
        key = record.key
        self.state.decided(record, decision.code)
        metrics.SCHEDULING_ALGORITHM_DURATION.observe(time.perf_counter() - started)
        self.cel.update()
        kind = self._kind(key)
        result = metrics.RESULT_BY_PHASE[decision.phase]
        metrics.SCHEDULE_ATTEMPTS.labels(kind=kind, result=result).inc()
        status = status_from_decision(
            decision, record.generation, record.status, self.now(), workload_selector(record.name)
        )
        logger.debug("%s: %s %d/%d", key, decision.phase.value, decision.placed, decision.desired)
        if status == record.status and not victims:
            metrics.SCHEDULE_UNCHANGED.labels(kind=kind, result=result).inc()
            record.seen = None  # nothing to write: no end-to-end latency to observe
            if self.state.ledger.bookings(key) != decision.bookings:
                self.state.ledger.load(key, decision.bookings)  # e.g. a resize: new sizes
            self.queue.forget(key)
            return False
        write = self.writes.begin(record, status, decision.bookings, _transition(record, status))
        try:
            if victims and not await self.preemption.write_victims(victims, key):
                delay = self.queue.add_rate_limited(key)
                logger.info("preemption for %s did not land; retrying in %.2fs", key, delay)
                return True  # abandoned below: never sent
            outcome = await self.writes.commit(write)
        finally:
            self.writes.abandon(write)  # not sent, or a bug or a cancellation: nothing stays
        self._after(record, outcome, write.error)
        return True

    def _after(self, record: WorkloadRecord, outcome: Result, error: Exception | None) -> None:
        key = record.key
        if outcome is Result.WRITTEN:
            if record.seen is not None:
                metrics.E2E_SCHEDULING_DURATION.observe(time.monotonic() - record.seen)
            current = self.state.records.get(key)
            if current is not None:
                current.seen = None  # observed once; a later change starts a new clock
        elif outcome is Result.FENCED:
            # Not sent. Re-election requeues every Workload (``on_elected``): drop the key.
            logger.info("status write for %s not sent: the leader Lease lapsed", key)
        elif outcome in (Result.REFUSED, Result.UNANSWERED):
            delay = self.queue.add_rate_limited(key)
            conflict = outcome is Result.REFUSED and getattr(error, "conflict", False)
            log = logger.info if conflict else logger.warning
            log("status write for %s failed (%s); retrying in %.2fs", key, error, delay)

    def _decide(self, record: WorkloadRecord, clock: float) -> Decision:
        if record.workload is None:  # the API server accepted what our models refuse
            return Decision(
                phase=Phase.INVALID,
                reason=REASON_INVALID_SPEC,
                desired=0,
                placements=tuple(record.status.placements) if record.status else (),
                message=record.error or "invalid spec",
                bookings=self.state.ledger.bookings(record.key),
                code=Code.INVALID,
            )
        return self.scheduler.schedule(
            record.workload, self.state.ledger, self.priorities.classes, now=clock
        )

    def _kind(self, key: str) -> str:
        record = self.state.records.get(key)
        if record is None or record.workload is None:
            return metrics.KIND_UNKNOWN
        return record.workload.spec.kind.value


def _transition(record: WorkloadRecord, status: WorkloadStatus) -> EventSpec | None:
    """``Scheduled`` / ``FailedScheduling`` on a phase transition, else ``MovePending`` when
    a replica starts waiting out its toleration of a node (the condition appears or says
    something new); never per pass."""
    if record.phase != status.phase:
        scheduled = status.phase is Phase.SCHEDULED
        reason = EVENT_SCHEDULED if scheduled else EVENT_FAILED_SCHEDULING
        return EventSpec(reason, status.message or "", warning=not scheduled)
    pending = _move_pending(status)
    if pending is not None and pending != _move_pending(record.status):
        return EventSpec(EVENT_MOVE_PENDING, pending, warning=True)
    return None


def _move_pending(status: WorkloadStatus | None) -> str | None:
    """The MovePending condition's message, None when there is none."""
    for condition in status.conditions if status is not None else ():
        if condition.type == CONDITION_MOVE_PENDING:
            return condition.message or ""
    return None
