"""Score plugins: CEL affinity, Workload-name affinity, capacity (also in test_scheduler)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.api.models import Strategy
from controller.scheduler.celexpr import CelEvaluator, CompiledExpression
from controller.scheduler.framework import CycleState
from controller.scheduler.ledger import Booking, Ledger
from controller.scheduler.nodes import BoolArray, IntArray, NodeTable
from controller.scheduler.plugins.capacity import CapacityScore, capacity_score, capacity_score_of
from controller.scheduler.plugins.cel_affinity import CelAffinity
from controller.scheduler.plugins.name_affinity import NameAffinity
from controller.scheduler.scheduler import Scheduler
from tests.support.factories import NOW, GiB, cycle_for, ledger_for, node, workload
from tests.support.properties import examples


def test_cel_affinity_sums_the_weights_of_rules_that_hold() -> None:
    ledger = ledger_for(node("a", tags=("gpu",)), node("b", tags=("gpu", "ssd")), node("c"))
    rules = [
        {"target": '"gpu" in node.tags', "weight": 30},
        {"target": '"ssd" in node.tags', "weight": -10},
        {"target": "redis", "weight": 100},  # a Workload name: NameAffinity's
    ]
    cycle = cycle_for(workload(kind="Job", affinity=rules), ledger)
    part = CelAffinity(Scheduler().cel).score(cycle, np.arange(3))
    assert part is not None and part.tolist() == [30, 20, 0]
    plain = cycle_for(workload(kind="Job"), ledger)
    assert CelAffinity(Scheduler().cel).score(plain, np.arange(3)) is None  # adds nothing


def test_cel_affinity_prefilter_names_the_rule() -> None:
    w = workload(
        kind="Job", affinity=[{"target": "redis", "weight": 1}, {"target": "node.(", "weight": 1}]
    )
    (error,) = CelAffinity(Scheduler().cel).pre_filter(Scheduler().snapshot(w, ledger_for(), NOW))
    assert error.startswith("spec.affinity[1].target 'node.('")


def test_name_affinity_adds_weight_per_replica_of_the_target() -> None:
    ledger = ledger_for(node("a", cpu="8"), node("b", cpu="8"), node("c", cpu="8"))
    redis = workload(name="redis", kind="Service", count=3)
    ledger.load(redis.key, Scheduler().schedule(redis, ledger, now=NOW).bookings)
    per_node = ledger.replicas_per_node(redis.key).tolist()
    assert sorted(per_node) == [1, 1, 1]
    ledger.load(
        redis.key,
        [*ledger.bookings(redis.key)[:2], ledger.bookings(redis.key)[0]],  # two on one node
    )
    expected = [25 * n for n in ledger.replicas_per_node(redis.key).tolist()]
    cycle = cycle_for(workload(kind="Job", affinity=[{"target": "redis", "weight": 25}]), ledger)
    part = NameAffinity().score(cycle, np.arange(3))
    assert part is not None and part.tolist() == expected
    assert sorted(expected) == [0, 25, 50]


_QUANTITY = st.integers(min_value=-(2**53), max_value=2**53)
_ALLOCATABLE = st.integers(min_value=0, max_value=2**53)


@settings(max_examples=examples(500), deadline=None)
@given(
    strategy=st.sampled_from(list(Strategy)),
    nodes=st.lists(st.tuples(_ALLOCATABLE, _ALLOCATABLE, _QUANTITY, _QUANTITY), min_size=1),
)
def test_one_node_scores_as_the_vector_formula_scores_it(
    strategy: Strategy, nodes: list[tuple[int, int, int, int]]
) -> None:
    """CapacityScore recomputes the node or two that changed one by one in Python: the
    integer must be the vectorised formula's, over-commit, zero allocatable and 2^53 included
    (kube's formula itself: tests/unit/plugins/test_capacity_kube.py)."""
    cpu, memory, free_cpu, free_memory = (
        np.array(c, dtype=np.int64) for c in zip(*nodes, strict=True)
    )
    vector = capacity_score(strategy, cpu, memory, free_cpu, free_memory)
    one = [
        capacity_score_of(strategy, int(c), int(m), int(fc), int(fm))
        for c, m, fc, fm in zip(cpu, memory, free_cpu, free_memory, strict=True)
    ]
    assert vector.tolist() == one


def test_kept_scores_follow_the_free_capacity_of_every_cycle() -> None:
    """Scores kept between cycles are recomputed where free capacity moved, by one node or by
    many, and equal the formula over the candidates each time."""
    ledger = ledger_for(*(node(f"n{i}", cpu="4", memory="8Gi") for i in range(40)))
    plugin = CapacityScore()
    rng = np.random.default_rng(3)
    for strategy in ("Spread", "BinPack", "Spread"):
        cycle = cycle_for(workload(kind="Job", strategy=strategy), ledger)
        table = cycle.table
        for moved in (0, 1, 2, 20, 40, 1):
            nodes = rng.choice(len(table), size=moved, replace=False).tolist()
            cpus = rng.integers(0, 5000, size=moved).tolist()
            memories = rng.integers(0, 2**33, size=moved).tolist()
            for i, cpu, memory in zip(nodes, cpus, memories, strict=True):
                cycle.take(i, cpu, memory)  # the only writers of a cycle's free capacity
            candidates = np.flatnonzero(rng.random(len(table)) < 0.7)
            expected = capacity_score(
                cycle.spec.strategy,
                table.cpu[candidates],
                table.memory[candidates],
                cycle.free_cpu[candidates] - cycle.cpu,
                cycle.free_memory[candidates] - cycle.memory,
            )
            assert plugin.score(cycle, candidates).tolist() == expected.tolist()


class CountingCel(CelEvaluator):
    """Counts the passes over the table (``truth``) per expression."""

    def __init__(self) -> None:
        super().__init__()
        self.passes: Counter[str] = Counter()

    def truth(
        self, expr: CompiledExpression, table: NodeTable, free_cpu: IntArray, free_memory: IntArray
    ) -> tuple[BoolArray, BoolArray, BoolArray]:
        self.passes[expr.source] += 1
        return super().truth(expr, table, free_cpu, free_memory)


def test_cel_affinity_is_summed_once_per_cycle_unless_it_reads_free_capacity() -> None:
    """A Service's replicas are scored one by one: rules that read only what a node is
    are evaluated over the table once per cycle, one that reads ``node.freeCpu`` again per
    replica (each replica placed changes the free capacity it reads)."""
    ledger = ledger_for(node("a", tags=("gpu",)), node("b"), node("c"))
    cel = CountingCel()
    scheduler = Scheduler(cel=cel)
    fixed = [
        {"target": '"gpu" in node.tags', "weight": 10},
        {"target": "node.cpu > 0", "weight": 5},
    ]
    decision = scheduler.schedule(
        workload(kind="Service", count=3, affinity=fixed), ledger, now=NOW
    )
    assert decision.placed == 3
    assert cel.passes == {'"gpu" in node.tags': 1, "node.cpu > 0": 1}
    cel.passes.clear()
    free = [{"target": "node.freeCpu > 3500", "weight": 10}]
    scheduler.schedule(workload(kind="Service", count=3, affinity=free), ledger, now=NOW)
    assert cel.passes == {"node.freeCpu > 3500": 3}


def test_score_parts_are_integers() -> None:
    """kube's scores are int64; a part in floats would make the total (and the score written
    to status) a float."""
    ledger = ledger_for(node("a", cpu="8", tags=("gpu",)), node("b", cpu="8"))
    redis = workload(name="redis", kind="Service", count=1)
    ledger.load(redis.key, Scheduler().schedule(redis, ledger, now=NOW).bookings)
    rules = [{"target": '"gpu" in node.tags', "weight": 30}, {"target": "redis", "weight": 25}]
    cycle = cycle_for(workload(kind="Job", affinity=rules), ledger)
    for plugin in (CelAffinity(Scheduler().cel), NameAffinity(), CapacityScore()):
        part = plugin.score(cycle, np.arange(2))
        assert part is not None and part.dtype == np.int64, plugin.name


def test_name_affinity_reads_the_ledger_once_per_cycle(monkeypatch: pytest.MonkeyPatch) -> None:
    """The target's replicas do not change while one Workload's cycle places its replicas:
    counted once per cycle, not once per replica scored."""
    ledger = ledger_for(node("a"), node("b"), node("c"))
    redis = workload(name="redis", kind="Service", count=1)
    ledger.load(redis.key, Scheduler().schedule(redis, ledger, now=NOW).bookings)
    reads: list[str] = []
    real = Ledger.replicas_per_node

    def counting(self: Ledger, key: str) -> IntArray:
        reads.append(key)
        return real(self, key)

    monkeypatch.setattr(Ledger, "replicas_per_node", counting)
    web = workload(kind="Service", count=3, affinity=[{"target": "redis", "weight": 25}])
    assert Scheduler().schedule(web, ledger, now=NOW).placed == 3
    assert reads.count(redis.key) == 1


def test_name_affinity_adds_up_the_rules() -> None:
    """Two Workload-name rules: each adds its weight per replica of its target (a negative
    weight pushes away)."""
    ledger = ledger_for(node("a"), node("b"), node("c"))
    ledger.load(
        "shop/redis", [Booking("a", "shop/redis-0", 0, 0), Booking("b", "shop/redis-1", 0, 0)]
    )
    ledger.load(
        "shop/batch", [Booking("b", "shop/batch-0", 0, 0), Booking("b", "shop/batch-1", 0, 0)]
    )
    rules = [{"target": "redis", "weight": 25}, {"target": "batch", "weight": -10}]
    part = NameAffinity().score(
        cycle_for(workload(kind="Job", affinity=rules), ledger), np.arange(3)
    )
    assert part is not None and part.tolist() == [25, 25 - 20, 0]


def test_kept_scores_follow_each_request_and_each_resource_that_moved() -> None:
    """One plugin (the operator keeps one for its lifetime) scores Workloads of different
    strategies and requests on the same free capacity, then after a node's cpu alone, a
    node's memory alone, and many nodes changed: every answer is the formula's for that
    request on that free capacity (kube's formula itself: test_capacity_kube.py)."""
    ledger = ledger_for(*(node(f"n{i:02d}", cpu="4", memory="8Gi") for i in range(12)))
    plugin = CapacityScore()
    everyone = np.arange(12)
    asks = [
        ("Spread", {"cpu": "1", "memory": "2Gi"}),
        ("BinPack", {"cpu": "1", "memory": "2Gi"}),
        ("Spread", {"cpu": "2"}),
        ("Spread", {"cpu": "1", "memory": "2Gi"}),
    ]

    def check(cycle: CycleState) -> None:
        expected = capacity_score(
            cycle.spec.strategy,
            cycle.table.cpu,
            cycle.table.memory,
            cycle.free_cpu - cycle.cpu,
            cycle.free_memory - cycle.memory,
        )
        assert plugin.score(cycle, everyone).tolist() == expected.tolist(), cycle.spec

    cycles = [
        cycle_for(workload(kind="Job", strategy=strategy, resources=resources), ledger)
        for strategy, resources in asks
    ]
    for cycle in cycles:  # one after the other on the same free capacity
        check(cycle)
    for cycle in cycles:
        cycle.take(0, 1000, 0)  # a node's cpu alone
        check(cycle)
        cycle.take(1, 0, 2 * GiB)  # a node's memory alone
        check(cycle)
        for i in range(2, 12):  # more nodes than are redone one by one
            cycle.take(i, 500, GiB)
        check(cycle)


def test_kept_scores_follow_the_ledger_between_cycles(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plugin asks the ledger which rows changed since it kept a request's scores
    (``Ledger.rows_changed``): after other Workloads are booked, moved and removed, after
    the journal starts over (``JOURNAL_LIMIT``), after the rows move (``rebind``), on a copy
    of the ledger and back, on a cycle older than the scores and on its clone, every cycle's
    scores are the formula's on its own free capacity."""
    monkeypatch.setattr("controller.scheduler.ledger.JOURNAL_LIMIT", 12)
    nodes = [node(f"n{i:02d}", cpu="4", memory="8Gi") for i in range(12)]
    ledger = ledger_for(*nodes)
    plugin = CapacityScore()
    spec = workload(kind="Job", resources={"cpu": "500m", "memory": "1Gi"})

    def check(cycle: CycleState) -> None:
        everyone = np.arange(len(cycle.table))
        expected = capacity_score(
            cycle.spec.strategy,
            cycle.table.cpu,
            cycle.table.memory,
            cycle.free_cpu - cycle.cpu,
            cycle.free_memory - cycle.memory,
        )
        assert plugin.score(cycle, everyone).tolist() == expected.tolist()

    def book(key: str, *where: tuple[str, int]) -> None:
        ledger.load(key, [Booking(n, f"{key}-{i}", cpu, GiB) for i, (n, cpu) in enumerate(where)])

    first = cycle_for(spec, ledger)
    check(first)
    first.take(3, 500, GiB)
    check(first)
    book("ns/a", ("n01", 1000))
    check(cycle_for(spec, ledger))  # n01 changed in the ledger, n03 only in the first cycle
    book("ns/a", ("n02", 1500), ("n05", 200))  # moved: n01 freed, two others taken
    later = cycle_for(spec, ledger)
    later.take(7, 100, GiB)
    check(later)
    check(first)  # older than the scores: the rows changed since, either way
    check(first.clone())
    for i in range(8):  # past the journal's limit: it starts over
        book(f"ns/b{i}", (f"n{i:02d}", 250), (f"n{i + 1:02d}", 250))
    check(cycle_for(spec, ledger))
    check(cycle_for(spec, ledger.copy()))  # another ledger: every row compared
    check(cycle_for(spec, ledger))
    ledger.remove("ns/a")
    ledger.rebind(NodeTable(nodes[:6] + nodes[7:]))  # n06 gone: the rows move
    check(cycle_for(spec, ledger))
    book("ns/c", ("n09", 3000))
    check(cycle_for(spec, ledger))
