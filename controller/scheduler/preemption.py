"""Preemption: which lower-priority replicas a short Workload may remove to place its own.

kube-scheduler's DefaultPreemption (``framework/plugins/defaultpreemption``), in miniature.
A Job or Service whose decision is ``Code.UNSCHEDULABLE`` (some node failed only for lack of
room) and whose class does not say ``preemptionPolicy: Never`` looks, per missing replica:

    candidates  nodes that pass every filter but capacity (the cycle's static filters)
    per node    remove replicas of strictly lower-priority Workloads, lowest priority first,
                until the replica fits; none left and still no room: not a candidate.
                Then reprieve: walk the removed ones highest priority first and give back
                each one the replica does not need. What is left are the node's victims.
    select      the node as kube's ``pickOneNodeForPreemption`` (framework/preemption/
                preemption.go) orders candidates, after its PDB rule (orca has no PDBs):
                1. the lowest priority of the highest-priority victim;
                2. the smallest sum of victim priorities, each shifted by 2^31 first (kube
                   adds ``MaxInt32 + 1`` so every term is >= 0: with negative priorities a
                   node with more victims still sums higher, never lower);
                3. the fewest victims;
                4. the latest start of the highest-priority victims: per node the earliest
                   start among its victims of the highest priority (``GetEarliestPodStartTime``),
                   and the node where that is latest wins. orca's replicas have no start
                   time; the stand-in is the victim Workload's ``metadata.creationTimestamp``
                   (``started``), and a Workload without one counts as started now, i.e. the
                   latest (kube's ``GetPodStartTime`` for a Pod without ``status.startTime``);
                5. the lowest hostname (kube takes the first of the remaining candidates, in
                   map order, which is not deterministic; the table is hostname-sorted).
    repeat      for the next missing replica, on what the choices so far left

Equal or higher priorities are never touched, so a victim requeued later can never preempt
its preemptor back (no cascades upward). On a node, replicas are removed least important first
and reprieved most important first, importance being kube's ``MoreImportantPod`` (higher
priority, then the earlier start), then the lower AllocID, so the choice is a function of the
cluster, not of the order nodes or Workloads were listed.

Pure: the ledger is read, never written. ``preempt`` schedules the preemptor again without the
victims' replicas (on a scratch copy of the ledger), which also re-checks every filter
(per-replica ones such as topology spread are not modelled here); only if that places more
replicas than before does the preemption stand, and only on the nodes where it placed them
(``only_on``). The caller then removes the victims' replicas: the operator assumes their
shortened bookings, ``orca plan`` loads them.

A DaemonSet preempts as kube's DaemonSet Pods do (each is bound to its node): on every node it
wants (passes its static filters) that lacks room for it, the same per-node rule picks the
victims there; there is no node to choose. Its replicas can be victims like any other.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Final

import numpy as np

from controller.api import resources as names
from controller.api.models import Condition, Phase, Workload, WorkloadKind, WorkloadStatus
from controller.api.resources import Scalars
from controller.scheduler.budgets import Budget, budget_of
from controller.scheduler.decision import Decision, phase_of
from controller.scheduler.framework import Code, CycleState
from controller.scheduler.ledger import Booking, Ledger, has_room, scalar_amount
from controller.scheduler.nodes import BoolArray, IntArray, NodeTable
from controller.scheduler.priority import Priority, PriorityClasses
from controller.scheduler.scheduler import Scheduler
from controller.scheduler.status import OWN_CONDITIONS, Situation, nodes_summary, own_conditions
from controller.scheduler.vocabulary import CONDITION_PREEMPTED, REASON_PREEMPTED


@dataclass(frozen=True, slots=True)
class Victim:
    """One replica a preemption removes."""

    key: str  # the victim Workload, ``<namespace>/<name>``
    booking: Booking
    priority: int
    started: datetime | None = None  # its Workload's creationTimestamp; None: "now" (latest)
    start_key: int = field(init=False, compare=False, repr=False)
    """``started`` as microseconds since the epoch, ``LATEST`` when unknown."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "start_key", start_key(self.started))


