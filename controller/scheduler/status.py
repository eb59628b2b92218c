"""A scheduling ``Decision`` to the Workload ``status`` the API shows (the conditions of
``controller.scheduler.vocabulary``: Ready, Reconciling, Stalled, Scheduled, Preempted).

Pure: the caller passes the previous status and the time, so ``lastTransitionTime`` only moves
when a condition's status actually changes, and the same decision on the same previous status
gives an identical result (which is how the operator knows it has nothing to write).

Every status write costs the API server (and etcd) in proportion to its size (the object is
JSON, decoded, compared field by field for ``managedFields``, validated and encoded again on
every write: ``bench/bench_server_cost.py``), so the long text (the diagnosis: ``0/5 nodes are
available: ...``) lives in ``status.message`` and in the one condition that is True and says
what is wrong (Reconciling or Stalled: what kstatus, Flux and Argo CD show); Ready and Scheduled
get a short summary that points there; Reconciling and Stalled are present only while True
(kstatus's abnormal-true conditions: "no work left" reads the same absent as False, as Flux's
own controllers write them), and the conditions that are False carry no message.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from dataclasses import dataclass

from controller.api.models import Condition, Phase, WorkloadStatus
from controller.scheduler.decision import Decision, PendingMove, format_time, pending_what
from controller.scheduler.framework import Code
from controller.scheduler.nodes import TAINT_NOT_READY, TAINT_UNREACHABLE
from controller.scheduler.vocabulary import (
    CONDITION_BELOW_MIN_COUNT,
    CONDITION_MOVE_PENDING,
    CONDITION_PREEMPTED,
    CONDITION_READY,
    CONDITION_RECONCILING,
    CONDITION_SCHEDULED,
    CONDITION_STALLED,
    REASON_INVALID_SPEC,
    REASON_NO_EXECUTE_TAINT,
    REASON_NODE_NOT_READY,
    REASON_NODE_UNREACHABLE,
    REASON_PLACED_AGAIN,
    REASON_REPLICAS_LOST,
    REASON_UNRESOLVABLE,
    REASON_WAITING_FOR_CAPACITY,
)

_formatted: tuple[int, str] = (-1, "")  # the last second formatted, and how

#: The conditions this module owns, in the order the status lists them.
OWN_CONDITIONS = (
    CONDITION_READY,
    CONDITION_RECONCILING,
    CONDITION_STALLED,
    CONDITION_SCHEDULED,
    CONDITION_MOVE_PENDING,
    CONDITION_BELOW_MIN_COUNT,
)
MAX_PENDING_SHOWN = 5


def move_pending_reason(move: PendingMove) -> str:
    """MovePending's reason for the first replica due to move."""
    reasons = {TAINT_UNREACHABLE: REASON_NODE_UNREACHABLE, TAINT_NOT_READY: REASON_NODE_NOT_READY}
    return reasons.get(move.lifecycle or "", REASON_NO_EXECUTE_TAINT)


def move_pending_message(pending: Sequence[PendingMove]) -> str:
    """``web-1 on node-3 moves at 2026-12-01T10:05:00Z (node unreachable); ...``, earliest
    first, a few at most (the status is rewritten by every decision: it stays small)."""
    shown = [
        f"{m.alloc_id} on {m.node} moves at {format_time(m.at)} ({pending_what(m)})"
        for m in pending[:MAX_PENDING_SHOWN]
    ]
    more = len(pending) - MAX_PENDING_SHOWN
    listed = "; ".join(shown) + (f"; and {more} more" if more > 0 else "")
    return f"{listed}. Each moves only if its node has not recovered by then."


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


@dataclass(frozen=True, slots=True)
class Situation:
    """What the conditions say about one Workload, before timestamps.

    ``reason`` is the phase's reason (Ready, Scheduled); ``why`` the reason of the abnormal
    condition (Reconciling or Stalled, whichever holds; the other one is absent, and both
    when Ready). ``detail`` is the long text, carried by the abnormal condition.
    """

    ready: bool
    reconciling: bool
    stalled: bool
    reason: str
    why: str
    summary: str
    detail: str


def situation(decision: Decision) -> Situation:
    """Ready, Reconciling or Stalled for ``decision`` (see ``controller.scheduler.vocabulary``).

    Who can cure what is missing is the decision's ``code`` (kube-scheduler's
    ``framework.Code``): ``UNSCHEDULABLE`` (some node failed only for lack of room) waits for
    capacity, so Reconciling; ``UNRESOLVABLE`` (runtime, constraints, taints, eligibility,
    or no nodes at all) and ``INVALID`` wait for a change, so Stalled.
    """
    if decision.phase is Phase.SCHEDULED:
        return Situation(True, False, False, decision.reason, decision.reason, decision.message, "")
    if decision.phase is Phase.INVALID or decision.code is Code.INVALID:
        stalled, why = True, REASON_INVALID_SPEC
    elif decision.code is Code.UNRESOLVABLE:
        stalled, why = True, REASON_UNRESOLVABLE
    elif decision.code is Code.UNSCHEDULABLE:
        stalled, why = False, REASON_WAITING_FOR_CAPACITY
    else:  # short, yet nothing says what could cure it: not decided to be stuck
        stalled, why = False, decision.reason
    holder = CONDITION_STALLED if stalled else CONDITION_RECONCILING
    if decision.phase is Phase.INVALID:
        summary = f"invalid spec; see {holder}"
    else:
        summary = f"{decision.placed}/{decision.desired} replicas placed; see {holder}"
    return Situation(False, not stalled, stalled, decision.reason, why, summary, decision.message)


