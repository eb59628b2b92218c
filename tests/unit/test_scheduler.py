"""The scheduler's promises: the original's scenarios, docs/design.md 4 and 5, whole results."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest

from controller.api.models import Phase, Strategy, Workload
from controller.scheduler.decision import Decision
from controller.scheduler.framework import Code
from controller.scheduler.ledger import Ledger, alloc_index, ledger_from_statuses
from controller.scheduler.nodes import NodeInfo, NodeTable
from controller.scheduler.plan import plan
from controller.scheduler.plugins.capacity import capacity_score
from controller.scheduler.scheduler import Scheduler
from controller.scheduler.status import status_from_decision
from controller.scheduler.vocabulary import (
    REASON_ALL_PLACED,
    REASON_INVALID_SPEC,
    REASON_PARTIALLY_PLACED,
    REASON_UNSCHEDULABLE,
)
from tests.support.factories import NOW, GiB, ledger_for, node, workload


def schedule(w: Workload, ledger: Ledger) -> Decision:
    return Scheduler().schedule(w, ledger, now=NOW)


def book(w: Workload, ledger: Ledger, scheduler: Scheduler | None = None) -> Decision:
    """Schedule and book, as orca plan and the operator do."""
    decision = (scheduler or Scheduler()).schedule(w, ledger, now=NOW)
    ledger.load(w.key, decision.bookings)
    return decision


def nodes_of(decision: Decision) -> list[str]:
    return [p.node for p in decision.placements]


def test_five_service_replicas_on_three_nodes_land_two_two_one() -> None:
    ledger = ledger_for(node("a"), node("b"), node("c"))
    decision = schedule(workload(kind="Service", count=5, resources={"cpu": "100m"}), ledger)
    assert decision.phase is Phase.SCHEDULED
    assert sorted(Counter(nodes_of(decision)).values()) == [1, 2, 2]
    assert [p.alloc_id for p in decision.placements] == [f"shop/web-{i}" for i in range(5)]


def test_wasm_lands_only_on_wasmtime_nodes() -> None:
    ledger = ledger_for(
        node("big", cpu="64", runtimes=("docker",)),
        node("w1", cpu="1", runtimes=("wasmtime",)),
        node("w2", cpu="1", runtimes=("WASMTIME",)),
    )
    decision = schedule(workload(kind="Service", count=2, runtime={"oneOf": ["wasm"]}), ledger)
    assert sorted(nodes_of(decision)) == ["w1", "w2"]
    job = schedule(workload(name="j", kind="Job", runtime={"oneOf": ["wasm"]}), ledger)
    assert nodes_of(job) in (["w1"], ["w2"])


@pytest.mark.parametrize("runtime", ["pve-vm", "pve-ct", "proxmox"])
def test_proxmox_runtimes_land_only_on_proxmox_nodes(runtime: str) -> None:
    ledger = ledger_for(
        node("linux-with-label", cpu="64", runtimes=(runtime,)),
        node("pve", cpu="8", runtimes=(), kind="proxmox"),
    )
    decision = schedule(workload(kind="Job", runtime={"oneOf": [runtime]}), ledger)
    assert nodes_of(decision) == ["pve"]


def test_daemonset_one_per_fitting_node() -> None:
    ledger = ledger_for(
        node("a"),
        node("b", runtimes=("process",)),
        node("c", cpu="100m"),
        node("d", cordoned=True),
        node("e", ready=False),
    )
    spec: dict[str, Any] = {
        "kind": "DaemonSet",
        "runtime": {"oneOf": ["docker"]},
        "resources": {"cpu": "200m"},
    }
    decision = schedule(workload(name="agent", **spec), ledger)
    assert nodes_of(decision) == ["a"]
    assert decision.phase is Phase.SCHEDULED
    assert decision.desired == 1
    reasons = {r.reason: r.nodes for r in decision.unschedulable}
    assert reasons == {
        "node(s) were unschedulable": ["d"],
        "node(s) not ready": ["e"],
        "runtime docker not offered": ["b"],
        "Insufficient cpu": ["c"],
    }


def test_daemonset_modes() -> None:
    ledger = ledger_for(
        node("a", tags=("edge",)),
        node("b", tags=("edge",), cpu="100m"),
        node("c"),
    )
    base: dict[str, Any] = {
        "kind": "DaemonSet",
        "constraints": ['"edge" in node.tags'],
        "resources": {"cpu": "1"},
    }
    every = schedule(workload(name="d", schedule={"mode": "EveryNode"}, **base), ledger)
    assert nodes_of(every) == ["a", "c"]  # constraints ignored, capacity is not
    matching = schedule(workload(name="d", schedule={"mode": "Matching"}, **base), ledger)
    assert nodes_of(matching) == ["a"]
    assert matching.phase is Phase.SCHEDULED
    mandatory = schedule(workload(name="d", schedule={"mode": "Mandatory"}, **base), ledger)
    assert nodes_of(mandatory) == ["a"]
    assert mandatory.phase is Phase.PARTIALLY_SCHEDULED
    assert (mandatory.desired, mandatory.placed) == (2, 1)
    assert "Mandatory on b" in mandatory.message


def test_no_nodes_is_reported_not_raised() -> None:
    decision = schedule(workload(kind="Job"), Ledger())
    assert decision.phase is Phase.UNSCHEDULABLE
    assert decision.reason == REASON_UNSCHEDULABLE
    assert decision.message == "0/0 nodes are available: no nodes in the cluster."


def test_nothing_fits_gives_a_kube_scheduler_style_message() -> None:
    ledger = ledger_for(
        node("a", runtimes=("docker",)),
        node("b", runtimes=("docker",)),
        node("c", runtimes=("docker",)),
        node("d", runtimes=("wasmtime",), cpu="1"),
        node("e", runtimes=("wasmtime",), cpu="1"),
    )
    decision = schedule(
        workload(kind="Job", runtime={"oneOf": ["wasm"]}, resources={"cpu": "2"}), ledger
    )
    assert decision.phase is Phase.UNSCHEDULABLE
    assert decision.placements == ()
    assert decision.message == (
        "0/5 nodes are available: 3 runtime wasm not offered, 2 Insufficient cpu."
    )
    assert [(r.reason, r.count, r.nodes) for r in decision.unschedulable] == [
        ("runtime wasm not offered", 3, ["a", "b", "c"]),
        ("Insufficient cpu", 2, ["d", "e"]),
    ]


def test_partial_service_names_what_is_missing() -> None:
    ledger = ledger_for(node("a", cpu="1"), node("b", cpu="1"))
    decision = schedule(workload(kind="Service", count=3, resources={"cpu": "600m"}), ledger)
    assert decision.phase is Phase.PARTIALLY_SCHEDULED
    assert decision.reason == REASON_PARTIALLY_PLACED
    assert (decision.desired, decision.placed) == (3, 2)
    assert decision.message == ("2/3 replicas placed; 0/2 nodes are available: 2 Insufficient cpu.")


def test_memory_is_checked_after_cpu() -> None:
    ledger = ledger_for(node("a", memory="1Gi"), node("b", cpu="1"))
    decision = schedule(workload(kind="Job", resources={"cpu": "2", "memory": "2Gi"}), ledger)
    assert decision.message == (
        "0/2 nodes are available: 1 Insufficient cpu, 1 Insufficient memory."
    )


def test_constraints_filter_and_are_reported_with_their_expression() -> None:
    ledger = ledger_for(
        node("a", tags=("ssd",), labels={"zone": "z1"}),
        node("b", tags=("ssd",), labels={"zone": "z2"}),
        node("c", labels={"zone": "z1"}),
        node("d"),
    )
    spec: dict[str, Any] = {
        "kind": "Service",
        "count": 2,
        "constraints": ['"ssd" in node.tags', 'node.labels["zone"] == "z1"'],
    }
    decision = schedule(workload(**spec), ledger)
    assert nodes_of(decision) == ["a", "a"]  # colocation only because nothing else fits
    job = schedule(
        workload(name="j", kind="Job", constraints=['node.labels["zone"] == "z9"']), ledger
    )
    assert [(r.reason, r.count) for r in job.unschedulable] == [
        ('constraint node.labels["zone"] == "z9" failed to evaluate', 1),
        ('node(s) didn\'t match constraint node.labels["zone"] == "z9"', 3),
    ]


def test_ties_break_by_hostname_whatever_the_listing_order() -> None:
    nodes = [node(name) for name in ("zeta", "alpha", "mid")]
    for order in (nodes, nodes[::-1]):
        decision = schedule(workload(kind="Job"), Ledger(NodeTable(order)))
        assert nodes_of(decision) == ["alpha"]


def test_spread_prefers_free_capacity_binpack_prefers_full_nodes() -> None:
    ledger = ledger_for(node("a"), node("b"))
    book(workload(name="filler", kind="Job", resources={"cpu": "1", "memory": "2Gi"}), ledger)
    assert ledger.bookings("shop/filler")[0].node == "a"
    spread = schedule(workload(kind="Job", resources={"cpu": "500m"}), ledger)
    binpack = schedule(workload(kind="Job", resources={"cpu": "500m"}, strategy="BinPack"), ledger)
    assert nodes_of(spread) == ["b"]
    assert nodes_of(binpack) == ["a"]


def test_cel_affinity_adds_its_weight() -> None:
    ledger = ledger_for(node("a", cpu="8"), node("b", cpu="2", tags=("gpu",)))
    plain = schedule(workload(kind="Job"), ledger)
    assert nodes_of(plain) == ["a"]
    liked = schedule(
        workload(kind="Job", affinity=[{"target": '"gpu" in node.tags', "weight": 100}]), ledger
    )
    assert nodes_of(liked) == ["b"]
    assert liked.placements[0].score == 100 + 100
    avoided = schedule(
        workload(kind="Job", affinity=[{"target": 'node.hostname == "a"', "weight": -100}]), ledger
    )
    assert nodes_of(avoided) == ["b"]


def test_name_affinity_counts_the_other_workloads_replicas() -> None:
    ledger = ledger_for(node("a", cpu="8"), node("b", cpu="8"), node("c", cpu="8"))
    ledger.rebind(ledger.table)
    redis = book(workload(name="redis", kind="Service", count=1, resources={"cpu": "4"}), ledger)
    assert nodes_of(redis) == ["a"]
    near = schedule(workload(kind="Job", affinity=[{"target": "redis", "weight": 100}]), ledger)
    assert nodes_of(near) == ["a"]
    away = schedule(workload(kind="Job", affinity=[{"target": "redis", "weight": -100}]), ledger)
    assert nodes_of(away) == ["b"]
    other_ns = schedule(
        workload(namespace="other", kind="Job", affinity=[{"target": "redis", "weight": 100}]),
        ledger,
    )
    assert nodes_of(other_ns) == ["b"]  # same name, other namespace: no pull


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("constraints", ["node.tags.("], "spec.constraints[0]"),
        ("constraints", ["node.tagz == 1"], "node has no field 'tagz'"),
        ("affinity", [{"target": "node.kind ==", "weight": 1}], "spec.affinity[0].target"),
        ("runtime", {"oneOf": ["pve-lxc"]}, "unknown runtime alias"),
    ],
    ids=["syntax", "unknown-field", "affinity", "runtime-alias"],
)
def test_invalid_specs_are_reported_with_the_field(field: str, value: Any, message: str) -> None:
    decision = schedule(workload(kind="Job", **{field: value}), ledger_for(node("a")))
    assert decision.phase is Phase.INVALID
    assert decision.reason == REASON_INVALID_SPEC
    assert message in decision.message


def test_an_invalid_spec_still_says_how_many_replicas_it_wants() -> None:
    decision = schedule(
        workload(kind="Service", count=3, constraints=["node.tags.("]), ledger_for(node("a"))
    )
    assert (decision.phase, decision.desired, decision.placed) == (Phase.INVALID, 3, 0)


def test_invalid_spec_keeps_existing_placements() -> None:
    ledger = ledger_for(node("a"), node("b"))
    first = book(workload(kind="Service", count=2), ledger)
    broken = schedule(workload(kind="Service", count=2, constraints=["node.("]), ledger)
    assert broken.phase is Phase.INVALID
    assert broken.placements == first.placements


# -- reconciliation semantics (docs/design.md 5) ---------------------------------------------------


def test_existing_placements_are_kept_even_when_a_better_node_appears() -> None:
    ledger = ledger_for(node("a", cpu="2"), node("b", cpu="2"))
    scheduler = Scheduler()
    first = book(workload(kind="Service", count=2), ledger, scheduler)
    ledger.rebind(NodeTable([*ledger.table.nodes, node("big", cpu="64")]))
    again = book(workload(kind="Service", count=2), ledger, scheduler)
    assert again.placements == first.placements


def test_count_up_adds_and_count_down_removes_the_highest_indexes() -> None:
    ledger = ledger_for(node("a"), node("b"), node("c"))
    scheduler = Scheduler()
    three = book(workload(kind="Service", count=3), ledger, scheduler)
    five = book(workload(kind="Service", count=5), ledger, scheduler)
    assert five.placements[:3] == three.placements
    two = book(workload(kind="Service", count=2), ledger, scheduler)
    assert two.placements == three.placements[:2]
    assert len(ledger.bookings("shop/web")) == 2


def test_a_replica_moves_when_its_node_stops_passing() -> None:
    nodes = [node("a", tags=("ssd",)), node("b", tags=("ssd",)), node("c")]
    ledger = ledger_for(*nodes)
    scheduler = Scheduler()
    first = book(workload(kind="Service", count=2), ledger, scheduler)
    assert nodes_of(first) == ["a", "b"]
    # Constraint added: nothing moves that still passes.
    constrained = book(
        workload(kind="Service", count=2, constraints=['"ssd" in node.tags']), ledger, scheduler
    )
    assert constrained.placements == first.placements
    # b cordoned: its replica (index 1) moves, index 0 stays.
    ledger.rebind(NodeTable([nodes[0], node("b", tags=("ssd",), cordoned=True), nodes[2]]))
    moved = book(workload(kind="Service", count=2), ledger, scheduler)
    assert moved.placements[0] == first.placements[0]
    assert moved.placements[1].node == "c"
    assert moved.placements[1].alloc_id == "shop/web-1"


def test_node_removed_reschedules_services_and_drops_daemonsets() -> None:
    ledger = ledger_for(node("a"), node("b"))
    scheduler = Scheduler()
    book(workload(kind="Job"), ledger, scheduler)
    book(workload(name="agent", kind="DaemonSet"), ledger, scheduler)
    ledger.rebind(NodeTable([node("b")]))
    job = book(workload(kind="Job"), ledger, scheduler)
    agent = book(workload(name="agent", kind="DaemonSet"), ledger, scheduler)
    assert nodes_of(job) == ["b"]
    assert [(p.node, p.alloc_id) for p in agent.placements] == [("b", "shop/agent-1")]


def test_daemonset_grows_on_a_new_node_with_a_fresh_index() -> None:
    ledger = ledger_for(node("b"), node("c"))
    scheduler = Scheduler()
    first = book(workload(name="agent", kind="DaemonSet"), ledger, scheduler)
    ledger.rebind(NodeTable([node("a"), node("b"), node("c")]))
    grown = book(workload(name="agent", kind="DaemonSet"), ledger, scheduler)
    assert set(first.placements) <= set(grown.placements)
    assert [(p.node, p.alloc_id) for p in grown.placements] == [
        ("b", "shop/agent-0"),
        ("c", "shop/agent-1"),
        ("a", "shop/agent-2"),
    ]


def test_daemonset_placements_are_listed_by_replica_index() -> None:
    """A kept replica keeps its index (agent-1 on b); the new nodes take the free ones, 0 and
    2, in hostname order; the status lists them all by index."""
    ledger = ledger_for(node("a"), node("b"))
    scheduler = Scheduler()
    book(workload(name="agent", kind="DaemonSet"), ledger, scheduler)
    ledger.rebind(NodeTable([node("b")]))  # a is gone: its replica ends
    assert nodes_of(book(workload(name="agent", kind="DaemonSet"), ledger, scheduler)) == ["b"]
    ledger.rebind(NodeTable([node("a"), node("b"), node("c")]))
    grown = schedule(workload(name="agent", kind="DaemonSet"), ledger)
    assert [(p.node, p.alloc_id) for p in grown.placements] == [
        ("a", "shop/agent-0"),
        ("b", "shop/agent-1"),
        ("c", "shop/agent-2"),
    ]


def test_a_daemonset_on_a_full_node_it_fills_reports_no_rejection() -> None:
    """A node that holds the DaemonSet's replica already is not a node that fails it, even
    when that replica leaves it no room for another: nothing is unschedulable."""
    ledger = ledger_for(node("a", cpu="1"))
    spec: dict[str, Any] = {"kind": "DaemonSet", "resources": {"cpu": "1"}}
    book(workload(name="agent", **spec), ledger)
    ledger.rebind(NodeTable([node("a", cpu="1"), node("b")]))
    decision = schedule(workload(name="agent", **spec), ledger)
    assert nodes_of(decision) == ["a", "b"]
    assert (decision.unschedulable, decision.code) == ((), Code.SUCCESS)
    assert decision.message == "2/2 nodes placed"


def test_daemonset_replicas_carry_the_score_that_won_their_node() -> None:
    """LeastAllocated of 1 core, 2Gi: on a (4 cores, 8Gi) cpu 75, memory 75 -> 75; on b
    (2 cores, 8Gi) cpu 50, memory 75 -> 62 (the mean, rounded down)."""
    ledger = ledger_for(node("a", cpu="4"), node("b", cpu="2"))
    spec: dict[str, Any] = {"kind": "DaemonSet", "resources": {"cpu": "1", "memory": "2Gi"}}
    decision = schedule(workload(name="agent", **spec), ledger)
    assert [(p.node, p.score) for p in decision.placements] == [("a", 75), ("b", 62)]


def test_a_mandatory_daemonset_wants_the_nodes_every_selecting_filter_passes() -> None:
    """Mandatory wants the nodes that pass every filter that selects: b is cordoned
    (eligibility), c is not an edge node (constraints); only a is wanted, and holds it."""
    ledger = ledger_for(
        node("a", tags=("edge",)), node("b", tags=("edge",), cordoned=True), node("c")
    )
    spec: dict[str, Any] = {
        "kind": "DaemonSet",
        "constraints": ['"edge" in node.tags'],
        "schedule": {"mode": "Mandatory"},
    }
    decision = schedule(workload(name="agent", **spec), ledger)
    assert nodes_of(decision) == ["a"]
    assert (decision.phase, decision.desired, decision.placed) == (Phase.SCHEDULED, 1, 1)
    # Placed everywhere it is wanted, it still says why it is not on the other nodes, as the
    # other modes do (status.unschedulable, orca_unschedulable_workloads by plugin).
    assert {r.reason: r.nodes for r in decision.unschedulable} == {
        "node(s) were unschedulable": ["b"],
        """node(s) didn't match constraint "edge" in node.tags""": ["c"],
    }
    assert decision.message == "1/1 nodes placed"


