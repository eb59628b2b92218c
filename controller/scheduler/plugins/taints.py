"""TaintToleration: node taints against the Workload's tolerations (kube-scheduler semantics).

- ``NoSchedule`` / ``NoExecute`` taints no toleration tolerates filter the node, reported
  as ``node(s) had untolerated taint {key: value}`` with the node's first such taint.
- A ``NoExecute`` taint also moves existing replicas that do not tolerate it; a
  ``NoSchedule`` taint added later leaves them where they are.
- ``PreferNoSchedule`` taints lower the score: kube-scheduler's normalisation (the candidate
  with the most untolerated PreferNoSchedule taints scores 0, one without scores 100),
  shifted down by 100 so a cluster without such taints scores exactly as before: the part is
  ``-100 * count / max_count`` over the candidates, in -100..0.

Taints Kubernetes itself sets (``node.kubernetes.io/not-ready``, ``.../unschedulable``,
``node-role.kubernetes.io/control-plane``) need no special case.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Final

import numpy as np

from controller.api.models import TaintEffect, Toleration
from controller.scheduler.framework import Code, CycleState, IndexArray, Rejection, Verdict
from controller.scheduler.nodes import IntArray, Taint

_BLOCKING: Final = frozenset({TaintEffect.NO_SCHEDULE, TaintEffect.NO_EXECUTE})
MAX_CACHED: Final = 256


def reason_untolerated(taint: Taint) -> str:
    return f"node(s) had untolerated taint {taint}"


def untolerated(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> list[Taint]:
    """The taints no toleration tolerates, in the node's (sorted) order."""
    return [t for t in taints if not any(tol.tolerates(t) for tol in tolerations)]


class TaintToleration:
    """Filter and score over ``NodeInfo.taints`` and ``spec.tolerations``."""

    name = "TaintToleration"
    code = Code.UNRESOLVABLE
    evicts = False  # only NoExecute evicts: ``keeps`` is given explicitly
    selects = True
    per_replica = False

    def __init__(self) -> None:
        self._prefer: dict[tuple[int, Hashable], IntArray | None] = {}

    def signature(self, cycle: CycleState) -> Hashable:
        return tuple(cycle.spec.tolerations)

    def filter(self, cycle: CycleState) -> Verdict:
        table = cycle.table
        tolerations = cycle.spec.tolerations
        size = len(table)
        keeps = np.ones(size, dtype=np.bool_)
        rejected: dict[str, list[int]] = {}
        verdicts: dict[tuple[Taint, ...], tuple[str | None, bool]] = {}
        for i in table.tainted:
            node = table.nodes[i]
            verdict = verdicts.get(node.taints)
            if verdict is None:
                bad = [t for t in untolerated(node.taints, tolerations) if t.effect in _BLOCKING]
                executes = any(t.effect is TaintEffect.NO_EXECUTE for t in bad)
                verdict = verdicts[node.taints] = (
                    reason_untolerated(bad[0]) if bad else None,
                    executes,
                )
            reason, executes = verdict
            if reason is not None:
                rejected.setdefault(reason, []).append(i)
            if executes:
                keeps[i] = False
        rejections = []
        for reason, indexes in rejected.items():
            passed = np.ones(size, dtype=np.bool_)
            passed[indexes] = False
            rejections.append(Rejection(reason, passed))
        return Verdict(tuple(rejections), keeps)

    def score(self, cycle: CycleState, candidates: IndexArray) -> IntArray | None:
        counts = self._prefer_counts(cycle)
        if counts is None:
            return None
        part = counts[candidates]
        worst = int(part.max()) if len(part) else 0
        if worst == 0:
            return None
        return -((part * 100) // worst)

    def _prefer_counts(self, cycle: CycleState) -> IntArray | None:
        """Untolerated PreferNoSchedule taints per node (None: no node has any), memoised per
        node table and tolerations; only tainted nodes are looked at."""
        table = cycle.table
        key = (table.version, self.signature(cycle))
        if key in self._prefer:
            return self._prefer[key]
        if len(self._prefer) > MAX_CACHED:
            self._prefer.clear()
        tolerations = cycle.spec.tolerations
        counts = np.zeros(len(table), dtype=np.int64)
        for i in table.tainted:
            counts[i] = sum(
                1
                for t in untolerated(table.nodes[i].taints, tolerations)
                if t.effect is TaintEffect.PREFER_NO_SCHEDULE
            )
        result = counts if counts.any() else None
        self._prefer[key] = result
        return result
