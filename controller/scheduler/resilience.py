"""Resilience: what the loss of each failure domain would do, before it happens (``orca plan
--resilience KEY``, and the operator's ``orca_failure_domain_*`` gauges).

A failure domain is one value of a node label (``topology.kubernetes.io/zone`` for zones,
``kubernetes.io/hostname`` for every node alone: N-1); nodes without the label make one
domain of their own (``UNLABELLED``). The loss of a domain is the drain what-if of its nodes
(``controller.scheduler.whatif``), and its answer is exactly that drain's: the same moves, the
same replicas without a place and the same reasons, the same DaemonSet replicas ended.

Exactly that, at a fraction of the cost. A drain plans every Workload; one what-if per domain
on 5,000 nodes and 10,000 Workloads is 5,000 plans of 1.2 s. But in a full plan most Workloads
decide what they hold already, whatever the ledger holds at their turn, so ``DomainLoss`` plans
only the Workloads whose turn can differ, in the full plan's order (``Batch``), on one shared
snapshot (the cluster's ledger, the scheduler's caches, the priorities). The argument:

- A Workload is *settled* when its decision on the cluster as it is (``Scheduler.schedule``
  on the ledger, alone) books exactly what it holds, and nothing in that decision reads free
  capacity. That is, a Job or Service ``Scheduled`` (every replica kept: a kept replica
  stays where the static filters' ``keeps`` hold, which read each node alone; one that grew,
  or whose size is a guess, is re-fitted and so is not booked as it was), a DaemonSet whose
  missing nodes are refused for reasons capacity cannot cure (``Code`` not UNSCHEDULABLE),
  and a Workload short only of such reasons; no constraint reading ``node.freeCpu`` or
  ``freeMemory`` (a static filter over free capacity) and no CEL budget spent (a verdict of
  that cycle only). ``Invalid`` Workloads are settled too: their decision keeps what they
  hold, whatever the cluster.
- Removing nodes leaves each remaining node's static verdicts as they were, so a settled
  Workload none of whose replicas is on a lost node decides, at its turn in the full plan,
  what it holds: booking it again changes nothing in the ledger. It need not be planned.
- It changes only if a preemption takes replicas from it (lower priority, so later in the
  order): the full plan then decides it again at its turn, and so does this one (a victim
  joins the queue at its place when it is hit).
- Everything else is planned at its turn, in order: the Workloads with a replica on a lost
  node (the *displaced*) and every Workload not settled. Each sees the ledger the full plan
  would show it, by induction over the order, so each decides as in the full plan.

A settled DaemonSet with replicas on a lost node is not planned either (unless it has a
disruption budget or a gang, whose count others read): those replicas end with their node
(``Answer.ended``, from the cluster as it is), its other replicas stay, and the ledger's
capacity, counted over the remaining nodes only, is the same. Its result is the
one thing the full plan has that ``Answer.results`` here lacks: ``results`` holds the
Workloads planned, which are the ones the loss can move or leave without a place.

``tests/unit/test_resilience.py`` proves the equality against the full drain (an oracle over
random clusters with priorities, preemption, DaemonSets and spread) rather than assuming it.

Pure, as the scheduler: the snapshot is read, never written.
"""

from __future__ import annotations

import copy
import heapq
from collections.abc import Generator, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Final, TypeVar

import numpy as np
import numpy.typing as npt

from controller.api.models import Phase, Workload, WorkloadKind
from controller.scheduler.budgets import broken_by, budgeted
from controller.scheduler.celexpr import CelCompileError, CelEvaluator
from controller.scheduler.celexpr import compile_expression as compile_cel
from controller.scheduler.decision import Decision
from controller.scheduler.framework import (
    Code,
    CycleState,
    FilterPlugin,
    Profile,
    Rejection,
    ScorePlugin,
    Verdict,
)
from controller.scheduler.ledger import Ledger
from controller.scheduler.nodes import NodeInfo, NodeTable, label_key_problem, rfc3339_to_epoch
from controller.scheduler.plan import Batch, PlanResult, Turns
from controller.scheduler.plugins import default_profile
from controller.scheduler.plugins.taints import DefaultTolerations
from controller.scheduler.priority import NO_CLASSES, PriorityClasses
from controller.scheduler.scheduler import Scheduler
from controller.scheduler.whatif import (
    Answer,
    Ended,
    Question,
    Unplaced,
    WhatIf,
    _sort_key,
    held_through,
    left_without_place,
)