MANDATORY_EDGE: dict[str, Any] = {
    "kind": "DaemonSet",
    "runtime": {"oneOf": ["docker"]},
    "constraints": ['"edge" in node.tags'],
    "schedule": {"mode": "Mandatory"},
}


@pytest.mark.parametrize(
    ("without_docker", "phase", "message"),
    [
        (
            7,
            Phase.PARTIALLY_SCHEDULED,
            "1/8 replicas placed; 1/9 nodes are available: 7 runtime docker not offered,"
            ' 1 node(s) didn\'t match constraint "edge" in node.tags.'
            " Mandatory on e2, e3, e4, e5, e6, e7 and 1 more.",
        ),
        (
            2,
            Phase.PARTIALLY_SCHEDULED,
            "1/3 replicas placed; 1/4 nodes are available: 2 runtime docker not offered,"
            ' 1 node(s) didn\'t match constraint "edge" in node.tags. Mandatory on e2, e3.',
        ),
    ],
)
def test_a_mandatory_daemonset_names_the_wanted_nodes_it_is_missing_from(
    without_docker: int, phase: Phase, message: str
) -> None:
    """Runtime does not select (docs/design.md 4): edge nodes without docker are wanted and
    missing. The message names the first six (two lines' worth of NODES_PER_REASON = 3) and
    counts the rest; c, not an edge node, is not wanted."""
    edges = [node("e1", tags=("edge",), runtimes=("docker",))] + [
        node(f"e{i}", tags=("edge",), runtimes=("process",)) for i in range(2, without_docker + 2)
    ]
    decision = schedule(
        workload(name="agent", **MANDATORY_EDGE),
        ledger_for(*edges, node("c", runtimes=("docker",))),
    )
    assert nodes_of(decision) == ["e1"]
    assert (decision.phase, decision.desired) == (phase, without_docker + 1)
    assert decision.message == message


