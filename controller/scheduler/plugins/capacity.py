"""CapacityScore: Spread = kube-scheduler's LeastAllocated, BinPack = its MostAllocated, 0..100.

kube-scheduler's NodeResourcesFit scoring strategies (``pkg/scheduler/framework/plugins/
noderesources``: ``least_allocated.go``, ``most_allocated.go``, ``resource_allocation.go``),
over cpu and memory with weight 1 each, exactly (integer arithmetic, the same rounding):

- per resource, ``requested`` is what the node holds after placing one replica (its bookings
  plus the request, i.e. allocatable - free after) and ``capacity`` its allocatable;
- LeastAllocated (``leastRequestedScore``): ``(capacity - requested) * 100 / capacity``,
  0 when ``requested > capacity``; MostAllocated (``mostRequestedScore``):
  ``min(requested, capacity) * 100 / capacity``; both rounded down (Go integer division);
- the node's score is the sum of the resources' scores divided (rounded down) by the number
  of resources scored; a resource whose allocatable is 0 is left out of both
  (``calculateNodeAllocatableRequest`` skips it), and a node with neither scores 0.

One deliberate difference: kube scores a Pod without requests as if it asked for 100m cpu
and 200Mi memory (``schedutil.DefaultMilliCPURequest`` / ``DefaultMemoryRequest``, the
"non-zero" requests), orca scores the Workload's request as written (absent = 0).

A node's score depends only on its allocatable, its free capacity and the request, and from
one replica to the next (of one Workload, or of the next with the same request) the free
capacity changes on a few nodes: the plugin keeps each request's scores over the whole table
and recomputes them only where the free capacity differs from what they were computed on
(``_Scores``), instead of the whole formula over every candidate per replica. Which rows those
are it asks the ledger (the rows whose usage changed between the position the scores were
kept at and the one the cycle copied, ``Ledger.rows_changed``) and the cycles (the rows each
one's ``take`` and ``give`` changed, ``CycleState.touched``), rather than comparing every
row's free capacity per replica (four passes over the table: at 15,000 nodes a seventh of
``orca plan``'s time); only a cycle of another ledger or epoch compares them all. The answer is
the formula's, element for element; only the work differs.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Final

import numpy as np

from controller.api import resources as names
from controller.api.models import Strategy
from controller.scheduler.framework import CycleState, IndexArray
from controller.scheduler.nodes import IntArray

MAX_NODE_SCORE: Final = 100  # fwk.MaxNodeScore


def least_requested_score(requested: int, capacity: int) -> int:
    """kube-scheduler's ``leastRequestedScore`` (least_allocated.go), in Python ints.
    (``requested`` below 0, which kube never sees and orca's ledger never makes, counts as 0.)"""
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - max(requested, 0)) * MAX_NODE_SCORE // capacity


def most_requested_score(requested: int, capacity: int) -> int:
    """kube-scheduler's ``mostRequestedScore`` (most_allocated.go), in Python ints
    (``requested`` above ``capacity`` counts as ``capacity``)."""
    if capacity == 0:
        return 0
    return max(min(requested, capacity), 0) * MAX_NODE_SCORE // capacity


def capacity_score_of(
    strategy: Strategy, cpu: int, memory: int, free_cpu_after: int, free_memory_after: int
) -> int:
    """The score of one node (allocatable ``cpu``, ``memory``; free capacity after placing the
    replica), as kube's ``leastResourceScorer`` / ``mostResourceScorer`` compute it with
    weights cpu 1, memory 1: resources with allocatable 0 left out, 0 when none is left."""
    score = least_requested_score if strategy is Strategy.SPREAD else most_requested_score
    total = scored = 0
    for capacity, free_after in ((cpu, free_cpu_after), (memory, free_memory_after)):
        if capacity == 0:
            continue
        total += score(capacity - free_after, capacity)
        scored += 1
    return total // scored if scored else 0


def capacity_score(
    strategy: Strategy,
    cpu: IntArray,
    memory: IntArray,
    free_cpu_after: IntArray,
    free_memory_after: IntArray,
) -> IntArray:
    """``capacity_score_of`` of every node at once, in int64 (exact: every term is clipped to
    ``0..allocatable`` before it is multiplied by 100, and allocatable is at most 2^53).

    LeastAllocated's ``(capacity - requested)`` is the free capacity after placing, clipped
    to ``0..capacity`` (0 when over-requested); MostAllocated's ``requested`` is the used
    capacity after placing, clipped the same way (``capacity`` when over-requested). A
    resource with allocatable 0 clips to 0 and is not counted in the divisor."""
    total = _part(strategy, cpu, free_cpu_after)
    total += _part(strategy, memory, free_memory_after)
    scored = (cpu > 0).astype(np.int64) + (memory > 0)
    total //= np.maximum(scored, 1)
    return total


def _part(strategy: Strategy, capacity: IntArray, free_after: IntArray) -> IntArray:
    amount = free_after if strategy is Strategy.SPREAD else capacity - free_after
    # ``np.clip``'s own definition, without its wrapper: a third of the cost on the few
    # rows a replica changes (``_Scores``).
    part: IntArray = np.minimum(np.maximum(amount, 0), capacity)
    part *= MAX_NODE_SCORE
    part //= np.maximum(capacity, 1)
    return part


FEW: Final = 8  # changed nodes recomputed one by one in Python below this, with numpy above
MAX_REQUESTS_KEPT: Final = 16
"""Distinct (table, strategy, request) score vectors kept, least recently used dropped first:
3 arrays of one int64 per node each (5,000 nodes: 120 KB an entry)."""


