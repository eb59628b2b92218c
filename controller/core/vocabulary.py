"""The words orca's API uses for outcomes: condition types and reasons, Event reasons.

One home for this vocabulary, so the status, the Events and the docs say the same thing.
Filter rejection reasons ("Insufficient cpu", "node(s) had untolerated taint ...") belong to
the plugin that rejects, beside its logic (``controller.core.plugins``).
"""

from __future__ import annotations

from typing import Final

from controller.api.models import Phase

# -- the Scheduled condition ---------------------------------------------------------------------
CONDITION_SCHEDULED: Final = "Scheduled"

REASON_ALL_PLACED: Final = "AllPlaced"
REASON_PARTIALLY_PLACED: Final = "PartiallyPlaced"
REASON_UNSCHEDULABLE: Final = "Unschedulable"
REASON_INVALID_SPEC: Final = "InvalidSpec"
REASON_PREEMPTED: Final = "Preempted"  # replicas removed for a higher-priority Workload

CONDITION_REASON_BY_PHASE: Final = {
    Phase.SCHEDULED: REASON_ALL_PLACED,
    Phase.PARTIALLY_SCHEDULED: REASON_PARTIALLY_PLACED,
    Phase.UNSCHEDULABLE: REASON_UNSCHEDULABLE,
    Phase.INVALID: REASON_INVALID_SPEC,
}

# -- the Preempted condition: the last preemption a Workload suffered (who, where) -------------
CONDITION_PREEMPTED: Final = "Preempted"

# -- Events on a Workload (posted on phase transitions, never per reconcile) ---------------------
EVENT_SCHEDULED: Final = "Scheduled"
EVENT_FAILED_SCHEDULING: Final = "FailedScheduling"
EVENT_REBALANCED: Final = "Rebalanced"  # a replica moved by the rebalancer (one Event per move)
EVENT_PREEMPTED: Final = "Preempted"  # replicas removed for a higher-priority Workload
