"""The rebalancer's planner (``controller.scheduler.rebalance``, issue 13): scenarios a cluster
operator meets (new empty nodes, a fragmented BinPack cluster, a zone restored) and property
tests over random drifted clusters (every move valid when made, strictly improving, never
over-committing; a second run proposes nothing; node order does not matter; Never Workloads
never move)."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.api.models import Strategy, Workload
from controller.scheduler.ledger import Booking, Ledger
from controller.scheduler.nodes import NodeInfo, NodeTable
from controller.scheduler.rebalance import (
    MAX_MOVES,
    Move,
    Objective,
    Plan,
    Rebalancer,
    ffd_nodes,
    moved,
)
from controller.scheduler.scheduler import Scheduler
from tests.support.factories import NOW, node, workload
from tests.support.properties import examples

GiB = 1 << 30


def placed(nodes: list[NodeInfo], workloads: list[Workload], scheduler: Scheduler) -> Ledger:
    """The ledger after the scheduler placed ``workloads`` in order onto ``nodes``."""
    ledger = Ledger(NodeTable(nodes))
    for w in workloads:
        ledger.load(w.key, scheduler.schedule(w, ledger, now=NOW).bookings)
    return ledger


def grown(ledger: Ledger, more: list[NodeInfo]) -> Ledger:
    """The same placements after ``more`` nodes joined the cluster."""
    ledger.rebind(NodeTable([*ledger.table.nodes, *more]))
    return ledger


def stddev_of(ledger: Ledger) -> float:
    """Utilisation stddev over the eligible nodes, computed directly (not by the planner)."""
    t = ledger.table
    pool = t.eligible & ((t.cpu > 0) | (t.memory > 0))
    util = (ledger.used_cpu / t.cpu_divisor + ledger.used_memory / t.memory_divisor) / 2
    return float(np.std(util[pool])) if pool.any() else 0.0


def pool_size(ledger: Ledger) -> int:
    t = ledger.table
    return int((t.eligible & ((t.cpu > 0) | (t.memory > 0))).sum())


def zone_skew(ledger: Ledger, w: Workload, candidates: np.ndarray[Any, Any]) -> int:
    """max - min of ``w``'s replicas per zone over the zones with a candidate node."""
    table = ledger.table
    live = {n.labels[ZONE] for n, ok in zip(table.nodes, candidates, strict=True) if ok}
    per_zone = dict.fromkeys(live, 0)
    for b in ledger.bookings(w.key):
        zone = table.nodes[table.index[b.node]].labels[ZONE]
        if zone in per_zone:
            per_zone[zone] += 1
    return max(per_zone.values()) - min(per_zone.values()) if per_zone else 0


def nodes_in_use(ledger: Ledger) -> int:
    return len({b.node for k in ledger.workload_keys() for b in ledger.bookings(k)})


def replay(plan: Plan, ledger: Ledger) -> Ledger:
    """``ledger`` (a copy) with the plan's moves made in order."""
    out = ledger.copy()
    for m in plan.moves:
        out.load(m.workload, moved(out.bookings(m.workload), m))
    return out


def service(name: str, count: int, cpu: str = "500m", memory: str = "1Gi", **spec: Any) -> Workload:
    spec.setdefault("rebalance", "Allowed")
    return workload(
        name, kind="Service", count=count, resources={"cpu": cpu, "memory": memory}, **spec
    )


# -- scenarios -----------------------------------------------------------------------------------