Rows = npt.NDArray[np.intp]
T = TypeVar("T")

#: The label of zones, the failure domains asked about by default (``orca run``).
ZONE_KEY: Final = "topology.kubernetes.io/zone"
#: The domain of the nodes that do not carry the label: no label value can be written so.
UNLABELLED: Final = "<none>"
#: The most domains one question may have (N-1 of the largest cluster orca is measured on,
#: with room): a label with more values is refused in one line rather than planned for hours.
MAX_DOMAINS: Final = 20_000


@dataclass(frozen=True)
class Domain:
    """One value of the label (``UNLABELLED`` for the nodes without it) and its nodes."""

    name: str
    nodes: frozenset[str]


@dataclass(frozen=True)
class DomainAnswer:
    """The loss of one domain: its drain's answer."""

    domain: Domain
    answer: Answer

    @property
    def settled(self) -> bool:
        return self.answer.settled


@dataclass(frozen=True, slots=True)
class LossFigures:
    """The loss of a set of nodes, counted (``DomainLoss.figures``): ``len(answer.unplaced)``,
    ``answer.displaced`` and ``answer.settled`` of its drain's answer."""

    unplaced: int  # replicas left without a place
    displaced: int  # Job and Service replicas that were on the lost nodes
    settled: bool  # every replica has a place and no budget is broken


@dataclass(frozen=True, slots=True)
class _Decided:
    """What counting a loss reads of one planned Workload's decision: whether it is Invalid,
    and a budgeted DaemonSet's desired count (its budget's percentages are of it); the rest is
    read from the ledgers."""

    workload: Workload
    invalid: bool
    desired: int | None

    @classmethod
    def of(cls, result: PlanResult) -> _Decided:
        workload, status = result.workload, result.status
        desired = None
        if workload.spec.kind is WorkloadKind.DAEMONSET and budgeted(workload):
            desired = status.desired or 0
        return cls(workload, status.phase is Phase.INVALID, desired)


class ResilienceError(ValueError):
    """A question that cannot be asked (one line, naming the flag's value)."""


def domains_of(key: str, nodes: Iterable[NodeInfo]) -> list[Domain]:
    """The failure domains of label ``key``: one per value, sorted, then the unlabelled nodes
    (if any). A ``key`` that is not a label key is a ``ResilienceError``."""
    problem = label_key_problem(key)
    if problem is not None:
        shown = key if len(key) <= 80 else key[:77] + "..."
        raise ResilienceError(f"{shown!r} {problem}")
    by_value: dict[str, set[str]] = {}
    for node in nodes:
        by_value.setdefault(node.labels.get(key, UNLABELLED), set()).add(node.hostname)
    if len(by_value) > MAX_DOMAINS:
        raise ResilienceError(
            f"{key!r} has {len(by_value)} values; at most {MAX_DOMAINS} domains are planned"
        )
    names = sorted(v for v in by_value if v != UNLABELLED)
    if UNLABELLED in by_value:
        names.append(UNLABELLED)
    return [Domain(name, frozenset(by_value[name])) for name in names]


def worst_first(answers: Iterable[DomainAnswer]) -> list[DomainAnswer]:
    """Most replicas without a place first, then most displaced, then by name."""
    return sorted(
        answers, key=lambda d: worse(len(d.answer.unplaced), d.answer.displaced, d.domain.name)
    )


def worse(unplaced: int, displaced: int, domain: str) -> tuple[int, int, str]:
    """The order domains' losses are reported in, worst first (``worst_first``; the
    operator's log names the first): most replicas without a place, then most displaced,
    then by name."""
    return -unplaced, -displaced, domain


