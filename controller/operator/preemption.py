"""Preemption in the operator: one decision in the ledger, then victims' writes before the
preemptor's (DESIGN.md 4).

The reconciler asks ``consider`` after each decision. When the core says the Workload may
preempt (``controller.scheduler.preemption``) and finds victims, everything is booked at once, in
the scheduling loop, before any write::

    take       the victims' keys in the queue (the loop does not decide them meanwhile) and
               mark their records writing (watch events do not reload their old statuses)
    assume     each victim's bookings without the preempted replicas, then the preemptor
               decided again on that ledger: its new bookings are assumed by the reconciler
               as usual, so no one else is handed the freed room
    write      every victim's status (placements removed, condition reason ``Preempted``,
               a message naming the preemptor), each preconditioned on the resourceVersion
               decided on; confirmed one by one, each with an Event ``Preempted``; the
               victims are then released and queued again (they land elsewhere if room exists)
    then       only when every victim write landed, the preemptor's status write; if one
               failed, that victim's bookings come back (forget), the preemptor's assumption
               is forgotten and it is retried with backoff

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

from controller.api.models import Workload, WorkloadStatus
from controller.operator.kube import ApiError, Fenced, KubeApi, TransportError
from controller.operator.priorities import PriorityIndex
from controller.operator.state import ClusterState, WorkloadRecord, is_newer
from controller.operator.telemetry import metrics
from controller.operator.workqueue import WorkQueue
from controller.scheduler.decision import Decision
from controller.scheduler.ledger import Assumption, Ledger
from controller.scheduler.preemption import (
    PreemptionPlan,
    Victim,
    gained_nodes,
    may_preempt,
    preempted_status,
    preemption_message,
    select_victims,
)
from controller.scheduler.scheduler import Scheduler
from controller.scheduler.vocabulary import EVENT_PREEMPTED

logger = logging.getLogger("orca.preemption")

FAILPOINT_ENV: Final = "ORCA_TEST_FAILPOINT"
FAILPOINT_AFTER_VICTIMS: Final = "preempt-after-victims"


@dataclass
class VictimWrite:
    """One victim Workload's status write: what it loses and what it will say."""

    key: str
    status: WorkloadStatus
    assumption: Assumption
    victims: tuple[Victim, ...]
    resource_version: str | None


@dataclass
class PendingPreemption:
    """A preemption decided and booked, its victims' writes not yet sent."""

    plan: PreemptionPlan
    writes: list[VictimWrite] = field(default_factory=list)