def test_new_empty_nodes_spread_evens_utilisation_within_the_budget() -> None:
    scheduler = Scheduler()
    old = [node(f"old-{i:02}", cpu="4", memory="8Gi") for i in range(10)]
    services = [service(f"svc-{k}", 5) for k in range(6)]  # 30 replicas, 3 per old node
    ledger = grown(placed(old, services, scheduler), [node(f"new-{i:02}") for i in range(10)])
    plan = Rebalancer(scheduler, max_moves=20).plan(services, ledger, now=NOW)

    after = replay(plan, ledger)
    assert 0 < len(plan.moves) <= 20
    assert all(m.source.startswith("old-") and m.target.startswith("new-") for m in plan.moves)
    assert plan.before.utilisation_stddev == stddev_of(ledger) > 0
    assert plan.after.utilisation_stddev == stddev_of(after)
    # 30 replicas on 20 equal nodes: the best is 1 or 2 per node, 0.0625 apart from the mean.
    per_node = sorted(int(n) for n in after.used_cpu // 500)
    assert per_node == [1] * 10 + [2] * 10
    assert plan.complete


def test_budget_cuts_a_plan_short_and_says_so() -> None:
    scheduler = Scheduler()
    old = [node(f"old-{i:02}") for i in range(10)]
    services = [service(f"svc-{k}", 5) for k in range(6)]
    ledger = grown(placed(old, services, scheduler), [node(f"new-{i:02}") for i in range(10)])
    plan = Rebalancer(scheduler, max_moves=3).plan(services, ledger, now=NOW)
    assert len(plan.moves) == 3
    assert not plan.complete
    assert Rebalancer(scheduler, max_moves=0).plan(services, ledger, now=NOW).moves == ()


def fragmented() -> tuple[list[Workload], Ledger]:
    """Eight BinPack Jobs of one 1-cpu replica each, one per 4-cpu node: fragmented, two nodes
    would hold them all."""
    jobs = [
        workload(
            f"job-{i}",
            kind="Job",
            strategy="BinPack",
            rebalance="Allowed",
            resources={"cpu": "1", "memory": "1Gi"},
        )
        for i in range(8)
    ]
    ledger = Ledger(NodeTable([node(f"n-{i}", cpu="4", memory="8Gi") for i in range(8)]))
    for i, j in enumerate(jobs):
        ledger.load(j.key, [Booking(f"n-{i}", f"{j.key}-0", 1000, GiB)])
    return jobs, ledger


def test_fragmented_binpack_cluster_frees_nodes_compared_with_ffd() -> None:
    scheduler = Scheduler()
    jobs, ledger = fragmented()
    plan = Rebalancer(scheduler, max_moves=50).plan(jobs, ledger, now=NOW)
    after = replay(plan, ledger)

    assert plan.before.nodes_in_use == 8
    assert plan.ffd_nodes == 2  # 8 cpus of replicas on 4-cpu nodes
    assert plan.after.nodes_in_use == nodes_in_use(after) == 2
    assert plan.nodes_freed == 6
    assert all(m.after.nodes_in_use <= m.before.nodes_in_use for m in plan.moves)
    assert Rebalancer(scheduler, max_moves=50).plan(jobs, after, now=NOW).moves == ()


@pytest.mark.parametrize("when", ["ScheduleAnyway", "DoNotSchedule"])
def test_zone_restored_brings_skew_back_within_max_skew(when: str) -> None:
    scheduler = Scheduler()
    zone = "topology.kubernetes.io/zone"
    a_b = [node(f"{z}-{i}", labels={zone: z}) for z in ("a", "b") for i in range(3)]
    spread = [{"topologyKey": zone, "maxSkew": 1, "whenUnsatisfiable": when}]
    web = service("web", 6, topologySpread=spread)
    ledger = placed(a_b, [web], scheduler)  # zone c was down: 3 in a, 3 in b
    ledger = grown(ledger, [node(f"c-{i}", labels={zone: "c"}) for i in range(3)])
    plan = Rebalancer(scheduler, max_moves=10).plan([web], ledger, now=NOW)

    assert plan.before.skew == 3 and plan.before.over_max_skew == 1
    assert plan.after.skew <= 1 and plan.after.over_max_skew == 0
    after = replay(plan, ledger)
    per_zone = {z: sum(1 for b in after.bookings(web.key) if b.node[0] == z) for z in "abc"}
    assert per_zone == {"a": 2, "b": 2, "c": 2}
    assert [m.after.skew for m in plan.moves] == [2, 0]  # 3/3/0 -> 3/2/1 -> 2/2/2


def test_never_and_daemonset_workloads_stay_and_unsettled_ones_wait() -> None:
    scheduler = Scheduler()
    old = [node(f"old-{i}") for i in range(3)]
    never = service("never", 3, rebalance="Never")
    daemon = workload("agent", kind="DaemonSet", rebalance="Allowed", resources={"cpu": "100m"})
    ledger = grown(placed(old, [never, daemon], scheduler), [node(f"new-{i}") for i in range(3)])
    assert Rebalancer(scheduler).plan([never, daemon], ledger, now=NOW).moves == ()
    # A Workload whose placements the scheduler would change (count went up) is left to it.
    allowed = service("web", 2)
    ledger = grown(placed(old, [allowed], scheduler), [node(f"new-{i}") for i in range(3)])
    assert Rebalancer(scheduler).plan([service("web", 3)], ledger, now=NOW).moves == ()


def test_check_rejects_a_move_whose_target_filled_up() -> None:
    scheduler = Scheduler()
    old = [node("old-0", cpu="2", memory="4Gi")]
    web = service("web", 2, cpu="1")
    ledger = grown(placed(old, [web], scheduler), [node("new-0", cpu="1", memory="4Gi")])
    rebalancer = Rebalancer(scheduler)
    (move,) = rebalancer.plan([web], ledger, now=NOW).moves
    assert rebalancer.check(move, web, ledger, now=NOW) == move
    blocker = workload("blocker", kind="Job", resources={"cpu": "1"})
    ledger.load(blocker.key, [Booking("new-0", f"{blocker.key}-0", 1000, 0)])
    assert rebalancer.check(move, web, ledger, now=NOW) is None
    assert (
        rebalancer.check(move, service("web", 2, cpu="1", rebalance="Never"), ledger, now=NOW)
        is None
    )


def test_ffd_counts_first_fit_decreasing_on_the_largest_nodes_first() -> None:
    nodes = [node("small", cpu="2", memory="4Gi"), node("big", cpu="8", memory="16Gi")]
    ledger = Ledger(NodeTable(nodes))
    ledger.load(
        "ns/a", [Booking("small", "ns/a-0", 1000, GiB), Booking("small", "ns/a-1", 1000, 0)]
    )
    assert ffd_nodes(ledger) == 1  # both fit on big


def test_ffd_of_a_cluster_without_nodes_is_zero() -> None:
    assert ffd_nodes(Ledger(NodeTable([]))) == 0
    assert Rebalancer().plan([], Ledger(NodeTable([])), now=NOW).ffd_nodes == 0


@pytest.mark.parametrize("tiny", ["cpu", "memory"])
def test_ffd_weighs_a_resource_by_the_largest_node_even_a_tiny_one(tiny: str) -> None:
    """Sizes are shares of the largest node, even when its largest amount of a resource is
    the smallest there is (1m cpu, 1 byte). Four nodes of (1m cpu, 10Gi), two replicas of
    (1m, 1Gi) and two of (0, 5Gi): the 1m ones are whole nodes' worth of cpu, so they go
    first, one per node, and the 5Gi ones join them: 2 nodes. Taken as half a node's worth,
    the 5Gi ones (ids first) would fill one node and the 1m ones open two more: 3. The same
    with the roles of cpu and memory swapped (nodes of 10 cpus and 1 byte)."""
    if tiny == "cpu":
        nodes = [node(f"n-{i}", cpu="1m", memory="10Gi") for i in range(4)]
        whole, half = (1, GiB), (0, 5 * GiB)
    else:
        nodes = [node(f"n-{i}", cpu="10", memory="1") for i in range(4)]
        whole, half = (1000, 1), (5000, 0)
    ledger = Ledger(NodeTable(nodes))
    ledger.load("ns/a", [Booking("n-0", f"ns/a-{i}", *half) for i in range(2)])
    ledger.load("ns/b", [Booking(f"n-{i}", f"ns/b-{i}", *whole) for i in range(2)])
    assert ffd_nodes(ledger) == 2


# -- properties ----------------------------------------------------------------------------------

ZONE = "zone"


@st.composite
def drifted_clusters(draw: st.DrawFn) -> tuple[list[NodeInfo], list[Workload], Ledger]:
    """Workloads placed by the scheduler on some nodes, then more nodes join (some
    cordoned or in a zone of their own): the drift the rebalancer is for."""
    n_old = draw(st.integers(1, 6))
    n_new = draw(st.integers(0, 6))

    def make(name: str) -> NodeInfo:
        return NodeInfo(
            hostname=name,
            labels={ZONE: draw(st.sampled_from(["z1", "z2", "z3"]))},
            cpu=draw(st.sampled_from([1000, 2000, 4000, 8000])),
            memory=draw(st.sampled_from([2, 4, 8, 16])) * GiB,
            unschedulable=draw(st.booleans()) and draw(st.booleans()),
        )

    old = [make(f"old-{i}") for i in range(n_old)]
    new = [make(f"new-{i}") for i in range(n_new)]
    workloads = []
    for k in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["Service", "Service", "Job"]))
        spec: dict[str, Any] = {
            "kind": kind,
            "strategy": draw(st.sampled_from(["Spread", "BinPack"])),
            "rebalance": draw(st.sampled_from(["Allowed", "Allowed", "Never"])),
            "resources": {
                "cpu": draw(st.sampled_from(["0", "250m", "500m", "1"])),
                "memory": draw(st.sampled_from(["0", "256Mi", "1Gi"])),
            },
        }
        if kind == "Service":
            spec["count"] = draw(st.integers(1, 6))
            if draw(st.booleans()):
                spec["topologySpread"] = [
                    {
                        "topologyKey": ZONE,
                        "maxSkew": draw(st.integers(1, 2)),
                        "whenUnsatisfiable": draw(
                            st.sampled_from(["ScheduleAnyway", "DoNotSchedule"])
                        ),
                    }
                ]
        if draw(st.booleans()):
            spec["constraints"] = ['node.labels["zone"] != "z3"']
        workloads.append(workload(f"w{k}", **spec))
    ledger = placed(old, workloads, Scheduler())
    return [*old, *new], workloads, grown(ledger, new)