def test_a_mandatory_daemonset_no_node_wants_is_unschedulable() -> None:
    """No node passes the selecting filters: nothing is wanted, and 0 of 0 is not Scheduled."""
    ledger = ledger_for(node("a", runtimes=("docker",)), node("b", runtimes=("docker",)))
    decision = schedule(workload(name="agent", **MANDATORY_EDGE), ledger)
    assert (decision.phase, decision.desired, decision.placements) == (
        Phase.UNSCHEDULABLE,
        0,
        (),
    )
    assert decision.message == (
        '0/2 nodes are available: 2 node(s) didn\'t match constraint "edge" in node.tags.'
    )


def test_a_daemonset_placed_nowhere_says_why() -> None:
    ledger = ledger_for(node("a", runtimes=("process",)), node("b", runtimes=("process",)))
    spec: dict[str, Any] = {"kind": "DaemonSet", "runtime": {"oneOf": ["docker"]}}
    decision = schedule(workload(name="agent", **spec), ledger)
    assert (decision.phase, decision.desired, decision.placements) == (
        Phase.UNSCHEDULABLE,
        0,
        (),
    )
    assert decision.message == "0/2 nodes are available: 2 runtime docker not offered."
    assert decision.code is Code.UNRESOLVABLE  # only a spec or node change can cure it


