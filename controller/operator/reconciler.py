"""The one scheduling loop: every decision is made here, against one ledger, in order.

For each key the queue hands out (kube-scheduler's schedule_one, in miniature)::

    snapshot   the node table (rebuilt only after node changes) and the ledger
    decide     Scheduler.schedule: pure, microseconds to milliseconds
    compare    the status it implies vs the one the object has: equal -> write nothing
    assume     book the decision in the ledger before the write, so the next decision
               (made while this write is in flight) already sees the capacity as taken;
               what the decision gives up (a replica moved, dropped or shrunk) stays booked
               too until the write lands: the old placement is still the record, and a crash
               or a failed write leaves it there (``held_until_written``)
    write      one merge PATCH of /status, preconditioned on the resourceVersion decided on,
               sent only while this replica's Lease is locally valid (``KubeApi.fence``)
    confirm    on success; on a refusal forget (restore the previous bookings) and requeue
               with backoff; 404 means the Workload is gone, and so are its bookings;
               fenced (the Lease lapsed) means forget and drop: the next leader decides;
               no answer (the connection dropped) means the write may have landed or not:
               both outcomes stay booked until the object is read again (``_reread``)

Writes run concurrently (bounded); decisions never do. A key stays *processing* in the queue
until its write settles, so one Workload never has two decisions in flight.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from controller.api.models import GROUP, KIND, PLURAL, VERSION, Phase, WorkloadStatus
from controller.inputs.manifests import API_VERSION
from controller.operator.kube import ApiError, Fenced, KubeApi, TransportError
from controller.operator.preemption import PendingPreemption, Preemption
from controller.operator.priorities import PriorityIndex
from controller.operator.state import ClusterState, WorkloadRecord, is_newer
from controller.operator.telemetry import metrics
from controller.operator.telemetry.gauges import GaugeExporter
from controller.operator.workqueue import WorkQueue
from controller.scheduler.decision import Decision
from controller.scheduler.framework import Code
from controller.scheduler.ledger import (
    Assumption,
    Booking,
    bookings_from_object,
    bookings_from_status,
)
from controller.scheduler.scheduler import Scheduler
from controller.scheduler.status import rfc3339_now, status_from_decision
from controller.scheduler.vocabulary import (
    EVENT_FAILED_SCHEDULING,
    EVENT_SCHEDULED,
    REASON_INVALID_SPEC,
)

#: Events posted at a time when the scheduling queue is idle (``Reconciler.post_events``).
EVENT_POSTERS = 8
#: How long a graceful stop goes on posting queued Events (``Reconciler.flush_events``).
EVENT_FLUSH_SECONDS = 3.0

logger = logging.getLogger("orca.scheduler")

COMPONENT = "orca-controller"


class Reconciler:
    """Owns the scheduling loop, the status writes and the Events they produce."""

    def __init__(
        self,
        state: ClusterState,
        queue: WorkQueue,
        api: KubeApi,
        scheduler: Scheduler | None = None,
        is_leader: Callable[[], bool] = lambda: True,
        max_in_flight: int = 32,
        now: Callable[[], str] = rfc3339_now,
        identity: str = COMPONENT,
        ready: asyncio.Event | None = None,
    ) -> None:
        self.state = state
        self.queue = queue
        self.api = api
        self.scheduler = scheduler or Scheduler()
        self.is_leader = is_leader
        self.now = now
        self.identity = identity
        self.ready = ready if ready is not None else asyncio.Event()
        self._slots = asyncio.Semaphore(max_in_flight)
        #: Keys whose last status write got no answer: read before deciding again.
        self._unsure: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._cel_seen: dict[str, int] = {}
        self._gauges = GaugeExporter()
        self._events: asyncio.Queue[PendingEvent] = asyncio.Queue(maxsize=10_000)
        self.priorities = PriorityIndex()
        # The queue hands out higher priorities first: the priorities resolved here.
        queue.priority_of = lambda key: self.priorities.resolve(state, key).value
        self.preemption = Preemption(
            state,
            queue,
            api,
            self.scheduler,
            self.priorities,
            self.post_event,
            now,
        )

    # -- the loop --------------------------------------------------------------------------------

    async def run(self) -> None:
        """Process keys forever; nothing is decided before every informer has listed once
        (``handlers.StartupGate`` sets ``ready``)."""
        await self.ready.wait()
        while True:
            key = await self.queue.get()
            try:
                started = await self.reconcile(key)
            except Exception:
                logger.exception("reconcile of %s failed; retrying with backoff", key)
                metrics.SCHEDULE_ATTEMPTS.labels(
                    kind=self._kind(key), result=metrics.RESULT_ERROR
                ).inc()
                self.queue.add_rate_limited(key)
                started = False
            if not started:
                self.queue.done(key)

    def export_gauges(self) -> None:
        """Set the snapshot gauges (phases, pending queues, per node) from the state."""
        self._gauges.export(self.state, self.queue)

    def _kind(self, key: str) -> str:
        record = self.state.records.get(key)
        if record is None or record.workload is None:
            return metrics.KIND_UNKNOWN
        return record.workload.spec.kind.value

    @property
    def in_flight(self) -> set[asyncio.Task[None]]:
        """Status writes and Event posts not yet settled."""
        return self._tasks

    async def drain(self) -> None:
        """Wait for the status writes in flight (used on shutdown and by tests)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def reconcile(self, key: str) -> bool:
        """Decide ``key``; returns True when a write was started (it calls ``done`` itself)."""
        record = self.state.records.get(key)
        if record is None or not self.is_leader():
            return False
        if key in self._unsure:
            self._track(asyncio.create_task(self._reread(record)))
            return True
        self.state.table()
        started = time.perf_counter()
        decision, preemption = self.preemption.consider(record, self._decide(record))
        record.code = decision.code
        metrics.SCHEDULING_ALGORITHM_DURATION.observe(time.perf_counter() - started)
        self._count_cel()
        kind = self._kind(key)
        result = metrics.RESULT_BY_PHASE[decision.phase]
        metrics.SCHEDULE_ATTEMPTS.labels(kind=kind, result=result).inc()
        status = status_from_decision(decision, record.generation, record.status, self.now())
        previous = self.state.ledger.bookings(key)
        logger.debug("%s: %s %d/%d", key, decision.phase.value, decision.placed, decision.desired)
        if status == record.status and preemption is None:
            metrics.SCHEDULE_UNCHANGED.labels(kind=kind, result=result).inc()
            record.seen = None  # nothing to write: no end-to-end latency to observe
            if previous != decision.bookings:  # e.g. a resize: same placements, new sizes
                self.state.ledger.load(key, decision.bookings)
            self.queue.forget(key)
            return False
        assumption = self.state.ledger.assume(key, held_until_written(previous, decision.bookings))
        record.writing = True
        await self._slots.acquire()
        write = self._write(record, status, assumption, previous, decision.bookings)
        if preemption is not None:
            write = self._write_after_victims(preemption, write, assumption, record.key)
        self._track(asyncio.create_task(write))
        return True

    def _track(self, task: asyncio.Task[None]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _count_cel(self) -> None:
        """The evaluator keeps running totals; the counters get what is new since last time."""
        cel = self.scheduler.cel
        for counter, total, seen in (
            (metrics.CEL_ERRORS, cel.errors, "errors"),
            (metrics.CEL_COST_LIMIT_HITS, cel.cost_limit_hits, "cost_limit_hits"),
            (metrics.CEL_CYCLE_BUDGET_HITS, cel.cycle_budget_hits, "cycle_budget_hits"),
        ):
            new = total - self._cel_seen.get(seen, 0)
            if new > 0:
                counter.inc(new)
                self._cel_seen[seen] = total

    def _decide(self, record: WorkloadRecord) -> Decision:
        if record.workload is None:  # the API server accepted what our models refuse
            existing = self.state.ledger.bookings(record.key)
            return Decision(
                phase=Phase.INVALID,
                reason=REASON_INVALID_SPEC,
                desired=0,
                placements=tuple(record.status.placements) if record.status else (),
                message=record.error or "invalid spec",
                bookings=existing,
                code=Code.INVALID,
            )
        return self.scheduler.schedule(record.workload, self.state.ledger, self.priorities.classes)

    # -- the write ---------------------------------------------------------------------------------

    async def _write_after_victims(
        self,
        preemption: PendingPreemption,
        write: Coroutine[Any, Any, None],
        assumption: Assumption,
        key: str,
    ) -> None:
        """A preemptor's status write, sent only once every victim's write landed
        (``controller.operator.preemption``); else forget its decision and retry it."""
        try:
            landed = await self.preemption.write_victims(preemption)
        except BaseException:
            write.close()
            self._abandon(key, assumption)
            raise
        if landed:
            await write
            return
        write.close()
        self._abandon(key, assumption)
        delay = self.queue.add_rate_limited(key)
        logger.info("preemption for %s did not land; retrying in %.2fs", key, delay)

    def _abandon(self, key: str, assumption: Assumption) -> None:
        """Undo a decision whose write was never sent (what ``_write`` does when it fails)."""
        self.state.ledger.forget(assumption)
        self._settle(key)
        self._slots.release()
        self.queue.done(key)

    async def _write(
        self,
        record: WorkloadRecord,
        status: WorkloadStatus,
        assumption: Assumption,
        previous: tuple[Booking, ...],
        decided: tuple[Booking, ...],
    ) -> None:
        key = record.key
        previous_phase = record.phase
        payload = status.model_dump(by_alias=True, mode="json", exclude_none=True)
        try:
            response = await self.api.patch_workload_status(
                record.namespace, record.name, payload, record.resource_version
            )
        except Fenced:
            # Not sent. Re-election requeues every Workload (``on_elected``), so drop the key.
            self._forget(record, assumption)
            metrics.STATUS_WRITES.labels(outcome=metrics.WRITE_FENCED).inc()
            self._settle(key)
            logger.info("status write for %s not sent: the leader Lease lapsed", key)
        except (ApiError, TransportError) as exc:
            if isinstance(exc, ApiError):
                self._forget(record, assumption)
            else:
                # No answer: it may have landed (a connection cut after the request was
                # sent). Forgetting would free what it booked while the object may record
                # it, and the next decision would start from bookings the object no longer
                # has; so both outcomes stay booked until the object is read (``_reread``).
                self._unsure.add(key)
            code = str(exc.status) if isinstance(exc, ApiError) else exc.kind
            metrics.STATUS_WRITES.labels(outcome=write_outcome(exc)).inc()
            metrics.STATUS_WRITE_FAILURES.labels(code=code).inc()
            self._settle(key)
            if isinstance(exc, ApiError) and exc.not_found:
                self.state.delete_workload(key)
            else:
                delay = self.queue.add_rate_limited(key)
                log = logger.info if isinstance(exc, ApiError) and exc.conflict else logger.warning
                log("status write for %s failed (%s); retrying in %.2fs", key, exc, delay)
        else:
            self.state.ledger.confirm(assumption)
            if assumption.bookings != decided and self.state.records.get(key) is not None:
                self.state.ledger.load(key, decided)  # the record now: release what it left
            metrics.STATUS_WRITES.labels(outcome=metrics.WRITE_WRITTEN).inc()
            if record.seen is not None:
                metrics.E2E_SCHEDULING_DURATION.observe(time.monotonic() - record.seen)
            version = (response.get("metadata") or {}).get("resourceVersion")
            current = self.state.records.get(key)
            if current is not None:
                current.seen = None  # observed once; a later change starts a new clock
            if current is not None and is_newer(version, current.resource_version):
                current.written_version = version
                current.resource_version = version
                current.status = status
            self._settle(key)
            self.queue.forget(key)
            if previous_phase != status.phase:
                self._post_event(record, status, version)
            if _freed(previous, decided):
                self.queue.add_all(self.state.keys_waiting_for_capacity() - {key})
        finally:
            self._slots.release()
            self.queue.done(key)

    def _forget(self, record: WorkloadRecord, assumption: Assumption) -> None:
        """A write that did not land: restore the bookings it replaced; but if the Workload
        changed while it was in flight, book what it records now. The ledger books no event
        that comes during a write (``ClusterState.upsert_workload``): another replica's status
        write seen then, restored over by the bookings from before, left this replica deciding
        from placements the object no longer had (the split-brain chaos scenario: a Job moved
        off its node by the next leader, for no reason)."""
        self.state.ledger.forget(assumption)
        current = self.state.records.get(record.key)
        if current is not None and current is not record and current.workload is not None:
            self.state.ledger.load(record.key, bookings_from_status(current.workload))

    async def _reread(self, record: WorkloadRecord) -> None:
        """After a status write that got no answer: read the object, and take what it records
        as the truth (the record, and its bookings in place of both outcomes held), then
        decide again from it. Unreadable too: try again later, both outcomes still held."""
        key = record.key
        path = f"/apis/{GROUP}/{VERSION}/namespaces/{record.namespace}/{PLURAL}/{record.name}"
        try:
            obj = await self.api.request("GET", path)
        except ApiError as exc:
            if exc.not_found:
                self._unsure.discard(key)
                self.state.delete_workload(key)
            else:
                self.queue.add_rate_limited(key)
        except TransportError as exc:
            delay = self.queue.add_rate_limited(key)
            logger.warning("reading %s back failed (%s); retrying in %.2fs", key, exc, delay)
        else:
            self._unsure.discard(key)
            self.state.upsert_workload(obj)  # newer than what we knew: the record now
            current = self.state.records.get(key)
            version = (obj.get("metadata") or {}).get("resourceVersion")
            if current is not None and current.resource_version == version:
                # What it records is booked, however the record came to know this version
                # (an event of it while the write was in flight was not booked).
                self.state.ledger.load(key, bookings_from_object(obj))
            self.queue.add(key)  # queued again once done (below): decided from the truth
        finally:
            self.queue.done(key)

    def _settle(self, key: str) -> None:
        current = self.state.records.get(key)
        if current is not None:
            current.writing = False

    def _post_event(
        self, record: WorkloadRecord, status: WorkloadStatus, version: str | None
    ) -> None:
        """``Scheduled`` / ``FailedScheduling`` on a phase transition, never per pass."""
        scheduled = status.phase is Phase.SCHEDULED
        reason = EVENT_SCHEDULED if scheduled else EVENT_FAILED_SCHEDULING
        self.post_event(record, reason, status.message or "", version, warning=not scheduled)

    def post_event(
        self,
        record: WorkloadRecord,
        reason: str,
        message: str,
        version: str | None,
        warning: bool = False,
    ) -> None:
        """Queue an Event on the Workload (posted by ``post_events``; dropped and counted
        when the queue is full: Events are informational, status is the record)."""
        if self._events.full():
            metrics.EVENTS_DROPPED.inc()
            return
        event = PendingEvent(
            record.name,
            record.namespace,
            record.uid,
            version,
            reason,
            message,
            warning,
            self.now(),
            self.identity,
        )
        self._events.put_nowait(event)

    async def post_events(self, busy_interval: float = 0.05, posters: int = EVENT_POSTERS) -> None:
        """Post queued Events. While the scheduling queue has work, one per ``busy_interval``
        in all (20/s), so a burst's status writes get the API server first; Events are
        informational, status is the record. When idle, ``posters`` at a time: posted one by
        one, a 10,000-Workload backlog's Events took 31 s after its last placement and cost
        the API server + etcd ~3 ms each, with no two etcd writes to batch
        (``bench_vs_kube_scheduler``, Events included)."""
        await asyncio.gather(*(self._post_events(busy_interval * posters) for _ in range(posters)))

    async def _post_events(self, busy_interval: float) -> None:
        """One poster: paced while the scheduling queue has work (checked before taking an
        Event, so none is held back unposted while it waits)."""
        while True:
            if len(self.queue):
                await asyncio.sleep(busy_interval)
            await self._post(await self._events.get())  # on in any case: the server may be back

    async def _post(self, event: PendingEvent) -> bool:
        """Post one Event; False when this replica is fenced or the server is out of reach
        (the next Event would fail the same way), True when it was posted or only it was
        refused (its namespace terminating, say)."""
        try:
            await self.api.create_event(event.namespace, event.body())
        except (ApiError, Fenced, TransportError) as exc:
            logger.info("could not post event %s: %s", event.reason, exc)
            return isinstance(exc, ApiError)
        except Exception:  # a bug: this Event is dropped, the posters (and the operator) go on
            logger.exception("posting event %s on %s failed", event.reason, event.name)
        return True

    async def flush_events(
        self, within: float = EVENT_FLUSH_SECONDS, posters: int = EVENT_POSTERS
    ) -> int:
        """Post what is queued now (a graceful stop), ``posters`` at a time, for at most
        ``within`` seconds; return how many were left unposted or cut short. Bounded because
        the Lease is handed back only after this, and the standby decides only then: one at a
        time and unbounded, a stop right after a 10,000-Workload backlog held the Lease for
        10 s (5 s after 5,000), deciding nothing, for Events that only inform (the statuses are
        the record; client-go's recorder drops Events too, when its queue is full)."""

        async def poster() -> None:
            while not self._events.empty():
                if not await self._post(self._events.get_nowait()):
                    return  # fenced or the server gone: the rest would fail the same way

        tasks = [asyncio.create_task(poster()) for _ in range(posters)]
        _, cut_short = await asyncio.wait(tasks, timeout=within)
        for task in cut_short:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        left = self._events.qsize() + len(cut_short)
        if left:
            logger.warning("stopping: %d queued Events not posted within %gs", left, within)
        return left


@dataclass(frozen=True, slots=True)
class PendingEvent:
    """An Event waiting to be posted, kept as small as it can be: a backlog queues one per
    Workload while the status writes go first (10,000 as API dicts were ~16 MB of the
    operator's peak memory). ``body`` builds the API object when it is posted."""

    name: str
    namespace: str
    uid: str | None
    version: str | None  # the involved object's resourceVersion the Event is about
    reason: str
    message: str
    warning: bool
    time: str  # RFC 3339, when it happened (not when it is posted)
    instance: str  # reportingInstance: this replica

    def body(self) -> dict[str, Any]:
        return {
            "metadata": {"generateName": f"{self.name}.", "namespace": self.namespace},
            "involvedObject": {
                "apiVersion": API_VERSION,
                "kind": KIND,
                "name": self.name,
                "namespace": self.namespace,
                "uid": self.uid,
                "resourceVersion": self.version,
            },
            "type": "Warning" if self.warning else "Normal",
            "reason": self.reason,
            "message": self.message,
            "firstTimestamp": self.time,
            "lastTimestamp": self.time,
            "count": 1,
            "source": {"component": COMPONENT},
            "reportingComponent": f"orca.cloudinit.dev/{COMPONENT}",
            "reportingInstance": self.instance,
        }


def write_outcome(exc: Exception) -> str:
    """A failed status write's ``outcome`` label."""
    if isinstance(exc, ApiError) and exc.conflict:
        return metrics.WRITE_CONFLICT
    if isinstance(exc, ApiError) and exc.not_found:
        return metrics.WRITE_NOT_FOUND
    return metrics.WRITE_FAILED


def held_until_written(
    previous: tuple[Booking, ...], decided: tuple[Booking, ...]
) -> tuple[Booking, ...]:
    """What to book while a decision's write is in flight: the decided bookings, plus every
    previous one it gives up, each replica at the larger of its two sizes where it stays.

    Capacity a decision frees is not free until its status write lands. Handing it out at once
    let another Workload's write land first; a crash (or a 409) then lost the first write and
    left both on the node, over capacity, which nothing repairs. (DESIGN.md asks the same
    order of preemption: victims' writes confirmed before the preemptor's.)"""
    held = {(b.node, b.alloc_id): b for b in decided}
    for b in previous:
        now = held.get((b.node, b.alloc_id))
        if now is None:
            held[(b.node, b.alloc_id)] = b
        elif b.cpu > now.cpu or b.memory > now.memory:
            held[(b.node, b.alloc_id)] = Booking(
                b.node, b.alloc_id, max(b.cpu, now.cpu), max(b.memory, now.memory), now.score
            )
    return tuple(held.values())


def _freed(previous: tuple[Booking, ...], current: tuple[Booking, ...]) -> bool:
    """Whether a decision gave capacity back on some node (moved away, fewer, or smaller)."""
    usage: dict[str, list[int]] = {}
    for sign, bookings in ((1, previous), (-1, current)):
        for b in bookings:
            node = usage.setdefault(b.node, [0, 0])
            node[0] += sign * b.cpu
            node[1] += sign * b.memory
    return any(cpu > 0 or memory > 0 for cpu, memory in usage.values())
