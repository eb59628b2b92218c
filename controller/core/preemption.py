"""Preemption: which lower-priority replicas a short Workload may remove to place its own.

kube-scheduler's DefaultPreemption (``framework/plugins/defaultpreemption``), in miniature.
A Job or Service whose decision is ``Code.UNSCHEDULABLE`` (some node failed only for lack of
room) and whose class does not say ``preemptionPolicy: Never`` looks, per missing replica:

    candidates  nodes that pass every filter but capacity (the cycle's static filters)
    per node    remove replicas of strictly lower-priority Workloads, lowest priority first,
                until the replica fits; none left and still no room: not a candidate.
                Then reprieve: walk the removed ones highest priority first and give back
                each one the replica does not need. What is left are the node's victims.
    select      the node whose highest victim priority is lowest, then the fewest victims,
                then the lowest hostname (the table is hostname-sorted)
    repeat      for the next missing replica, on what the choices so far left

Equal or higher priorities are never touched, so a victim requeued later can never preempt
its preemptor back (no cascades upward). Ties between victims of one priority go by AllocID,
so the choice is a function of the cluster, not of the order nodes or Workloads were listed.

Pure: the ledger is read, never written. The caller removes the victims' replicas (the
operator assumes their shortened bookings, ``orca plan`` loads them) and schedules the
preemptor again on that ledger, which also re-checks every filter; only if that places more
replicas than before does the preemption stand.

DaemonSets do not preempt here (kube's DaemonSet Pods do, one node each): a DaemonSet replica
belongs on one particular node, and evicting for it is a policy of its own. Their replicas can
be victims like any other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from controller.api.models import Condition, Phase, Workload, WorkloadKind, WorkloadStatus
from controller.core.decision import Decision, phase_of
from controller.core.framework import Code
from controller.core.ledger import Booking, Ledger
from controller.core.priority import Priority
from controller.core.scheduler import Scheduler
from controller.core.status import nodes_summary
from controller.core.vocabulary import CONDITION_PREEMPTED, CONDITION_SCHEDULED, REASON_PREEMPTED


@dataclass(frozen=True, slots=True)
class Victim:
    """One replica a preemption removes."""

    key: str  # the victim Workload, ``<namespace>/<name>``
    booking: Booking
    priority: int


@dataclass(frozen=True)
class Nomination:
    """One missing replica of the preemptor: the node chosen and what it removes there."""

    node: str
    victims: tuple[Victim, ...]


@dataclass(frozen=True)
class PreemptionPlan:
    """The victims a preemptor needs, node by node, in the order they were chosen."""

    preemptor: str
    priority: int
    nominations: tuple[Nomination, ...]

    @property
    def victims(self) -> tuple[Victim, ...]:
        return tuple(v for n in self.nominations for v in n.victims)

    def victim_keys(self) -> list[str]:
        """The victim Workloads, each once, sorted."""
        return sorted({v.key for v in self.victims})

    def remaining(self, ledger: Ledger) -> dict[str, tuple[Booking, ...]]:
        """Per victim Workload: its bookings without the preempted replicas."""
        removed = {(v.key, v.booking.alloc_id) for v in self.victims}
        return {
            key: tuple(b for b in ledger.bookings(key) if (key, b.alloc_id) not in removed)
            for key in self.victim_keys()
        }


def may_preempt(workload: Workload, decision: Decision, priority: Priority) -> bool:
    """Whether a decision is one preemption could improve: a Job or Service short of
    replicas only for lack of room, whose class allows preempting."""
    return (
        workload.spec.kind is not WorkloadKind.DAEMONSET
        and priority.preempts
        and priority.error is None
        and decision.phase is not Phase.INVALID
        and decision.code is Code.UNSCHEDULABLE
        and decision.placed < decision.desired
    )


def select_victims(
    scheduler: Scheduler,
    workload: Workload,
    ledger: Ledger,
    decision: Decision,
    priority: int,
    preemptible: Mapping[str, int],
) -> PreemptionPlan | None:
    """The victims ``workload`` (at ``priority``, short as ``decision`` says) would need.

    ``preemptible`` maps the Workloads whose replicas may be removed now to their priority
    (the caller leaves out those it cannot touch, e.g. with a status write in flight); only
    those strictly below ``priority`` are considered. None when no missing replica can be
    placed by preempting.
    """
    prepared = scheduler.prepare(workload, ledger)
    if prepared.filtered is None:
        return None
    cycle = prepared.cycle
    table = ledger.table
    index = table.index
    free_cpu, free_memory = cycle.free_cpu.copy(), cycle.free_memory.copy()
    kept = {b.alloc_id for b in prepared.kept.values()}
    for b in decision.bookings:  # the decision's new replicas take room too
        i = index.get(b.node)
        if i is not None and b.alloc_id not in kept:
            free_cpu[i] -= b.cpu
            free_memory[i] -= b.memory
    passes = prepared.filtered.passes
    pools: dict[int, list[Victim]] = {}
    for key in sorted(preemptible):
        value = preemptible[key]
        if value >= priority or key == workload.key:
            continue
        for b in ledger.bookings(key):
            i = index.get(b.node)
            if i is not None and passes[i]:
                pools.setdefault(i, []).append(Victim(key, b, value))
    cpu, memory = cycle.cpu, cycle.memory
    touched: set[int] = set()  # nodes this plan freed room on (leftovers may fit more)
    nominations: list[Nomination] = []
    for _ in range(decision.desired - decision.placed):
        best: tuple[tuple[int, int, str], int, tuple[Victim, ...]] | None = None
        for i, pool in pools.items():
            victims = victims_on_node(int(free_cpu[i]), int(free_memory[i]), cpu, memory, pool)
            if victims is None or (not victims and i not in touched):
                continue
            highest = max((v.priority for v in victims), default=-(2**63))
            rank = (highest, len(victims), table.hostnames[i])
            if best is None or rank < best[0]:
                best = (rank, i, victims)
        if best is None:
            break
        _, i, victims = best
        for v in victims:
            free_cpu[i] += v.booking.cpu
            free_memory[i] += v.booking.memory
        free_cpu[i] -= cpu
        free_memory[i] -= memory
        gone = set(victims)
        pools[i] = [v for v in pools[i] if v not in gone]
        touched.add(i)
        nominations.append(Nomination(table.hostnames[i], victims))
    if not any(n.victims for n in nominations):
        return None
    return PreemptionPlan(workload.key, priority, tuple(nominations))


def victims_on_node(
    free_cpu: int, free_memory: int, cpu: int, memory: int, pool: list[Victim]
) -> tuple[Victim, ...] | None:
    """The fewest of ``pool`` (replicas on one node) whose removal makes room for one replica
    of (``cpu``, ``memory``): remove lowest priority first until it fits, then give back,
    highest priority first, each one not needed. None if removing them all is not enough.
    A request of zero fits anywhere (as ``ResourcesFit`` says)."""

    def fits(c: int, m: int) -> bool:
        return (not cpu or c >= cpu) and (not memory or m >= memory)

    order = sorted(pool, key=lambda v: (v.priority, v.booking.alloc_id))
    removed: list[Victim] = []
    for victim in order:
        if fits(free_cpu, free_memory):
            break
        free_cpu += victim.booking.cpu
        free_memory += victim.booking.memory
        removed.append(victim)
    if not fits(free_cpu, free_memory):
        return None
    victims: list[Victim] = []
    for victim in reversed(removed):  # highest priority (then AllocID) first
        c, m = free_cpu - victim.booking.cpu, free_memory - victim.booking.memory
        if fits(c, m):
            free_cpu, free_memory = c, m  # reprieved
        else:
            victims.append(victim)
    victims.reverse()
    return tuple(victims)


def preemption_message(removed: Sequence[Victim], preemptor: str, priority: int) -> str:
    """``1 replica preempted by shop/batch (priority 1000) on node-a``: the victim's
    condition, status message and Event say who took its room, and where."""
    count = len(removed)
    nodes = ", ".join(sorted({v.booking.node for v in removed}))
    noun = "replica" if count == 1 else "replicas"
    return f"{count} {noun} preempted by {preemptor} (priority {priority}) on {nodes}"


def preempted_status(
    previous: WorkloadStatus, removed: Sequence[Victim], preemptor: str, priority: int, now: str
) -> WorkloadStatus:
    """A victim's status with the preempted replicas removed: phase recomputed, the
    ``Scheduled`` condition False with reason ``Preempted``, and a ``Preempted`` condition
    that stays (later decisions keep other conditions) so ``orca explain`` can say who."""
    gone = {v.booking.alloc_id for v in removed}
    placements = [p for p in previous.placements if p.alloc_id not in gone]
    desired = previous.desired if previous.desired is not None else len(previous.placements)
    message = preemption_message(removed, preemptor, priority)
    conditions: list[Condition] = []
    for old in previous.conditions:
        if old.type == CONDITION_SCHEDULED:
            since = old.last_transition_time if old.status == "False" else now
            old = Condition(
                type=CONDITION_SCHEDULED,
                status="False",
                reason=REASON_PREEMPTED,
                message=message,
                last_transition_time=since,
                observed_generation=old.observed_generation,
            )
        if old.type != CONDITION_PREEMPTED:
            conditions.append(old)
    conditions.append(
        Condition(
            type=CONDITION_PREEMPTED,
            status="True",
            reason=REASON_PREEMPTED,
            message=message,
            last_transition_time=now,
            observed_generation=previous.observed_generation,
        )
    )
    return previous.model_copy(
        update={
            "phase": phase_of(len(placements), desired) if desired else Phase.UNSCHEDULABLE,
            "placed": len(placements),
            "placements": placements,
            "conditions": conditions,
            "message": message,
            "nodes": nodes_summary([p.node for p in placements]),
        }
    )
