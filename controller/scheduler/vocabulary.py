"""The words orca's API uses for outcomes: condition types and reasons, Event reasons.

One home for this vocabulary, so the status, the Events and the docs say the same thing.
Filter rejection reasons ("Insufficient cpu", "node(s) had untolerated taint ...") belong to
the plugin that rejects, beside its logic (``controller.scheduler.plugins``).

The conditions follow the Kubernetes API conventions and kstatus (``sigs.k8s.io/cli-utils``
``pkg/kstatus/status``, what Flux's ``wait``/``healthChecks`` and cli-utils' appliers read):

    Ready        True when every replica is placed for the current generation
    Reconciling  True while the Workload waits for something that comes by itself: capacity
                 (the framework's ``Code.UNSCHEDULABLE``), or being placed again after a
                 preemption. (A generation not yet decided at all shows as
                 ``status.observedGeneration`` behind ``metadata.generation``, which kstatus
                 reads as Reconciling on its own; the CRD defaults it to 0.)
    Stalled      True when nothing changes without a change of the spec or the nodes: an
                 invalid spec, or every missing replica rejected for reasons freed capacity
                 cannot cure (``Code.INVALID``, ``Code.UNRESOLVABLE``)
    Scheduled    kept from earlier releases: the same status and reason as Ready
    Preempted    the last preemption this Workload suffered (who, where); False once it is
                 placed again, the message kept for ``orca explain``
    MovePending  present (True) while some replica stays on a node only for a while: the
                 node is NotReady or unreachable, or has a NoExecute taint the replica
                 tolerates for ``tolerationSeconds``; the message says which replica, where,
                 and when it moves unless the node recovers. Absent otherwise. Ready is not
                 touched: those replicas are still placed.
    BelowMinCount  present (True) while a placed gang holds fewer than its ``minCount`` (a
                 node lost, a taint) and waits for room to place the rest: since when (its
                 ``lastTransitionTime``), and when every placement is released unless it is
                 whole again (``timeoutSeconds`` later). Absent otherwise.

kstatus reads Reconciling True as InProgress, Stalled True as Failed, and otherwise Ready True
as Current; ``kubectl wait --for=condition=Ready`` waits for "fully placed".
"""

from __future__ import annotations

from typing import Final

from controller.api.models import Phase

# -- condition types -----------------------------------------------------------------------------
CONDITION_READY: Final = "Ready"
CONDITION_RECONCILING: Final = "Reconciling"
CONDITION_STALLED: Final = "Stalled"
CONDITION_SCHEDULED: Final = "Scheduled"
CONDITION_PREEMPTED: Final = "Preempted"
CONDITION_MOVE_PENDING: Final = "MovePending"
CONDITION_BELOW_MIN_COUNT: Final = "BelowMinCount"

# -- reasons: what the Workload's situation is (the same reason on each condition it touches,
#    whether that condition is True or False, so any one of them reads on its own) -------------
REASON_ALL_PLACED: Final = "AllPlaced"
REASON_PARTIALLY_PLACED: Final = "PartiallyPlaced"
REASON_UNSCHEDULABLE: Final = "Unschedulable"
REASON_INVALID_SPEC: Final = "InvalidSpec"
REASON_PREEMPTED: Final = "Preempted"  # replicas removed for a higher-priority Workload
REASON_WAITING_FOR_CAPACITY: Final = "WaitingForCapacity"  # freed capacity can place the rest
REASON_UNRESOLVABLE: Final = "Unresolvable"  # only a spec or node change can place the rest
REASON_PLACED_AGAIN: Final = "PlacedAgain"  # Preempted, False: every replica is back
# MovePending's reason: what the first replica to move waits out
REASON_NODE_UNREACHABLE: Final = "NodeUnreachable"  # node.kubernetes.io/unreachable
REASON_NODE_NOT_READY: Final = "NodeNotReady"  # node.kubernetes.io/not-ready
REASON_NO_EXECUTE_TAINT: Final = "NoExecuteTaint"  # any other NoExecute taint
REASON_REPLICAS_LOST: Final = "ReplicasLost"  # BelowMinCount: a gang lost replicas

CONDITION_REASON_BY_PHASE: Final = {
    Phase.SCHEDULED: REASON_ALL_PLACED,
    Phase.PARTIALLY_SCHEDULED: REASON_PARTIALLY_PLACED,
    Phase.UNSCHEDULABLE: REASON_UNSCHEDULABLE,
    Phase.INVALID: REASON_INVALID_SPEC,
}

# -- Events on a Workload (posted on phase transitions, never per reconcile) ---------------------
EVENT_SCHEDULED: Final = "Scheduled"
EVENT_FAILED_SCHEDULING: Final = "FailedScheduling"
EVENT_REBALANCED: Final = "Rebalanced"  # a replica moved by the rebalancer (one Event per move)
EVENT_PREEMPTED: Final = "Preempted"  # replicas removed for a higher-priority Workload
EVENT_MOVE_PENDING: Final = "MovePending"  # a replica will move unless its node recovers