@dataclass(frozen=True)
class Demand:
    """What one replica of the preemptor asks of a node, over every dimension ``ResourcesFit``
    checks: a Pod, cpu, memory and each scalar resource it asks for. Free room and victims'
    sizes are vectors over the same dimensions (``free_at``, ``size``), so the per-node rule
    is one loop over them, whatever resources are asked for."""

    cpu: int
    memory: int
    scalars: Scalars = ()

    @property
    def dimensions(self) -> tuple[str, ...]:
        return (names.PODS, names.CPU, names.MEMORY, *(name for name, _ in self.scalars))

    @property
    def vector(self) -> tuple[int, ...]:
        return (1, self.cpu, self.memory, *(amount for _, amount in self.scalars))

    def size(self, booking: Booking) -> tuple[int, ...]:
        """What removing ``booking`` frees, per dimension."""
        return (
            1,
            booking.cpu,
            booking.memory,
            *(scalar_amount(booking.scalars, name) for name, _ in self.scalars),
        )

    def free_at(self, cycle: CycleState, i: int) -> list[int]:
        """The cycle's free room on node ``i``, per dimension."""
        return [
            int(cycle.free_pods[i]),
            int(cycle.free_cpu[i]),
            int(cycle.free_memory[i]),
            *(int(cycle.free_scalars[name][i]) for name, _ in self.scalars),
        ]

    def columns(self, cycle: CycleState) -> list[IntArray]:
        """The cycle's free room of every node, per dimension (live: the cycle's own arrays)."""
        return [
            cycle.free_pods,
            cycle.free_cpu,
            cycle.free_memory,
            *(cycle.free_scalars[name] for name, _ in self.scalars),
        ]

    def fits(self, free: list[int]) -> bool:
        """``has_room`` on every dimension: the one capacity rule, for one node."""
        return all(has_room(f, r) for f, r in zip(free, self.vector, strict=True))

    @classmethod
    def of(cls, cycle: CycleState) -> Demand:
        return cls(cycle.cpu, cycle.memory, cycle.scalars)


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

    def only_on(self, nodes: set[str]) -> PreemptionPlan | None:
        """The plan without the nominations on other nodes (where the preemptor, decided
        again, did not land: a filter the plan does not model, e.g. topology spread, said
        no there), so no replica is removed for nothing; None if no victim is left."""
        kept = tuple(n for n in self.nominations if n.node in nodes)
        if not any(n.victims for n in kept):
            return None
        return PreemptionPlan(self.preemptor, self.priority, kept)

    def lifted(self) -> dict[str, tuple[Booking, ...]]:
        """Per victim Workload: the bookings the plan removes (``Ledger.what_if``'s ``lift``)."""
        out: dict[str, tuple[Booking, ...]] = {}
        for v in self.victims:
            out[v.key] = (*out.get(v.key, ()), v.booking)
        return out

    def remaining(self, ledger: Ledger) -> dict[str, tuple[Booking, ...]]:
        """Per victim Workload: its bookings without the preempted replicas."""
        removed = {(v.key, v.booking.alloc_id) for v in self.victims}
        return {
            key: tuple(b for b in ledger.bookings(key) if (key, b.alloc_id) not in removed)
            for key in self.victim_keys()
        }


_NO_PRIORITY = np.iinfo(np.int64).max  # ``lowest`` of a node without preemptible replicas
PRIORITY_SHIFT: Final = 2**31
"""kube's ``math.MaxInt32 + 1``, added to each victim priority before summing."""
LATEST: Final = 2**62
"""The start key of a replica whose start is unknown: after any real time (``time.Now()``)."""
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND: Final = datetime.resolution