def test_capacity_changes_never_evict() -> None:
    ledger = ledger_for(node("a", cpu="2"))
    scheduler = Scheduler()
    first = book(workload(kind="Job", resources={"cpu": "2"}), ledger, scheduler)
    ledger.rebind(NodeTable([node("a", cpu="1")]))
    again = book(workload(kind="Job", resources={"cpu": "2"}), ledger, scheduler)
    assert again.placements == first.placements


def test_a_replica_leaves_a_node_that_no_longer_offers_its_runtime() -> None:
    """Runtime evicts (docs/design.md 5), unlike capacity: a Service replica on a node that
    drops its runtime moves to a node that offers it."""
    ledger = ledger_for(node("a", runtimes=("docker",)), node("b", runtimes=("process",)))
    scheduler = Scheduler()
    spec: dict[str, Any] = {"kind": "Service", "count": 1, "runtime": {"oneOf": ["docker"]}}
    assert nodes_of(book(workload(name="web", **spec), ledger, scheduler)) == ["a"]
    ledger.rebind(NodeTable([node("a", runtimes=("process",)), node("b", runtimes=("docker",))]))
    assert nodes_of(book(workload(name="web", **spec), ledger, scheduler)) == ["b"]


def test_two_workloads_never_overcommit_a_node() -> None:
    ledger = ledger_for(node("a", cpu="1"))
    scheduler = Scheduler()
    assert (
        book(workload(name="one", kind="Job", resources={"cpu": "600m"}), ledger, scheduler).placed
        == 1
    )
    second = book(workload(name="two", kind="Job", resources={"cpu": "600m"}), ledger, scheduler)
    assert second.phase is Phase.UNSCHEDULABLE
    assert int(ledger.used_cpu[0]) == 600