class DomainLoss:
    """The drain what-if of any set of nodes, exact and incremental, on one snapshot
    (the module's docstring says why it is exact). Built once per snapshot; ``answer`` (or
    ``steps``, for a caller that must yield between decisions) per set of nodes."""

    def __init__(
        self,
        ledger: Ledger,
        workloads: Sequence[Workload],
        *,
        now: str,
        classes: PriorityClasses = NO_CLASSES,
        known_priorities: Mapping[str, int] | None = None,
        known_started: Mapping[str, datetime] | None = None,
        tolerations: DefaultTolerations | None = None,
    ) -> None:
        self.slices = Slices(ledger)
        cel = CelEvaluator()
        profile = self.slices.profile(default_profile(cel, tolerations))
        # No gang grace: a what-if answers where the cluster settles (controller.scheduler.gang).
        scheduler = Scheduler(cel=cel, profile=profile, gang_grace=False)
        self.whatif = WhatIf(
            ledger, workloads, scheduler, classes, now, known_priorities, known_started
        )
        self.batch = Batch.of(workloads, classes, known_priorities, known_started)
        order = self.batch.order
        #: A settled DaemonSet's replicas on a lost node simply end, unless it has a disruption
        #: budget or a gang: then how many it holds is read by preemption's budgets and by the
        #: answer's, so it is planned like the displaced.
        self._ends_alone = [
            w.spec.kind is WorkloadKind.DAEMONSET and not budgeted(w) for w in order
        ]
        self._settled: set[str] = set()
        self._invalid: set[str] = set()
        #: The turns every answer plans (the Workloads not settled); None: not settled yet.
        self._always: list[int] | None = None

    def _ends_alone_key(self, key: str) -> bool:
        turn = self.batch.position.get(key)
        return turn is not None and self._ends_alone[turn]

    def settling(self) -> Generator[None, None, None]:
        """Find the settled Workloads (see the module), yielding after each decision: one
        decision per Workload on the cluster as it is, the cost of one plan. ``answer`` does
        it first if it was not done."""
        whatif = self.whatif
        scheduler, ledger = whatif.scheduler, whatif.ledger
        clock = rfc3339_to_epoch(whatif.now)
        settled, invalid = self._settled, self._invalid
        for workload, key in zip(self.batch.order, self.batch.keys, strict=True):
            prepared = scheduler.prepare(workload, ledger, now=clock)
            if prepared.filtered is None or all(r.cacheable for r in prepared.filtered.results):
                decision = scheduler.decide(workload, prepared, self.batch.classes)
                if decision.bookings == ledger.bookings(key) and _settles(workload, decision):
                    settled.add(key)
                    if decision.phase is Phase.INVALID:
                        invalid.add(key)
            # else: a verdict of this cycle only (a CEL budget spent): planned every time
            yield
        self._always = [i for i, key in enumerate(self.batch.keys) if key not in settled]

    def _settled_turns(self) -> list[int]:
        """The turns every answer plans, settling first if that was not done."""
        if self._always is None:
            finish(self.settling())
        assert self._always is not None
        return self._always

    @property
    def unsettled(self) -> int:
        """How many Workloads every answer plans (the rest only where displaced)."""
        return len(self._settled_turns())

    def answer(self, drain: frozenset[str]) -> Answer:
        """The drain what-if of ``drain``: ``WhatIf.answer(Question(drain=drain))``'s."""
        return finish(self.steps(drain))

    def steps(self, drain: frozenset[str]) -> Generator[PlanResult | None, None, Answer]:
        """``answer``, yielding after the trial ledger is made and after each decision (its
        result), so a caller on an event loop can give the loop back in between."""
        if self._always is None:
            yield from self.settling()
        whatif = self.whatif
        base = whatif.ledger
        touched = self._touched(drain)
        queue = self._queue(touched)
        results: list[PlanResult] = []
        trial = base  # nothing to plan (no replica there, nothing unsettled): nothing changes
        if queue:
            trial = self._without(drain)
            self.slices.add(trial.table)
            try:
                for result in self._plan(queue, trial):
                    if result is not None:
                        results.append(result)
                    yield result
            finally:
                self.slices.forget(trial.table)
        answer = whatif._compare(Question(drain=drain), results, trial, ())
        planned = {r.workload.key for r in results}
        ended = [
            Ended(key, b.alloc_id, b.node)
            for key in sorted(touched - planned)
            if key in self._settled and key not in self._invalid and self._ends_alone_key(key)
            for b in base.bookings(key)
            if b.node in drain
        ]
        if ended:
            answer = replace(answer, ended=tuple(sorted((*answer.ended, *ended), key=_sort_key)))
        return answer

    def figures(self, drain: frozenset[str]) -> LossFigures:
        """What ``answer(drain)`` comes to, counted: its replicas without a place, its
        displaced and whether it settled, each decision let go once counted."""
        return finish(self.figure_steps(drain))

    def figure_steps(self, drain: frozenset[str]) -> Generator[None, None, LossFigures]:
        """``figures``, yielding where ``steps`` does. The same plan as ``steps``; of each
        decision it keeps only what the count reads (``_Decided``: no status, no result), so
        what one domain's answer holds does not grow with the decided statuses (the operator's
        gauges read nothing else). The count is made at the end, on the trial ledger as the
        plan leaves it, as ``WhatIf._compare`` makes it: a later preemption can still take a
        replica from a Workload already decided."""
        if self._always is None:
            yield from self.settling()
        queue = self._queue(self._touched(drain))
        if not queue:  # nothing planned: nothing moves, nothing is left without a place
            return LossFigures(0, 0, True)
        trial = self._without(drain)
        self.slices.add(trial.table)
        decided: list[_Decided] = []
        try:
            for result in self._plan(queue, trial):
                if result is not None:
                    decided.append(_Decided.of(result))
                yield None
        finally:
            self.slices.forget(trial.table)
        return _count(drain, decided, self.whatif.ledger, trial)

    def first_stranded(self, drain: frozenset[str]) -> Unplaced | None:
        """The first replica, in planning order, that the loss of ``drain`` leaves without a
        place (None: every one has a place), planning no further than that: a Job's or
        Service's replicas are final at its turn (only a lower priority, planned later,
        could preempt them, and preemption takes only from lower priorities). What a search
        that only needs yes or no asks (``controller.scheduler.consolidation``)."""
        queue = self._queue(self._touched(drain))
        if not queue:
            return None
        trial = self._without(drain)
        self.slices.add(trial.table)
        question = Question(drain=drain)
        try:
            for result in self._plan(queue, trial):
                if result is None:
                    continue
                lost = self.whatif._compare(question, [result], trial, ()).unplaced
                if lost:
                    return lost[0]
        finally:
            self.slices.forget(trial.table)
        return None

    def _without(self, drain: frozenset[str]) -> Ledger:
        """The cluster without ``drain``'s nodes, as ``Ledger.what_if(remove=drain)`` makes it
        (a copy bound to the table of the other nodes), without its checks of added nodes."""
        trial = self.whatif.ledger.copy()
        trial.rebind(trial.table.without(drain))
        return trial

    def _touched(self, drain: frozenset[str]) -> set[str]:
        """The Workloads with a replica on a node of ``drain``."""
        touched: set[str] = set()
        for node in drain:
            touched |= self.whatif.ledger.keys_on(node)
        return touched

    def _queue(self, touched: set[str]) -> list[int]:
        """The turns to plan first: every Workload not settled, and the settled ones with a
        replica on a lost node (the displaced; a settled DaemonSet's replicas there end)."""
        queue = list(self._settled_turns())
        position = self.batch.position
        for key in touched:
            turn = position.get(key)
            if turn is not None and key in self._settled and not self._ends_alone[turn]:
                queue.append(turn)
        return queue

    def _plan(self, queue: list[int], trial: Ledger) -> Generator[PlanResult | None, None, None]:
        """Decide the Workloads of ``queue``, and each preemption victim, at their turns on
        ``trial``; yields None once, then each result (kept by the caller, or not)."""
        yield None
        batch = self.batch
        position = batch.position
        heapq.heapify(queue)
        turns = Turns(batch, trial, self.whatif.scheduler, self.whatif.now)
        planned: set[int] = set()
        while queue:
            turn = heapq.heappop(queue)
            if turn in planned:
                continue
            planned.add(turn)
            result = turns.decide(batch.order[turn])
            for p in result.victims:
                victim = position.get(p.victim.key)
                if victim is not None and victim not in planned:
                    heapq.heappush(queue, victim)
            yield result

    def domains(self, key: str) -> Iterator[DomainAnswer]:
        """Each domain of label ``key`` lost alone, in the domains' order."""
        for domain in domains_of(key, self.whatif.ledger.table.nodes):
            yield DomainAnswer(domain, self.answer(domain.nodes))