def start_key(started: datetime | None) -> int:
    """A start time as an integer that orders as the times do (microseconds since the epoch;
    a naive time is taken as UTC), ``LATEST`` for None."""
    if started is None:
        return LATEST
    if started.tzinfo is None:
        started = started.replace(tzinfo=UTC)
    return (started - _EPOCH) // _MICROSECOND


def node_rank(victims: Sequence[Victim], hostname: str) -> tuple[int, int, int, int, str]:
    """The key kube's ``pickOneNodeForPreemption`` orders candidate nodes by, smallest best:
    (highest victim priority, sum of shifted priorities, victims, -earliest start of the
    highest-priority victims, hostname). ``victims`` is not empty."""
    highest = max(v.priority for v in victims)
    earliest = min(v.start_key for v in victims if v.priority == highest)
    total = sum(v.priority + PRIORITY_SHIFT for v in victims)
    return (highest, total, len(victims), -earliest, hostname)


def importance(victim: Victim) -> tuple[int, int, str]:
    """Sorts the most important first: kube's ``MoreImportantPod`` (the higher priority, then
    the earlier start, is more important), then the lower AllocID, for a total order."""
    return (-victim.priority, victim.start_key, victim.booking.alloc_id)


def gained_nodes(before: Decision, after: Decision) -> set[str]:
    """Nodes where ``after`` holds more replicas than ``before``."""
    had = Counter(b.node for b in before.bookings)
    has = Counter(b.node for b in after.bookings)
    return {node for node, count in has.items() if count > had[node]}


def may_preempt(workload: Workload, decision: Decision, priority: Priority) -> bool:
    """Whether a decision is one preemption could improve: some node failed it only for lack
    of room (a Job or Service short of replicas, a DaemonSet missing from a node it wants),
    and its class allows preempting."""
    return (
        priority.preempts
        and priority.error is None
        and decision.phase is not Phase.INVALID
        and decision.code is Code.UNSCHEDULABLE
        and (workload.spec.kind is WorkloadKind.DAEMONSET or decision.placed < decision.desired)
    )


def select_victims(
    scheduler: Scheduler,
    workload: Workload,
    ledger: Ledger,
    decision: Decision,
    priority: int,
    preemptible: Mapping[str, int],
    started: Mapping[str, datetime] | None = None,
    *,
    now: float,
    budgets: Mapping[str, Budget] | None = None,
) -> PreemptionPlan | None:
    """The victims ``workload`` (at ``priority``, short as ``decision`` says) would need.

    ``preemptible`` maps the Workloads whose replicas may be removed now to their priority
    (the caller leaves out those it cannot touch, e.g. with a status write in flight); only
    those strictly below ``priority`` are considered. ``started`` maps Workloads to their
    start stand-in (``metadata.creationTimestamp``); one absent counts as started now.
    ``budgets`` (``controller.scheduler.budgets``) caps, per Workload, how many of its
    replicas the plan may take in all: a budget is never broken, whatever the preemptor's
    priority. None when no missing replica can be placed by preempting.

    Exact, and cheap on big clusters: each node's rank (``node_rank``) is bounded below by
    (its lowest victim priority, that times the fewest victims that could cover its
    shortfall given its largest victim, those fewest, minus the latest start on the node,
    its hostname), computed with numpy for every node at once; nodes are evaluated in that
    order and the search stops when the next bound cannot beat the best rank found.
    """
    prepared = scheduler.prepare(workload, ledger, now=now)
    if prepared.filtered is None:
        return None
    table = ledger.table
    index = table.index
    kept = {b.alloc_id for b in prepared.kept.values()}
    # The plan's own scratch: the cycle with the decision's new replicas placed too.
    cycle = scheduler.framework.what_if(
        prepared.cycle, book=[b for b in decision.bookings if b.alloc_id not in kept]
    )
    demand = Demand.of(cycle)
    pools = _Pools.of(
        ledger,
        preemptible,
        started or {},
        priority,
        workload.key,
        prepared.filtered.passes,
        demand,
        {key: b.allowed for key, b in (budgets or {}).items()},
    )
    if pools is None:
        return None
    if cycle.daemon:
        holding = {index[b.node] for b in decision.bookings if b.node in index}
        daemon = _daemon_nominations(pools, holding, cycle, demand, table)
        return PreemptionPlan(workload.key, priority, daemon) if daemon else None
    touched: set[int] = set()  # nodes this plan freed room on (leftovers may fit more)
    nominations: list[Nomination] = []
    for _ in range(decision.desired - decision.placed):
        chosen = _leftover(touched, cycle, demand)
        if chosen is None:
            chosen = pools.best(demand.columns(cycle), demand, table.hostnames)
        if chosen is None:
            break
        i, victims = chosen
        for v in victims:
            b = v.booking
            cycle.give(i, b.cpu, b.memory, b.scalars, own=False)
        cycle.take_one(i)
        if victims:
            pools.spend(i, victims)
        touched.add(i)
        nominations.append(Nomination(table.hostnames[i], victims))
    if not any(n.victims for n in nominations):
        return None
    return PreemptionPlan(workload.key, priority, tuple(nominations))