def test_schedule_does_not_touch_the_ledger() -> None:
    ledger = ledger_for(node("a"), node("b"))
    before = (ledger.used_cpu.copy(), len(ledger))
    decision = schedule(workload(kind="Service", count=3, resources={"cpu": "1"}), ledger)
    assert decision.placed == 3
    assert (ledger.used_cpu.tolist(), len(ledger)) == (before[0].tolist(), before[1])


def test_all_placed_reason_and_message() -> None:
    decision = schedule(workload(kind="Service", count=2), ledger_for(node("a"), node("b")))
    assert (decision.reason, decision.message) == (REASON_ALL_PLACED, "2/2 replicas placed")
    assert decision.unschedulable == ()


@pytest.mark.parametrize(
    ("value", "index"),
    [
        ("shop/web-0", 0),
        ("shop/web-12", 12),
        ("shop/web-999999999", 999999999),  # nine digits: the most an index has
        ("shop/web-1000000000", None),
        ("shop/web-01", None),  # no leading zeros
        ("other/web-1", None),
        ("shop/wex-1", None),  # another Workload's id whose key is as long
        ("shop/web", None),
        ("shop/web-", None),
        ("shop/web-1-2", None),  # shop/web-1's replica 2, not shop/web's
        ("shop/webby-1", None),
        ("shop/web-\u00b2", None),  # a digit to str.isdigit, not an index
    ],
)
def test_alloc_index(value: str, index: int | None) -> None:
    assert alloc_index("shop/web", value) == index