def objective_key(m: Move, after: bool) -> tuple[float, float]:
    o = m.after if after else m.before
    if o.strategy is Strategy.BINPACK:
        return (o.nodes_in_use, -o.packing)
    return (o.skew, o.dispersion)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(drifted_clusters(), st.integers(1, 15))
def test_every_move_is_valid_when_made_and_improves(
    cluster: tuple[list[NodeInfo], list[Workload], Ledger], budget: int
) -> None:
    _, workloads, ledger = cluster
    scheduler = Scheduler()
    plan = Rebalancer(scheduler, max_moves=budget).plan(workloads, ledger, now=NOW)
    by_key = {w.key: w for w in workloads}
    assert len(plan.moves) <= budget
    state = ledger.copy()
    table = state.table
    for m in plan.moves:
        w = by_key[m.workload]
        assert w.spec.rebalance.value == "Allowed"  # Never Workloads never move
        assert w.spec.kind.value != "DaemonSet"
        # Valid when made: the target passes every static filter of the profile for this
        # Workload, and has the free capacity for the replica, given the moves before it.
        prepared = scheduler.prepare(w, state, now=NOW)
        assert prepared.filtered is not None
        t = table.index[m.target]
        assert prepared.filtered.passes[t], m
        free_cpu, free_memory = state.free()
        assert free_cpu[t] >= w.spec.cpu_millis and free_memory[t] >= w.spec.memory_bytes, m
        # A DoNotSchedule spread is never pushed past maxSkew (nor further past it).
        hard = [c for c in w.spec.topology_spread if c.when_unsatisfiable.value == "DoNotSchedule"]
        skew_before = zone_skew(state, w, prepared.filtered.passes)  # the only key drawn
        # Strictly better by the Workload's strategy, and the figures are the real ones.
        assert objective_key(m, True) < objective_key(m, False)
        assert np.isclose(m.before.stddev, stddev_of(state))
        assert np.isclose(m.before.dispersion, pool_size(state) * stddev_of(state) ** 2)
        assert m.before.nodes_in_use == nodes_in_use(state)
        state.load(m.workload, moved(state.bookings(m.workload), m))
        assert np.isclose(m.after.stddev, stddev_of(state))
        for c in hard:
            assert zone_skew(state, w, prepared.filtered.passes) <= max(c.max_skew, skew_before)
        assert m.after.nodes_in_use == nodes_in_use(state)
        # Never over-committed at any step (the initial placements were within capacity).
        assert (state.used_cpu <= table.cpu).all() and (state.used_memory <= table.memory).all()
        # The scheduler keeps the moved replica where it now is: the move is stable.
        assert scheduler.schedule(w, state, now=NOW).bookings == state.bookings(w.key)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(drifted_clusters())
