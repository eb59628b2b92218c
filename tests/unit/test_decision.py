"""A ``Decision``'s words (``controller.scheduler.decision``): the phase from placed and desired,
kube-scheduler's ``0/5 nodes are available: ...`` line, the Invalid line, and what a replica
about to move waits out. The scheduler's own tests check them in context; these pin each case.
"""

from __future__ import annotations

import pytest

from controller.api.models import Phase, RejectionReason
from controller.scheduler.decision import (
    PendingMove,
    format_time,
    invalid,
    invalid_message,
    pending_why,
    phase_of,
    short_message,
)
from controller.scheduler.framework import Code
from controller.scheduler.ledger import Booking
from tests.support.factories import NOW


@pytest.mark.parametrize(
    ("placed", "desired", "phase"),
    [
        (3, 3, Phase.SCHEDULED),
        (4, 3, Phase.SCHEDULED),  # more than asked (a count lowered, not yet removed)
        (2, 3, Phase.PARTIALLY_SCHEDULED),
        (1, 3, Phase.PARTIALLY_SCHEDULED),
        (0, 3, Phase.UNSCHEDULABLE),
    ],
)
def test_the_phase_of_placed_out_of_desired(placed: int, desired: int, phase: Phase) -> None:
    assert phase_of(placed, desired) is phase


CPU = RejectionReason(reason="Insufficient cpu", count=2)
WASM = RejectionReason(reason="runtime wasm not offered", count=1)


@pytest.mark.parametrize(
    ("placed", "desired", "total", "diagnosis", "message"),
    [
        (0, 1, 0, (), "0/0 nodes are available: no nodes in the cluster."),
        (
            0,
            2,
            3,
            (CPU, WASM),
            "0/3 nodes are available: 2 Insufficient cpu, 1 runtime wasm not offered.",
        ),
        (0, 2, 4, (CPU,), "2/4 nodes are available: 2 Insufficient cpu."),
        (1, 2, 3, (CPU,), "1/2 replicas placed; 1/3 nodes are available: 2 Insufficient cpu."),
        (1, 1, 3, (CPU,), "1/1 replicas placed; 1/3 nodes are available: 2 Insufficient cpu."),
        # a DaemonSet no node wants: nothing desired, the nodes' line alone
        (0, 0, 1, (WASM,), "0/1 nodes are available: 1 runtime wasm not offered."),
        (2, 0, 1, (WASM,), "0/1 nodes are available: 1 runtime wasm not offered."),
    ],
    ids=[
        "no-nodes",
        "none-placed",
        "some-available",
        "partly",
        "all",
        "none-desired",
        "placed-none-desired",
    ],
)
def test_the_short_message_is_kube_schedulers(
    placed: int, desired: int, total: int, diagnosis: tuple[RejectionReason, ...], message: str
) -> None:
    assert short_message(placed, desired, total, diagnosis) == message


def test_an_invalid_spec_says_every_error_and_keeps_its_placements() -> None:
    errors = ["spec.constraints[0]: bad", "spec.priorityClassName: missing"]
    assert invalid_message(errors) == "spec.constraints[0]: bad; spec.priorityClassName: missing"
    held = (Booking("a", "shop/web-0", 500, 0, 40),)
    decision = invalid(errors, 3, held)
    assert (decision.phase, decision.reason, decision.code) == (
        Phase.INVALID,
        "InvalidSpec",
        Code.INVALID,
    )
    assert (decision.desired, decision.placed, decision.bookings) == (3, 1, held)
    assert decision.message == invalid_message(errors)
    assert [(p.node, p.alloc_id, p.score) for p in decision.placements] == [("a", "shop/web-0", 40)]


def test_times_are_rfc3339_in_whole_seconds_utc() -> None:
    assert format_time(NOW + 59.9) == "2026-12-01T10:00:59Z"


def test_why_a_replica_is_about_to_move() -> None:
    move = PendingMove("shop/web-0", "a", NOW, ("node.kubernetes.io/not-ready",))
    assert pending_why(move) == "node not ready; moves unless the node recovers first"
    other = PendingMove("shop/web-0", "a", NOW, ("dedicated",))
    assert pending_why(other) == "NoExecute taint dedicated; moves unless the node recovers first"