def _since(previous: Sequence[Condition], kind: str, state: str, now: str) -> str:
    """``lastTransitionTime``: kept while the condition's status stays, else ``now``."""
    for old in previous:
        if old.type == kind:
            return old.last_transition_time if old.status == state else now
    return now


@functools.lru_cache(maxsize=1024)
def _condition(
    kind: str, state: str, reason: str, message: str | None, since: str, generation: int | None
) -> Condition:
    """One Condition per distinct value, shared by the statuses that have it (Conditions are
    frozen). A backlog decides a few hundred Workloads a second with the same reason, message
    and time: sharing their Ready and Scheduled conditions kept ~0.8 KB per status out of the
    operator's memory for as long as the Workload exists."""
    return Condition(
        type=kind,
        status=state,
        reason=reason,
        message=message,
        last_transition_time=since,
        observed_generation=generation,
    )


def own_conditions(
    s: Situation,
    generation: int | None,
    previous: Sequence[Condition],
    now: str,
    pending: Sequence[PendingMove] = (),
    released_at: float | None = None,
) -> list[Condition]:
    """Ready and Scheduled for situation ``s``; Reconciling or Stalled when it holds (neither
    when every replica is placed); MovePending while a replica is ``pending``; BelowMinCount
    while a gang holds fewer than its minCount, until ``released_at``."""

    def condition(kind: str, true: bool, reason: str, message: str | None) -> Condition:
        state = "True" if true else "False"
        since = _since(previous, kind, state, now)
        return _condition(kind, state, reason, message, since, generation)

    conditions = [condition(CONDITION_READY, s.ready, s.reason, s.summary)]
    if s.reconciling:
        conditions.append(condition(CONDITION_RECONCILING, True, s.why, s.detail))
    if s.stalled:
        conditions.append(condition(CONDITION_STALLED, True, s.why, s.detail))
    conditions.append(condition(CONDITION_SCHEDULED, s.ready, s.reason, s.summary))
    if pending:
        reason = move_pending_reason(pending[0])
        conditions.append(
            condition(CONDITION_MOVE_PENDING, True, reason, move_pending_message(pending))
        )
    if released_at is not None:
        message = (
            f"fewer replicas placed than the gang's minCount; every placement is released at "
            f"{format_time(released_at)} unless it is whole again"
        )
        conditions.append(condition(CONDITION_BELOW_MIN_COUNT, True, REASON_REPLICAS_LOST, message))
    return conditions


def _others(
    previous: Sequence[Condition], ready: bool, generation: int | None, now: str
) -> list[Condition]:
    """Conditions this module does not decide, kept; ``Preempted`` turns False (its message,
    who preempted, kept for ``orca explain``) once every replica is placed again."""
    out = []
    for old in previous:
        if old.type in OWN_CONDITIONS:
            continue
        if old.type == CONDITION_PREEMPTED and old.status == "True" and ready:
            old = old.model_copy(
                update={
                    "status": "False",
                    "reason": REASON_PLACED_AGAIN,
                    "last_transition_time": now,
                    "observed_generation": generation,
                }
            )
        out.append(old)
    return out


def status_from_decision(
    decision: Decision,
    generation: int | None,
    previous: WorkloadStatus | None,
    now: str,
    selector: str | None = None,
) -> WorkloadStatus:
    """The full status for ``decision``; ``now`` is an RFC 3339 timestamp; ``selector`` the
    Workload's ``workload_selector`` (what ``/scale`` reports)."""
    old = previous.conditions if previous else []
    s = situation(decision)
    return WorkloadStatus(
        observed_generation=generation,
        phase=decision.phase,
        desired=decision.desired,
        placed=decision.placed,
        placements=list(decision.placements),
        conditions=[
            *own_conditions(s, generation, old, now, decision.pending, decision.deadline),
            *_others(old, s.ready, generation, now),
        ],
        message=decision.message,
        unschedulable=list(decision.unschedulable),
        nodes=nodes_summary([p.node for p in decision.placements]),
        resources=decision.resources or (previous.resources if previous else None),
        priority=decision.priority,
        selector=selector,
    )
