"""CapacityScore: Spread (most free capacity after placing) or BinPack (least), 0..100.

Normalised per node, like kube-scheduler's LeastAllocated / MostAllocated, so heterogeneous
nodes compare fairly (see ``capacity_score`` for the formula).

A node's score depends only on its allocatable, its free capacity and the request, and from
one replica to the next (of one Workload, or of the next with the same request) the free
capacity changes on a few nodes: the plugin keeps each request's scores over the whole table
and recomputes them only where the free capacity differs from what they were computed on
(``_Scores``), instead of the whole formula over every candidate per replica. The answer is the
formula's, element for element; only the work differs.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import Final

import numpy as np

from controller.api.models import Strategy
from controller.core.framework import CycleState, IndexArray
from controller.core.nodes import FloatArray, IntArray


def capacity_score(
    strategy: Strategy,
    cpu_divisor: FloatArray,
    memory_divisor: FloatArray,
    free_cpu_after: IntArray,
    free_memory_after: IntArray,
) -> IntArray:
    """Capacity score 0..100 per node, normalised per node so unequal nodes compare fairly.

    Spread:  mean over cpu, memory of ``floor(free_after * 100 / allocatable)``
    BinPack: mean over cpu, memory of ``100 - that``, i.e. of the used share (MostAllocated)

    The mean is rounded down. ``*_divisor`` is the allocatable as float, ``inf`` where a node
    has none of the resource (``NodeTable.cpu_divisor``), so such a resource scores 0 (or 100
    for BinPack, where a node that has none of it is as full as it gets). Each part is clipped
    to 0..100, so an over-committed node never scores outside the range. float64 division of
    integers below 2**46 (64 TiB) is exact enough that the floor equals integer floor division.
    """
    total = _percent_free(cpu_divisor, free_cpu_after)
    total += _percent_free(memory_divisor, free_memory_after)
    if strategy is Strategy.BINPACK:
        np.subtract(200.0, total, out=total)
    total //= 2
    return total.astype(np.int64)


def capacity_score_of(
    strategy: Strategy,
    cpu_divisor: float,
    memory_divisor: float,
    free_cpu_after: int,
    free_memory_after: int,
) -> int:
    """``capacity_score`` of one node, in Python floats (IEEE float64, as numpy's): the same
    operations in the same order, so the same integer (a unit test compares the two)."""
    total = _one_percent_free(cpu_divisor, free_cpu_after)
    total += _one_percent_free(memory_divisor, free_memory_after)
    if strategy is Strategy.BINPACK:
        total = 200 - total
    return total // 2


def _one_percent_free(divisor: float, free_after: int) -> int:
    return min(max(math.floor(float(free_after) * 100.0 / divisor), 0), 100)


def _percent_free(divisor: FloatArray, free_after: IntArray) -> FloatArray:
    score: FloatArray = np.multiply(free_after, 100.0, dtype=np.float64)
    score /= divisor
    np.floor(score, out=score)
    np.minimum(score, 100.0, out=score)
    np.maximum(score, 0.0, out=score)
    return score


FEW: Final = 8  # changed nodes recomputed one by one in Python below this, with numpy above
MAX_REQUESTS_KEPT: Final = 16
"""Distinct (table, strategy, request) score vectors kept, least recently used dropped first:
3 arrays of one int64 per node each (5,000 nodes: 120 KB an entry)."""


@dataclass
class _Scores:
    """Scores of every node of a table for one strategy and request, and the free capacity
    they were computed on."""

    free_cpu: IntArray
    free_memory: IntArray
    scores: IntArray


class CapacityScore:
    """Score by ``spec.strategy`` on the cycle's free capacity after placing one replica."""

    name = "CapacityScore"

    def __init__(self) -> None:
        self._kept: OrderedDict[tuple[int, Strategy, int, int], _Scores] = OrderedDict()

    def score(self, cycle: CycleState, candidates: IndexArray) -> IntArray:
        return self._all_nodes(cycle)[candidates]

    def _all_nodes(self, cycle: CycleState) -> IntArray:
        """The score of every node of the table on the cycle's free capacity now."""
        table = cycle.table
        strategy, cpu, memory = cycle.spec.strategy, cycle.cpu, cycle.memory
        key = (table.version, strategy, cpu, memory)
        kept = self._kept.get(key)
        if kept is None:
            scores = capacity_score(
                strategy,
                table.cpu_divisor,
                table.memory_divisor,
                cycle.free_cpu - cpu,
                cycle.free_memory - memory,
            )
            kept = _Scores(cycle.free_cpu.copy(), cycle.free_memory.copy(), scores)
            self._kept[key] = kept
            if len(self._kept) > MAX_REQUESTS_KEPT:
                self._kept.popitem(last=False)
            return kept.scores
        self._kept.move_to_end(key)
        changed = np.flatnonzero(
            (kept.free_cpu != cycle.free_cpu) | (kept.free_memory != cycle.free_memory)
        )
        if changed.size > FEW:
            free_cpu, free_memory = cycle.free_cpu[changed], cycle.free_memory[changed]
            kept.scores[changed] = capacity_score(
                strategy,
                table.cpu_divisor[changed],
                table.memory_divisor[changed],
                free_cpu - cpu,
                free_memory - memory,
            )
            kept.free_cpu[changed] = free_cpu
            kept.free_memory[changed] = free_memory
        else:  # the usual case: the node or two booked since; numpy's per-call cost dominates
            for i in changed.tolist():
                fc, fm = int(cycle.free_cpu[i]), int(cycle.free_memory[i])
                kept.scores[i] = capacity_score_of(
                    strategy,
                    float(table.cpu_divisor[i]),
                    float(table.memory_divisor[i]),
                    fc - cpu,
                    fm - memory,
                )
                kept.free_cpu[i] = fc
                kept.free_memory[i] = fm
        return kept.scores
