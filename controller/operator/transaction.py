"""The status-write transaction: the one way a decision reaches a Workload's status, used by
the scheduling loop, preemption (the victims first, then the preemptor) and the rebalancer.
kube-scheduler's assume, bind, then confirm or forget (``pkg/scheduler/schedule_one.go``,
``backend/cache/interface.go``), in small::

    begin      assume: the decided bookings are booked in the ledger now, so the next decision
               (made while this write is in flight) already sees the capacity as taken; what
               the decision gives up (a replica moved, dropped or shrunk) stays booked too
               until the write lands (``ledger.held_until_written``): the old placement is
               still the record, and a crash or a failed write leaves it there. A preemption
               victim gives its room up at once: the preemptor, whose own write is sent only
               once every victim's landed, books it.
    commit     one write of /status (a PUT of the status alone: ``status_body``), preconditioned
               on the resourceVersion decided on, sent only while this replica's Lease is
               locally valid (``KubeApi.fence``); then
      written    confirm: the ledger books the decision alone; the record holds what was
                 written (so the echo of this write is a no-op); the Event; whoever waits for
                 capacity is queued if the write gave some back
      refused    (409, 5xx...) forget: the bookings from before come back, or, if the Workload
                 changed while the write was in flight, what it records now; whoever waits
                 for capacity is queued if that frees some
      fenced     not sent (the Lease lapsed): forget, as refused
      gone       404: the Workload and its bookings go
      no answer  the connection dropped: the write may have landed or not, so both outcomes
                 stay booked (``Ledger.hold``) and the Workload is read back (``reread``)
                 before it is decided again; the read-back books what the object records,
                 and whoever waits for capacity is queued if that frees some
    abandon    a write never sent (a preemptor whose victims did not all land): forget

A booking given up without a write that landed (forget, or a hold resolved by the read-back)
frees capacity that other Workloads were decided without, as a write that lands does:
kube-scheduler treats forgetting an assumed Pod as a Pod deletion and moves every
unschedulable Pod back to the active queue (``handleBindingCycleError``,
pkg/scheduler/schedule_one.go); here, every Workload waiting for capacity is queued.

The rollback runs on every way out of ``commit``, a bug or a cancellation included, and once:
the ledger settles an assumption only once. The write's state lives in one place, the ledger's
assumption (``Ledger.assumed``: a write in flight), and ``Ledger.forget`` is called from here
only. Each caller decides what to do next from the ``Result`` (retry, count a move...).
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass

from controller.api.models import WorkloadStatus, status_body, workload_path
from controller.operator.events import EventRecorder
from controller.operator.kube import ApiError, Fenced, KubeApi, TransportError
from controller.operator.state import ClusterState, WorkloadRecord, is_newer
from controller.operator.telemetry import metrics
from controller.operator.workqueue import WorkQueue
from controller.scheduler.ledger import (
    Assumption,
    Booking,
    bookings_from_object,
    bookings_from_status,
    held_until_written,
)

logger = logging.getLogger("orca.writes")


class Result(enum.Enum):
    """How a status write ended (see the module's docstring)."""

    WRITTEN = "written"
    REFUSED = "refused"
    FENCED = "fenced"
    GONE = "gone"
    UNANSWERED = "unanswered"


@dataclass(frozen=True, slots=True)
class EventSpec:
    """The Event a write posts once it landed."""

    reason: str
    message: str
    warning: bool = False


@dataclass(eq=False)
class StatusWrite:
    """One decision on its way to a Workload's status (``StatusWrites.begin``)."""

    record: WorkloadRecord  # the record decided on: the object's name, uid and version
    status: WorkloadStatus
    assumption: Assumption
    decided: tuple[Booking, ...]  # what the ledger books once it landed
    event: EventSpec | None = None
    victim: bool = False  # a preemption victim's: its room went to the preemptor
    #: The answer: the error when it did not land, the resourceVersion written when it did.
    error: Exception | None = None
    version: str | None = None

    @property
    def key(self) -> str:
        return self.record.key


class StatusWrites:
    """Begins, commits and abandons status writes; reads back the ones that got no answer."""

    def __init__(
        self, state: ClusterState, queue: WorkQueue, api: KubeApi, events: EventRecorder
    ) -> None:
        self.state = state
        self.queue = queue
        self.api = api
        self.events = events
        #: Keys whose last status write got no answer: read back before deciding again.
        self.unsure: set[str] = set()
        #: Writes sent and not yet answered (the Event posters hold back while there are).
        self.in_flight = 0

    def begin(
        self,
        record: WorkloadRecord,
        status: WorkloadStatus,
        decided: tuple[Booking, ...],
        event: EventSpec | None = None,
        victim: bool = False,
    ) -> StatusWrite:
        """Assume ``decided`` for ``record`` (see the module's docstring)."""
        ledger = self.state.ledger
        previous = ledger.bookings(record.key)
        booked = decided if victim else held_until_written(previous, decided)
        assumption = ledger.assume(record.key, booked)
        return StatusWrite(record, status, assumption, decided, event, victim)

    async def commit(self, write: StatusWrite) -> Result:
        """Send the write and settle it; the rollback runs however this ends."""
        self.in_flight += 1
        try:
            return await self._send(write)
        finally:
            self.in_flight -= 1
            self.abandon(write)  # nothing to do when settled: a bug or a cancellation

    def abandon(self, write: StatusWrite) -> None:
        """Undo a write that did not land or was never sent; nothing once it is settled."""
        if write.assumption.settled:
            return
        before = self.state.ledger.bookings(write.key)
        self.state.ledger.forget(write.assumption)
        current = self.state.records.get(write.key)
        if current is not None and current is not write.record and current.workload is not None:
            # The Workload changed while the write was in flight: an event that came meanwhile
            # was not booked (``ClusterState.upsert_workload``), so book what it records now.
            # Restoring the bookings from before over another replica's write seen meanwhile
            # left this replica deciding from placements the object no longer had (the
            # split-brain chaos scenario: a Job moved off its node by the next leader).
            self.state.ledger.load(write.key, bookings_from_status(current.workload))
        self.queue.add_all(self.state.woken_by(write.key, before))

    async def _send(self, write: StatusWrite) -> Result:
        record, key = write.record, write.key
        try:
            response = await self.api.write_workload_status(
                record.namespace, record.name, status_body(write.status), record.resource_version
            )
        except Fenced as exc:
            write.error = exc
            metrics.STATUS_WRITES.labels(outcome=metrics.WRITE_FENCED).inc()
            return Result.FENCED  # forgotten on the way out
        except ApiError as exc:
            write.error = exc
            metrics.STATUS_WRITES.labels(outcome=write_outcome(exc)).inc()
            metrics.STATUS_WRITE_FAILURES.labels(code=str(exc.status)).inc()
            if exc.not_found:  # gone, and its bookings with it: nothing to roll back
                before = self.state.ledger.bookings(key)
                self.state.ledger.confirm(write.assumption)
                self.state.delete_workload(key)
                self.queue.add_all(self.state.woken_by(key, before))
                return Result.GONE
            return Result.REFUSED
        except TransportError as exc:
            # It may have landed (a connection cut after the request was sent). Forgetting
            # would free what it booked while the object may record it, and the next decision
            # would start from bookings the object no longer has: hold both outcomes.
            write.error = exc
            metrics.STATUS_WRITES.labels(outcome=metrics.WRITE_FAILED).inc()
            metrics.STATUS_WRITE_FAILURES.labels(code=exc.kind).inc()
            self.state.ledger.hold(write.assumption)
            self.unsure.add(key)
            return Result.UNANSWERED
        self._landed(write, (response.get("metadata") or {}).get("resourceVersion"))
        return Result.WRITTEN

    def _landed(self, write: StatusWrite, version: str | None) -> None:
        state, key, assumption = self.state, write.key, write.assumption
        state.ledger.confirm(assumption)
        if assumption.bookings != write.decided and key in state.records:
            state.ledger.load(key, write.decided)  # the record now: release what it gave up
        metrics.STATUS_WRITES.labels(outcome=metrics.WRITE_WRITTEN).inc()
        write.version = version
        current = state.records.get(key)
        if current is not None and is_newer(version, current.resource_version):
            # The record holds what was written: the echo of this write is then a no-op.
            current.written_version = version
            current.resource_version = version
            state.set_status(current, write.status)
        self.queue.forget(key)  # its next failure starts the back-off from the beginning
        if write.event is not None:
            event = write.event
            self.events.record(write.record, event.reason, event.message, version, event.warning)
        if not write.victim:
            self.queue.add_all(state.woken_by(key, assumption.previous, write.decided))

    # -- after no answer -----------------------------------------------------------------------

    async def reread(self, record: WorkloadRecord) -> None:
        """After a status write that got no answer: read the object, and take what it records
        as the truth (the record, and its bookings in place of both outcomes held), then
        decide again from it. Unreadable too: try again later, both outcomes still held."""
        key = record.key
        try:
            obj = await self.api.request("GET", workload_path(record.namespace, record.name))
        except ApiError as exc:
            if exc.not_found:
                self.unsure.discard(key)
                before = self.state.ledger.bookings(key)
                self.state.delete_workload(key)
                self.queue.add_all(self.state.woken_by(key, before))
            else:
                self.queue.add_rate_limited(key)
        except TransportError as exc:
            delay = self.queue.add_rate_limited(key)
            logger.warning("reading %s back failed (%s); retrying in %.2fs", key, exc, delay)
        else:
            self.unsure.discard(key)
            before = self.state.ledger.bookings(key)  # both outcomes, held
            self.state.upsert_workload(obj)  # newer than what we knew: the record now
            current = self.state.records.get(key)
            version = (obj.get("metadata") or {}).get("resourceVersion")
            if current is not None and current.resource_version == version:
                # What it records is booked, however the record came to know this version
                # (an event of it while the write was in flight was not booked).
                self.state.ledger.load(key, bookings_from_object(obj))
            self.queue.add_all(self.state.woken_by(key, before))  # the outcome not taken held room
            self.queue.add(key)  # queued again once done: decided from the truth


def write_outcome(exc: Exception) -> str:
    """A failed status write's ``outcome`` label."""
    if isinstance(exc, ApiError) and exc.conflict:
        return metrics.WRITE_CONFLICT
    if isinstance(exc, ApiError) and exc.not_found:
        return metrics.WRITE_NOT_FOUND
    return metrics.WRITE_FAILED
