"""What if: a drain, a zone lost, nodes bought, answered before anyone acts (``orca plan
--drain`` and ``--add-nodes``).

The answer is a plan (``controller.scheduler.plan``: highest priority first, preemption, every
filter of the profile) on the cluster as the question changes it (``Ledger.what_if``: the
drained nodes gone, copies of a template Node added, empty), compared with the cluster as it
is (the placements in the Workloads' statuses):

    moved       each replica whose node changed (from -> to), and who preempted it if a
                preemption moved it
    unplaced    each replica the question is about that finds no place, with its Workload's
                reason in the words of its status and of ``orca explain``: those the drain
                displaced, any that lose their place on the way (preempted, not placed
                again), and, when nodes are added, every pending one too
    ended       DaemonSet replicas on drained nodes: a DaemonSet is one replica per node, so
                they end with their node (and one starts on each added node that takes it)
    budgets     each Workload the question leaves below its disruption budget or its gang's
                minCount (``controller.scheduler.budgets``): how many replicas it keeps, how
                many it needs. A drain is a voluntary disruption, as ``kubectl drain`` is:
                breaking a budget is a failed answer, like a replica without a place. (A gang
                that cannot be whole again is released at once here: the plan answers where the
                cluster settles.)

``smallest_count`` answers ``--add-nodes FILE:auto``: the smallest number of copies of the
template after which nothing is unplaced, or one line saying why no number does. It does not
plan every count: it starts from a lower bound (the room still missing, in whole templates)
and keeps a bracket (a count that leaves something unplaced, one that places everything),
probing where the unplaced replicas would run out at the rate the last added nodes took them
(a secant), bisecting whenever a probe did not halve the bracket. It stops when the two are
adjacent, so the plan at the answer minus one is always one it made: the answer comes with its
proof (what that plan leaves without a place) rather than an assumption that more nodes never
hurt. It is only that: placing is greedy, as the operator's is (and kube-scheduler's), so
one more node can now and then change where earlier replicas go and leave one unplaced that
one fewer would not; the answer is minimal against the count below it, which is what the
proof shows. A template that cannot take some Workload that waits (a runtime it lacks, a constraint
or taint that excludes it, too small) is tried at the largest count first, so the common "no
count can" answer costs one plan.

Pure, as the scheduler: the ledger given is read, never written; the same inputs and ``now``
give the same answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Container, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Final

from controller.api.models import MAX_NAME_LENGTH, Phase, Workload, WorkloadKind
from controller.scheduler.budgets import broken_by
from controller.scheduler.ledger import Ledger, alloc_id
from controller.scheduler.nodes import (
    TAINT_NOT_READY,
    TAINT_UNREACHABLE,
    NodeInfo,
    NodeTable,
    rfc3339_to_epoch,
)
from controller.scheduler.plan import PlanResult, plan
from controller.scheduler.priority import NO_CLASSES, PriorityClasses
from controller.scheduler.scheduler import Scheduler
from controller.scheduler.status import rfc3339_now

MAX_ADDED_NODES: Final = 10_000
"""The most copies of a template a question may add (``FILE:COUNT``) or ``auto`` may try."""
HOSTNAME_LABEL: Final = "kubernetes.io/hostname"


@dataclass(frozen=True, slots=True)
class Moved:
    workload: str
    alloc_id: str
    source: str
    target: str
    preempted_by: str | None = None  # the preemptor, when a preemption moved it


@dataclass(frozen=True, slots=True)
class Unplaced:
    workload: str
    alloc_id: str
    source: str | None  # where it was; None: it was pending
    reason: str  # its Workload's status message after the plan


@dataclass(frozen=True, slots=True)
class Ended:
    workload: str
    alloc_id: str
    node: str


@dataclass(frozen=True, slots=True)
class BrokenBudget:
    """A Workload the question leaves below its budget: it ``keeps`` fewer than ``needs``."""

    workload: str
    budget: str  # the rule: ``minAvailable 3``, ``gang minCount 4``
    keeps: int
    needs: int


@dataclass(frozen=True)
class Question:
    """What the operator asks: these nodes gone, ``count`` copies of ``template`` added."""

    drain: frozenset[str] = frozenset()
    template: NodeInfo | None = None
    count: int = 0

    @property
    def counts_pending(self) -> bool:
        """Adding nodes is about every replica without a place; a drain alone is about the
        replicas it displaces."""
        return self.template is not None


@dataclass(frozen=True)
class Answer:
    """The plan of one question, and what it changes."""

    question: Question
    results: list[PlanResult]
    moved: tuple[Moved, ...]
    unplaced: tuple[Unplaced, ...]
    ended: tuple[Ended, ...]
    added: tuple[str, ...]  # the added nodes' names
    displaced: int  # Job and Service replicas that were on drained nodes
    budgets: tuple[BrokenBudget, ...] = ()

    @property
    def settled(self) -> bool:
        """Every replica the question is about has a place, and no budget is broken."""
        return not self.unplaced and not self.budgets


@dataclass(frozen=True)
class Capacity:
    """``--add-nodes``' answer: how many copies of ``template`` (``count``), or None with
    ``why`` when no count up to ``tried`` places everything."""

    template: str
    count: int | None
    auto: bool
    names: tuple[str, ...] = ()
    proof: str | None = None  # auto: what the plan with count - 1 leaves without a place
    why: str | None = None
    tried: int = 0
    plans: int = 0  # auto: how many plans the search made (the benchmark prints it)


@dataclass
class WhatIf:
    """One cluster and the Workloads to plan on it; asks ``answer`` and ``smallest_count``.

    ``ledger`` is the cluster as it is (every Workload's recorded placements); ``workloads``
    are planned (all of the cluster's, for a dry run against it); ``known_priorities`` and
    ``known_started`` describe Workloads in the ledger that are not planned, as ``plan``
    takes them."""

    ledger: Ledger
    workloads: Sequence[Workload]
    #: Without a gang's grace: a what-if answers where the cluster settles
    #: (``controller.scheduler.gang``).
    scheduler: Scheduler = field(default_factory=lambda: Scheduler(gang_grace=False))
    classes: PriorityClasses = NO_CLASSES
    now: str = field(default_factory=rfc3339_now)
    known_priorities: Mapping[str, int] | None = None
    known_started: Mapping[str, datetime] | None = None
    plans: int = 0

    def answer(
        self,
        question: Question,
        before_each: Callable[[Workload, Ledger], None] | None = None,
    ) -> Answer:
        """The plan of ``question``, compared with the cluster as it is."""
        nodes = copies(question.template, question.count, self.ledger.table)
        trial = self.ledger.what_if(remove=question.drain, add=nodes)
        self.plans += 1
        results = plan(
            trial.table.nodes,
            self.workloads,
            ledger=trial,
            scheduler=self.scheduler,
            now=self.now,
            classes=self.classes,
            known_priorities=dict(self.known_priorities or {}),
            known_started=self.known_started,
            before_each=before_each,
        )
        return self._compare(question, results, trial, tuple(n.hostname for n in nodes))

    def _compare(
        self, question: Question, results: list[PlanResult], after: Ledger, added: tuple[str, ...]
    ) -> Answer:
        preempted_by = {p.victim.booking.alloc_id: p.by for r in results for p in r.preempted}
        moved: list[Moved] = []
        unplaced: list[Unplaced] = []
        ended: list[Ended] = []
        budgets: list[BrokenBudget] = []
        displaced = 0
        for result in results:
            workload = result.workload
            key = workload.key
            before = {b.alloc_id: b.node for b in self.ledger.bookings(key)}
            if result.status.phase is Phase.INVALID:
                continue  # waits for a spec change, not for room: not the question's
            held = held_through(workload, before, question.drain)
            broken = _broken_budget(result, held, after.placed(key))
            if broken is not None:
                budgets.append(broken)
            if workload.spec.kind is WorkloadKind.DAEMONSET:
                ended.extend(
                    Ended(key, a, node) for a, node in before.items() if node in question.drain
                )
                continue
            displaced += sum(node in question.drain for node in before.values())
            now = {b.alloc_id: b.node for b in after.bookings(key)}
            for a, target in now.items():
                source = before.get(a)
                if source is not None and source != target:
                    moved.append(Moved(key, a, source, target, preempted_by.get(a)))
            reason = result.status.message or ""
            for a in left_without_place(workload, before, now, question.counts_pending):
                unplaced.append(Unplaced(key, a, before.get(a), reason))
        order = _sort_key
        return Answer(
            question,
            results,
            tuple(sorted(moved, key=order)),
            tuple(sorted(unplaced, key=order)),
            tuple(sorted(ended, key=order)),
            added,
            displaced,
            tuple(sorted(budgets, key=lambda b: b.workload)),
        )

    # -- how many nodes ----------------------------------------------------------------------

    def smallest_count(self, question: Question) -> tuple[Capacity, Answer]:
        """The smallest count of ``question.template`` after which nothing is unplaced, with
        the answer at that count (or at the largest count tried, when none is enough).

        The search keeps a bracket: ``failing``, a count whose plan leaves something
        unplaced (0 at first, when anything waits), and ``enough``, a count whose plan places
        everything (none yet at first). Each probe lies strictly inside it: where the
        unplaced replicas would run out if each added node took as many as the last ones
        did (a secant through the last two failing plans), else double the last step; a probe
        that did not halve the bracket is followed by its middle, so the search never
        crawls. It ends when the two are adjacent: the plan at ``enough - 1`` was made, and is
        the proof. Only the two bracketing answers are kept (a plan of 10,000 Workloads is
        large)."""
        template = question.template
        if template is None:
            raise ValueError("smallest_count needs a template node")
        start = self.plans
        base = self.answer(replace(question, count=0))
        if base.settled:
            return Capacity(template.hostname, 0, True, plans=self.plans - start), base
        cap = min(MAX_ADDED_NODES, max(len(base.unplaced), 1))
        refused = self._refusing(base, template)
        search = _Search(0, base.unplaced, cap)
        if refused:  # the template takes some waiting Workload nowhere: try the most first
            top = self.answer(replace(question, count=cap))
            if not top.settled:
                return self._no_count(template, cap, top, refused, start), top
            search.record(cap, top)
        probe = min(cap, self._lower_bound(base, template))
        del base  # the answers are large: the search keeps only what it needs
        while not search.done:
            count = search.clamp(probe)
            found = self.answer(replace(question, count=count))
            if not found.settled and count >= cap:
                return self._no_count(template, cap, found, refused, start), found
            search.record(count, found)
            probe = search.next_probe()
        failing, first = search.failing_count, search.failing_unplaced[0]
        count, enough = search.bracket_top()
        capacity = Capacity(
            template.hostname,
            count,
            True,
            names=enough.added,
            proof=f"with {failing}, {first.alloc_id} has no place: {first.reason}",
            tried=search.largest,
            plans=self.plans - start,
        )
        return capacity, enough

    def _lower_bound(self, base: Answer, template: NodeInfo) -> int:
        """No count below this places everything: every Job and Service replica of the plan
        needs room, and the existing nodes (drained ones gone) have at most the room they
        have left once those replicas' bookings are lifted (counted on every node, ready or
        not, generously); each copy of the template adds its allocatable less what the
        DaemonSets that would start on it take. At least 1: ``base`` leaves something
        unplaced."""
        invalid = {r.workload.key for r in base.results if r.status.phase is Phase.INVALID}
        placeable = [
            w
            for w in self.workloads
            if w.spec.kind is not WorkloadKind.DAEMONSET and w.key not in invalid
        ]
        lifted = {w.key: self.ledger.bookings(w.key) for w in placeable}
        rest = self.ledger.what_if(remove=base.question.drain, lift=lifted)
        free_cpu, free_memory = rest.free()
        daemons = self._daemons_on(template)
        bound = 1
        for need, spare, per in (
            (
                sum(w.spec.cpu_millis * w.spec.replicas for w in placeable),
                int(free_cpu.clip(min=0).sum()),
                template.cpu - sum(w.spec.cpu_millis for w in daemons),
            ),
            (
                sum(w.spec.memory_bytes * w.spec.replicas for w in placeable),
                int(free_memory.clip(min=0).sum()),
                template.memory - sum(w.spec.memory_bytes for w in daemons),
            ),
        ):
            if need > spare and per > 0:
                bound = max(bound, -(-(need - spare) // per))
        return bound

    def _daemons_on(self, template: NodeInfo) -> list[Workload]:
        """The DaemonSets that would start on a copy of ``template``."""
        alone = _alone(template)
        out = []
        for w in self.workloads:
            if w.spec.kind is not WorkloadKind.DAEMONSET:
                continue
            prepared = self.scheduler.prepare(w, alone, now=rfc3339_to_epoch(self.now))
            if prepared.filtered is not None and bool(prepared.filtered.passes[0]):
                out.append(w)
        return out

    def _refusing(self, base: Answer, template: NodeInfo) -> dict[str, str]:
        """Per waiting Workload the template cannot take even empty, why (the first filter
        that rejects it, in the status's words)."""
        alone = _alone(template)
        by_key = {w.key: w for w in self.workloads}
        out: dict[str, str] = {}
        for key in dict.fromkeys(u.workload for u in base.unplaced):
            prepared = self.scheduler.prepare(by_key[key], alone, now=rfc3339_to_epoch(self.now))
            if prepared.filtered is None:
                continue
            first = self.scheduler.framework.first_rejections(prepared.cycle, prepared.filtered)
            if first[0] is not None:
                plugin, reason = first[0]
                out[key] = f"{reason} ({plugin})"
        return out

    def _no_count(
        self,
        template: NodeInfo,
        cap: int,
        answer: Answer,
        refused: Mapping[str, str],
        start: int,
    ) -> Capacity:
        first = answer.unplaced[0]
        why = f"{first.alloc_id} still has no place with {cap}: {first.reason.rstrip('.')}"
        if first.workload in refused:
            why += f"; a {template.hostname} node cannot take it: {refused[first.workload]}"
        return Capacity(template.hostname, None, True, why=why, tried=cap, plans=self.plans - start)


def held_through(workload: Workload, before: Mapping[str, str], drain: frozenset[str]) -> int:
    """The replicas of ``workload`` (``before``: AllocID to node) its budget counts as held
    through the drain of ``drain``: all of them, but a DaemonSet's replicas on drained nodes
    end with them (kubectl drain leaves them too), so they take nothing from its budget,
    which counts the nodes it keeps. What ``WhatIf`` answers and the failure domains' counts
    (``controller.scheduler.resilience``) both read."""
    if workload.spec.kind is WorkloadKind.DAEMONSET:
        return sum(node not in drain for node in before.values())
    return len(before)


def left_without_place(
    workload: Workload, before: Mapping[str, str], after: Container[str], pending: bool
) -> Iterator[str]:
    """The replicas (AllocIDs, by index) of a Job or Service the question leaves without a
    place: not placed ``after``, and placed ``before`` (or, with ``pending``, waiting
    already: a question that counts those too)."""
    namespace, name = workload.metadata.namespace, workload.metadata.name
    for index in range(workload.spec.replicas):
        a = alloc_id(namespace, name, index)
        if a not in after and (pending or a in before):
            yield a


def _broken_budget(result: PlanResult, before: int, after: int) -> BrokenBudget | None:
    """The budget ``result``'s Workload breaks with ``after`` replicas placed (it held
    ``before``): its disruption budget (of the desired count after the plan: a DaemonSet's
    shrinks with its nodes) or its gang's minCount; None when it keeps it, or when the
    question took nothing from it."""
    workload = result.workload
    desired = None
    if workload.spec.kind is WorkloadKind.DAEMONSET:
        desired = result.status.desired or 0
    budget = broken_by(workload, before, after, desired)
    if budget is None:
        return None
    return BrokenBudget(workload.key, budget.text, after, budget.needs)


def _alone(template: NodeInfo) -> Ledger:
    """A cluster of one copy of ``template`` (as ``copies`` makes it: registered and Ready),
    to ask what a copy would take."""
    return Ledger(NodeTable(copies(template, 1, NodeTable(()))))


@dataclass
class _Search:
    """The bracket of ``WhatIf.smallest_count``: the plan at ``failing_count`` leaves
    ``failing_unplaced``, ``enough`` (once found) places everything; ``previous`` is the
    failing point before, for the secant."""

    failing_count: int
    failing_unplaced: tuple[Unplaced, ...]  # what the failing plan left (only this is kept)
    cap: int
    enough: tuple[int, Answer] | None = None
    previous: tuple[int, int] | None = None  # (count, unplaced) of the failing point before
    width: int | None = None  # the bracket's width before the last probe
    largest: int = 0

    @property
    def done(self) -> bool:
        return self.enough is not None and self.enough[0] - self.failing_count <= 1

    def bracket_top(self) -> tuple[int, Answer]:
        if self.enough is None:
            raise RuntimeError("the search has not found a count that is enough")
        return self.enough

    def _top(self) -> int:
        return self.enough[0] if self.enough is not None else self.cap + 1

    def clamp(self, probe: int) -> int:
        """``probe`` moved strictly inside the bracket."""
        top = self._top()
        self.width = top - self.failing_count
        return max(self.failing_count + 1, min(probe, top - 1))

    def record(self, count: int, answer: Answer) -> None:
        self.largest = max(self.largest, count)
        if answer.settled:
            self.enough = (count, answer)
        else:
            self.previous = (self.failing_count, len(self.failing_unplaced))
            self.failing_count, self.failing_unplaced = count, answer.unplaced

    def next_probe(self) -> int:
        low, unplaced, top = self.failing_count, len(self.failing_unplaced), self._top()
        if self.width is not None and self.enough is not None and top - low > self.width // 2:
            return (low + top) // 2  # the last probe did not halve the bracket
        if self.previous is not None:
            before_count, before_unplaced = self.previous
            per_node = (before_unplaced - unplaced) / max(low - before_count, 1)
            if per_node > 0:
                return low + max(1, math.ceil(unplaced / per_node))
            return low + 2 * max(low - before_count, 1)
        return low + 1


def copies(template: NodeInfo | None, count: int, table: NodeTable) -> list[NodeInfo]:
    """``count`` copies of ``template`` named ``<name>-1`` ... ``<name>-<count>``, as new Nodes
    that have registered and turned Ready: the template's labels (``kubernetes.io/hostname``
    set to each copy's name), capacity, runtimes, tags, kind, cordon and taints, but not the
    lifecycle taints its own readiness put on it. A name already in ``table`` is a
    ``ValueError``."""
    if template is None or count == 0:
        return []
    if not 0 <= count <= MAX_ADDED_NODES:
        raise ValueError(f"a count of {count} is outside 0..{MAX_ADDED_NODES}")
    longest = f"{template.hostname}-{count}"
    if len(longest) > MAX_NAME_LENGTH:
        raise ValueError(f"{longest} would be longer than {MAX_NAME_LENGTH} characters")
    taints = tuple(t for t in template.taints if t.key not in (TAINT_NOT_READY, TAINT_UNREACHABLE))
    out = []
    for i in range(1, count + 1):
        name = f"{template.hostname}-{i}"
        if name in table.index:
            raise ValueError(f"Node {name} is already in the cluster: rename the template")
        labels = dict(template.labels)
        if HOSTNAME_LABEL in labels:
            labels[HOSTNAME_LABEL] = name
        out.append(
            template.model_copy(
                update={
                    "hostname": name,
                    "labels": labels,
                    "ready": True,
                    "readable": True,
                    "taints": taints,
                }
            )
        )
    return out


def _sort_key(item: Moved | Unplaced | Ended) -> tuple[str, int, str]:
    """Workload, then replica index, numerically (``web-2`` before ``web-10``)."""
    index = item.alloc_id.rpartition("-")[2]
    return (item.workload, int(index) if index.isdigit() else -1, item.alloc_id)