def test_a_second_run_on_its_own_output_proposes_nothing(
    cluster: tuple[list[NodeInfo], list[Workload], Ledger],
) -> None:
    _, workloads, ledger = cluster
    rebalancer = Rebalancer(Scheduler(), max_moves=200)
    plan = rebalancer.plan(workloads, ledger, now=NOW)
    if plan.complete:
        assert rebalancer.plan(workloads, replay(plan, ledger), now=NOW).moves == ()
    else:  # the budget ran out first: the next plan goes on from there
        assert len(plan.moves) == 200


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(drifted_clusters(), st.randoms(use_true_random=False))
def test_the_plan_does_not_depend_on_node_order(
    cluster: tuple[list[NodeInfo], list[Workload], Ledger], rnd: random.Random
) -> None:
    nodes, workloads, ledger = cluster
    shuffled = list(nodes)
    rnd.shuffle(shuffled)
    other = Ledger(NodeTable(shuffled))
    for key in ledger.workload_keys():
        other.load(key, ledger.bookings(key))
    first = Rebalancer(Scheduler(), max_moves=10).plan(workloads, ledger, now=NOW)
    second = Rebalancer(Scheduler(), max_moves=10).plan(workloads, other, now=NOW)
    assert first == second


@settings(max_examples=examples(60), deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from([1000, 2000, 4000]), st.sampled_from([1, 4, 8])),
             min_size=1, max_size=8),
    st.lists(st.tuples(st.sampled_from([0, 250, 500, 1000, 3000]), st.sampled_from([0, 1, 2])),
             max_size=30),
)  # fmt: skip
def test_ffd_resuming_per_size_equals_first_fit_from_the_start(
    sizes: list[tuple[int, int]], replicas: list[tuple[int, int]]
) -> None:
    nodes = [NodeInfo(hostname=f"n{i}", cpu=c, memory=m * GiB) for i, (c, m) in enumerate(sizes)]
    ledger = Ledger(NodeTable(nodes))
    bookings = [Booking("n0", f"ns/w-{i}", c, m * GiB) for i, (c, m) in enumerate(replicas)]
    ledger.load("ns/w", bookings)
    # The textbook version: every replica scans every node from the first.
    bins = sorted(ledger.table.nodes, key=lambda n: (-n.cpu, -n.memory, n.hostname))
    free = [[n.cpu, n.memory] for n in bins]
    big_cpu, big_memory = max(n.cpu for n in bins), max(n.memory for n in bins)
    used = set()
    for b in sorted(
        bookings, key=lambda b: (-max(b.cpu / big_cpu, b.memory / big_memory), b.alloc_id)
    ):
        for j, room in enumerate(free):
            if room[0] >= b.cpu and room[1] >= b.memory:
                room[0] -= b.cpu
                room[1] -= b.memory
                used.add(j)
                break
    assert ffd_nodes(ledger) == len(used)


