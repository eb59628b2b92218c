"""The ledger's assume/confirm/forget and the status built from a decision."""

from __future__ import annotations

from controller.api.models import Phase, WorkloadStatus
from controller.core.decision import Decision
from controller.core.ledger import Booking, Ledger
from controller.core.nodes import NodeTable
from controller.core.status import nodes_summary, status_from_decision
from tests.factories import node


def test_assume_books_and_forget_restores() -> None:
    ledger = Ledger(NodeTable([node("a", cpu="4")]))
    ledger.load("ns/w", [Booking("a", "ns/w-0", 1000, 0)])
    assumption = ledger.assume(
        "ns/w", [Booking("a", "ns/w-0", 1000, 0), Booking("a", "ns/w-1", 1000, 0)]
    )
    assert int(ledger.used_cpu[0]) == 2000
    ledger.forget(assumption)
    assert int(ledger.used_cpu[0]) == 1000
    ledger.forget(assumption)  # idempotent
    assert int(ledger.used_cpu[0]) == 1000


def test_forget_never_undoes_a_newer_decision() -> None:
    ledger = Ledger(NodeTable([node("a", cpu="4")]))
    old = ledger.assume("ns/w", [Booking("a", "ns/w-0", 1000, 0)])
    ledger.assume("ns/w", [Booking("a", "ns/w-0", 3000, 0)])
    ledger.forget(old)
    assert int(ledger.used_cpu[0]) == 3000


def test_confirmed_assumption_is_not_forgotten() -> None:
    ledger = Ledger(NodeTable([node("a")]))
    assumption = ledger.assume("ns/w", [Booking("a", "ns/w-0", 500, 0)])
    ledger.confirm(assumption)
    ledger.forget(assumption)
    assert int(ledger.used_cpu[0]) == 500


def test_rebind_keeps_bookings_on_nodes_that_left() -> None:
    ledger = Ledger(NodeTable([node("a"), node("b")]))
    ledger.load("ns/w", [Booking("b", "ns/w-0", 500, 0)])
    ledger.rebind(NodeTable([node("a")]))
    assert ledger.bookings("ns/w") == (Booking("b", "ns/w-0", 500, 0),)
    assert ledger.used_cpu.tolist() == [0]
    ledger.rebind(NodeTable([node("a"), node("b")]))
    assert ledger.used_cpu.tolist() == [0, 500]
    ledger.remove("ns/w")
    assert ledger.used_cpu.tolist() == [0, 0]
    assert len(ledger) == 0


def _decision(phase: Phase) -> Decision:
    return Decision(phase=phase, reason="R", desired=1, placements=(), message="m")


def test_last_transition_time_moves_only_when_the_condition_status_changes() -> None:
    first = status_from_decision(_decision(Phase.UNSCHEDULABLE), 1, None, "t1")
    same = status_from_decision(_decision(Phase.UNSCHEDULABLE), 2, first, "t2")
    assert same.conditions[0].last_transition_time == "t1"
    assert same.conditions[0].observed_generation == 2
    flipped = status_from_decision(_decision(Phase.SCHEDULED), 2, same, "t3")
    assert flipped.conditions[0].status == "True"
    assert flipped.conditions[0].last_transition_time == "t3"


def test_same_decision_on_same_status_is_identical() -> None:
    first = status_from_decision(_decision(Phase.SCHEDULED), 1, None, "t1")
    again = status_from_decision(_decision(Phase.SCHEDULED), 1, first, "t9")
    assert again == first
    assert isinstance(again, WorkloadStatus)


def test_nodes_summary_is_distinct_and_bounded() -> None:
    assert nodes_summary(["b", "a", "b"]) == "b,a"
    assert nodes_summary([f"n{i}" for i in range(8)]) == "n0,n1,n2,n3,n4,+3"
    assert nodes_summary([]) == ""