def finish(steps: Generator[object, None, T]) -> T:
    """Run ``steps`` to the end; what it returns."""
    while True:
        try:
            next(steps)
        except StopIteration as stop:
            value: T = stop.value
            return value


def _count(
    drain: frozenset[str], decided: Sequence[_Decided], base: Ledger, after: Ledger
) -> LossFigures:
    """``WhatIf._compare``'s counts for the drain of ``drain`` (no pending replica is counted),
    from what the plan decided and the two ledgers: the cluster as it is, and as the plan
    leaves it, with the same rules (``held_through``, ``left_without_place``, ``broken_by``)
    and without the answer's lists. ``tests/unit/test_resilience.py`` holds the two equal."""
    unplaced = displaced = 0
    broken = False
    for one in decided:
        if one.invalid:
            continue  # waits for a spec change, not for room: not the question's
        workload = one.workload
        key = workload.key
        before = {b.alloc_id: b.node for b in base.bookings(key)}
        held = held_through(workload, before, drain)
        broken = broken or broken_by(workload, held, after.placed(key), one.desired) is not None
        if workload.spec.kind is WorkloadKind.DAEMONSET:
            continue  # its replicas on lost nodes end with them
        displaced += sum(node in drain for node in before.values())
        now = {b.alloc_id for b in after.bookings(key)}
        unplaced += sum(1 for _ in left_without_place(workload, before, now, pending=False))
    return LossFigures(unplaced, displaced, not unplaced and not broken)