def test_a_replica_never_moves_out_of_every_spread_domain() -> None:
    # web (ScheduleAnyway over zones, maxSkew 1): a1 (zone a) holds two, b1 (zone b) one; x has
    # no zone label, so it passes the filter but counts in no domain. Moving a replica from a1
    # to x would even the utilisation and leave a/b at 1/1, a skew of 0, only by dropping the
    # replica from the count: never a move. A move to b1 keeps the skew at 1 and the
    # utilisation as uneven: no move at all.
    zone = "topology.kubernetes.io/zone"
    spread = [{"topologyKey": zone, "maxSkew": 1, "whenUnsatisfiable": "ScheduleAnyway"}]
    web = service("web", 3, topologySpread=spread)
    ledger = Ledger(NodeTable([node("a1", labels={zone: "a"}), node("b1", labels={zone: "b"})]))
    ledger.load(
        web.key,
        [
            Booking("a1", "shop/web-0", 500, GiB),
            Booking("a1", "shop/web-1", 500, GiB),
            Booking("b1", "shop/web-2", 500, GiB),
        ],
    )
    ledger = grown(ledger, [node("x")])
    plan = Rebalancer().plan([web], ledger, now=NOW)
    assert plan.moves == ()
    assert (plan.before.skew, plan.after.skew) == (1, 1)
    assert plan.before.over_max_skew == 0  # at maxSkew is not over it


def test_a_cluster_without_eligible_nodes_has_no_spread_of_utilisation() -> None:
    ledger = Ledger(NodeTable([node("off", cordoned=True), node("down", ready=False)]))
    job = workload("j", kind="Job", rebalance="Allowed")
    ledger.load(job.key, [Booking("off", "shop/j-0", 1000, GiB)])
    plan = Rebalancer().plan([job], ledger, now=NOW)
    assert plan.moves == ()
    assert plan.before.utilisation_stddev == plan.after.utilisation_stddev == 0.0
    assert plan.before.nodes_in_use == 1


@pytest.mark.parametrize(
    ("strategy", "parts"),
    [
        (Strategy.SPREAD, {"skew": 2, "utilisationStddev": 0.1235}),
        (Strategy.BINPACK, {"nodesInUse": 3, "packing": 0.5679}),
    ],
)
def test_the_objective_shows_the_parts_its_strategy_compares(
    strategy: Strategy, parts: dict[str, float]
) -> None:
    objective = Objective(strategy, 2, 3, 0.123456, 0.567890, 0.9)
    assert objective.as_dict() == parts


def test_the_move_budget_is_bounded() -> None:
    for bad in (-1, MAX_MOVES + 1):
        with pytest.raises(ValueError, match=rf"^max moves must be 0\.\.{MAX_MOVES}, not {bad}$"):
            Rebalancer(max_moves=bad)
    assert Rebalancer(max_moves=0).max_moves == 0
    assert Rebalancer(max_moves=MAX_MOVES).max_moves == MAX_MOVES


def test_check_judges_the_named_replica_only() -> None:
    # Two replicas on old-0 (2 cpus): the plan moves one to the new node. Checked again, the
    # move holds for the replica it names; the same move naming a replica that is not on its
    # source (or none) does not.
    scheduler = Scheduler()
    web = service("web", 2, cpu="1")
    ledger = grown(
        placed([node("old-0", cpu="2", memory="4Gi")], [web], scheduler),
        [node("new-0", cpu="2", memory="4Gi")],
    )
    rebalancer = Rebalancer(scheduler)
    (move,) = rebalancer.plan([web], ledger, now=NOW).moves
    # both replicas' moves tie: the first replica's is kept
    assert (move.alloc_id, move.source, move.target) == ("shop/web-0", "old-0", "new-0")
    assert rebalancer.check(move, web, ledger, now=NOW) == move
    other = next(b.alloc_id for b in ledger.bookings(web.key) if b.alloc_id != move.alloc_id)
    assert rebalancer.check(replace(move, alloc_id=other), web, ledger, now=NOW) == replace(
        move, alloc_id=other
    )
    assert rebalancer.check(replace(move, alloc_id="shop/web-9"), web, ledger, now=NOW) is None
    assert rebalancer.check(replace(move, source="new-0"), web, ledger, now=NOW) is None
    assert rebalancer.check(replace(move, workload="shop/other"), web, ledger, now=NOW) is None


def test_each_round_visits_the_workloads_in_key_order() -> None:
    # The budget is shared fairly: one move per Workload per round, Workloads by key, whatever
    # order they are given in. Six Services of five on ten old nodes, ten new empty ones; a
    # budget of six moves is one round: one move of each, svc-0 first.
    scheduler = Scheduler()
    old = [node(f"old-{i:02}") for i in range(10)]
    services = [service(f"svc-{k}", 5) for k in range(6)]
    ledger = grown(placed(old, services, scheduler), [node(f"new-{i:02}") for i in range(10)])
    plan = Rebalancer(scheduler, max_moves=6).plan(services[::-1], ledger, now=NOW)
    assert [m.workload for m in plan.moves] == [f"shop/svc-{k}" for k in range(6)]
    assert not plan.complete