@dataclass
class _Scores:
    """Scores of every node of a table for one strategy and request, and the free capacity
    they were computed on: the ledger's at ``origin`` but in the rows of ``extra`` (those the
    cycle that last brought them up to date had changed itself)."""

    free_cpu: IntArray
    free_memory: IntArray
    scores: IntArray
    origin: tuple[int, int]
    extra: set[int]


#: kube's default ``NodeResourcesFitArgs.ScoringStrategy.Resources``: cpu and memory, weight 1.
DEFAULT_RESOURCES: Final = ((names.CPU, 1), (names.MEMORY, 1))
MAX_RESOURCE_WEIGHT: Final = 100  # kube's ValidateNodeResourcesFitArgs: weight 1..100


class CapacityScore:
    """Score by ``spec.strategy`` on the cycle's free capacity after placing one replica.

    ``resources`` are the resources scored, with their weights (kube's ``ScoringStrategy.
    Resources``): cpu and memory with weight 1 by default, the fast path below. Others are
    scored as ``resourceAllocationScorer`` does: a resource the node has no allocatable of is
    left out, and a scalar one (huge pages, extended) the replica does not ask for too
    (``calculateNodeAllocatableRequest``); the weighted sum divided by the weights' sum."""

    name = "CapacityScore"

    def __init__(self, resources: tuple[tuple[str, int], ...] = DEFAULT_RESOURCES) -> None:
        seen = [name for name, _ in resources]
        if not resources or len(set(seen)) != len(seen):
            raise ValueError(f"CapacityScore needs distinct resources, not {seen}")
        for name, weight in resources:
            if names.name_problem(name) is not None or not 1 <= weight <= MAX_RESOURCE_WEIGHT:
                raise ValueError(
                    f"CapacityScore: {name} (weight {weight}) is not a resource to score "
                    f"with a weight of 1 to {MAX_RESOURCE_WEIGHT}"
                )
        self.resources = tuple(resources)
        self._kept: OrderedDict[tuple[int, Strategy, int, int], _Scores] = OrderedDict()

    def score(self, cycle: CycleState, candidates: IndexArray) -> IntArray:
        if self.resources != DEFAULT_RESOURCES:
            return self._weighted(cycle)[candidates]
        return self._all_nodes(cycle)[candidates]

    def _weighted(self, cycle: CycleState) -> IntArray:
        """Every node's score over ``resources`` with their weights (not kept: the default
        profile never takes this path)."""
        table = cycle.table
        asked = dict(cycle.scalars)
        total = np.zeros(len(table), dtype=np.int64)
        weights = np.zeros(len(table), dtype=np.int64)
        for name, weight in self.resources:
            if name == names.CPU:
                capacity, free, request = table.cpu, cycle.free_cpu, cycle.cpu
            elif name == names.MEMORY:
                capacity, free, request = table.memory, cycle.free_memory, cycle.memory
            else:
                request = asked.get(name, 0)
                if not request and name != names.EPHEMERAL_STORAGE:
                    continue  # a scalar resource it does not ask for: not scored
                capacity = table.scalar(name)
                followed = cycle.free_scalars.get(name)
                free = followed if followed is not None else cycle.ledger.free_scalar(name)
            total += _part(cycle.spec.strategy, capacity, free - request) * weight
            weights += (capacity > 0) * weight
        total //= np.maximum(weights, 1)
        return total

    def _all_nodes(self, cycle: CycleState) -> IntArray:
        """The score of every node of the table on the cycle's free capacity now."""
        table = cycle.table
        strategy, cpu, memory = cycle.spec.strategy, cycle.cpu, cycle.memory
        key = (table.shape, strategy, cpu, memory)  # reads allocatable and free only
        kept = self._kept.get(key)
        if kept is None:
            scores = capacity_score(
                strategy,
                table.cpu,
                table.memory,
                cycle.free_cpu - cpu,
                cycle.free_memory - memory,
            )
            kept = _Scores(
                cycle.free_cpu.copy(),
                cycle.free_memory.copy(),
                scores,
                cycle.origin,
                set(cycle.touched),
            )
            self._kept[key] = kept
            if len(self._kept) > MAX_REQUESTS_KEPT:
                self._kept.popitem(last=False)
            return kept.scores
        self._kept.move_to_end(key)
        changed = _changed(kept, cycle)
        kept.origin, kept.extra = cycle.origin, set(cycle.touched)
        if len(changed) > FEW:
            rows = np.array(changed, dtype=np.intp)
            free_cpu, free_memory = cycle.free_cpu[rows], cycle.free_memory[rows]
            kept.scores[rows] = capacity_score(
                strategy,
                table.cpu[rows],
                table.memory[rows],
                free_cpu - cpu,
                free_memory - memory,
            )
            kept.free_cpu[rows] = free_cpu
            kept.free_memory[rows] = free_memory
        else:  # the usual case: the node or two booked since; numpy's per-call cost dominates
            for i in changed:
                fc, fm = int(cycle.free_cpu[i]), int(cycle.free_memory[i])
                kept.scores[i] = capacity_score_of(
                    strategy,
                    int(table.cpu[i]),
                    int(table.memory[i]),
                    fc - cpu,
                    fm - memory,
                )
                kept.free_cpu[i] = fc
                kept.free_memory[i] = fm
        return kept.scores


def _changed(kept: _Scores, cycle: CycleState) -> list[int]:
    """The rows where the cycle's free cpu or memory may differ from what ``kept`` was
    computed on (see the module), some perhaps more than once."""
    rows = cycle.ledger.rows_changed(kept.origin, cycle.origin)
    if rows is None:  # another ledger, or another epoch of it: compare every row
        moved = (kept.free_cpu != cycle.free_cpu) | (kept.free_memory != cycle.free_memory)
        return np.flatnonzero(moved).tolist()
    return [*kept.extra.union(rows, cycle.touched)]
