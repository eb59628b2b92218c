"""CelAffinity: ``+weight`` on nodes where an affinity rule's CEL target is true.

Unnormalised: the part is the sum of the weights of the rules that hold, so within
``-100 * rules .. 100 * rules``; a rule that fails to evaluate on a node adds nothing there.
Rules whose target is a Workload name belong to ``NameAffinity``.
"""

from __future__ import annotations

import numpy as np

from controller.scheduler.celexpr import CelCompileError, CelEvaluator, CompiledExpression
from controller.scheduler.celexpr import compile_expression as compile_cel
from controller.scheduler.framework import CycleState, IndexArray
from controller.scheduler.nodes import IntArray


class CelAffinity:
    """PreFilter (compile the CEL targets) and Score."""

    name = "CelAffinity"

    def __init__(self, cel: CelEvaluator) -> None:
        self.cel = cel

    def pre_filter(self, cycle: CycleState) -> list[str]:
        errors: list[str] = []
        rules: list[tuple[CompiledExpression, int]] = []
        for i, rule in enumerate(cycle.spec.affinity):
            if rule.is_workload_name:
                continue
            try:
                rules.append((compile_cel(rule.target), rule.weight))
            except CelCompileError as exc:
                errors.append(f"spec.affinity[{i}].target {rule.target!r}: {exc}")
        cycle.data[self.name] = tuple(rules)
        return errors

    def score(self, cycle: CycleState, candidates: IndexArray) -> IntArray | None:
        rules: tuple[tuple[CompiledExpression, int], ...] = cycle.data[self.name]
        if not rules:
            return None
        cached: IntArray | None = cycle.data.get(f"{self.name}/total")
        if cached is None:
            total = np.zeros(len(cycle.table), dtype=np.int64)
            for expr, weight in rules:
                true, _, _ = self.cel.truth(expr, cycle.table, cycle.free_cpu, cycle.free_memory)
                total += true * weight
            if not any(expr.reads_free for expr, _ in rules):  # else: again per replica
                cycle.data[f"{self.name}/total"] = total
            cached = total
        return cached[candidates]