def _reads_free(workload: Workload) -> bool:
    """Whether a constraint reads free capacity (``node.freeCpu``, ``node.freeMemory``): a
    static filter whose verdict capacity freed by others can change."""
    for source in workload.spec.constraints:
        try:
            if compile_cel(source).reads_free:
                return True
        except CelCompileError:
            continue  # Invalid: decided as such whatever the cluster
    return False


class Slices:
    """The trial tables of one snapshot (its table without some nodes), each with its rows in
    the snapshot's table, and the profile whose node-by-node filters answer them by slicing.

    A static filter that declares ``shape_only`` (runtime, CEL constraints) reads each node
    alone (its labels, runtimes, tags, kind, allocatable), so its verdict on a trial table is
    its verdict on the snapshot's table at the trial's rows. Worked out on a new table, it
    was most of the cost of a failure domain's what-if (a pass over 5,000 nodes per
    signature, per domain); sliced, it is a few array copies. A filter whose verdict reads
    free capacity (signature None) or holds for this cycle only (not ``cacheable``, a CEL
    budget spent) is run on the trial table itself, as the framework would."""

    MAX_CACHED: Final = 4096

    def __init__(self, base: Ledger) -> None:
        self.base = base
        self._rows: dict[int, Rows] = {base.table.version: np.arange(len(base.table))}

    def add(self, table: NodeTable) -> None:
        """A trial table, made from the snapshot's by removing nodes."""
        index = self.base.table.index
        self._rows[table.version] = np.array([index[h] for h in table.hostnames], dtype=np.intp)

    def forget(self, table: NodeTable) -> None:
        self._rows.pop(table.version, None)

    def rows(self, table: NodeTable) -> Rows | None:
        return self._rows.get(table.version)

    def profile(self, profile: Profile) -> Profile:
        """``profile`` with each ``shape_only`` static filter answered through ``SlicedFilter``."""
        plugins: list[tuple[object, int]] = []
        for plugin, weight in profile.plugins:
            if (
                isinstance(plugin, FilterPlugin)
                and getattr(plugin, "shape_only", False)
                and not plugin.per_replica
                and not isinstance(plugin, ScorePlugin)
            ):
                plugins.append((SlicedFilter(plugin, self), weight))
            else:
                plugins.append((plugin, weight))
        return Profile(tuple(plugins))


