"""NodeEligibility: cordoned and NotReady nodes take nothing new; cordoned ones (and Nodes
orca cannot read) also lose what they hold.

docs/design.md 5: replicas on a cordoned node are rescheduled (DaemonSets dropped). Replicas on a
NotReady node are not moved here: the node carries (or is read as carrying) the node
lifecycle controller's ``not-ready``/``unreachable`` NoExecute taint, and TaintToleration moves
them when their toleration of it runs out (300 s by default), as Kubernetes does for Pods.
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
    read (the operator logs why and counts it) is reported as such, not as merely NotReady.
    Keeps: readable and not cordoned (a NotReady node keeps its replicas, see above)."""

    name = "NodeEligibility"
    code = Code.UNRESOLVABLE
    evicts = False  # ``keeps`` is given explicitly
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
            ),
            keeps=table.readable & ~table.cordoned,
        )
