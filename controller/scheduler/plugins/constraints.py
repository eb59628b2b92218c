"""CelConstraints: every CEL expression in ``spec.constraints`` must be true on the node.

Each expression is one rejection reason, ``node(s) didn't match constraint <source>``, and
nodes where it fails to evaluate get their own, ``constraint <source> failed to evaluate``.
Outcomes are memoised per distinct value of what an expression reads
(``controller.scheduler.celexpr``); expressions that read free capacity are evaluated per cycle.
``EveryNode`` DaemonSets ignore constraints.

A replica already placed stays while the expressions that do not read free capacity hold
(docs/design.md 5: "capacity changes never evict"). One that reads ``node.freeCpu`` or
``node.freeMemory`` decides where a *new* replica may go; re-checked for a kept one, it would
move the replica as soon as other Workloads filled the node (or at a restart, where the free
capacity seen no longer counts what was placed before), which is a capacity change.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from controller.scheduler.celexpr import CelCompileError, CelEvaluator, CompiledExpression
from controller.scheduler.celexpr import compile_expression as compile_cel
from controller.scheduler.framework import Code, CycleState, Rejection, Verdict


def reason_constraint(source: str) -> str:
    return f"node(s) didn't match constraint {source}"


def reason_constraint_error(source: str) -> str:
    return f"constraint {source} failed to evaluate"


def reason_constraint_unbudgeted(source: str) -> str:
    return f"constraint {source} not evaluated (the Workload's CEL budget for one cycle is spent)"


class CelConstraints:
    """PreFilter (compile) and Filter over ``spec.constraints``."""

    name = "CelConstraints"
    code = Code.UNRESOLVABLE
    evicts = True
    selects = True
    per_replica = False
    shape_only = True  # reads runtimes / CEL fields only (NodeTable.SHAPE_FIELDS)

    def __init__(self, cel: CelEvaluator) -> None:
        self.cel = cel

    def pre_filter(self, cycle: CycleState) -> list[str]:
        errors: list[str] = []
        compiled: list[CompiledExpression] = []
        for i, source in enumerate(cycle.spec.constraints):
            try:
                compiled.append(compile_cel(source))
            except CelCompileError as exc:
                errors.append(f"spec.constraints[{i}] {source!r}: {exc}")
        cycle.data[self.name] = tuple(compiled)
        return errors

    def _expressions(self, cycle: CycleState) -> tuple[CompiledExpression, ...]:
        if not cycle.uses_constraints:
            return ()
        compiled: tuple[CompiledExpression, ...] = cycle.data[self.name]
        return compiled

    def signature(self, cycle: CycleState) -> Hashable | None:
        expressions = self._expressions(cycle)
        if any(e.reads_free for e in expressions):
            return None  # free capacity differs from cycle to cycle
        return tuple(e.source for e in expressions)

    def filter(self, cycle: CycleState) -> Verdict:
        rejections: list[Rejection] = []
        complete = True
        keeps = np.ones(len(cycle.table), dtype=np.bool_)
        for expr in self._expressions(cycle):
            true, failed, skipped = self.cel.truth(
                expr, cycle.table, cycle.free_cpu, cycle.free_memory
            )
            if skipped.any():  # this cycle's answer only: never memoised
                complete = False
                rejections.append(Rejection(reason_constraint_unbudgeted(expr.source), ~skipped))
            if failed.any():
                rejections.append(Rejection(reason_constraint_error(expr.source), ~failed))
            rejections.append(Rejection(reason_constraint(expr.source), true | failed))
            if not expr.reads_free:
                keeps &= true & ~failed & ~skipped
        return Verdict(tuple(rejections), keeps=keeps, cacheable=complete)