class SlicedFilter:
    """A ``shape_only`` filter plugin answered once per signature on the snapshot's table and
    sliced to each trial table's rows (``Slices``); its other extension points and
    attributes are the plugin's."""

    def __init__(self, plugin: FilterPlugin, slices: Slices) -> None:
        self.plugin = plugin
        self.slices = slices
        self.name = plugin.name
        self.code = plugin.code
        self.evicts = plugin.evicts
        self.selects = plugin.selects
        self.per_replica = plugin.per_replica
        self.shape_only = True
        self._verdicts: dict[Hashable, Verdict] = {}

    def pre_filter(self, cycle: CycleState) -> Sequence[str]:
        pre_filter = getattr(self.plugin, "pre_filter", None)
        return pre_filter(cycle) if pre_filter is not None else []

    def signature(self, cycle: CycleState) -> Hashable | None:
        return self.plugin.signature(cycle)

    def filter(self, cycle: CycleState) -> Verdict:
        rows = self.slices.rows(cycle.table)
        key = self.plugin.signature(cycle)
        if rows is None or key is None:
            return self.plugin.filter(cycle)
        verdict = self._verdicts.get(key)
        if verdict is None or not verdict.since <= cycle.now < verdict.until:
            verdict = self.plugin.filter(self._on_base(cycle))
            if not verdict.cacheable:
                return self.plugin.filter(cycle)
            if len(self._verdicts) >= Slices.MAX_CACHED:
                self._verdicts.clear()
            self._verdicts[key] = verdict
        if cycle.table is self.slices.base.table:
            return verdict
        return _sliced(verdict, rows)

    def _on_base(self, cycle: CycleState) -> CycleState:
        """``cycle`` on the snapshot's table (its free capacity as the snapshot has it: a
        filter sliced reads none of it, but its arrays must fit the table)."""
        base = self.slices.base
        other = copy.copy(cycle)
        other.ledger = base
        other.free_cpu, other.free_memory = base.free()
        other.origin, other.touched = base.position, set()
        other.own = np.zeros(len(base.table), dtype=np.int64)
        return other


def _sliced(verdict: Verdict, rows: Rows) -> Verdict:
    return Verdict(
        tuple(Rejection(r.reason, r.passed[rows], r.code) for r in verdict.rejections),
        keeps=None if verdict.keeps is None else verdict.keeps[rows],
        cacheable=verdict.cacheable,
        leaves=None if verdict.leaves is None else verdict.leaves[rows],
        since=verdict.since,
        until=verdict.until,
    )


def _settles(workload: Workload, decision: Decision) -> bool:
    """Whether a decision that books what the Workload holds stays so on any cluster
    without some of the other nodes, whatever the ledger holds (see the module)."""
    if decision.phase is Phase.INVALID:
        return True  # whatever the cluster: it keeps what it holds until its spec changes
    daemon = workload.spec.kind is WorkloadKind.DAEMONSET
    if _reads_free(workload):  # a static filter over free capacity: only "all kept" holds
        return not daemon and decision.phase is Phase.SCHEDULED
    if daemon:
        return decision.code is not Code.UNSCHEDULABLE
    return decision.phase is Phase.SCHEDULED or decision.code is Code.UNRESOLVABLE
