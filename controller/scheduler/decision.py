"""A scheduling ``Decision``: what a Workload's status should say, and the bookings behind it."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from controller.api.models import Phase, Placement, RejectionReason, Resources
from controller.scheduler.framework import Code
from controller.scheduler.ledger import Booking
from controller.scheduler.nodes import TAINT_NOT_READY, TAINT_UNREACHABLE
from controller.scheduler.vocabulary import CONDITION_REASON_BY_PHASE


@dataclass(frozen=True, slots=True)
class PendingMove:
    """A replica that stays on its node for now and moves at ``at`` (seconds since the epoch)
    unless the node recovers first: it tolerates the node's NoExecute ``taints`` (e.g.
    ``node.kubernetes.io/unreachable``) only for a while."""

    alloc_id: str
    node: str
    at: float
    taints: tuple[str, ...]

    @property
    def lifecycle(self) -> str | None:
        """The node lifecycle taint it waits out (unreachable before not-ready), or None for
        another NoExecute taint."""
        for key in (TAINT_UNREACHABLE, TAINT_NOT_READY):
            if key in self.taints:
                return key
        return None


def format_time(epoch: float) -> str:
    """Seconds since the epoch as RFC 3339, whole seconds, UTC (``2026-12-01T10:05:00Z``)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(epoch)))


def pending_what(move: PendingMove) -> str:
    """What a replica waits out, in a few words: ``node unreachable``, ``node not ready`` or
    ``NoExecute taint <keys>``."""
    words = {TAINT_UNREACHABLE: "node unreachable", TAINT_NOT_READY: "node not ready"}
    return words.get(move.lifecycle or "", "NoExecute taint " + ", ".join(move.taints))


def pending_why(move: PendingMove) -> str:
    """Why a replica is about to move, for people (``orca explain``)."""
    return f"{pending_what(move)}; moves unless the node recovers first"


@dataclass(frozen=True, slots=True)
class Decision:
    """What a Workload's status should say, the bookings that back it, and ``code``: who can
    cure what is missing (``Code.UNSCHEDULABLE``: freed capacity; ``UNRESOLVABLE``: a spec or
    node change; ``INVALID``: a spec change). A DaemonSet may be ``Scheduled`` with code
    ``UNSCHEDULABLE``: some node it wants lacks room, and freed capacity would add it there."""

    phase: Phase
    reason: str
    desired: int
    placements: tuple[Placement, ...]
    message: str
    unschedulable: tuple[RejectionReason, ...] = ()
    bookings: tuple[Booking, ...] = ()
    code: Code = Code.SUCCESS
    resources: Resources | None = None  # what each placement holds; None: as before
    priority: int | None = None  # the resolved priority (None: not resolved, e.g. Invalid)
    pending: tuple[PendingMove, ...] = ()  # replicas that move later unless their node recovers
    #: A gang below its minCount: since when (seconds since the epoch; ``BelowMinCount``),
    #: and when its placements are released unless it is whole again.
    below_since: float | None = None
    deadline: float | None = None

    @property
    def placed(self) -> int:
        return len(self.placements)

    @property
    def look_again_at(self) -> float | None:
        """When the decision may change by the clock alone (a pending move due, a gang's
        timeout), the earliest; None when only a change can change it."""
        times = [t for t in (self.pending[0].at if self.pending else None, self.deadline) if t]
        return min(times) if times else None


def placement_of(booking: Booking) -> Placement:
    return Placement(node=booking.node, alloc_id=booking.alloc_id, score=booking.score)


def decide(
    phase: Phase,
    desired: int,
    bookings: Sequence[Booking],
    message: str,
    diagnosis: tuple[RejectionReason, ...] = (),
    code: Code = Code.SUCCESS,
) -> Decision:
    return Decision(
        phase=phase,
        reason=CONDITION_REASON_BY_PHASE[phase],
        desired=desired,
        placements=tuple(placement_of(b) for b in bookings),
        message=message,
        unschedulable=diagnosis,
        bookings=tuple(bookings),
        code=code,
    )


def invalid_message(errors: Sequence[str]) -> str:
    """The one line an ``Invalid`` status and an admission refusal both carry: each error
    names its field (``spec.constraints[0]: ...``), several joined by ``; ``."""
    return "; ".join(errors)


def invalid(errors: Sequence[str], desired: int, existing: Sequence[Booking]) -> Decision:
    """A spec that cannot run: say why; existing placements stay until it is fixed."""
    return decide(Phase.INVALID, desired, existing, invalid_message(errors), code=Code.INVALID)


def phase_of(placed: int, desired: int) -> Phase:
    if placed >= desired:
        return Phase.SCHEDULED
    return Phase.PARTIALLY_SCHEDULED if placed else Phase.UNSCHEDULABLE


def short_message(
    placed: int, desired: int, total: int, diagnosis: Sequence[RejectionReason]
) -> str:
    """kube-scheduler style: ``0/5 nodes are available: 3 runtime wasm not offered, ...``."""
    rejected = sum(r.count for r in diagnosis)
    if total == 0:
        detail = "0/0 nodes are available: no nodes in the cluster."
    else:
        parts = ", ".join(f"{r.count} {r.reason}" for r in diagnosis)
        detail = f"{total - rejected}/{total} nodes are available: {parts}."
    if desired == 0 or placed == 0:
        return detail
    return f"{placed}/{desired} replicas placed; {detail}"