class Preemption:
    """Decides preemptions in the loop and writes the victims' statuses."""

    def __init__(
        self,
        state: ClusterState,
        queue: WorkQueue,
        api: KubeApi,
        scheduler: Scheduler,
        priorities: PriorityIndex,
        post_event: Callable[[WorkloadRecord, str, str, str | None], None],
        now: Callable[[], str],
    ) -> None:
        self.state = state
        self.queue = queue
        self.api = api
        self.scheduler = scheduler
        self.priorities = priorities
        self.post_event = post_event
        self.now = now
        self.failpoint = os.environ.get(FAILPOINT_ENV) == FAILPOINT_AFTER_VICTIMS

    @property
    def ledger(self) -> Ledger:
        return self.state.ledger

    # -- in the loop ---------------------------------------------------------------------------

    def consider(
        self, record: WorkloadRecord, decision: Decision
    ) -> tuple[Decision, PendingPreemption | None]:
        """The decision to write for ``record``: ``decision`` itself, or, when preempting
        places more of it, the one made after its victims' replicas were removed (booked)."""
        workload = record.workload
        if workload is None:
            return decision, None
        priority = self.priorities.classes.resolve(workload.spec.priority_class_name)
        if not may_preempt(workload, decision, priority):
            return decision, None
        if priority.value <= self.priorities.classes.lowest:
            return decision, None  # nothing can be below it: no search (no attempt)
        metrics.PREEMPTION_ATTEMPTS.inc()
        preemptible: dict[str, int] = {}
        started: dict[str, datetime] = {}  # the start-time stand-in (core.preemption)
        records, classes = self.state.records, self.priorities.classes
        for key in self.ledger.workload_keys():  # those holding replicas
            other = records.get(key)
            if (
                other is None
                or other.workload is None  # unparseable: its priority is unknown
                or other.writing  # its own write in flight: not ours to change now
                or key == record.key
                or self.queue.processing(key)
            ):
                continue
            value = classes.resolve(other.workload.spec.priority_class_name).value
            if value < priority.value:
                preemptible[key] = value
                if (created := other.workload.metadata.creation_timestamp) is not None:
                    started[key] = created
        plan = select_victims(
            self.scheduler, workload, self.ledger, decision, priority.value, preemptible, started
        )
        if plan is None:
            return decision, None
        tried = self._try(plan, workload, decision)
        if tried is None:
            return decision, None
        plan, assumptions, after = tried
        pending = PendingPreemption(plan)
        now = self.now()
        for key, assumption in assumptions.items():
            victim = self.state.records[key]
            lost = tuple(v for v in plan.victims if v.key == key)
            previous = victim.status if victim.status is not None else WorkloadStatus()
            status = preempted_status(previous, lost, record.key, priority.value, now)
            self.queue.take(key)
            victim.writing = True
            pending.writes.append(
                VictimWrite(key, status, assumption, lost, victim.resource_version)
            )
        metrics.PREEMPTION_VICTIMS.observe(len(plan.victims))
        logger.info(
            "%s (priority %d) preempts %s",
            record.key,
            priority.value,
            ", ".join(f"{v.booking.alloc_id} on {v.booking.node}" for v in plan.victims),
        )
        return after, pending

    def _try(
        self, plan: PreemptionPlan, workload: Workload, decision: Decision
    ) -> tuple[PreemptionPlan, dict[str, Assumption], Decision] | None:
        """Book the victims' removal and decide again; keep only the nominations where the
        preemptor then landed (trying again without the others). None: it does not help."""
        while True:
            remaining = plan.remaining(self.ledger)
            assumptions = {key: self.ledger.assume(key, kept) for key, kept in remaining.items()}
            after = self.scheduler.schedule(workload, self.ledger, self.priorities.classes)
            trimmed = plan.only_on(gained_nodes(decision, after))
            if after.placed > decision.placed and trimmed == plan:
                return plan, assumptions, after
            for assumption in assumptions.values():
                self.ledger.forget(assumption)
            if after.placed <= decision.placed or trimmed is None:
                return None
            plan = trimmed  # fewer nominations each round: this ends

    # -- the writes ----------------------------------------------------------------------------

    async def write_victims(self, pending: PendingPreemption) -> bool:
        """Every victim's status write; True when all landed (the preemptor may write)."""
        results = await asyncio.gather(
            *(self._write_victim(w, pending.plan) for w in pending.writes)
        )
        landed = all(results)
        if landed and self.failpoint:
            logger.warning(
                "failpoint %s: the victims' writes landed; holding the preemptor's write of %s",
                FAILPOINT_AFTER_VICTIMS,
                pending.plan.preemptor,
            )
            await asyncio.Event().wait()  # until the test kills the process
        return landed

    async def _write_victim(self, write: VictimWrite, plan: PreemptionPlan) -> bool:
        key = write.key
        namespace, _, name = key.partition("/")
        payload = write.status.model_dump(by_alias=True, mode="json", exclude_none=True)
        landed = False
        try:
            response = await self.api.patch_workload_status(
                namespace, name, payload, write.resource_version
            )
        except ApiError as exc:
            if exc.not_found:  # gone: its room is free anyway
                self.ledger.confirm(write.assumption)
                self.state.delete_workload(key)
                metrics.STATUS_WRITES.labels(outcome=metrics.WRITE_NOT_FOUND).inc()
                landed = True
            else:
                self.ledger.forget(write.assumption)
                outcome = metrics.WRITE_CONFLICT if exc.conflict else metrics.WRITE_FAILED
                metrics.STATUS_WRITES.labels(outcome=outcome).inc()
                metrics.STATUS_WRITE_FAILURES.labels(code=str(exc.status)).inc()
                logger.info("preemption of %s for %s failed: %s", key, plan.preemptor, exc)
        except Fenced:
            self.ledger.forget(write.assumption)
            metrics.STATUS_WRITES.labels(outcome=metrics.WRITE_FENCED).inc()
        except TransportError as exc:
            self.ledger.forget(write.assumption)
            metrics.STATUS_WRITES.labels(outcome=metrics.WRITE_FAILED).inc()
            metrics.STATUS_WRITE_FAILURES.labels(code=exc.kind).inc()
            logger.warning("preemption of %s for %s failed: %s", key, plan.preemptor, exc)
        else:
            self.ledger.confirm(write.assumption)
            metrics.STATUS_WRITES.labels(outcome=metrics.WRITE_WRITTEN).inc()
            version = (response.get("metadata") or {}).get("resourceVersion")
            record = self.state.records.get(key)
            if record is not None and is_newer(version, record.resource_version):
                record.written_version = version
                record.resource_version = version
                record.status = write.status
            if record is not None:
                self._event(record, write, plan, version)
            landed = True
        finally:
            record = self.state.records.get(key)
            if record is not None:
                record.writing = False
            self.queue.done(key)
            if key in self.state.records:
                self.queue.add(key)  # decided again: it lands elsewhere if room exists
        return landed

    def _event(
        self, record: WorkloadRecord, write: VictimWrite, plan: PreemptionPlan, version: str | None
    ) -> None:
        """``Preempted`` on the victim, naming the preemptor (kube-scheduler's wording:
        ``Preempted by pod <uid> on node <node>``; here the preemptor's key and priority)."""
        message = preemption_message(write.victims, plan.preemptor, plan.priority)
        self.post_event(record, EVENT_PREEMPTED, message, version)
