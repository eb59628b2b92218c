"""NameAffinity: ``+weight`` per replica of the named Workload already on the node.

The target is a Workload in the same namespace (an affinity target that is a DNS-1123 label,
docs/design.md 2); its replicas are counted in the cluster-wide ledger. Unnormalised: a rule
adds ``weight * replicas`` (negative weights push away).
"""

from __future__ import annotations

import numpy as np

from controller.scheduler.framework import CycleState, IndexArray
from controller.scheduler.nodes import IntArray


class NameAffinity:
    """Score over the ledger's replicas per node of the target Workloads."""

    name = "NameAffinity"

    def score(self, cycle: CycleState, candidates: IndexArray) -> IntArray | None:
        if not any(rule.is_workload_name for rule in cycle.spec.affinity):
            return None
        total: IntArray | None = cycle.data.get(self.name)
        if total is None:
            total = np.zeros(len(cycle.table), dtype=np.int64)
            for rule in cycle.spec.affinity:
                if rule.is_workload_name:
                    target = f"{cycle.namespace}/{rule.target}"
                    total += cycle.ledger.replicas_per_node(target) * rule.weight
            cycle.data[self.name] = total
        return total[candidates]