def packing_of(ledger: Ledger) -> float:
    """The sum of squared utilisations over the eligible nodes, computed directly."""
    t = ledger.table
    pool = t.eligible & ((t.cpu > 0) | (t.memory > 0))
    util = (ledger.used_cpu / t.cpu_divisor + ledger.used_memory / t.memory_divisor) / 2
    return float((util[pool] ** 2).sum())


def spread_out(strategy: str) -> tuple[list[Workload], Ledger]:
    """Three Services of three on four old nodes, three new nodes of different sizes (Spread);
    or eight 1-cpu Jobs one per 4-cpu node (BinPack): both with moves to make."""
    scheduler = Scheduler()
    if strategy == "Spread":
        old = [node(f"old-{i:02}", cpu="4", memory="8Gi") for i in range(4)]
        services = [service(f"svc-{k}", 3) for k in range(3)]
        new = [node(f"new-{i:02}", cpu=str(2 + i), memory="8Gi") for i in range(3)]
        return services, grown(placed(old, services, scheduler), new)
    return fragmented()


@pytest.mark.parametrize("strategy", ["Spread", "BinPack"])
def test_each_moves_figures_are_those_of_the_cluster_after_it(strategy: str) -> None:
    """The planner updates its figures move by move; after each move they are what a direct
    count of the cluster with the moves so far made says (stddev, packing, nodes in use)."""
    workloads, ledger = spread_out(strategy)
    plan = Rebalancer(Scheduler(), max_moves=12).plan(workloads, ledger, now=NOW)
    assert plan.moves
    so_far = ledger.copy()
    for m in plan.moves:
        assert m.before.stddev == pytest.approx(stddev_of(so_far))
        assert m.before.packing == pytest.approx(packing_of(so_far))
        so_far.load(m.workload, moved(so_far.bookings(m.workload), m))
        assert m.after.stddev == pytest.approx(stddev_of(so_far))
        assert m.after.packing == pytest.approx(packing_of(so_far))
        assert m.after.nodes_in_use == nodes_in_use(so_far)
        n = pool_size(so_far)
        assert m.after.dispersion == pytest.approx(n * stddev_of(so_far) ** 2)


def test_a_workload_being_resized_waits_for_the_scheduler() -> None:
    # web was placed at 500m; its spec now asks 1 cpu: the scheduler has a decision to make
    # (every replica booked at the new size) before anything moves, even with new empty nodes.
    scheduler = Scheduler()
    old = [node(f"old-{i}") for i in range(2)]
    ledger = grown(placed(old, [service("web", 4)], scheduler), [node("new-0"), node("new-1")])
    assert Rebalancer(scheduler).plan([service("web", 4)], ledger, now=NOW).moves != ()
    resized = service("web", 4, cpu="1")
    assert Rebalancer(scheduler).plan([resized], ledger, now=NOW).moves == ()


def binpack_job(name: str, cpu: str, memory: str) -> Workload:
    return workload(
        name,
        kind="Job",
        strategy="BinPack",
        rebalance="Allowed",
        resources={"cpu": cpu, "memory": memory},
    )


def test_binpack_moves_a_replica_to_the_fullest_node_that_takes_it() -> None:
    """Two targets both free the replica's node (nodes in use 3 -> 2): the tie on the first
    part of BinPack's objective goes to the higher packing, the fuller node. a (3 of 4 cpus
    booked) ends full, b (1 of 4) half full: a's utilisation squared is the larger, so the
    replica goes to a, in one move (not to b and on to a in a second)."""
    mine, big = binpack_job("mine", "1", "2Gi"), binpack_job("big", "3", "6Gi")
    small = binpack_job("small", "1", "2Gi")
    ledger = Ledger(NodeTable([node(n, cpu="4", memory="8Gi") for n in ("a", "b", "c")]))
    ledger.load(big.key, [Booking("a", f"{big.key}-0", 3000, 6 * GiB)])
    ledger.load(small.key, [Booking("b", f"{small.key}-0", 1000, 2 * GiB)])
    ledger.load(mine.key, [Booking("c", f"{mine.key}-0", 1000, 2 * GiB)])
    plan = Rebalancer(Scheduler()).plan([mine], ledger, now=NOW)  # only mine may move
    assert [(m.source, m.target) for m in plan.moves] == [("c", "a")]
    assert (plan.before.nodes_in_use, plan.after.nodes_in_use) == (3, 2)
    # what the dry run prints for the move: BinPack's parts; packing 0.75^2 + 2 x 0.25^2
    # before, 1^2 + 0.25^2 after
    (move,) = plan.moves
    assert (move.before.as_dict(), move.after.as_dict()) == (
        {"nodesInUse": 3, "packing": 0.6875},
        {"nodesInUse": 2, "packing": 1.0625},
    )


