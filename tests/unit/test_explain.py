"""``orca explain``'s core (``controller.scheduler.explain``): each current replica kept or why it
moves, each node's first rejecting filter or its score parts, best first.

The expectations are worked out by hand from the rules the scheduler follows: the first filter
in profile order that rejects a node (eligibility before resources before runtime), LeastAllocated
(the mean of the cpu and memory shares left free once the next replica is added, floored),
and fewest replicas of this Workload before the highest total (the scheduler's implicit
anti-affinity). ``tests/integration/test_explain.py`` runs the same through the CLI against
the real API server.
"""

from __future__ import annotations

from typing import Any

from controller.api.models import Phase
from controller.scheduler.explain import NodeVerdict, ReplicaVerdict, explain
from controller.scheduler.ledger import Booking
from controller.scheduler.priority import PriorityClass, PriorityClasses
from controller.scheduler.scheduler import Scheduler
from tests.support.factories import NOW, ledger_for, node, workload

GiB = 1 << 30
UNREACHABLE_15S = {
    "key": "node.kubernetes.io/unreachable",
    "operator": "Exists",
    "effect": "NoExecute",
    "tolerationSeconds": 15,
}
ALL_PARTS = ("CapacityScore", "CelAffinity", "NameAffinity", "TaintToleration", "TopologySpread")


def scores(capacity: int) -> dict[str, int]:
    """The score parts of a node on which only LeastAllocated has something to say."""
    return {name: capacity if name == "CapacityScore" else 0 for name in ALL_PARTS}


def test_each_node_is_named_with_the_first_filter_that_rejects_it() -> None:
    ledger = ledger_for(
        node("a", cpu="2"),
        node("b", cpu="2"),
        node("off", cordoned=True),  # would also lack room: eligibility comes first
        node("w", runtimes=("wasmtime",)),  # 4 cpus: room enough, but no docker
    )
    big = workload("big", kind="Job", runtime={"oneOf": ["docker"]}, resources={"cpu": "3"})
    explained = explain(Scheduler(), big, ledger, now=NOW)
    assert (explained.workload, explained.kind) == ("shop/big", "Job")
    assert explained.decision.phase is Phase.UNSCHEDULABLE
    assert explained.nodes == (
        NodeVerdict("a", 0, "ResourcesFit", "Insufficient cpu"),
        NodeVerdict("b", 0, "ResourcesFit", "Insufficient cpu"),
        NodeVerdict("off", 0, "NodeEligibility", "node(s) were unschedulable"),
        NodeVerdict("w", 0, "Runtime", "runtime docker not offered"),
    )
    assert explained.replicas == () and explained.errors == () and explained.spread == ()


def test_passing_nodes_come_fewest_replicas_first_then_highest_total_then_name() -> None:
    # web-0 on c (8 cpus); the next replica of 1 cpu (no memory asked) would leave a and b
    # half their cpu (score (50 + 100) / 2 = 75) and c 6 of 8 (score (75 + 100) / 2 = 87).
    ledger = ledger_for(node("a", cpu="2"), node("b", cpu="2"), node("c", cpu="8"))
    web = workload(kind="Service", count=1, resources={"cpu": "1"})
    ledger.load(web.key, [Booking("c", "shop/web-0", 1000, 0, 87)])
    explained = explain(Scheduler(), web, ledger, now=NOW)
    assert explained.nodes == (
        NodeVerdict("a", 0, scores=scores(75), total=75),
        NodeVerdict("b", 0, scores=scores(75), total=75),
        NodeVerdict("c", 1, scores=scores(87), total=87),  # the best total, but holds one
    )
    assert explained.replicas == (ReplicaVerdict("shop/web-0", "c", 87, True, "kept"),)


def test_a_larger_total_goes_first_among_nodes_holding_as_many() -> None:
    # a and c hold one replica each (1 cpu): a (2 cpus) would be full, c (8) at 2 of 8.
    ledger = ledger_for(node("a", cpu="2"), node("c", cpu="8"))
    web = workload(kind="Service", count=2, resources={"cpu": "1"})
    ledger.load(
        web.key, [Booking("a", "shop/web-0", 1000, 0, 75), Booking("c", "shop/web-1", 1000, 0, 93)]
    )
    explained = explain(Scheduler(), web, ledger, now=NOW)
    assert explained.nodes == (
        NodeVerdict("c", 1, scores=scores(87), total=87),
        NodeVerdict("a", 1, scores=scores(50), total=50),
    )


