"""orca's scheduler: one Workload and the cluster in, the status it should have out.

The scheduling cycle reads as a pipeline (kube-scheduler's ``schedule_one``, in miniature)::

    snapshot     a CycleState: the spec, the ledger's free capacity (copies), this
                 Workload's own bookings given back (the cycle re-decides them)
    pre_filter   every plugin checks and compiles what it needs; errors -> Invalid
    filter       the static filters over the node table, memoised per plugin signature
    keep         existing placements stay where the filters' ``keeps`` hold (capacity
                 changes never evict; a resize re-checks fit); those that stay only until
                 a time (a NoExecute taint tolerated for a while) are reported as pending
    place        per kind (``controller.scheduler.placement``): fit, score, select, book;
                 a gang then places at least its minCount or nothing
                 (``controller.scheduler.gang``)
    diagnose     when short: the first failing filter per rejected node, counted, which
                 becomes the status message, with a Code saying who can cure it

``Scheduler.schedule`` is a pure function of (Workload, Ledger, time): the ledger is read,
never written, and the memo caches inside only remember answers. The caller books the decision.
The plugins and their order are the profile's (``controller.scheduler.plugins``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from controller.api.models import Resources, TaintEffect, Workload
from controller.scheduler.celexpr import CelEvaluator
from controller.scheduler.decision import Decision, PendingMove, invalid
from controller.scheduler.framework import CycleState, Filtered, Framework, Profile
from controller.scheduler.gang import gang_rule
from controller.scheduler.ledger import Booking, Ledger
from controller.scheduler.placement import (
    keep,
    place_daemonset,
    place_replicas,
    release,
    selected,
)
from controller.scheduler.plugins import default_profile
from controller.scheduler.plugins.taints import DefaultTolerations
from controller.scheduler.priority import NO_CLASSES, Priority, PriorityClasses

_NO_NODES = Ledger()  # the pre-filters read the spec only


@dataclass(frozen=True)
class PreparedCycle:
    """A cycle before placement. ``filtered`` is None when the spec is invalid (``errors``)."""

    cycle: CycleState
    existing: tuple[Booking, ...]
    errors: tuple[str, ...] = ()
    filtered: Filtered | None = None
    kept: dict[int, Booking] = field(default_factory=dict)

    def dry_run(self) -> PreparedCycle:
        """The same, on a clone of the cycle (``Framework.what_if``): deciding from it leaves
        this one as it was."""
        return replace(self, cycle=Framework.what_if(self.cycle))


class Scheduler:
    """Runs the scheduling cycle. Holds only memo caches (CEL outcomes, filter masks per node
    table), so one instance can serve a whole ``orca plan`` run or the operator's lifetime."""

    def __init__(
        self,
        cel: CelEvaluator | None = None,
        profile: Profile | None = None,
        tolerations: DefaultTolerations | None = None,
        *,
        gang_grace: bool = True,
    ) -> None:
        #: Whether a placed gang that lost replicas keeps them for its ``timeoutSeconds``
        #: (the operator, where time passes) or is released at once (``orca plan`` and the
        #: what-ifs, which answer where the cluster settles): ``controller.scheduler.gang``.
        self.gang_grace = gang_grace
        self.cel = cel if cel is not None else CelEvaluator()
        self.framework = Framework(
            profile if profile is not None else default_profile(self.cel, tolerations)
        )

    def schedule(
        self,
        workload: Workload,
        ledger: Ledger,
        classes: PriorityClasses = NO_CLASSES,
        *,
        now: float,
    ) -> Decision:
        """The status ``workload`` should have at time ``now`` (seconds since the epoch: the
        NoExecute taints' clock), given the cluster in ``ledger`` and the PriorityClasses its
        ``priorityClassName`` is resolved against (a missing class makes it Invalid, as Pod
        admission refuses such a Pod)."""
        return self.decide(workload, self.prepare(workload, ledger, now=now), classes)

    def decide(
        self, workload: Workload, prepared: PreparedCycle, classes: PriorityClasses = NO_CLASSES
    ) -> Decision:
        """Place from a prepared cycle: the steps of ``schedule`` after ``prepare``. The
        placing uses ``prepared.cycle`` up; a caller that narrates the cycle afterwards
        (``explain``) decides on ``prepared.dry_run()``."""
        priority = classes.resolve(workload.spec.priority_class_name)
        errors = refusals(prepared.errors, priority)
        if prepared.filtered is None or errors:
            return invalid(errors, workload.spec.replicas, prepared.existing)
        cycle = prepared.cycle
        place = place_daemonset if cycle.daemon else place_replicas
        decision = place(self.framework, cycle, prepared.filtered, prepared.kept)
        if workload.spec.gang is not None:
            decision = gang_rule(
                decision,
                workload,
                kept=len(prepared.kept),
                nodes=len(cycle.table),
                now=cycle.now,
                grace=self.gang_grace,
            )
        # The size the placements hold, recorded in status so a rebuilt ledger is exact.
        return replace(
            decision,
            resources=workload.spec.resources or Resources(),
            priority=priority.value,
            pending=pending_moves(prepared, decision),
        )

    def prepare(self, workload: Workload, ledger: Ledger, *, now: float) -> PreparedCycle:
        """The cycle up to placing: snapshot, pre-filter, give back this Workload's bookings,
        filter, keep. ``decide`` places from here; ``orca explain`` narrates it, the planners
        ask their "what if" of it (``Framework.what_if``)."""
        cycle = self.snapshot(workload, ledger, now)
        self.cel.start_cycle()
        existing = ledger.bookings(workload.key)
        errors = tuple(self.framework.pre_filter(cycle))
        if errors:
            return PreparedCycle(cycle, existing, errors)
        release(cycle, existing)
        filtered = self.framework.filter(cycle)
        kept = keep(cycle, existing, filtered.keeps)
        return PreparedCycle(cycle, existing, (), filtered, kept)

    def selected(self, workload: Workload, ledger: Ledger, *, now: float) -> int:
        """How many nodes of ``ledger`` a DaemonSet ``workload`` is for, whatever their room
        (``placement.selected``); 0 when its spec is Invalid. Kube's DaemonSet controller
        counts its desired Pods the same way (``desiredNumberScheduled``: the nodes that
        should run it, ``NodeShouldRunDaemonPod``, which reads the node's name, affinity and
        taints, never its resources), and a PodDisruptionBudget's percentages of a DaemonSet
        are of that count: the room a preemption takes from it does not shrink it. Its
        status's ``desired`` does shrink unless it is ``Mandatory``: there a node without
        room is not counted."""
        prepared = self.prepare(workload, ledger, now=now)
        if prepared.filtered is None:
            return 0
        return int(selected(prepared.filtered, len(prepared.cycle.table)).sum())

    def invalid_because(
        self, workload: Workload, classes: PriorityClasses | None
    ) -> tuple[str, ...]:
        """Why ``schedule`` would make ``workload`` ``Invalid`` whatever the nodes: the
        pre-filters' errors and, with ``classes``, a missing PriorityClass (the admission
        webhook asks this before the object is stored; ``None``: the classes are not known
        yet, so that check is left to the operator's decision)."""
        priority = classes.resolve(workload.spec.priority_class_name) if classes else None
        return refusals(self.spec_errors(workload), priority)

    def spec_errors(self, workload: Workload) -> tuple[str, ...]:
        """What the pre-filters refuse in the spec alone (CEL that does not compile or is
        ill-typed, an unknown runtime alias), each naming the field: the Workload is
        ``Invalid`` whatever the cluster. ``orca plan`` refuses such input outright."""
        return tuple(self.framework.pre_filter(self.snapshot(workload, _NO_NODES, 0.0)))

    @staticmethod
    def snapshot(workload: Workload, ledger: Ledger, now: float) -> CycleState:
        """The cycle's scratch state: copies of the ledger's free capacity."""
        free_cpu, free_memory = ledger.free()
        scalars = workload.spec.scalars
        return CycleState(
            key=workload.key,
            namespace=workload.metadata.namespace,
            name=workload.metadata.name,
            spec=workload.spec,
            ledger=ledger,
            free_cpu=free_cpu,
            free_memory=free_memory,
            own=np.zeros(len(ledger.table), dtype=np.int64),
            cpu=workload.spec.cpu_millis,
            memory=workload.spec.memory_bytes,
            free_pods=ledger.free_pods(),
            scalars=scalars,
            free_scalars={name: ledger.free_scalar(name) for name, _ in scalars},
            now=now,
            origin=ledger.position,
        )


def refusals(spec_errors: tuple[str, ...], priority: Priority | None) -> tuple[str, ...]:
    """The errors that make a Workload ``Invalid``: its spec's, then its PriorityClass's."""
    if priority is None or priority.error is None:
        return spec_errors
    return (*spec_errors, priority.error)


def pending_moves(prepared: PreparedCycle, decision: Decision) -> tuple[PendingMove, ...]:
    """The decision's replicas that stay on a node only until a time (``Filtered.leaves``),
    earliest first: what the status announces and when the operator looks again."""
    leaves = prepared.filtered.leaves if prepared.filtered is not None else None
    if leaves is None:
        return ()
    table = prepared.cycle.table
    out = []
    for booking in decision.bookings:
        i = table.index.get(booking.node)
        if i is None or not np.isfinite(leaves[i]):
            continue
        node = table.nodes[i]
        taints = tuple(
            dict.fromkeys(t.key for t in node.taints if t.effect is TaintEffect.NO_EXECUTE)
        )
        out.append(PendingMove(booking.alloc_id, booking.node, float(leaves[i]), taints))
    return tuple(sorted(out, key=lambda m: (m.at, m.alloc_id)))
