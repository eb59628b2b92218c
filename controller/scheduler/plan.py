"""The scheduler over a batch of Workloads, offline: ``orca plan``'s core.

Workloads are planned highest priority first (equal priorities in the order given), each
seeing the placements made before it, as the operator's queue orders them; a Workload short
of room preempts lower-priority replicas as the operator would
(``controller.scheduler.preemption``). Pure: the ledger given (or built from the Workloads'
statuses) is the only thing written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from controller.api.models import Phase, Workload, WorkloadStatus, workload_selector
from controller.scheduler.budgets import budgeted
from controller.scheduler.ledger import Ledger, ledger_from_statuses
from controller.scheduler.nodes import NodeInfo, rfc3339_to_epoch
from controller.scheduler.plugins.topology_spread import ConstraintVerdict, explain_spread
from controller.scheduler.preemption import (
    Victim,
    may_preempt,
    preempt_within_budgets,
    victim_budget,
    with_budget_note,
)
from controller.scheduler.priority import NO_CLASSES, Priority, PriorityClasses
from controller.scheduler.scheduler import Scheduler
from controller.scheduler.status import rfc3339_now, status_from_decision


@dataclass(frozen=True)
class Preempted:
    """One replica a preemption removed: whose, where, and for whom."""

    victim: Victim
    by: str  # the preemptor's key
    priority: int  # the preemptor's


@dataclass(frozen=True)
class PlanResult:
    workload: Workload
    status: WorkloadStatus
    victims: tuple[Preempted, ...] = ()  # what this Workload preempted
    preempted: list[Preempted] = field(default_factory=list)  # its replicas preempted
    spread: tuple[ConstraintVerdict, ...] = ()  # its topologySpread, after its decision

    @property
    def fully_placed(self) -> bool:
        return self.status.phase is Phase.SCHEDULED


def plan(
    nodes: Iterable[NodeInfo],
    workloads: Sequence[Workload],
    ledger: Ledger | None = None,
    scheduler: Scheduler | None = None,
    now: str | None = None,
    classes: PriorityClasses = NO_CLASSES,
    known_priorities: dict[str, int] | None = None,
    on_first_decision: Callable[[], None] | None = None,
    known_started: Mapping[str, datetime] | None = None,
    before_each: Callable[[Workload, Ledger], None] | None = None,
) -> list[PlanResult]:
    """Plan ``workloads`` onto ``nodes`` (or onto ``ledger``'s table if given), highest
    priority first, ties in the order given; results in planning order.

    Preemption may remove replicas of the given Workloads planned later (lower priority) and
    of the Workloads in ``known_priorities`` (others in the ledger, e.g. the cluster's, by
    the priority their status records); the ledger holds anything else out of reach. Between
    equal candidate nodes it prefers the victims started last: a Workload's
    ``metadata.creationTimestamp`` (from the files, or ``known_started`` for the others); a
    Workload without one counts as started now.

    ``now`` (RFC 3339; default the current time) is the plan's clock: the conditions' times,
    and when replicas on a node with a NoExecute taint they tolerate for a while move (the
    same files and ``now`` plan the same).

    ``before_each`` is called with each Workload and the ledger just before its decision
    (``orca explain --drain`` narrates one Workload at its turn)."""
    if ledger is None:
        ledger = ledger_from_statuses(nodes, workloads)
    batch = Batch.of(workloads, classes, known_priorities, known_started)
    turn = Turns(batch, ledger, scheduler or Scheduler(gang_grace=False), now or rfc3339_now())
    results: list[PlanResult] = []
    for workload in batch.order:
        if before_each is not None:
            before_each(workload, ledger)
        results.append(turn.decide(workload))
        if on_first_decision is not None and len(results) == 1:
            on_first_decision()
    return results


@dataclass(frozen=True)
class Batch:
    """What a plan of these Workloads knows before its first decision: their order (highest
    priority first, ties in the order given), each one's resolved priority, the priorities
    and start stand-ins preemption reads (theirs and the ``known`` ones of Workloads in the
    ledger that are not planned), and the floor at or below which nothing is preemptible.
    Computed once, so a planner that plans the same batch on many ledgers (one per failure
    domain, ``controller.scheduler.resilience``) does not compute it per plan."""

    order: tuple[Workload, ...]
    resolved: Mapping[str, Priority]
    priorities: Mapping[str, int]
    started: Mapping[str, datetime]
    floor: int
    classes: PriorityClasses
    position: Mapping[str, int]  # a key's turn: its index in ``order``
    #: The Workloads a preemption may not take below a budget (a disruption budget or a
    #: gang's minCount: ``controller.scheduler.budgets``).
    budgeted: tuple[Workload, ...] = ()
    #: Each key of ``order``, in its order (the strings ``position`` holds).
    keys: tuple[str, ...] = ()

    @classmethod
    def of(
        cls,
        workloads: Sequence[Workload],
        classes: PriorityClasses = NO_CLASSES,
        known_priorities: Mapping[str, int] | None = None,
        known_started: Mapping[str, datetime] | None = None,
    ) -> Batch:
        # Each key built once and shared by every mapping: ``Workload.key`` builds a new
        # string per call, four per Workload here (25 MB of the failure domains' answer on
        # 100,000 Workloads, bench_restart_memory).
        keyed = [(w.key, w) for w in workloads]
        resolved = {key: classes.resolve(w.spec.priority_class_name) for key, w in keyed}
        priorities = dict(known_priorities or {})
        priorities.update({key: p.value for key, p in resolved.items() if p.error is None})
        started = dict(known_started or {})
        started.update(
            {
                key: w.metadata.creation_timestamp
                for key, w in keyed
                if w.metadata.creation_timestamp
            }
        )
        ordered = sorted(keyed, key=lambda k: -resolved[k[0]].value)  # stable
        order = tuple(w for _, w in ordered)
        return cls(
            order=order,
            resolved=resolved,
            priorities=priorities,
            started=started,
            floor=min([classes.lowest, *priorities.values()]),  # nothing preemptible at or below
            classes=classes,
            position={key: i for i, (key, _) in enumerate(ordered)},
            budgeted=tuple(w for w in workloads if budgeted(w)),
            keys=tuple(key for key, _ in ordered),
        )


class Turns:
    """One plan of a ``Batch`` on one ledger, a Workload at a time: ``decide`` it at its turn
    (the caller keeps to ``Batch.order``), preempting as the operator would, and book the
    decision in the ledger. ``plan`` decides every Workload in order; the resilience planner
    only those whose turn can differ from the cluster as it is."""

    def __init__(self, batch: Batch, ledger: Ledger, scheduler: Scheduler, now: str) -> None:
        self.batch = batch
        self.ledger = ledger
        self.scheduler = scheduler
        self.timestamp = now
        self.clock = rfc3339_to_epoch(now)
        self.preempted: dict[str, list[Preempted]] = {}

    def decide(self, workload: Workload) -> PlanResult:
        """``workload``'s decision at its turn, booked; its result."""
        batch, ledger, scheduler, clock = self.batch, self.ledger, self.scheduler, self.clock
        key = workload.key
        decision = scheduler.schedule(workload, ledger, batch.classes, now=clock)
        victims: tuple[Preempted, ...] = ()
        priority = batch.resolved[key]
        if may_preempt(workload, decision, priority) and priority.value > batch.floor:
            preemptible = {
                k: v for k, v in batch.priorities.items() if k != key and ledger.bookings(k)
            }
            budgets = {
                w.key: budget
                for w in batch.budgeted
                if w.key in preemptible
                and (budget := victim_budget(scheduler, w, ledger, now=clock)) is not None
            }
            found, blockers = preempt_within_budgets(
                scheduler,
                workload,
                ledger,
                decision,
                batch.classes,
                preemptible,
                batch.started,
                budgets,
                now=clock,
            )
            decision = with_budget_note(decision, blockers)
            if found is not None:  # as the operator does (controller.operator.preemption)
                chosen, decision = found
                for victim_key, kept in chosen.remaining(ledger).items():
                    ledger.load(victim_key, kept)
                victims = tuple(Preempted(v, key, priority.value) for v in chosen.victims)
                for p in victims:
                    self.preempted.setdefault(p.victim.key, []).append(p)
        ledger.load(key, decision.bookings)
        status = status_from_decision(
            decision,
            workload.metadata.generation,
            workload.status,
            self.timestamp,
            workload_selector(workload.metadata.name),
        )
        spread = (
            _spread(scheduler, workload, ledger, clock) if workload.spec.topology_spread else ()
        )
        return PlanResult(workload, status, victims, self.preempted.setdefault(key, []), spread)


def _spread(
    scheduler: Scheduler, workload: Workload, ledger: Ledger, now: float
) -> tuple[ConstraintVerdict, ...]:
    """The Workload's topology spread constraints (defaults filled in) and domains with the
    replicas it now holds, as its next cycle would count them (later preemptions of its
    replicas are not reflected)."""
    prepared = scheduler.prepare(workload, ledger, now=now)
    if prepared.filtered is None:
        return ()
    return explain_spread(prepared.cycle)