def preempt(
    scheduler: Scheduler,
    workload: Workload,
    ledger: Ledger,
    decision: Decision,
    classes: PriorityClasses,
    preemptible: Mapping[str, int],
    started: Mapping[str, datetime] | None = None,
    *,
    now: float,
    budgets: Mapping[str, Budget] | None = None,
) -> tuple[PreemptionPlan, Decision] | None:
    """The preemption ``orca plan`` and the operator both make: the victims
    (``select_victims``, within ``budgets``), then ``workload`` decided again on a scratch
    copy of ``ledger`` without their replicas, which re-checks every filter (per-replica ones
    such as topology spread are not modelled by the plan); the plan stands only if that
    places more replicas than ``decision`` did, and only with the nominations on the nodes
    where it placed them (``only_on``: no replica is removed for nothing), trying again
    without the others. A gang's decision places all or nothing, so a plan that does not make
    room for the whole gang places nothing more and does not stand. The plan and the
    decision made without its victims, or None when preempting does not help. Pure:
    ``ledger`` is read, never written; the caller removes the victims' replicas."""
    priority = classes.resolve(workload.spec.priority_class_name).value
    plan = select_victims(
        scheduler,
        workload,
        ledger,
        decision,
        priority,
        preemptible,
        started,
        now=now,
        budgets=budgets,
    )
    while plan is not None:
        after = scheduler.schedule(workload, ledger.what_if(lift=plan.lifted()), classes, now=now)
        trimmed = plan.only_on(gained_nodes(decision, after))
        if after.placed > decision.placed and trimmed == plan:
            return plan, after
        plan = trimmed if after.placed > decision.placed else None  # fewer each round: ends
    return None


def victim_budget(
    scheduler: Scheduler, victim: Workload, ledger: Ledger, *, now: float
) -> Budget | None:
    """The budget a preemption keeps for ``victim`` in ``ledger`` (``budgets.budget_of``),
    on its replicas available: those on Ready nodes (``Ledger.healthy``, as kube counts
    Ready Pods), so a replica kept on a NotReady node leaves no room to take another. A
    DaemonSet's percentages are of the nodes it is for now (``Scheduler.selected``), not of
    its status's ``desired``: unless it is ``Mandatory``, that counts only the nodes it
    fits, so each replica a preemption took shrank it and the next preemption's allowance
    with it (a DaemonSet of 6 with ``minAvailable: 50%`` went down to 1, five preemptions in
    a row)."""
    desired = None
    if victim.spec.kind is WorkloadKind.DAEMONSET and victim.spec.disruption is not None:
        desired = scheduler.selected(victim, ledger, now=now)
    return budget_of(victim, ledger.healthy(victim.key), desired=desired)


