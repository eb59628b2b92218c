"""Why a Workload is where it is, or why it is not placed: the scheduler's cycle, narrated.

``explain`` runs the same cycle as ``Scheduler.schedule`` (snapshot, pre-filter, filter, keep)
and reports, instead of only the decision:

- each current replica: kept where it is, or why it has to move (the first filter that now
  evicts it, a resize its node cannot hold, a lowered count, a node that is gone);
- each node, as the next replica would see it: the first filter that rejects it (with the
  reason text the status uses), or, for nodes that pass, every score part and the total,
  with how many replicas of this Workload it holds (fewer wins before score). Best first.
- each topology spread constraint, with its defaults filled in: per domain the replicas the
  skew counts and the node inclusion policy that counted or ignored the domain, the minimum
  the skew is measured from, and whether ``minDomains`` made it 0.

Pure, like the scheduler: the ledger is read, nothing is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from controller.api.models import Workload
from controller.scheduler.decision import Decision, format_time, pending_why
from controller.scheduler.framework import FilterResult
from controller.scheduler.ledger import Ledger, alloc_index
from controller.scheduler.plugins.topology_spread import ConstraintVerdict, explain_spread
from controller.scheduler.priority import NO_CLASSES, PriorityClasses
from controller.scheduler.scheduler import Scheduler


@dataclass(frozen=True)
class NodeVerdict:
    """One node as the next replica sees it."""

    node: str
    replicas: int  # of this Workload, kept on the node
    filter: str | None = None  # the plugin that rejects it (None: it passes)
    reason: str | None = None
    scores: dict[str, int] = field(default_factory=dict)
    total: int | None = None


@dataclass(frozen=True)
class ReplicaVerdict:
    """One current replica: where it is, whether it stays, and why."""

    alloc_id: str
    node: str
    score: int
    kept: bool
    why: str


@dataclass(frozen=True)
class Explanation:
    workload: str
    kind: str
    decision: Decision
    replicas: tuple[ReplicaVerdict, ...]
    nodes: tuple[NodeVerdict, ...]
    errors: tuple[str, ...] = ()
    spread: tuple[ConstraintVerdict, ...] = ()  # per topologySpread constraint, its domains


def explain(
    scheduler: Scheduler,
    workload: Workload,
    ledger: Ledger,
    classes: PriorityClasses = NO_CLASSES,
    *,
    now: float,
) -> Explanation:
    """The explanation of ``workload``'s placement in the cluster ``ledger`` describes at time
    ``now`` (its priority resolved against ``classes``)."""
    framework = scheduler.framework
    prepared = scheduler.prepare(workload, ledger, now=now)
    decision = scheduler.decide(workload, prepared.dry_run(), classes)  # the cycle stays as is
    cycle, existing, filtered = prepared.cycle, prepared.existing, prepared.filtered
    if filtered is None:
        why = "kept while the spec is invalid"
        held = tuple(ReplicaVerdict(b.alloc_id, b.node, b.score, True, why) for b in existing)
        kind = workload.spec.kind.value
        return Explanation(workload.key, kind, decision, held, (), prepared.errors)
    kept = prepared.kept
    table = cycle.table
    kept_ids = {b.alloc_id for b in kept.values()}
    leaving = {m.alloc_id: m for m in decision.pending}
    first_rejections = framework.first_rejections(cycle, filtered)
    replicas: list[ReplicaVerdict] = []
    for b in existing:
        i = table.index.get(b.node)
        index = alloc_index(workload.key, b.alloc_id)
        if b.alloc_id in leaving:
            move = leaving[b.alloc_id]
            why = f"kept until {format_time(move.at)}: {pending_why(move)}"
        elif b.alloc_id in kept_ids:
            why = "kept"
        elif i is None:
            why = "moves: the node is gone"
        elif index is not None and not cycle.daemon and index >= workload.spec.replicas:
            why = f"removed: count is {workload.spec.replicas}"
        elif not filtered.keeps[i]:
            plugin, reason = _evicting(filtered.results, i)
            why = f"moves: {reason} ({plugin})"
        else:
            why = "moves: its node cannot hold the new size"
        replicas.append(ReplicaVerdict(b.alloc_id, b.node, b.score, b.alloc_id in kept_ids, why))
    candidates = framework.candidates(cycle, filtered)
    parts = framework.score_parts(cycle, candidates)
    totals = framework.score(cycle, candidates)
    passing = {
        int(i): NodeVerdict(
            node=table.hostnames[i],
            replicas=int(cycle.own[i]),
            scores={name: int(values[k]) for name, values in parts.items()},
            total=int(totals[k]),
        )
        for k, i in enumerate(candidates.tolist())
    }
    rejected = [
        NodeVerdict(table.hostnames[i], int(cycle.own[i]), first[0], first[1])
        for i, first in enumerate(first_rejections)
        if first is not None and i not in passing
    ]
    best = sorted(passing.values(), key=lambda v: (v.replicas, -(v.total or 0), v.node))
    return Explanation(
        workload.key,
        workload.spec.kind.value,
        decision,
        tuple(replicas),
        (*best, *rejected),
        spread=explain_spread(cycle) if workload.spec.topology_spread else (),
    )


def _evicting(results: Sequence[FilterResult], i: int) -> tuple[str, str]:
    """The first filter (in profile order) that no longer keeps a replica on node ``i``."""
    for result in results:
        if not result.keeps[i]:
            for rejection in result.rejections:
                if not rejection.passed[i]:
                    return result.plugin, rejection.reason
            return result.plugin, "no longer passes"
    return "", "no longer passes"
