"""CapacityScore: Spread (most free capacity after placing) or BinPack (least), 0..100.

Normalised per node, like kube-scheduler's LeastAllocated / MostAllocated, so heterogeneous
nodes compare fairly (see ``capacity_score`` for the formula).
"""

from __future__ import annotations

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


def _percent_free(divisor: FloatArray, free_after: IntArray) -> FloatArray:
    score: FloatArray = np.multiply(free_after, 100.0, dtype=np.float64)
    score /= divisor
    np.floor(score, out=score)
    np.minimum(score, 100.0, out=score)
    np.maximum(score, 0.0, out=score)
    return score


class CapacityScore:
    """Score by ``spec.strategy`` on the cycle's free capacity after placing one replica."""

    name = "CapacityScore"

    def score(self, cycle: CycleState, candidates: IndexArray) -> IntArray:
        table = cycle.table
        return capacity_score(
            cycle.spec.strategy,
            table.cpu_divisor[candidates],
            table.memory_divisor[candidates],
            cycle.free_cpu[candidates] - cycle.cpu,
            cycle.free_memory[candidates] - cycle.memory,
        )