@pytest.mark.parametrize(("min_gain", "moves"), [(0.25, [("b", "a")]), (0.5, [])])
def test_a_binpack_move_gaining_exactly_the_minimum_is_made(
    min_gain: float, moves: list[tuple[str, str]]
) -> None:
    """Utilisation on 4-cpu 8Gi nodes, cpu and memory in step: a holds 3/4, b 1/4 plus the
    replica's 1/4. Moving it b -> a keeps two nodes in use and takes packing (the sum of
    utilisations squared) from 0.75^2 + 0.5^2 = 0.8125 to 1^2 + 0.25^2 = 1.0625: a gain of
    0.25, exactly (quarters are exact in binary). "At least min_gain": made at 0.25, not at
    0.5."""
    mine, big = binpack_job("mine", "1", "2Gi"), binpack_job("big", "3", "6Gi")
    small = binpack_job("small", "1", "2Gi")
    ledger = Ledger(NodeTable([node(n, cpu="4", memory="8Gi") for n in ("a", "b")]))
    ledger.load(big.key, [Booking("a", f"{big.key}-0", 3000, 6 * GiB)])
    ledger.load(small.key, [Booking("b", f"{small.key}-0", 1000, 2 * GiB)])
    ledger.load(mine.key, [Booking("b", f"{mine.key}-0", 1000, 2 * GiB)])
    plan = Rebalancer(Scheduler(), min_gain=min_gain).plan([mine], ledger, now=NOW)
    assert [(m.source, m.target) for m in plan.moves] == moves
    if moves:
        assert (plan.moves[0].before.packing, plan.moves[0].after.packing) == (0.8125, 1.0625)


def test_a_moved_replica_holds_the_targets_score() -> None:
    """``moved`` books the replica on its target at the score the move recorded (the score
    status shows for that placement); the other bookings are left as they are."""
    jobs, ledger = fragmented()
    move = replace(Rebalancer(Scheduler()).plan(jobs, ledger, now=NOW).moves[0], score=77)
    other = Booking("n-7", "other-0", 500, GiB, 5)
    mine = next(b for b in ledger.bookings(move.workload) if b.alloc_id == move.alloc_id)
    assert moved([mine, other], move) == (
        Booking(move.target, move.alloc_id, mine.cpu, mine.memory, 77),
        other,
    )


def test_check_rejects_a_move_to_a_node_that_left() -> None:
    """The target named by a planned move is gone from the cluster when the move is about
    to be made: the move no longer holds (None), even though other new nodes would take the
    replica; check never swaps in another target."""
    scheduler = Scheduler()
    web = service("web", 2, cpu="1")
    ledger = grown(
        placed([node("old-0", cpu="2", memory="4Gi")], [web], scheduler),
        [node(f"new-{i}", cpu="2", memory="4Gi") for i in range(2)],
    )
    rebalancer = Rebalancer(scheduler)
    move = rebalancer.plan([web], ledger, now=NOW).moves[0]
    assert rebalancer.check(move, web, ledger, now=NOW) == move
    assert rebalancer.check(replace(move, target="new-9"), web, ledger, now=NOW) is None


def test_a_spread_move_gaining_exactly_the_minimum_is_made() -> None:
    """Spread's objective after the skew is the dispersion (the sum of squared deviations of
    node utilisation from the mean). a holds 2/4 plus the replica's 1/4, b 1/4 (4-cpu 8Gi
    nodes, cpu and memory in step): utilisations 0.75 and 0.25, mean 0.5, dispersion
    0.0625 + 0.0625 = 0.125; moving the replica to b evens them at 0.5, dispersion 0. A gain
    of 0.125 exactly: made at min_gain 0.125, not at 0.25."""
    mine = service("mine", 1, cpu="1", memory="2Gi")
    other = binpack_job("other", "1", "2Gi")
    ledger = Ledger(NodeTable([node(n, cpu="4", memory="8Gi") for n in ("a", "b")]))
    ledger.load(
        other.key,
        [Booking(n, f"{other.key}-{i}", 1000, 2 * GiB) for i, n in enumerate(("a", "a", "b"))],
    )
    ledger.load(mine.key, [Booking("a", f"{mine.key}-0", 1000, 2 * GiB)])
    assert stddev_of(ledger) == 0.25  # dispersion = n x variance = 2 x 0.0625
    for min_gain, moves in ((0.125, [("a", "b")]), (0.25, [])):
        plan = Rebalancer(Scheduler(), min_gain=min_gain).plan([mine], ledger, now=NOW)
        assert [(m.source, m.target) for m in plan.moves] == moves, min_gain
        assert [(m.before.dispersion, m.after.dispersion) for m in plan.moves] == [
            (0.125, 0.0) for _ in moves
        ]