def test_capacity_score_formula() -> None:
    """kube's LeastAllocated / MostAllocated (noderesources/least_allocated.go,
    most_allocated.go); the third node has no cpu allocatable, so only memory is scored
    (resource_allocation.go's calculateNodeAllocatableRequest skips it)."""
    cpu = np.array([4000, 4000, 0])
    memory = np.array([8 * GiB, 8 * GiB, 8 * GiB])
    free_cpu = np.array([2000, 4000, 0])
    free_memory = np.array([8 * GiB, 0, 4 * GiB])
    spread = capacity_score(Strategy.SPREAD, cpu, memory, free_cpu, free_memory)
    binpack = capacity_score(Strategy.BINPACK, cpu, memory, free_cpu, free_memory)
    assert spread.tolist() == [75, 50, 50]  # (50+100)/2, (100+0)/2, 50/1
    assert binpack.tolist() == [25, 50, 50]  # (50+0)/2, (0+100)/2, 50/1
    over = capacity_score(
        Strategy.SPREAD, cpu[:1], memory[:1], np.array([-500]), np.array([8 * GiB])
    )
    assert over.tolist() == [50]  # cpu over-requested scores 0, memory 100


def test_nodeinfo_eligibility_is_what_filters_use() -> None:
    n: NodeInfo = node("x", cordoned=True)
    assert not n.eligible


