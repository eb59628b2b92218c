"""NodeEligibility: cordoned and NotReady nodes take nothing new, and lose what they hold.

DESIGN.md 5: replicas on a node that is cordoned or NotReady are rescheduled (DaemonSets
dropped), so this filter also evicts.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Final

from controller.scheduler.framework import Code, CycleState, Rejection, Verdict

REASON_UNREADABLE: Final = "node(s) could not be read by orca"
REASON_CORDONED: Final = "node(s) were unschedulable"
REASON_NOT_READY: Final = "node(s) not ready"


class NodeEligibility:
    """Filter: readable, Ready and not cordoned (``spec.unschedulable``). A Node orca cannot
    read (the operator logs why and counts it) is reported as such, not as merely NotReady."""

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
            (
                Rejection(REASON_UNREADABLE, table.readable),
                Rejection(REASON_CORDONED, ~table.cordoned),
                Rejection(REASON_NOT_READY, table.ready),
            )
        )