def preempt_within_budgets(
    scheduler: Scheduler,
    workload: Workload,
    ledger: Ledger,
    decision: Decision,
    classes: PriorityClasses,
    preemptible: Mapping[str, int],
    started: Mapping[str, datetime] | None,
    budgets: Mapping[str, Budget],
    *,
    now: float,
) -> tuple[tuple[PreemptionPlan, Decision] | None, list[Budget]]:
    """``preempt`` within ``budgets``, and when that finds nothing, the budgets that stood in
    the way: those a preemption made without budgets would break (sorted by key; empty when
    preempting would not help even so). What ``orca plan``, the operator and ``explain`` ask;
    the second search runs only when the first found nothing and some budget exists."""
    args = (scheduler, workload, ledger, decision, classes, preemptible, started)
    found = preempt(*args, now=now, budgets=budgets)
    if found is not None or not budgets:
        return found, []
    unbounded = preempt(*args, now=now)
    if unbounded is None:
        return None, []
    taken = Counter(v.key for v in unbounded[0].victims)
    blockers = [
        budgets[key]
        for key, count in taken.items()
        if key in budgets and count > budgets[key].allowed
    ]
    return None, sorted(blockers, key=lambda b: b.key)


def with_budget_note(decision: Decision, blockers: Sequence[Budget]) -> Decision:
    """``decision`` whose message ends with the budgets that keep it from preempting:
    `` Preempting would break the disruption budget of shop/web (minAvailable 3).``"""
    if not blockers:
        return decision
    return replace(decision, message=decision.message + budget_message(blockers))


def preemption_outlook(
    scheduler: Scheduler,
    workload: Workload,
    ledger: Ledger,
    decision: Decision,
    classes: PriorityClasses,
    workloads: Mapping[str, Workload],
    *,
    now: float,
) -> str | None:
    """What preempting would do for ``workload`` short as ``decision`` says, in a line
    (``orca explain``): the replicas it would remove, or the budgets that forbid it, or that
    nothing below it makes room; None when it may not preempt at all. Every Workload of
    ``workloads`` with lower priority and replicas in ``ledger`` is preemptible, as the
    operator sees them when no write is in flight."""
    priority = classes.resolve(workload.spec.priority_class_name)
    if not may_preempt(workload, decision, priority):
        return None
    preemptible: dict[str, int] = {}
    started: dict[str, datetime] = {}
    budgets: dict[str, Budget] = {}
    for key, other in workloads.items():
        booked = ledger.placed(key)
        value = classes.resolve(other.spec.priority_class_name).value
        if key == workload.key or not booked or value >= priority.value:
            continue
        preemptible[key] = value
        if other.metadata.creation_timestamp is not None:
            started[key] = other.metadata.creation_timestamp
        budget = victim_budget(scheduler, other, ledger, now=now)
        if budget is not None:
            budgets[key] = budget
    found, blockers = preempt_within_budgets(
        scheduler, workload, ledger, decision, classes, preemptible, started, budgets, now=now
    )
    if found is not None:
        plan, after = found
        return (
            f"would remove {len(plan.victims)} replica(s) of "
            f"{', '.join(plan.victim_keys())}, and place {after.placed}/{after.desired}"
        )
    if blockers:
        return "refused:" + budget_message(blockers).removeprefix(" Preempting")
    return "nothing of lower priority makes room"


def budget_message(blockers: Sequence[Budget]) -> str:
    """`` Preempting would break the disruption budget of shop/web (minAvailable 3).``"""
    shown = ", ".join(b.describe() for b in blockers)
    noun = "budget" if len(blockers) == 1 else "budgets"
    return f" Preempting would break the disruption {noun} of {shown}."