# -- resizes (docs/design.md 5: a resize never over-commits; capacity changes never evict) ---------


def test_a_resize_moves_the_replica_its_node_cannot_hold() -> None:
    ledger = ledger_for(node("a", cpu="2"), node("b", cpu="2"))
    scheduler = Scheduler()
    j1 = book(workload(name="j1", kind="Job", resources={"cpu": "1"}), ledger, scheduler)
    j2 = book(workload(name="j2", kind="Job", resources={"cpu": "1"}), ledger, scheduler)
    assert nodes_of(j1) == ["a"] and nodes_of(j2) == ["b"]
    book(workload(name="j3", kind="Job", resources={"cpu": "1"}), ledger, scheduler)  # on a
    grown = book(workload(name="j1", kind="Job", resources={"cpu": "2"}), ledger, scheduler)
    assert grown.phase is Phase.UNSCHEDULABLE  # a holds j3 beside it, b holds j2: no room
    assert int(ledger.used_cpu.max()) <= 2000
    shrunk = book(workload(name="j2", kind="Job", resources={"cpu": "500m"}), ledger, scheduler)
    assert shrunk.placements == j2.placements  # shrinking never moves


def test_a_resize_that_still_fits_stays_put() -> None:
    ledger = ledger_for(node("a", cpu="4"), node("b", cpu="4"))
    scheduler = Scheduler()
    first = book(workload(kind="Service", count=2, resources={"cpu": "1"}), ledger, scheduler)
    grown = book(workload(kind="Service", count=2, resources={"cpu": "3"}), ledger, scheduler)
    assert grown.placements == first.placements


def test_orca_plan_resize_example_from_a_hand_written_status() -> None:
    """The issue's case: node a (2 cpu) holds j1, now resized to 2 cpu, and j2 (1 cpu), both
    recorded in status without the size they were placed at."""
    status = {"placements": [{"node": "a", "allocId": "shop/j1-0", "score": 50}]}
    j1 = workload(name="j1", kind="Job", resources={"cpu": "2"}, status=status)
    status2 = {"placements": [{"node": "a", "allocId": "shop/j2-0", "score": 50}]}
    j2 = workload(name="j2", kind="Job", resources={"cpu": "1"}, status=status2)
    results = plan([node("a", cpu="2")], [j1, j2])
    by_name = {r.workload.metadata.name: r.status for r in results}
    assert [p.node for p in by_name["j2"].placements] == ["a"]
    assert by_name["j1"].placements == [] and by_name["j1"].phase is Phase.UNSCHEDULABLE


