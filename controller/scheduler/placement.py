"""Per-kind placement on the framework: which existing replicas stay, and where new ones go.

- **Job / Service** (``place_replicas``): the missing replica indexes one by one, each on the
  node with the fewest replicas of this Workload (implicit anti-affinity, before score), then
  the best score, then the lowest hostname (the table is hostname-sorted and argmax takes the
  first maximum).
- **DaemonSet** (``place_daemonset``): one replica on every node that passes the filters;
  ``Mandatory`` also counts the wanted nodes that cannot take it (runtime, capacity).

Both use the same framework calls (``fits``, ``score``, ``diagnose``); nothing here knows
which plugins exist.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from controller.api.models import Phase, ScheduleMode
from controller.api.resources import Scalars
from controller.scheduler.decision import Decision, decide, phase_of, short_message
from controller.scheduler.framework import NODES_PER_REASON, Code, CycleState, Filtered, Framework
from controller.scheduler.ledger import Booking, alloc_id, alloc_index
from controller.scheduler.nodes import BoolArray


def release(cycle: CycleState, existing: Sequence[Booking]) -> None:
    """Give back what this Workload's bookings hold: the cycle re-decides them all (the cycle
    counts none of them in ``own`` yet: ``keep`` books those that stay)."""
    index = cycle.table.index
    for booking in existing:
        i = index.get(booking.node)
        if i is not None:
            cycle.give(i, booking.cpu, booking.memory, booking.scalars, own=False)


def keep(cycle: CycleState, existing: Sequence[Booking], keeps: BoolArray) -> dict[int, Booking]:
    """Existing placements that stay, by replica index (docs/design.md 5).

    A replica stays while its node exists and ``keeps`` holds there (readable, not cordoned,
    runtime, constraints, every NoExecute taint tolerated for now: a NotReady node keeps its
    replicas until their toleration of its lifecycle taint runs out); count down drops the
    highest indexes; a DaemonSet keeps one replica per node. Kept replicas are booked at the
    spec's size.

    Capacity changes never evict, yet a resize never over-commits: a replica that grew (or
    whose booked size is unknown, ``Booking.sized``) stays only where its node holds the new
    size beside everything else, else it is placed again like a new replica. Replicas that
    did not grow are settled first, so the growing ones see what is really left.
    """
    table = cycle.table
    cpu, memory, scalars = cycle.cpu, cycle.memory, cycle.scalars
    replicas = cycle.spec.replicas
    staying: list[tuple[bool, int, int, Booking]] = []
    for booking in existing:
        i = table.index.get(booking.node)
        index = alloc_index(cycle.key, booking.alloc_id)
        if i is None or index is None or not keeps[i]:
            continue
        if not cycle.daemon and index >= replicas:
            continue
        grows = (
            not booking.sized
            or cpu > booking.cpu
            or memory > booking.memory
            or (scalars != booking.scalars and grown(booking.scalars, scalars))
        )
        staying.append((grows, index, i, booking))
    kept: dict[int, Booking] = {}
    taken_nodes: set[int] = set()
    for grows, index, i, booking in sorted(staying, key=lambda s: s[0]):  # stable sort
        if index in kept or (cycle.daemon and i in taken_nodes):
            continue
        if grows and not cycle.fits_one(i, pod=False):
            continue
        cycle.take_one(i)
        taken_nodes.add(i)
        kept[index] = Booking(
            booking.node, booking.alloc_id, cpu, memory, booking.score, scalars=scalars
        )
    return kept


def grown(held: Scalars, wanted: Scalars) -> bool:
    """Whether ``wanted`` asks more of some scalar resource than ``held`` holds."""
    had = dict(held)
    return any(amount > had.get(name, 0) for name, amount in wanted)


def place_replicas(
    framework: Framework, cycle: CycleState, filtered: Filtered, kept: dict[int, Booking]
) -> Decision:
    """Job and Service: fill the missing replica indexes one by one."""
    table = cycle.table
    desired = cycle.spec.replicas
    cpu, memory, scalars = cycle.cpu, cycle.memory, cycle.scalars
    new: dict[int, Booking] = {}
    for index in range(desired):
        if index in kept:
            continue
        candidates = framework.candidates(cycle, filtered)
        if candidates.size == 0:
            break
        if new or kept:
            own = cycle.own[candidates]
            candidates = candidates[own == own.min()]
        scores = framework.score(cycle, candidates)
        best = int(scores.argmax())  # the first maximum: lowest hostname wins ties
        i = int(candidates[best])
        booking_id = alloc_id(cycle.namespace, cycle.name, index)
        new[index] = Booking(
            table.hostnames[i], booking_id, cpu, memory, int(scores[best]), scalars=scalars
        )
        cycle.take_one(i)
    bookings = [b for _, b in sorted({**kept, **new}.items())]
    placed = len(bookings)
    if placed >= desired:
        return decide(Phase.SCHEDULED, desired, bookings, f"{placed}/{desired} replicas placed")
    diagnosis, code = framework.diagnose(cycle, filtered)
    message = short_message(placed, desired, len(table), diagnosis)
    return decide(phase_of(placed, desired), desired, bookings, message, diagnosis, code)


def selected(filtered: Filtered, size: int) -> BoolArray:
    """The nodes a DaemonSet is for: those that pass every filter that selects (its node
    eligibility and taints, and unless ``EveryNode`` its constraints), whatever their room or
    runtime. A ``Mandatory`` DaemonSet's desired count, and the count any DaemonSet's budget
    percentages are of (``Scheduler.selected``)."""
    wanted = np.ones(size, dtype=np.bool_)
    for result in filtered.results:
        if result.selects:
            wanted &= result.passes
    return wanted


def place_daemonset(
    framework: Framework, cycle: CycleState, filtered: Filtered, kept: dict[int, Booking]
) -> Decision:
    """DaemonSet: one placement per node that passes the filters.

    ``EveryNode`` ignores constraints (the constraints plugin reads ``uses_constraints``),
    ``Matching`` uses them, ``Mandatory`` also counts the wanted nodes (those that pass the
    plugins that ``select``) that cannot take it (runtime, capacity) as missing.
    """
    table = cycle.table
    cpu, memory, scalars = cycle.cpu, cycle.memory, cycle.scalars
    holding = cycle.own > 0
    diagnosis, code = framework.diagnose(cycle, filtered, ignore=holding)
    candidates = np.flatnonzero(framework.fits(cycle, filtered) & ~holding)
    scores = framework.score(cycle, candidates)
    used = set(kept)
    free_indexes = (i for i in range(len(table) + len(kept) + 1) if i not in used)
    new = [
        Booking(
            table.hostnames[i],
            alloc_id(cycle.namespace, cycle.name, index),
            cpu,
            memory,
            s,
            scalars=scalars,
        )
        for i, s, index in zip(candidates.tolist(), scores.tolist(), free_indexes, strict=False)
    ]
    bookings = sorted([*kept.values(), *new], key=lambda b: alloc_index(cycle.key, b.alloc_id) or 0)
    placed = len(bookings)
    if cycle.spec.mode is not ScheduleMode.MANDATORY:
        if not placed:
            message = short_message(0, 0, len(table), diagnosis)
            return decide(Phase.UNSCHEDULABLE, 0, bookings, message, diagnosis, code)
        code = Code.UNSCHEDULABLE if code is Code.UNSCHEDULABLE else Code.SUCCESS
        return decide(
            Phase.SCHEDULED, placed, bookings, f"{placed}/{placed} nodes placed", diagnosis, code
        )
    wanted = selected(filtered, len(table))
    desired = int(wanted.sum())
    if desired and placed >= desired:
        return decide(
            Phase.SCHEDULED, desired, bookings, f"{placed}/{desired} nodes placed", diagnosis
        )
    missing = wanted.copy()
    for b in bookings:
        missing[table.index[b.node]] = False
    names = table.names(missing, NODES_PER_REASON * 2)
    more = int(missing.sum()) - len(names)
    message = short_message(placed, desired, len(table), diagnosis)
    if names:
        message += f" Mandatory on {', '.join(names)}" + (f" and {more} more." if more > 0 else ".")
    phase = phase_of(placed, desired) if desired else Phase.UNSCHEDULABLE
    return decide(phase, desired, bookings, message, diagnosis, code)
