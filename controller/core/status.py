"""A scheduling ``Decision`` to the Workload ``status`` the API shows (DESIGN.md 2).

Pure: the caller passes the previous status and the time, so ``lastTransitionTime`` only moves
when the condition's status actually changes, and the same decision on the same previous
status gives an identical result (which is how the operator knows it has nothing to write).
"""

from __future__ import annotations

import time

from controller.api.models import Condition, Phase, WorkloadStatus
from controller.core.decision import Decision
from controller.core.vocabulary import CONDITION_SCHEDULED

_formatted: tuple[int, str] = (-1, "")  # the last second formatted, and how


def rfc3339_now() -> str:
    """The clock callers pass in as ``now`` (whole seconds, UTC, as conditions use). Formatted
    once per second: a backlog asks for it hundreds of times a second (1% of the operator's
    CPU when every call formatted it)."""
    global _formatted
    second = int(time.time())
    if second != _formatted[0]:
        _formatted = (second, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second)))
    return _formatted[1]


MAX_NODES_SUMMARY = 5


def nodes_summary(nodes: list[str]) -> str:
    """``a,b,c`` (distinct, in placement order), ``+N`` past a few: a column, not a record."""
    distinct = list(dict.fromkeys(nodes))
    shown = ",".join(distinct[:MAX_NODES_SUMMARY])
    more = len(distinct) - MAX_NODES_SUMMARY
    return shown + (f",+{more}" if more > 0 else "")


def condition_status(phase: Phase) -> str:
    """``Scheduled`` is True only when everything is placed."""
    return "True" if phase is Phase.SCHEDULED else "False"


def status_from_decision(
    decision: Decision,
    generation: int | None,
    previous: WorkloadStatus | None,
    now: str,
) -> WorkloadStatus:
    """The full status for ``decision``; ``now`` is an RFC 3339 timestamp."""
    state = condition_status(decision.phase)
    last_transition = now
    if previous is not None:
        for old in previous.conditions:
            if old.type == CONDITION_SCHEDULED and old.status == state:
                last_transition = old.last_transition_time
    condition = Condition(
        type=CONDITION_SCHEDULED,
        status=state,
        reason=decision.reason,
        message=decision.message,
        last_transition_time=last_transition,
        observed_generation=generation,
    )
    others = [c for c in (previous.conditions if previous else []) if c.type != CONDITION_SCHEDULED]
    return WorkloadStatus(
        observed_generation=generation,
        phase=decision.phase,
        desired=decision.desired,
        placed=decision.placed,
        placements=list(decision.placements),
        conditions=[condition, *others],
        message=decision.message,
        unschedulable=list(decision.unschedulable),
        nodes=nodes_summary([p.node for p in decision.placements]),
        resources=decision.resources or (previous.resources if previous else None),
        priority=decision.priority,
    )