def test_status_records_the_size_so_a_rebuilt_ledger_is_exact() -> None:
    decision = schedule(workload(kind="Job", resources={"cpu": "1500m"}), ledger_for(node("a")))
    status = status_from_decision(decision, 1, None, "2026-01-01T00:00:00Z")
    assert status.resources is not None and status.resources.root == {"cpu": "1500m"}
    recorded = status.model_dump(by_alias=True, mode="json", exclude_none=True)
    same = workload(kind="Job", resources={"cpu": "1500m"}, status=recorded)
    grown = workload(kind="Job", resources={"cpu": "3"}, status=recorded)
    # The spec grew since: the rebuilt ledger still books what the placement holds.
    assert ledger_from_statuses([node("a", cpu="2")], [grown]).used_cpu.tolist() == [1500]
    # The node shrank under an unchanged Workload: it stays (capacity never evicts) ...
    assert nodes_of(schedule(same, ledger_from_statuses([node("a", cpu="1")], [same]))) == ["a"]
    # ... but the resize to 3 cpu does not fit on the 2-cpu node: it cannot stay.
    resized = schedule(grown, ledger_from_statuses([node("a", cpu="2")], [grown]))
    assert resized.phase is Phase.UNSCHEDULABLE


# -- taints and tolerations (docs/design.md 4) ----------------------------------------------------


CONTROL_PLANE = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}


def test_control_plane_nodes_get_nothing_unless_tolerated() -> None:
    ledger = ledger_for(node("cp", cpu="64", taints=[CONTROL_PLANE]), node("w1"), node("w2"))
    web = schedule(workload(kind="Service", count=3), ledger)
    assert "cp" not in nodes_of(web)
    agent = schedule(workload(name="agent", kind="DaemonSet"), ledger)
    assert nodes_of(agent) == ["w1", "w2"]
    assert [(r.reason, r.nodes) for r in agent.unschedulable] == [
        ("node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }", ["cp"])
    ]
    tolerant = schedule(
        workload(
            name="agent",
            kind="DaemonSet",
            tolerations=[{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}],
        ),
        ledger,
    )
    assert sorted(nodes_of(tolerant)) == ["cp", "w1", "w2"]


def test_noexecute_added_later_moves_only_intolerant_replicas() -> None:
    nodes = [node("a"), node("b")]
    ledger = ledger_for(*nodes)
    scheduler = Scheduler()
    cpu = {"cpu": "1"}
    plain = book(workload(name="plain", kind="Job", resources=cpu), ledger, scheduler)
    toleration = [{"key": "maintenance", "operator": "Exists", "effect": "NoExecute"}]
    tolerant = book(
        workload(name="tol", kind="Job", resources=cpu, tolerations=toleration), ledger, scheduler
    )
    hit = nodes_of(plain)[0]
    assert nodes_of(tolerant) != [hit]  # spread: the other node
    # Taint both nodes' holder of `plain` with NoExecute, and the other one with NoSchedule.
    evicting = {"key": "maintenance", "value": "", "effect": "NoExecute"}
    blocking = {"key": "maintenance", "value": "", "effect": "NoSchedule"}
    ledger.rebind(
        NodeTable(
            [node(n.hostname, taints=[evicting if n.hostname == hit else blocking]) for n in nodes]
        )
    )
    plain_after = book(workload(name="plain", kind="Job"), ledger, scheduler)
    tolerant_after = book(
        workload(name="tol", kind="Job", tolerations=toleration), ledger, scheduler
    )
    assert plain_after.placements == ()  # moved off, and nowhere else will take it
    assert tolerant_after.placements == tolerant.placements  # NoSchedule added later: stays
    assert plain_after.message.startswith(
        "0/2 nodes are available: 2 node(s) had untolerated taint"
    )
