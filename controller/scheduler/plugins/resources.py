"""ResourcesFit: the node has the free cpu and memory the replica asks for.

Per replica: the cycle's free capacity shrinks as it places replicas. Capacity never evicts
(docs/design.md 5): an existing replica's fit is only re-checked when the Workload grew
(``controller.scheduler.placement.keep``). A request of zero fits anywhere, as in Kubernetes, even
on a node that is over-committed for that resource.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Final

from controller.scheduler.framework import Code, CycleState, Rejection, Verdict
from controller.scheduler.ledger import has_room

REASON_INSUFFICIENT_CPU: Final = "Insufficient cpu"
REASON_INSUFFICIENT_MEMORY: Final = "Insufficient memory"


class ResourcesFit:
    """Filter (per replica) over the cycle's free cpu and memory."""

    name = "ResourcesFit"
    code = Code.UNSCHEDULABLE
    evicts = False
    selects = False
    per_replica = True

    def signature(self, cycle: CycleState) -> Hashable | None:
        return None

    def filter(self, cycle: CycleState) -> Verdict:
        return Verdict(
            (
                Rejection(REASON_INSUFFICIENT_CPU, has_room(cycle.free_cpu, cycle.cpu)),
                Rejection(REASON_INSUFFICIENT_MEMORY, has_room(cycle.free_memory, cycle.memory)),
            )
        )
