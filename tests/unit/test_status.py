"""The status builder's conditions: Ready, Reconciling, Stalled (kstatus), Scheduled, Preempted.

Reconciling and Stalled are kstatus's abnormal-true conditions, present only while True
(issue 31: every condition is bytes on every status write; absent reads as False to kstatus,
Argo CD's check and ``kubectl wait --for=condition=Ready``).

Decisions come from the real scheduler on small clusters, so the mapping is checked against
the codes the framework really gives (capacity vs runtime vs an invalid spec), not against
codes chosen by hand. What kstatus and Argo CD make of these statuses is proven with the real
clients in ``tests/integration/test_gitops_health.py``.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from controller.api.models import Condition, Resources, WorkloadStatus
from controller.scheduler.decision import PendingMove
from controller.scheduler.ledger import Booking
from controller.scheduler.preemption import Victim, preempted_status
from controller.scheduler.scheduler import Scheduler
from controller.scheduler.status import (
    move_pending_message,
    move_pending_reason,
    rfc3339_now,
    status_from_decision,
)
from tests.support.factories import NOW, ledger_for, node, workload

T0, T1, T2 = "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z", "2026-01-01T00:02:00Z"
T3 = "2026-01-01T00:03:00Z"


def decide(nodes: list[dict[str, Any]], generation: int = 1, **spec: Any) -> Any:
    """The real scheduler's decision; every node of ``BUSY`` holds 1 cpu of another Workload
    (short of room that freed capacity can give back: a request above a node's allocatable is
    beyond cure, kube's ``Unresolvable``)."""
    ledger = ledger_for(*(node(**n) for n in nodes))
    if nodes is BUSY:
        for n in nodes:
            ledger.load(f"other/{n['name']}", [Booking(n["name"], "other/hog-0", 1000, 0)])
    return Scheduler().schedule(workload(generation=generation, **spec), ledger, now=NOW)


def by_type(status: WorkloadStatus) -> dict[str, Condition]:
    return {c.type: c for c in status.conditions}


def states(status: WorkloadStatus) -> dict[str, tuple[str, str]]:
    return {c.type: (c.status, c.reason) for c in status.conditions}


SMALL = [{"name": "a", "cpu": "1"}, {"name": "b", "cpu": "1"}]
BUSY = [{"name": "a", "cpu": "2"}, {"name": "b", "cpu": "2"}]


def test_fully_placed_is_ready() -> None:
    status = status_from_decision(decide(SMALL, kind="Service", count=2), 3, None, T0)
    assert states(status) == {
        "Ready": ("True", "AllPlaced"),
        "Scheduled": ("True", "AllPlaced"),
    }  # neither Reconciling nor Stalled: both would say False
    assert [c.type for c in status.conditions] == ["Ready", "Scheduled"]
    assert {c.observed_generation for c in status.conditions} == {3}
    assert status.observed_generation == 3
    assert by_type(status)["Ready"].message == "2/2 replicas placed"


def test_waiting_for_capacity_is_reconciling_with_the_diagnosis() -> None:
    decision = decide(BUSY, kind="Service", count=2, resources={"cpu": "2"})
    status = status_from_decision(decision, 1, None, T0)
    assert states(status) == {
        "Ready": ("False", "Unschedulable"),
        "Reconciling": ("True", "WaitingForCapacity"),
        "Scheduled": ("False", "Unschedulable"),
    }
    conditions = by_type(status)
    assert conditions["Reconciling"].message == "0/2 nodes are available: 2 Insufficient cpu."
    assert conditions["Ready"].message == "0/2 replicas placed; see Reconciling"


def test_some_nodes_short_of_capacity_is_enough_to_wait() -> None:
    """One node lacks the runtime (unresolvable), the other lacks room (capacity can come):
    freed capacity would place it, so it waits rather than stalls (kube-scheduler's rule)."""
    nodes: list[dict[str, Any]] = [
        {"name": "a", "runtimes": ("process",)},
        {"name": "b", "cpu": "1"},
    ]
    ledger = ledger_for(*(node(**n) for n in nodes))
    ledger.load("other/b", [Booking("b", "other/hog-0", 1000, 0)])  # b's cpu is held
    job = workload(kind="Job", runtime={"oneOf": ["docker"]}, resources={"cpu": "1"})
    decision = Scheduler().schedule(job, ledger, now=NOW)
    assert states(status_from_decision(decision, 1, None, T0))["Reconciling"][0] == "True"


def test_a_request_no_node_can_ever_hold_stalls() -> None:
    """kube's ``fitsRequest``: a request above every node's allocatable is ``Unresolvable``;
    freed capacity cannot place it, so it stalls rather than waits."""
    decision = decide(SMALL, kind="Service", count=2, resources={"cpu": "2"})
    assert states(status_from_decision(decision, 1, None, T0))["Stalled"] == (
        "True",
        "Unresolvable",
    )


def test_only_unresolvable_reasons_stall() -> None:
    decision = decide(SMALL, kind="Job", runtime={"oneOf": ["wasm"]})
    status = status_from_decision(decision, 1, None, T0)
    assert states(status) == {
        "Ready": ("False", "Unschedulable"),
        "Stalled": ("True", "Unresolvable"),
        "Scheduled": ("False", "Unschedulable"),
    }
    assert by_type(status)["Stalled"].message == (
        "0/2 nodes are available: 2 runtime wasm not offered."
    )


def test_partially_placed_with_unresolvable_rest_stalls() -> None:
    """A Mandatory DaemonSet wants b too, which lacks the runtime: nothing frees that."""
    nodes: list[dict[str, Any]] = [{"name": "a"}, {"name": "b", "runtimes": ("process",)}]
    decision = decide(
        nodes, kind="DaemonSet", schedule={"mode": "Mandatory"}, runtime={"oneOf": ["docker"]}
    )
    status = status_from_decision(decision, 1, None, T0)
    assert (decision.placed, decision.desired) == (1, 2)
    assert states(status)["Ready"] == ("False", "PartiallyPlaced")
    assert states(status)["Stalled"] == ("True", "Unresolvable")


def test_an_invalid_spec_stalls() -> None:
    decision = decide(SMALL, kind="Job", constraints=["node.tags.("])
    status = status_from_decision(decision, 2, None, T0)
    assert states(status) == {
        "Ready": ("False", "InvalidSpec"),
        "Stalled": ("True", "InvalidSpec"),
        "Scheduled": ("False", "InvalidSpec"),
    }
    assert "spec.constraints[0]" in (by_type(status)["Stalled"].message or "")
    assert by_type(status)["Ready"].message == "invalid spec; see Stalled"


@pytest.mark.parametrize(
    "spec",
    [
        {"kind": "Service", "count": 2, "resources": {"cpu": "2"}},
        {"kind": "Job", "runtime": {"oneOf": ["wasm"]}},
        {"kind": "Job", "constraints": ["node.tags.("]},
    ],
    ids=["capacity", "unresolvable", "invalid"],
)
def test_the_long_message_is_written_once_among_the_conditions(spec: dict[str, Any]) -> None:
    """Each status write costs the API server by its size: the diagnosis is in
    ``status.message`` and in the one condition that is True and abnormal, nowhere else."""
    status = status_from_decision(decide(BUSY, **spec), 1, None, T0)
    assert status.message
    holders = [c.type for c in status.conditions if c.message == status.message]
    assert len(holders) == 1 and holders[0] in ("Reconciling", "Stalled")
    assert [c.type for c in status.conditions if c.type in ("Reconciling", "Stalled")] == [
        holders[0]
    ]  # the other one is absent
    dumped = status.model_dump(by_alias=True, mode="json", exclude_none=True)
    assert sum("message" in c for c in dumped["conditions"]) == 3  # Ready, Scheduled, the one


def test_an_empty_message_read_back_is_the_one_written() -> None:
    """The API server (or an older orca) may return ``message: ""``: it parses to None, so the
    status decided again compares equal and nothing is written."""
    first = status_from_decision(
        decide(SMALL, kind="Job", runtime={"oneOf": ["wasm"]}), 1, None, T0
    )
    wire = first.model_dump(by_alias=True, mode="json", exclude_none=True)
    for condition in wire["conditions"]:
        condition.setdefault("message", "")
    read_back = WorkloadStatus.model_validate(wire)
    assert read_back == first
    again = decide(SMALL, kind="Job", runtime={"oneOf": ["wasm"]})
    assert status_from_decision(again, 1, read_back, T1) == read_back


def test_last_transition_time_moves_per_condition_only_when_its_status_changes() -> None:
    short = decide(BUSY, kind="Service", count=2, resources={"cpu": "2"})
    stuck = decide(SMALL, kind="Service", count=2, runtime={"oneOf": ["wasm"]})
    placed = decide(SMALL, kind="Service", count=2)
    first = status_from_decision(short, 1, None, T0)
    second = status_from_decision(stuck, 2, first, T1)
    times = {c.type: c.last_transition_time for c in second.conditions}
    # Ready/Scheduled stayed False; Reconciling went (False) and Stalled turned True at T1.
    assert times == {"Ready": T0, "Scheduled": T0, "Stalled": T1}
    third = status_from_decision(placed, 3, second, T2)
    times = {c.type: c.last_transition_time for c in third.conditions}
    assert times == {"Ready": T2, "Scheduled": T2}  # Stalled went (False) at T2
    fourth = status_from_decision(stuck, 4, third, T3)
    times = {c.type: c.last_transition_time for c in fourth.conditions}
    assert times == {"Ready": T3, "Scheduled": T3, "Stalled": T3}  # True again: from now


def test_the_same_decision_on_the_same_status_is_identical() -> None:
    """How the operator knows it has nothing to write: equal statuses, whatever the clock."""
    for spec in (
        {"kind": "Service", "count": 2},
        {"kind": "Service", "count": 2, "resources": {"cpu": "2"}},
        {"kind": "Job", "runtime": {"oneOf": ["wasm"]}},
        {"kind": "Job", "constraints": ["node.tags.("]},
    ):
        first = status_from_decision(decide(SMALL, **spec), 1, None, T0)
        again = status_from_decision(decide(SMALL, **spec), 1, first, T2)
        assert again == first, spec


def _victim_status() -> WorkloadStatus:
    placed = decide(SMALL, kind="Service", count=2)
    before = status_from_decision(placed, 1, None, T0)
    victim = Victim("shop/web", Booking("a", "shop/web-0", 0, 0), 0)
    return preempted_status(before, [victim], "shop/boss", 1000, T1)


def test_a_preempted_victim_is_reconciling_until_placed_again() -> None:
    status = _victim_status()
    assert states(status) == {
        "Ready": ("False", "Preempted"),
        "Reconciling": ("True", "Preempted"),
        "Scheduled": ("False", "Preempted"),
        "Preempted": ("True", "Preempted"),
    }
    message = "1 replica preempted by shop/boss (priority 1000) on a"
    assert by_type(status)["Preempted"].message == status.message == message
    assert [c.type for c in status.conditions if c.message == message] == ["Preempted"]


def test_preempted_turns_false_once_placed_again_and_keeps_who() -> None:
    victim = _victim_status()
    # Still short (no room anywhere): Preempted stays True.
    short = decide(SMALL, kind="Service", count=2, resources={"cpu": "2"})
    waiting = status_from_decision(short, 1, victim, T2)
    assert by_type(waiting)["Preempted"] == by_type(victim)["Preempted"]
    # Placed again: Preempted False, the message kept for ``orca explain``.
    again = status_from_decision(decide(SMALL, kind="Service", count=2), 1, waiting, T2)
    preempted = by_type(again)["Preempted"]
    assert (preempted.status, preempted.reason) == ("False", "PlacedAgain")
    assert preempted.message == by_type(victim)["Preempted"].message
    assert preempted.last_transition_time == T2
    assert states(again)["Ready"] == ("True", "AllPlaced")
    # And it stays as it is on the next identical decision.
    assert status_from_decision(decide(SMALL, kind="Service", count=2), 1, again, T0) == again


def test_preempted_placed_again_is_observed_at_the_generation_decided() -> None:
    victim = _victim_status()  # written at generation 1
    placed = decide(SMALL, generation=2, kind="Service", count=2)
    preempted = by_type(status_from_decision(placed, 2, victim, T2))["Preempted"]
    assert (preempted.status, preempted.observed_generation) == ("False", 2)


def test_conditions_of_others_are_kept() -> None:
    foreign = Condition(type="Audited", status="True", reason="Ok", last_transition_time=T0)
    previous = WorkloadStatus(conditions=[foreign])
    status = status_from_decision(decide(SMALL, kind="Job"), 1, previous, T1)
    assert status.conditions[-1] == foreign


UNREACHABLE, NOT_READY = "node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"


def pending(i: int, *taints: str) -> PendingMove:
    """shop/web-<i> on node-<i>, due at NOW + i minutes (10:00 + i)."""
    return PendingMove(f"shop/web-{i}", f"node-{i}", NOW + 60 * i, taints)


@pytest.mark.parametrize(
    ("taints", "reason", "what"),
    [
        ((UNREACHABLE,), "NodeUnreachable", "node unreachable"),
        ((NOT_READY,), "NodeNotReady", "node not ready"),
        # a node both unreachable and not ready waits out unreachable (the lifecycle order)
        ((NOT_READY, UNREACHABLE), "NodeUnreachable", "node unreachable"),
        (("dedicated", "maintenance"), "NoExecuteTaint", "NoExecute taint dedicated, maintenance"),
    ],
    ids=["unreachable", "not-ready", "both", "other-taints"],
)
def test_move_pending_names_what_the_replica_waits_out(
    taints: tuple[str, ...], reason: str, what: str
) -> None:
    move = pending(5, *taints)
    assert move_pending_reason(move) == reason
    assert move_pending_message([move]) == (
        f"shop/web-5 on node-5 moves at 2026-12-01T10:05:00Z ({what}). "
        "Each moves only if its node has not recovered by then."
    )


def test_move_pending_lists_five_moves_and_counts_the_rest() -> None:
    six = [pending(i, UNREACHABLE) for i in range(1, 7)]
    listed = "; ".join(
        f"shop/web-{i} on node-{i} moves at 2026-12-01T10:0{i}:00Z (node unreachable)"
        for i in range(1, 6)
    )
    tail = ". Each moves only if its node has not recovered by then."
    assert move_pending_message(six) == f"{listed}; and 1 more{tail}"
    assert move_pending_message(six[:5]) == f"{listed}{tail}"  # five: all of them, no count


def test_the_clock_is_formatted_anew_each_second(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [NOW + 0.9]
    monkeypatch.setattr(time, "time", lambda: clock[0])
    assert rfc3339_now() == "2026-12-01T10:00:00Z"
    clock[0] = NOW + 1.0  # the next second: never the one formatted before
    assert rfc3339_now() == "2026-12-01T10:00:01Z"
    clock[0] = NOW + 1.5
    assert rfc3339_now() == "2026-12-01T10:00:01Z"


def test_the_size_held_outlives_an_invalid_spec_and_the_selector_is_the_callers() -> None:
    """``status.resources`` is what the placements hold: an Invalid decision keeps them where
    they are, so it keeps the size the previous status recorded; ``selector`` (what /scale
    reports) and the resolved priority are written as given."""
    placed = decide(SMALL, kind="Job", resources={"cpu": "500m"})
    first = status_from_decision(placed, 1, None, T0, "orca.cloudinit.dev/workload=web")
    assert (first.resources, first.selector, first.priority) == (
        Resources(cpu="500m"),
        "orca.cloudinit.dev/workload=web",
        0,
    )
    broken = decide(SMALL, kind="Job", resources={"cpu": "2"}, constraints=["node.tags.("])
    second = status_from_decision(broken, 2, first, T1)
    assert (second.resources, second.selector, second.priority) == (
        Resources(cpu="500m"),
        None,
        None,
    )
    assert status_from_decision(broken, 2, None, T1).resources is None


def test_statuses_decided_alike_at_the_same_time_share_their_conditions() -> None:
    """A backlog decides hundreds of Workloads a second alike: one Condition object each
    serves them all (the operator holds a status per Workload), with the values a status of
    its own would have."""
    one = status_from_decision(decide(SMALL, kind="Service", count=2), 1, None, T0)
    two = status_from_decision(decide(SMALL, kind="Service", count=2), 1, None, T0)
    assert [id(c) for c in one.conditions] == [id(c) for c in two.conditions]
    later = status_from_decision(decide(SMALL, kind="Service", count=2), 1, None, T1)
    newer = status_from_decision(decide(SMALL, kind="Service", count=2), 2, None, T0)
    for other in (later, newer):
        assert not {id(c) for c in other.conditions} & {id(c) for c in one.conditions}
    assert by_type(later)["Ready"].last_transition_time == T1
    assert by_type(newer)["Ready"].observed_generation == 2
    assert by_type(one)["Ready"] == Condition(
        type="Ready",
        status="True",
        reason="AllPlaced",
        message="2/2 replicas placed",
        last_transition_time=T0,
        observed_generation=1,
    )
