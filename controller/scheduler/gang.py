"""Gangs: a Service placed with at least ``spec.gang.minCount`` replicas or none.

A distributed job's workers are useful only together: eight workers with five placed hold five
nodes' room for nothing, and two such jobs that each get half the cluster wait on each other
for ever (Volcano #3373; the reason for coscheduling, Kueue's all-or-nothing admission and
KEP-4671). The placement (``controller.scheduler.placement``) places replicas one by one as for
any Service; this rule then looks at how many it placed:

- at least ``minCount``: the decision stands (the rest, if any, wait for room as usual);
- fewer, and the gang held none before (or is planned, not run): nothing is placed; the
  message says how many would fit and why not the rest. One decision at a time decides a
  gang whole, so two gangs that each need the whole cluster never split it: the first decided
  is placed, the other waits;
- fewer, and the gang was placed before (it lost replicas: a node gone, a taint; or its
  ``minCount`` grew): it keeps what it holds, plus what fits of the rest, for
  ``timeoutSeconds`` from when it fell below (the ``BelowMinCount`` condition's
  ``lastTransitionTime``), then lets every placement go, so the room it holds serves others;
  it is placed whole again once room returns. A node lost is not the gang's doing: it gets
  the time to recover.

``orca plan`` and every what-if answer where the cluster settles, so they give a gang that
falls below its ``minCount`` no grace: it is released at once (``grace=False``).

Pure: the previous status and the clock come in, a decision goes out.
"""

from __future__ import annotations

import math
from dataclasses import replace

from controller.api.models import Phase, Workload
from controller.scheduler.decision import Decision, decide, format_time, short_message
from controller.scheduler.framework import Code
from controller.scheduler.nodes import rfc3339_to_epoch
from controller.scheduler.vocabulary import CONDITION_BELOW_MIN_COUNT


def below_since(workload: Workload) -> float | None:
    """When the gang fell below its minCount, as its status records it (the ``BelowMinCount``
    condition's ``lastTransitionTime``), or None."""
    status = workload.status
    for condition in status.conditions if status is not None else ():
        if condition.type == CONDITION_BELOW_MIN_COUNT and condition.status == "True":
            try:
                return rfc3339_to_epoch(condition.last_transition_time)
            except ValueError:
                return None
    return None


def gang_rule(
    decision: Decision,
    workload: Workload,
    *,
    kept: int,
    nodes: int,
    now: float,
    grace: bool,
) -> Decision:
    """``decision`` (a Service's, placed replica by replica) under its gang's rule; ``kept``:
    how many replicas it held before and keeps, ``nodes`` the table's size (for the
    message), ``now`` the clock, ``grace``: whether a placed gang that lost replicas is given
    its ``timeoutSeconds`` (the operator) or released at once (plans and what-ifs)."""
    gang = workload.spec.gang
    if gang is None or decision.phase is Phase.INVALID or decision.placed >= gang.min_count:
        return decision
    minimum, desired, fit = gang.min_count, decision.desired, decision.placed
    detail = short_message(0, desired, nodes, decision.unschedulable)
    if grace and kept:
        since = below_since(workload)
        since = now if since is None else min(since, now)
        # The condition records whole seconds, the moment truncated: the hold ends a second
        # past it, so it never lasts less than timeoutSeconds.
        deadline = math.floor(since) + 1 + gang.timeout_seconds
        if now < deadline:
            message = (
                f"{fit}/{desired} replicas placed, fewer than gang minCount {minimum} since "
                f"{format_time(since)}; every placement is released at "
                f"{format_time(deadline)} unless {minimum - fit} more can be placed. {detail}"
            )
            return replace(decision, message=message, below_since=since, deadline=deadline)
        why = (
            f"gang held fewer than minCount {minimum} for {gang.timeout_seconds}s: every "
            "placement released so its room serves others"
        )
    else:
        why = f"gang minCount {minimum}: {fit} of {desired} replicas would fit, so none is placed"
    code = decision.code if decision.code is not Code.SUCCESS else Code.UNSCHEDULABLE
    released = decide(
        Phase.UNSCHEDULABLE, desired, (), f"{why}. {detail}", decision.unschedulable, code
    )
    return replace(released, resources=decision.resources, priority=decision.priority)