def test_nodes_without_allocatable_hold_no_utilisation_to_spread() -> None:
    """A Workload that requests nothing, on Nodes that report no allocatable (kwok's bare
    nodes): no node is in the utilisation pool, so there is no spread of utilisation to
    improve; the planner says so (nothing to move, stddev 0) instead of failing."""
    ledger = Ledger(NodeTable([node(f"bare-{i}", cpu="0", memory="0") for i in range(2)]))
    idle = workload("idle", kind="Service", count=1, rebalance="Allowed")
    ledger.load(idle.key, [Booking("bare-0", f"{idle.key}-0", 0, 0)])
    plan = Rebalancer(Scheduler()).plan([idle], ledger, now=NOW)
    assert plan.moves == ()
    assert (plan.before.utilisation_stddev, plan.before.nodes_in_use) == (0.0, 1)


def test_a_spread_workload_on_nodes_without_allocatable_still_evens_its_zones() -> None:
    """Utilisation has no pool on bare Nodes, but topology skew still counts: two replicas
    that need nothing, both in zone a, and an empty node in zone b: one moves to b (skew
    2 -> 0), the utilisation parts of the objective staying 0 on every target."""
    zone = "topology.kubernetes.io/zone"
    bare = [node(f"{z}-0", cpu="0", memory="0", labels={zone: z}) for z in ("a", "b")]
    bare.append(node("a-1", cpu="0", memory="0", labels={zone: "a"}))
    spread = [{"topologyKey": zone, "maxSkew": 1, "whenUnsatisfiable": "ScheduleAnyway"}]
    idle = workload("idle", kind="Service", count=2, rebalance="Allowed", topologySpread=spread)
    ledger = Ledger(NodeTable(bare))
    ledger.load(idle.key, [Booking(f"a-{i}", f"{idle.key}-{i}", 0, 0) for i in range(2)])
    plan = Rebalancer(Scheduler()).plan([idle], ledger, now=NOW)
    assert [(m.target, m.before.skew, m.after.skew) for m in plan.moves] == [("b-0", 2, 0)]
    assert (plan.moves[0].after.stddev, plan.moves[0].after.dispersion) == (0.0, 0.0)


def test_the_plans_skew_figures_add_up_every_spread_workload() -> None:
    """The plan's skew is the sum over the Workloads that have topologySpread, and
    over_max_skew how many of them are over; a Workload without topologySpread, or one whose
    spec the scheduler refuses (an ill-typed constraint: Invalid), counts nothing and does
    not stop the count of those after it. web and web-2 are 3/3/0 over zones a, b, c."""
    scheduler = Scheduler()
    zone = "topology.kubernetes.io/zone"
    a_b = [node(f"{z}-{i}", labels={zone: z}) for z in ("a", "b") for i in range(3)]
    spread = [{"topologyKey": zone, "maxSkew": 1, "whenUnsatisfiable": "ScheduleAnyway"}]
    webs = [service(name, 6, topologySpread=spread) for name in ("web", "web-2")]
    ledger = grown(
        placed(a_b, webs, scheduler), [node(f"c-{i}", labels={zone: "c"}) for i in range(3)]
    )
    invalid = service("a-invalid", 1, topologySpread=spread, constraints=['node.cpu == "x"'])
    plain = service("b-plain", 1)
    plan = Rebalancer(scheduler, max_moves=0).plan([*webs, plain, invalid], ledger, now=NOW)
    assert (plan.before.skew, plan.before.over_max_skew) == (3 + 3, 2)


def test_a_plan_that_spends_its_budget_exactly_is_complete() -> None:
    """A plan is complete when nothing was left to improve: a budget spent to the last move on a
    plan that needed exactly that many is complete; one move less is not."""
    jobs, ledger = fragmented()
    full = Rebalancer(Scheduler(), max_moves=50).plan(jobs, ledger, now=NOW)
    assert full.complete and len(full.moves) < 50
    exact = Rebalancer(Scheduler(), max_moves=len(full.moves)).plan(jobs, ledger, now=NOW)
    short = Rebalancer(Scheduler(), max_moves=len(full.moves) - 1).plan(jobs, ledger, now=NOW)
    assert (exact.moves, exact.complete) == (full.moves, True)
    assert (len(short.moves), short.complete) == (len(full.moves) - 1, False)


def test_the_utilisation_pool_is_the_eligible_nodes_with_any_cpu_or_memory() -> None:
    """A node counts in the utilisation spread when it has some cpu or some memory, however
    little (1m, 1 byte): full (half booked), cpu-only and memory-only nodes do, a bare one
    does not. Utilisations 0.5, 0, 0: mean 1/6, variance 0.25/3 - 1/36 = 1/18."""
    nodes = [
        node("full", cpu="4", memory="8Gi"),
        node("cpu-only", cpu="1m", memory="0"),
        node("memory-only", cpu="0", memory="1"),
        node("bare", cpu="0", memory="0"),
    ]
    ledger = Ledger(NodeTable(nodes))
    ledger.load("ns/x", [Booking("full", "ns/x-0", 2000, 4 * GiB)])
    plan = Rebalancer(Scheduler()).plan([], ledger, now=NOW)
    assert plan.before.utilisation_stddev == pytest.approx((1 / 18) ** 0.5)