def test_each_replica_is_kept_or_says_why_it_moves() -> None:
    """Six replicas, one per branch: kept; its node gone; an untolerated NoExecute taint now on
    its node; a resize its node cannot hold; kept for its toleration of an unreachable node
    (Unknown since 09:59:50, tolerated 15 s: until 10:00:05); past the count."""
    ledger = ledger_for(
        node("a", cpu="2"),
        node("late", cpu="2", ready="Unknown", since="2026-12-01T09:59:50Z"),
        node("small", cpu="500m"),
        node("t", taints=[{"key": "dedicated", "value": "db", "effect": "NoExecute"}]),
    )
    web = workload(
        kind="Service",
        count=5,
        resources={"cpu": "1", "memory": "1Gi"},
        tolerations=[UNREACHABLE_15S],
    )
    ledger.load(
        web.key,
        [
            Booking("a", "shop/web-0", 1000, GiB, 50),
            Booking("gone", "shop/web-1", 1000, GiB, 51),
            Booking("t", "shop/web-2", 1000, GiB, 52),
            Booking("small", "shop/web-3", 250, GiB, 53),  # held at 250m, now asks 1 cpu
            Booking("late", "shop/web-4", 1000, GiB, 54),
            Booking("a", "shop/web-5", 1000, GiB, 55),
        ],
    )
    explained = explain(Scheduler(), web, ledger, now=NOW)
    taint = "node(s) had untolerated taint {dedicated: db}"
    assert explained.replicas == (
        ReplicaVerdict("shop/web-0", "a", 50, True, "kept"),
        ReplicaVerdict("shop/web-1", "gone", 51, False, "moves: the node is gone"),
        ReplicaVerdict("shop/web-2", "t", 52, False, f"moves: {taint} (TaintToleration)"),
        ReplicaVerdict(
            "shop/web-3", "small", 53, False, "moves: its node cannot hold the new size"
        ),
        ReplicaVerdict(
            "shop/web-4",
            "late",
            54,
            True,
            "kept until 2026-12-01T10:00:05Z: node unreachable; moves unless the node recovers "
            "first",
        ),
        ReplicaVerdict("shop/web-5", "a", 55, False, "removed: count is 5"),
    )
    # The next replica: a holds web-0 (1 of 2 cpus, 1 of 8 GiB): with one more, cpu 0 % free,
    # memory 75 %: 37. The others are rejected, late for being not ready.
    assert explained.nodes == (
        NodeVerdict("a", 1, scores=scores(37), total=37),
        NodeVerdict("late", 1, "NodeEligibility", "node(s) not ready"),
        NodeVerdict("small", 0, "ResourcesFit", "Insufficient cpu"),
        NodeVerdict("t", 0, "TaintToleration", taint),
    )


def test_an_invalid_spec_keeps_every_replica_and_says_why() -> None:
    ledger = ledger_for(node("a"))
    typo: dict[str, Any] = {"kind": "Job", "constraints": ['node.cpu == "x"']}
    job = workload("typo", **typo)
    ledger.load(job.key, [Booking("a", "shop/typo-0", 1000, GiB, 40)])
    explained = explain(Scheduler(), job, ledger, now=NOW)
    assert (explained.workload, explained.kind) == ("shop/typo", "Job")
    assert explained.decision.phase is Phase.INVALID
    assert explained.replicas == (
        ReplicaVerdict("shop/typo-0", "a", 40, True, "kept while the spec is invalid"),
    )
    assert explained.nodes == ()
    assert explained.errors == (
        "spec.constraints[0] 'node.cpu == \"x\"': found no matching overload for '_==_' "
        "applied to '(int, string)' at column 1",
    )


def test_a_daemonset_replica_has_no_count_to_be_past() -> None:
    # A DaemonSet is one replica per node it wants, whatever its index: agent-1 leaves b for
    # the taint now on b, not for a count.
    ledger = ledger_for(
        node("a"), node("b", taints=[{"key": "dedicated", "value": "db", "effect": "NoExecute"}])
    )
    agent = workload("agent", kind="DaemonSet", resources={"cpu": "100m"})
    ledger.load(
        agent.key,
        [Booking("a", "shop/agent-0", 100, 0, 10), Booking("b", "shop/agent-1", 100, 0, 10)],
    )
    explained = explain(Scheduler(), agent, ledger, now=NOW)
    taint = "node(s) had untolerated taint {dedicated: db}"
    assert explained.replicas == (
        ReplicaVerdict("shop/agent-0", "a", 10, True, "kept"),
        ReplicaVerdict("shop/agent-1", "b", 10, False, f"moves: {taint} (TaintToleration)"),
    )


def test_the_decision_explained_resolves_the_priority_class_given() -> None:
    # web asks for PriorityClass high: with the classes given it resolves (1000) and is
    # placed; a class no one gave would make it Invalid, as Pod admission refuses the Pod.
    web = workload(kind="Service", count=1, priorityClassName="high")
    classes = PriorityClasses.of([PriorityClass("high", 1000)])
    explained = explain(Scheduler(), web, ledger_for(node("a")), classes, now=NOW)
    assert explained.decision.phase is Phase.SCHEDULED
    assert explained.decision.priority == 1000


def test_a_total_of_zero_goes_after_a_total_of_one() -> None:
    # BinPack (MostAllocated: the share used once the replica is added, floored, averaged
    # over cpu and memory; no memory asked, so its share is 0): 1 cpu on a (100 cpus) is 1,
    # (1 + 0) // 2 = 0; on b (50 cpus) 2, (2 + 0) // 2 = 1. b's larger total goes first,
    # though a is the lower name.
    ledger = ledger_for(node("a", cpu="100"), node("b", cpu="50"))
    web = workload(kind="Service", count=1, resources={"cpu": "1"}, strategy="BinPack")
    explained = explain(Scheduler(), web, ledger, now=NOW)
    assert [(v.node, v.total) for v in explained.nodes] == [("b", 1), ("a", 0)]
