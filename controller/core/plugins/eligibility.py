"""NodeEligibility: cordoned and NotReady nodes take nothing new, and lose what they hold.

DESIGN.md 5: replicas on a node that is cordoned or NotReady are rescheduled (DaemonSets
dropped), so this filter also evicts.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Final

from controller.core.framework import Code, CycleState, Rejection, Verdict

REASON_CORDONED: Final = "node(s) were unschedulable"
REASON_NOT_READY: Final = "node(s) not ready"


class NodeEligibility:
    """Filter: Ready and not cordoned (``spec.unschedulable``)."""

    name = "NodeEligibility"
    code = Code.UNRESOLVABLE
    evicts = True
    selects = True
    per_replica = False

    def signature(self, cycle: CycleState) -> Hashable:
        return ()  # reads nothing of the spec

    def filter(self, cycle: CycleState) -> Verdict:
        table = cycle.table
        return Verdict(
            (Rejection(REASON_CORDONED, ~table.cordoned), Rejection(REASON_NOT_READY, table.ready))
        )
