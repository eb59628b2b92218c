"""Preemption in the operator: one decision in the ledger, then the victims' writes before the
preemptor's (docs/design.md 4).

The scheduling loop asks ``consider`` after each decision. When the scheduler says the
Workload may preempt and finds victims (``controller.scheduler.preemption.preempt``, the same
search and retry ``orca plan`` makes), everything is booked at once, in the loop, before any
write::

    take       the victims' keys in the queue (the loop does not decide them meanwhile)
    begin      each victim's status write (``transaction``): its bookings without the
               preempted replicas, assumed at once (the room goes to the preemptor), its
               status with the placements removed, condition reason ``Preempted`` and a
               message naming the preemptor; then the preemptor's own write, decided on that
               ledger, is begun by the loop as usual, so no one else is handed the freed room
    write      every victim's status, each preconditioned on the resourceVersion decided on,
               each with an Event ``Preempted`` once it landed; the victims are then released
               and queued again (they land elsewhere if room exists)
    then       only when every victim write landed, the preemptor's status write; if one did
               not land, the transaction rolled that victim back, and the preemptor's write is
               abandoned and retried with back-off

A crash between the two leaves the victims' room free in the statuses (the ledger is rebuilt
from them on start), never booked twice. ``ORCA_TEST_FAILPOINT=preempt-after-victims`` (a test
hook, read once at start) holds the preemptor's write forever once the victims' writes landed,
so a test can kill the operator exactly there.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from controller.api.models import WorkloadStatus
from controller.operator.priorities import PriorityIndex
from controller.operator.state import ClusterState, WorkloadRecord
from controller.operator.telemetry import metrics
from controller.operator.transaction import EventSpec, Result, StatusWrite, StatusWrites
from controller.operator.workqueue import WorkQueue
from controller.scheduler.budgets import Budget
from controller.scheduler.decision import Decision
from controller.scheduler.preemption import (
    may_preempt,
    preempt_within_budgets,
    preempted_status,
    preemption_message,
    victim_budget,
    with_budget_note,
)
from controller.scheduler.scheduler import Scheduler
from controller.scheduler.vocabulary import EVENT_PREEMPTED

logger = logging.getLogger("orca.preemption")

FAILPOINT_ENV: Final = "ORCA_TEST_FAILPOINT"
FAILPOINT_AFTER_VICTIMS: Final = "preempt-after-victims"


@dataclass
class Preemption:
    """Decides preemptions in the loop and writes the victims' statuses."""

    state: ClusterState
    queue: WorkQueue
    scheduler: Scheduler
    priorities: PriorityIndex
    writes: StatusWrites
    now: Callable[[], str]
    #: The test hook (``ORCA_TEST_FAILPOINT``), read once.
    failpoint: bool = field(
        default_factory=lambda: os.environ.get(FAILPOINT_ENV) == FAILPOINT_AFTER_VICTIMS
    )

    # -- in the loop ---------------------------------------------------------------------------

    def consider(
        self, record: WorkloadRecord, decision: Decision, clock: float
    ) -> tuple[Decision, list[StatusWrite]]:
        """The decision to write for ``record``: ``decision`` itself, or, when preempting
        places more of it, the one made without its victims' replicas (at time ``clock``,
        the decision's), and the victims' writes (begun: their bookings already assumed)."""
        workload = record.workload
        if workload is None:
            return decision, []
        classes = self.priorities.classes
        priority = classes.resolve(workload.spec.priority_class_name)
        if not may_preempt(workload, decision, priority):
            return decision, []
        if priority.value <= classes.lowest:
            return decision, []  # nothing can be below it: no search (no attempt)
        metrics.PREEMPTION_ATTEMPTS.inc()
        preemptible: dict[str, int] = {}
        started: dict[str, datetime] = {}  # the start-time stand-in (scheduler.preemption)
        budgets: dict[str, Budget] = {}  # disruption budgets and gangs (scheduler.budgets)
        ledger, records = self.state.ledger, self.state.records
        busy: list[str] = []  # lower-priority Workloads left out: decided or written now
        for key in ledger.workload_keys():  # those holding replicas
            other = records.get(key)
            if (
                other is None
                or other.workload is None  # unparseable: its priority is unknown
                or key == record.key
            ):
                continue
            value = classes.resolve(other.workload.spec.priority_class_name).value
            if value < priority.value and (
                ledger.assumed(key)  # its own write in flight: not ours to change now
                or self.queue.processing(key)
            ):
                busy.append(key)
            elif value < priority.value:
                preemptible[key] = value
                if (created := other.workload.metadata.creation_timestamp) is not None:
                    started[key] = created
                budget = victim_budget(self.scheduler, other.workload, ledger, now=clock)
                if budget is not None:
                    budgets[key] = budget
        found, blockers = preempt_within_budgets(
            self.scheduler,
            workload,
            ledger,
            decision,
            classes,
            preemptible,
            started,
            budgets,
            now=clock,
        )
        if found is None:  # the status says which budget, if any, keeps it waiting
            # Decided again once each is done: its replicas, or a budget it just relaxed (a
            # change that wakes who waits for capacity while the Workload is itself being
            # decided: ``handlers.WorkloadEvents``), count then.
            for key in busy:
                self.queue.add_when_done(key, record.key)
            return with_budget_note(decision, blockers), []
        plan, after = found
        now = self.now()
        victims = []
        for key, kept in plan.remaining(ledger).items():
            victim = records[key]
            lost = tuple(v for v in plan.victims if v.key == key)
            previous = victim.status if victim.status is not None else WorkloadStatus()
            status = preempted_status(previous, lost, record.key, priority.value, now)
            message = preemption_message(lost, plan.preemptor, plan.priority)
            self.queue.take(key)
            event = EventSpec(EVENT_PREEMPTED, message)
            victims.append(self.writes.begin(victim, status, kept, event, victim=True))
        metrics.PREEMPTION_VICTIMS.observe(len(plan.victims))
        logger.info(
            "%s (priority %d) preempts %s",
            record.key,
            priority.value,
            ", ".join(f"{v.booking.alloc_id} on {v.booking.node}" for v in plan.victims),
        )
        return after, victims

    # -- the writes ----------------------------------------------------------------------------

    async def write_victims(self, victims: list[StatusWrite], preemptor: str) -> bool:
        """Every victim's status write; True when all landed (the preemptor may write)."""
        handed, victims[:] = list(victims), []  # theirs from here on, not ``release``'s
        landed = all(await asyncio.gather(*(self._write_victim(w, preemptor) for w in handed)))
        if landed and self.failpoint:
            logger.warning(
                "failpoint %s: the victims' writes landed; holding the preemptor's write of %s",
                FAILPOINT_AFTER_VICTIMS,
                preemptor,
            )
            await asyncio.Event().wait()  # until the test kills the process
        return landed

    def release(self, victims: list[StatusWrite]) -> None:
        """Victims begun but never written (a bug between ``consider`` and ``write_victims``):
        their bookings back, their keys released and queued again."""
        for write in victims:
            self.writes.abandon(write)
            self.queue.done(write.key)
            self.queue.add(write.key)
        victims.clear()

    async def _write_victim(self, write: StatusWrite, preemptor: str) -> bool:
        key = write.key
        try:
            result = await self.writes.commit(write)
        finally:
            self.queue.done(key)
            if key in self.state.records:
                self.queue.add(key)  # decided again: it lands elsewhere if room exists
        if result not in (Result.WRITTEN, Result.GONE):  # gone: its room is free anyway
            logger.info("preemption of %s for %s failed: %s", key, preemptor, write.error)
            return False
        return True