def _daemon_nominations(
    pools: _Pools, holding: set[int], cycle: CycleState, demand: Demand, table: NodeTable
) -> tuple[Nomination, ...]:
    """Per wanted node without the DaemonSet and without room for it, in hostname order: the
    victims that make room there, if any can."""
    nominations = []
    for i in np.flatnonzero(pools.has).tolist():
        free = demand.free_at(cycle, i)
        if i in holding or demand.fits(free):
            continue
        victims = pools.victims_on(i, free, demand)
        if victims:
            pools.spend(i, victims)
            nominations.append(Nomination(table.hostnames[i], victims))
    return tuple(nominations)


def _leftover(
    touched: set[int], cycle: CycleState, demand: Demand
) -> tuple[int, tuple[Victim, ...]] | None:
    """A node this plan already freed that holds one more replica without new victims:
    rank (no victim, 0, hostname) beats every other, so the lowest such index wins."""
    for i in sorted(touched):
        if demand.fits(demand.free_at(cycle, i)):
            return i, ()
    return None


class _Pools:
    """The preemptible replicas per node, and per node and dimension of the ``Demand`` their
    total and largest size, and their lowest priority, as numpy columns (lower bounds on the
    node's rank, for pruning). A node's ``Victim`` list is built only when the search looks at
    that node. ``allowed`` holds each budgeted Workload's disruptions left: a Workload whose
    budget is spent leaves every pool."""

    def __init__(
        self,
        size: int,
        entries: list[tuple[str, Booking, int, datetime | None]],
        nodes: IntArray,
        priorities: IntArray,
        starts: IntArray,
        sizes: IntArray,
        allowed: dict[str, int],
        demand: Demand,
    ) -> None:
        self._entries = entries
        self._demand = demand
        self._sizes_by_id: dict[str, IntArray] = {
            e[1].alloc_id: row for e, row in zip(entries, sizes, strict=True)
        }
        self._order = np.argsort(nodes, kind="stable")
        self._starts = np.searchsorted(nodes[self._order], np.arange(size + 1))
        self._pools: dict[int, list[Victim]] = {}
        dimensions = sizes.shape[1]
        self.total = np.zeros((size, dimensions), dtype=np.int64)
        self.largest = np.zeros((size, dimensions), dtype=np.int64)
        for d in range(dimensions):
            np.add.at(self.total[:, d], nodes, sizes[:, d])
            np.maximum.at(self.largest[:, d], nodes, sizes[:, d])
        self.lowest = np.full(size, _NO_PRIORITY, dtype=np.int64)
        np.minimum.at(self.lowest, nodes, priorities)
        self.latest = np.full(size, -LATEST, dtype=np.int64)  # the latest start on the node
        np.maximum.at(self.latest, nodes, starts)
        self.has = np.bincount(nodes, minlength=size) > 0
        self.allowed = allowed
        self._nodes_of: dict[str, set[int]] = {}
        for (key, _, _, _), i in zip(entries, nodes.tolist(), strict=True):
            if key in allowed:
                self._nodes_of.setdefault(key, set()).add(i)

    @classmethod
    def of(
        cls,
        ledger: Ledger,
        preemptible: Mapping[str, int],
        started: Mapping[str, datetime],
        priority: int,
        preemptor: str,
        passes: BoolArray,
        demand: Demand,
        allowed: Mapping[str, int],
    ) -> _Pools | None:
        """Replicas of Workloads strictly below ``priority`` on nodes that pass the filters,
        of Workloads whose budget allows a disruption."""
        index = ledger.table.index
        entries: list[tuple[str, Booking, int, datetime | None]] = []
        nodes: list[int] = []
        starts: list[int] = []
        for key, value in preemptible.items():
            if value >= priority or key == preemptor or allowed.get(key, 1) <= 0:
                continue
            start = started.get(key)
            start_int = start_key(start)  # once per Workload, not per replica
            for b in ledger.bookings(key):
                i = index.get(b.node)
                if i is not None:
                    entries.append((key, b, value, start))
                    nodes.append(i)
                    starts.append(start_int)
        node_array = np.array(nodes, dtype=np.int64)
        keep = passes[node_array] if nodes else np.zeros(0, dtype=np.bool_)
        if not keep.any():
            return None
        picked = np.flatnonzero(keep)
        entries = [entries[j] for j in picked.tolist()]
        return cls(
            len(ledger.table),
            entries,
            node_array[picked],
            np.array([e[2] for e in entries], dtype=np.int64),
            np.array(starts, dtype=np.int64)[picked],
            np.array([demand.size(e[1]) for e in entries], dtype=np.int64).reshape(
                len(entries), len(demand.vector)
            ),
            {key: count for key, count in allowed.items() if key in preemptible},
            demand,
        )

    def pool(self, i: int) -> list[Victim]:
        found = self._pools.get(i)
        if found is None:
            rows = self._order[self._starts[i] : self._starts[i + 1]].tolist()
            found = [Victim(*self._entries[j]) for j in rows]
            self._pools[i] = found
        return found

    def victims_on(self, i: int, free: list[int], demand: Demand) -> tuple[Victim, ...] | None:
        """``victims_on_node`` for node ``i``, within the budgets left."""
        return victims_on_node(free, demand, self.pool(i), self.allowed)

    def spend(self, i: int, victims: tuple[Victim, ...]) -> None:
        """The plan removes ``victims`` from node ``i``: out of its pool, out of their
        budgets; a Workload whose budget is now spent leaves every pool."""
        self._without(i, set(victims))
        spent: set[str] = set()
        for v in victims:
            if v.key in self.allowed:
                self.allowed[v.key] -= 1
                if self.allowed[v.key] <= 0:
                    spent.add(v.key)
        for key in sorted(spent):
            for j in sorted(self._nodes_of.get(key, ())):
                gone = {v for v in self.pool(j) if v.key == key}
                if gone:
                    self._without(j, gone)

    def _without(self, i: int, gone: set[Victim]) -> None:
        pool = [v for v in self.pool(i) if v not in gone]
        self._pools[i] = pool
        self.has[i] = bool(pool)
        self.total[i] = 0
        self.largest[i] = 0
        for v in pool:
            size = self._size(v)
            self.total[i] += size
            np.maximum(self.largest[i], size, out=self.largest[i])
        self.lowest[i] = min((v.priority for v in pool), default=_NO_PRIORITY)
        self.latest[i] = max((v.start_key for v in pool), default=-LATEST)

    def _size(self, v: Victim) -> IntArray:
        return self._sizes_by_id.setdefault(
            v.booking.alloc_id, np.array(self._demand.size(v.booking), dtype=np.int64)
        )

    def best(
        self, free: list[IntArray], demand: Demand, hostnames: tuple[str, ...]
    ) -> tuple[int, tuple[Victim, ...]] | None:
        """The node of lowest ``node_rank`` and its victims, among nodes whose removable
        replicas could make room."""
        could = self.has.copy()
        fewest = np.ones(len(could), dtype=np.int64)
        for d, request in enumerate(demand.vector):
            if not request:
                continue
            column = free[d]
            could &= column + self.total[:, d] >= request
            short = np.maximum(request - column, 0)
            need = -(-short // np.maximum(self.largest[:, d], 1))  # each victim frees <= largest
            fewest = np.maximum(fewest, need)
        nodes = np.flatnonzero(could)
        if nodes.size == 0:
            return None
        # Bounds in the order of the rank's components: at fixed ``lowest`` the sum's bound
        # fewest * (lowest + 2^31) grows with ``fewest``, so sorting by (lowest, fewest,
        # -latest, index) sorts the bound tuples (index order is hostname order).
        order = nodes[np.lexsort((nodes, -self.latest[nodes], fewest[nodes], self.lowest[nodes]))]
        best: tuple[tuple[int, int, int, int, str], int, tuple[Victim, ...]] | None = None
        for i in order.tolist():
            lowest, least = int(self.lowest[i]), int(fewest[i])
            bound = (lowest, least * (lowest + PRIORITY_SHIFT), least, -int(self.latest[i]))
            if best is not None and (*bound, hostnames[i]) >= best[0]:
                break  # every node from here on ranks at least as high as the best
            victims = self.victims_on(i, [int(column[i]) for column in free], demand)
            if not victims:  # cannot make room (None), or room without victims: not a candidate
                continue
            rank = node_rank(victims, hostnames[i])
            if best is None or rank < best[0]:
                best = (rank, i, victims)
        return None if best is None else (best[1], best[2])


def victims_on_node(
    free: list[int],
    demand: Demand,
    pool: list[Victim],
    allowed: Mapping[str, int] | None = None,
) -> tuple[Victim, ...] | None:
    """The victims on one node (``pool``: its preemptible replicas; ``free``: its free room
    per dimension of ``demand``) that make room for one replica of ``demand``: remove the
    least important first until it fits, then give back, most important first, each one not
    needed (``importance``). None if removing them all is not enough. Room is the one capacity
    rule (``Demand.fits``: a Pod and every resource asked for), as ``ResourcesFit`` asks it.
    ``allowed``: per budgeted Workload, how many of its replicas may go (``_Pools.allowed``);
    one whose budget the removals so far have spent is skipped.

    The same victims as kube's ``SelectVictimsOnNode`` (defaultpreemption/
    default_preemption.go), which removes every lower-priority Pod and then reprieves them
    most important first: the ones this never removes are the most important ones, which
    fit together, so kube reprieves them too; the rest is the same reprieve in the same
    order. (kube only prefers not to break a budget; orca never does.)"""
    free = list(free)
    order = sorted(pool, key=importance, reverse=True)  # least important first
    left = dict(allowed or {})
    removed: list[Victim] = []
    sizes: list[tuple[int, ...]] = []
    for victim in order:
        if demand.fits(free):
            break
        if left.get(victim.key, 1) <= 0:
            continue
        if victim.key in left:
            left[victim.key] -= 1
        size = demand.size(victim.booking)
        free = [f + s for f, s in zip(free, size, strict=True)]
        removed.append(victim)
        sizes.append(size)
    if not demand.fits(free):
        return None
    victims: list[Victim] = []
    for victim, size in zip(reversed(removed), reversed(sizes), strict=True):  # most important
        less = [f - s for f, s in zip(free, size, strict=True)]
        if demand.fits(less):
            free = less  # reprieved
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
    """A victim's status with the preempted replicas removed: phase recomputed; Ready and
    ``Scheduled`` False with reason ``Preempted``; Reconciling True (it is queued to be placed
    again, which needs nobody's change); and a ``Preempted`` condition naming the preemptor,
    which stays (False once placed again) so ``orca explain`` can say who."""
    gone = {v.booking.alloc_id for v in removed}
    placements = [p for p in previous.placements if p.alloc_id not in gone]
    desired = previous.desired if previous.desired is not None else len(previous.placements)
    message = preemption_message(removed, preemptor, priority)
    waiting = Situation(
        ready=False,
        reconciling=True,
        stalled=False,
        reason=REASON_PREEMPTED,
        why=REASON_PREEMPTED,
        summary=f"{len(placements)}/{desired} replicas placed; see {CONDITION_PREEMPTED}",
        detail=f"waiting to be placed again after a preemption; see {CONDITION_PREEMPTED}",
    )
    generation = previous.observed_generation
    conditions = own_conditions(waiting, generation, previous.conditions, now)
    conditions += [
        c
        for c in previous.conditions
        if c.type not in OWN_CONDITIONS and c.type != CONDITION_PREEMPTED
    ]
    conditions.append(
        Condition(
            type=CONDITION_PREEMPTED,
            status="True",
            reason=REASON_PREEMPTED,
            message=message,
            last_transition_time=now,
            observed_generation=generation,
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
