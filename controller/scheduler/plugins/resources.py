"""ResourcesFit: the node has a Pod's room and the free amount of every resource the replica
asks for.

kube-scheduler's NodeResourcesFit filter (``fitsRequest``, pkg/scheduler/framework/plugins/
noderesources/fit.go), in its order: ``Too many pods`` when the node's allocatable ``pods``
are all taken (every replica is one Pod; a Node that does not state ``pods`` takes any
number, where kube would take none), then ``Insufficient cpu``, ``Insufficient memory`` and
``Insufficient <name>`` for every other resource asked for (``ephemeral-storage`` first, then
by name: kube walks a map). The one capacity rule (``ledger.has_room``): a resource the
replica does not ask for never fails, even on a node that is over-committed for it; a
resource the node does not offer has 0 allocatable.

Per replica: the cycle's free capacity shrinks as it places replicas. Capacity never evicts
(docs/design.md 5): an existing replica's fit is only re-checked when the Workload grew
(``controller.scheduler.placement.keep``).

A node whose allocatable itself is below the request is beyond cure (kube marks that
``InsufficientResource`` ``Unresolvable`` and the status ``UnschedulableAndUnresolvable``):
the diagnosis counts it as ``UNRESOLVABLE``, so a Workload no node could ever take is Stalled,
not waiting for capacity. One difference: kube lists every failing resource of a node; orca
reports a node under the first that fails (the diagnosis counts each node once).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Final

from controller.api import resources as names
from controller.scheduler.framework import Code, CycleState, Rejection, Verdict
from controller.scheduler.ledger import has_room
from controller.scheduler.nodes import BoolArray, IntArray

REASON_TOO_MANY_PODS: Final = "Too many pods"
REASON_INSUFFICIENT_CPU: Final = "Insufficient cpu"
REASON_INSUFFICIENT_MEMORY: Final = "Insufficient memory"


def insufficient(name: str) -> str:
    """kube's reason for a resource short on a node: ``Insufficient <name>``."""
    return f"Insufficient {name}"


def _kube_order(item: tuple[str, int]) -> tuple[bool, str]:
    """ephemeral-storage before the scalar resources, as ``fitsRequest`` checks it."""
    return (item[0] != names.EPHEMERAL_STORAGE, item[0])


class ResourcesFit:
    """Filter (per replica) over the cycle's free Pods and resources."""

    name = "ResourcesFit"
    code = Code.UNSCHEDULABLE
    evicts = False
    selects = False
    per_replica = True

    def signature(self, cycle: CycleState) -> Hashable | None:
        return None

    def fit(self, cycle: CycleState) -> BoolArray:
        """The nodes with room now: the cycle's own ``room``, kept node by node."""
        return cycle.room()

    def filter(self, cycle: CycleState) -> Verdict:
        table = cycle.table
        rejections = [
            Rejection(REASON_TOO_MANY_PODS, cycle.free_pods >= 1),
            _short(REASON_INSUFFICIENT_CPU, cycle.free_cpu, table.cpu, cycle.cpu),
            _short(REASON_INSUFFICIENT_MEMORY, cycle.free_memory, table.memory, cycle.memory),
        ]
        for name, amount in sorted(cycle.scalars, key=_kube_order):
            rejections.append(
                _short(insufficient(name), cycle.free_scalars[name], table.scalar(name), amount)
            )
        return Verdict(tuple(rejections))


def _short(reason: str, free: IntArray, allocatable: IntArray, request: int) -> Rejection:
    """Nodes without ``request`` free (``has_room``); those whose allocatable is below it are
    beyond cure (kube's ``Unresolvable: request > allocatable``)."""
    if not request:
        return Rejection(reason, has_room(free, request))
    return Rejection(reason, free >= request, beyond=allocatable < request)
