"""Consolidation (``controller.scheduler.consolidation``): the nodes that can go together.

The proof a user relies on is the plan without them: the property test removes the
removable set from the cluster and plans every Workload again with a fresh scheduler (the
plain ``plan`` of ``orca plan``, not the what-if that chose them), and finds every replica
that had a place with one. The cases below are worked out by hand (cpu only, 4-core nodes).
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.api.models import Phase, Workload, WorkloadKind
from controller.scheduler.consolidation import (
    ALREADY,
    MAX_BLOCKED_IN_A_ROW,
    REASON_ANNOTATED,
    REASON_CORDONED,
    Blocked,
    consolidate,
    not_tried,
    utilisation,
)
from controller.scheduler.ledger import ledger_from_statuses
from controller.scheduler.nodes import NodeInfo
from controller.scheduler.plan import plan
from controller.scheduler.resilience import DomainLoss
from controller.scheduler.whatif import Moved
from tests.support.factories import node, workload
from tests.support.properties import examples
from tests.unit.test_resilience import CLASSES, NOW, placed_cluster, prioritised_specs
from tests.unit.test_resilience import clusters as cluster_objects


def held(name: str, cpu: str, *nodes: str) -> dict[str, Any]:
    placements = [
        {"node": n, "allocId": f"shop/{name}-{i}", "score": 0} for i, n in enumerate(nodes)
    ]
    return {"placements": placements, "resources": {"cpu": cpu}}


def job(name: str, cpu: str, where: str) -> Workload:
    return workload(name, kind="Job", resources={"cpu": cpu}, status=held(name, cpu, where))


def loss_of(nodes: list[NodeInfo], workloads: list[Workload]) -> DomainLoss:
    return DomainLoss(ledger_from_statuses(nodes, workloads), workloads, now=NOW, classes=CLASSES)


def test_two_quarter_full_nodes_go_together_and_the_half_full_one_stays() -> None:
    # a and b hold a 1-core Job each (25 %), c a 2-core one (50 %): least utilised first,
    # a then b (the lower name). All three cannot go (nowhere left): the search halves:
    # a alone goes (its Job to b or c), a and b go (both Jobs to c: 2 + 1 + 1 = 4 cores).
    # c is blocked by the what-if of all three: ja, planned first, has no node at all.
    workloads = [job("ja", "1", "a"), job("jb", "1", "b"), job("jc", "2", "c")]
    result = consolidate(loss_of([node("a"), node("b"), node("c")], workloads))
    assert result.removable == ("a", "b")
    assert result.answer.moved == (
        Moved("shop/ja", "shop/ja-0", "a", "c"),
        Moved("shop/jb", "shop/jb-0", "b", "c"),
    )
    assert result.answer.settled and result.answer.ended == ()
    assert result.blocked == (
        Blocked("c", "shop/ja-0", "0/0 nodes are available: no nodes in the cluster.", source="a"),
    )
    # what-ifs: the cluster as it is (nothing stranded already), all three, 1, then 2
    # (adjacent to 3: c's proof is that probe's), then the set's for its moves
    assert result.checks == 5 and result.candidates == 3


def test_a_full_cluster_has_nothing_to_remove_and_says_why_for_each_node() -> None:
    # Two 4-core nodes, each holding a 3-core Job: neither Job fits beside the other.
    workloads = [job("x", "3", "a"), job("y", "3", "b")]
    result = consolidate(loss_of([node("a"), node("b")], workloads))
    assert result.removable == ()
    assert result.answer.moved == () and result.answer.settled
    full = "0/1 nodes are available: 1 Insufficient cpu."
    assert result.blocked == (
        Blocked("a", "shop/x-0", full, source="a"),
        Blocked("b", "shop/y-0", full, source="b"),
    )


def test_cordoned_and_annotated_nodes_are_kept_and_say_so() -> None:
    # Three empty nodes: only the plain one is a candidate, and it can go.
    nodes = [
        node("a", cordoned=True),
        node("b").model_copy(update={"do_not_consolidate": True}),
        node("c"),
    ]
    result = consolidate(loss_of(nodes, []))
    assert result.removable == ("c",)
    assert result.blocked == (
        Blocked("a", None, REASON_CORDONED),
        Blocked("b", None, REASON_ANNOTATED),
    )


def test_a_daemonsets_replicas_end_with_their_node_and_hold_nothing_back() -> None:
    # agent (a DaemonSet, 3 cores) on a and b; a's agent ends with a, nothing moves.
    agent = workload(
        "agent", kind="DaemonSet", resources={"cpu": "3"}, status=held("agent", "3", "a", "b")
    )
    busy = job("busy", "1", "b")
    result = consolidate(loss_of([node("a"), node("b")], [agent, busy]))
    assert result.removable == ("a",)
    assert [(e.alloc_id, e.node) for e in result.answer.ended] == [("shop/agent-0", "a")]
    # b cannot go: busy (1 core) has no node once a is gone too
    assert [(b.node, b.replica) for b in result.blocked] == [("b", "shop/busy-0")]


def test_only_the_selected_nodes_are_candidates() -> None:
    nodes = [node("a"), node("b"), node("c")]
    result = consolidate(loss_of(nodes, []), [n for n in nodes if n.hostname != "a"])
    assert result.removable == ("b", "c") and result.candidates == 2


def test_a_cluster_that_strands_a_replica_already_removes_nothing() -> None:
    # x is on a cordoned node with no room elsewhere: even removing nothing, it has no place.
    nodes = [node("a", cordoned=True), node("b", cpu="1")]
    result = consolidate(loss_of(nodes, [job("x", "3", "a")]))
    assert result.removable == ()
    reason = (
        "even with no node removed: 0/2 nodes are available: 1 node(s) were unschedulable, "
        "1 Insufficient cpu."
    )
    assert result.blocked == (
        Blocked("a", None, REASON_CORDONED),
        Blocked("b", "shop/x-0", reason, source="a"),
    )


def test_the_search_stops_after_so_many_blocked_in_a_row() -> None:
    # One more node than the limit plus two, each full with a 4-core Job, and one empty node
    # last (its name sorts last, utilisation 0 puts it first): the empty one goes; then
    # every full one is blocked until the limit, and the rest are not tried.
    count = MAX_BLOCKED_IN_A_ROW + 2
    nodes = [node(f"n{i:02}") for i in range(count)] + [node("z")]
    workloads = [job(f"j{i:02}", "4", f"n{i:02}") for i in range(count)]
    result = consolidate(loss_of(nodes, workloads))
    assert result.removable == ("z",)
    tried = [b for b in result.blocked if b.replica is not None]
    assert len(tried) == MAX_BLOCKED_IN_A_ROW
    assert [b.node for b in result.blocked if b.replica is None] == ["n20", "n21"]
    assert {b.reason for b in result.blocked if b.replica is None} == {
        not_tried(MAX_BLOCKED_IN_A_ROW)
    }


def test_utilisation_is_the_larger_share_of_cpu_and_memory() -> None:
    # a: 1 of 4 cores, 6 of 8 GiB -> 0.75; b: nothing -> 0; c: no allocatable at all -> 0.
    status = held("w", "1", "a")
    status["resources"] = {"cpu": "1", "memory": "6Gi"}
    w = workload("w", kind="Job", resources={"cpu": "1", "memory": "6Gi"}, status=status)
    shares = utilisation(loss_of([node("a"), node("b"), node("c", cpu="0", memory="0")], [w]))
    assert shares == {"a": 0.75, "b": 0.0, "c": 0.0}


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cluster_objects,
    st.lists(prioritised_specs, min_size=1, max_size=8),
    st.lists(st.integers(0, 3), max_size=8),
)
def test_without_the_removable_nodes_every_replica_keeps_a_place(
    objects: list[dict[str, Any]], batch: list[dict[str, Any]], changes: list[int]
) -> None:
    nodes, workloads = placed_cluster(objects, batch, changes)
    ledger = ledger_from_statuses(nodes, workloads)
    result = consolidate(DomainLoss(ledger, workloads, now=NOW, classes=CLASSES))
    gone = set(result.removable)
    assert result.answer.question.drain == gone
    assert gone.isdisjoint(b.node for b in result.blocked)
    assert len(gone) + len(result.blocked) == len(nodes)
    if not result.answer.settled:  # the cluster as it is strands a replica: nothing can go
        assert not gone
        assert all(b.replica is None or b.reason.startswith(ALREADY) for b in result.blocked)
        return
    after = plan([n for n in nodes if n.hostname not in gone], workloads, classes=CLASSES, now=NOW)
    for r in after:
        if r.workload.spec.kind is WorkloadKind.DAEMONSET or r.status.phase is Phase.INVALID:
            continue
        had = {b.alloc_id for b in ledger.bookings(r.workload.key)}
        has = {p.alloc_id for p in r.status.placements}
        assert had <= has, (r.workload.key, sorted(had - has), r.status.message)
