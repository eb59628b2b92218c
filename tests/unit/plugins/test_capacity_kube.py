"""CapacityScore against kube-scheduler's NodeResourcesFit scoring strategies, v1.36.3.

Expected scores are computed by hand from kube's Go code, never from orca's:

- ``pkg/scheduler/framework/plugins/noderesources/least_allocated.go``: ``leastRequestedScore``
  = ``(capacity - requested) * 100 / capacity`` (Go integer division), 0 when
  ``requested > capacity`` or ``capacity == 0``; ``leastResourceScorer`` = the weighted sum
  over the resources with non-zero allocatable divided by their weights' sum (0 if none);
- ``most_allocated.go``: ``mostRequestedScore`` = ``min(requested, capacity) * 100 /
  capacity``; ``mostResourceScorer`` likewise;
- ``resource_allocation.go``: ``calculateNodeAllocatableRequest`` leaves a resource whose
  node allocatable is 0 out of the score; ``requested`` = what the node holds + the Pod's
  request. Default resources: cpu and memory, weight 1 each.

Several cases are kube's own test tables (``least_allocated_test.go``,
``most_allocated_test.go``), in the same units (cpu "10000" is 10,000 cores there and here;
memory "20000" is 20,000 bytes). The property tests check the vectorised score against an
oracle transcribed from those Go functions (this module imports nothing it checks for it).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.api.models import Strategy
from controller.scheduler.ledger import Booking
from controller.scheduler.plugins.capacity import (
    CapacityScore,
    capacity_score,
    capacity_score_of,
    least_requested_score,
    most_requested_score,
)
from controller.scheduler.scheduler import Scheduler
from tests.support.factories import NOW, cycle_for, ledger_for, node, workload
from tests.support.properties import examples

GiB = 1 << 30


# -- the oracle: kube's Go functions, transcribed --------------------------------------------


def go_div(a: int, b: int) -> int:
    """Go's integer division truncates toward zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def kube_least_requested_score(requested: int, capacity: int) -> int:
    if capacity == 0:
        return 0
    if requested > capacity:
        return 0
    return go_div((capacity - requested) * 100, capacity)


def kube_most_requested_score(requested: int, capacity: int) -> int:
    if capacity == 0:
        return 0
    if requested > capacity:
        requested = capacity
    return go_div(requested * 100, capacity)


def kube_scorer(strategy: str, requested: list[int], allocatable: list[int]) -> int:
    """``leastResourceScorer`` / ``mostResourceScorer`` with weights 1."""
    score = kube_least_requested_score if strategy == "Spread" else kube_most_requested_score
    node_score = weight_sum = 0
    for r, a in zip(requested, allocatable, strict=True):
        if a == 0:
            continue
        node_score += score(r, a)
        weight_sum += 1
    return 0 if weight_sum == 0 else go_div(node_score, weight_sum)


# -- table-driven cases ----------------------------------------------------------------------


def scores(
    strategy: str,
    nodes: list[dict[str, Any]],
    request: dict[str, str],
    held: dict[str, tuple[int, int]] | None = None,
) -> dict[str, int]:
    """The plugin's score per node for a Job of ``request`` (``held``: cpu millicores and
    memory bytes already booked per node)."""
    # Not ``n.pop("name")``: the table's dicts are shared by every run of the case.
    ledger = ledger_for(*(node(**n) for n in nodes))
    for i, (name, (cpu, memory)) in enumerate((held or {}).items()):
        ledger.load(f"other/held-{i}", [Booking(name, f"other/held-{i}-0", cpu, memory)])
    cycle = cycle_for(workload(kind="Job", strategy=strategy, resources=request), ledger)
    part = CapacityScore().score(cycle, np.arange(len(ledger.table)))
    return dict(zip(ledger.table.hostnames, part.tolist(), strict=True))


CASES = [
    pytest.param(
        "BinPack",
        [{"name": "node-a", "cpu": "3", "memory": "10Gi"}],
        {"cpu": "1", "memory": "1Gi"},
        None,
        # cpu 1000*100/3000 = 33, memory 1Gi*100/10Gi = 10, (33+10)/2 = 21
        {"node-a": 21},
        id="issue-23-node-a-mostallocated",
    ),
    pytest.param(
        "BinPack",
        [{"name": "node-b", "cpu": "100", "memory": "100Gi"}],
        {"cpu": "1", "memory": "1Gi"},
        {"node-b": (33_000, 9 * GiB)},
        # cpu 34000*100/100000 = 34, memory 10Gi*100/100Gi = 10, (34+10)/2 = 22
        {"node-b": 22},
        id="issue-23-node-b-mostallocated",
    ),
    pytest.param(
        "Spread",
        [
            {"name": "node1", "cpu": "10000", "memory": "20000"},
            {"name": "node2", "cpu": "10000", "memory": "20000"},
        ],
        {"cpu": "3000", "memory": "5000"},
        {"node1": (3000 * 1000, 0), "node2": (3000 * 1000, 5000)},
        # least_allocated_test.go "resources requested, pods scheduled with resources"
        # node1: cpu (10000-6000)*100/10000 = 40, memory (20000-5000)*100/20000 = 75 -> 57
        # node2: cpu 40, memory (20000-10000)*100/20000 = 50 -> 45
        {"node1": 57, "node2": 45},
        id="kube-least-pods-scheduled-with-resources",
    ),
    pytest.param(
        "Spread",
        [
            {"name": "node1", "cpu": "10000", "memory": "20000"},
            {"name": "node2", "cpu": "10000", "memory": "50000"},
        ],
        {"cpu": "3000", "memory": "5000"},
        {"node1": (3000 * 1000, 0), "node2": (3000 * 1000, 5000)},
        # least_allocated_test.go "..., differently sized nodes": node2 memory
        # (50000-10000)*100/50000 = 80 -> (40+80)/2 = 60
        {"node1": 57, "node2": 60},
        id="kube-least-differently-sized-nodes",
    ),
    pytest.param(
        "BinPack",
        [
            {"name": "node1", "cpu": "10000", "memory": "20000"},
            {"name": "node2", "cpu": "10000", "memory": "20000"},
        ],
        {"cpu": "3000", "memory": "5000"},
        {"node1": (3000 * 1000, 0), "node2": (3000 * 1000, 5000)},
        # most_allocated_test.go "resources requested, pods scheduled with resources"
        # node1: cpu 6000*100/10000 = 60, memory 5000*100/20000 = 25 -> 42
        # node2: cpu 60, memory 10000*100/20000 = 50 -> 55
        {"node1": 42, "node2": 55},
        id="kube-most-pods-scheduled-with-resources",
    ),
    pytest.param(
        "BinPack",
        [
            {"name": "node1", "cpu": "5000", "memory": "10000"},
            {"name": "node2", "cpu": "10000", "memory": "9000"},
        ],
        {"cpu": "5000", "memory": "9000"},
        None,
        # most_allocated_test.go "resources requested equal node capacity"
        # node1: cpu 100, memory 90 -> 95; node2: cpu 50, memory 100 -> 75
        {"node1": 95, "node2": 75},
        id="kube-most-requested-equals-capacity",
    ),
    pytest.param(
        "BinPack",
        [{"name": "no-cpu", "cpu": "0", "memory": "8Gi"}],
        {"memory": "2Gi"},
        None,
        # cpu allocatable 0: left out; memory 2Gi*100/8Gi = 25 -> 25/1 = 25
        {"no-cpu": 25},
        id="zero-cpu-allocatable-left-out-most",
    ),
    pytest.param(
        "Spread",
        [{"name": "no-cpu", "cpu": "0", "memory": "8Gi"}],
        {"memory": "2Gi"},
        None,
        # cpu left out; memory (8Gi-2Gi)*100/8Gi = 75 -> 75
        {"no-cpu": 75},
        id="zero-cpu-allocatable-left-out-least",
    ),
    pytest.param(
        "BinPack",
        [{"name": "empty", "cpu": "0", "memory": "0"}],
        {},
        None,
        # nothing allocatable: weightSum 0 -> 0 (least_allocated_test.go "zero node resources")
        {"empty": 0},
        id="zero-node-resources-most",
    ),
    pytest.param(
        "Spread",
        [{"name": "empty", "cpu": "0", "memory": "0"}],
        {},
        None,
        {"empty": 0},
        id="zero-node-resources-least",
    ),
    pytest.param(
        "Spread",
        [{"name": "node1", "cpu": "4000", "memory": "10000"}],
        {"cpu": "3000"},
        {"node1": (3000 * 1000, 0)},
        # least_allocated_test.go "requested resources exceed node capacity": cpu 6000 > 4000
        # -> 0; memory (10000-0)*100/10000 = 100 -> 50
        {"node1": 50},
        id="kube-least-over-request",
    ),
    pytest.param(
        "BinPack",
        [{"name": "node1", "cpu": "4000", "memory": "10000"}],
        {"cpu": "3000"},
        {"node1": (3000 * 1000, 5000)},
        # mostRequestedScore: cpu 6000 > 4000 counts as 4000 -> 100; memory 50 -> 75
        {"node1": 75},
        id="most-over-request-counts-as-capacity",
    ),
    pytest.param(
        "BinPack",
        [{"name": "n", "cpu": "3", "memory": "3"}],
        {"cpu": "2", "memory": "2"},
        None,
        # 2000*100/3000 = 66 (not 67: rounded down), 2*100/3 = 66 -> 66
        {"n": 66},
        id="most-rounds-the-used-share-down",
    ),
]


@pytest.mark.parametrize(("strategy", "nodes", "asks", "held", "expected"), CASES)
def test_capacity_score_is_kubes(
    strategy: str,
    nodes: list[dict[str, Any]],
    asks: dict[str, str],
    held: dict[str, tuple[int, int]] | None,
    expected: dict[str, int],
) -> None:
    assert scores(strategy, nodes, asks, held) == expected


def test_issue_23_binpack_picks_node_b_as_kube_does() -> None:
    """node-a 3 cpu / 10Gi; node-b 100 cpu / 100Gi with 33 cpu and 9Gi used; a BinPack Job
    of 1 cpu, 1Gi. MostAllocated: a = (33 + 10) / 2 = 21, b = (34 + 10) / 2 = 22: node-b."""
    ledger = ledger_for(
        node("node-a", cpu="3", memory="10Gi"), node("node-b", cpu="100", memory="100Gi")
    )
    ledger.load("other/big", [Booking("node-b", "other/big-0", 33_000, 9 * GiB)])
    job = workload(kind="Job", strategy="BinPack", resources={"cpu": "1", "memory": "1Gi"})
    decision = Scheduler().schedule(job, ledger, now=NOW)
    assert [(b.node, b.score) for b in decision.bookings] == [("node-b", 22)]


# -- properties: the formula over random allocatable and usage -------------------------------

_ALLOCATABLE = st.one_of(st.just(0), st.integers(min_value=1, max_value=2**53))
_USED = st.integers(min_value=0, max_value=2**53)


@settings(max_examples=examples(600), deadline=None)
@given(
    strategy=st.sampled_from(["Spread", "BinPack"]),
    nodes=st.lists(st.tuples(_ALLOCATABLE, _ALLOCATABLE, _USED, _USED), min_size=1, max_size=20),
)
def test_vector_and_scalar_scores_are_kubes_formula(
    strategy: str, nodes: list[tuple[int, int, int, int]]
) -> None:
    """Any allocatable (0 included, up to 2^53) and any usage after placing (over-request
    included): both implementations give the oracle's integer."""
    cpu, memory, used_cpu, used_memory = (
        np.array(c, dtype=np.int64) for c in zip(*nodes, strict=True)
    )
    free_cpu_after, free_memory_after = cpu - used_cpu, memory - used_memory
    expected = [
        kube_scorer(strategy, [uc, um], [c, m])
        for c, m, uc, um in zip(
            cpu.tolist(), memory.tolist(), used_cpu.tolist(), used_memory.tolist(), strict=True
        )
    ]
    s = Strategy(strategy)
    vector = capacity_score(s, cpu, memory, free_cpu_after, free_memory_after)
    assert vector.tolist() == expected
    one = [
        capacity_score_of(s, c, m, fc, fm)
        for c, m, fc, fm in zip(
            cpu.tolist(),
            memory.tolist(),
            free_cpu_after.tolist(),
            free_memory_after.tolist(),
            strict=True,
        )
    ]
    assert one == expected


@settings(max_examples=examples(300), deadline=None)
@given(
    allocatable=st.integers(min_value=1, max_value=2**53),
    used=st.integers(min_value=0, max_value=2**53),
)
def test_least_and_most_allocated_are_bounded_and_complementary(
    allocatable: int, used: int
) -> None:
    """Within capacity, LeastAllocated + MostAllocated of one resource is 99 or 100 (each
    rounds down); over capacity, Least is 0 and Most is 100 (kube's clamps)."""
    least = capacity_score_of(Strategy.SPREAD, allocatable, 0, allocatable - used, 0)
    most = capacity_score_of(Strategy.BINPACK, allocatable, 0, allocatable - used, 0)
    assert 0 <= least <= 100 and 0 <= most <= 100
    if used > allocatable:
        assert (least, most) == (0, 100)
    else:
        assert least + most in (99, 100)
        assert least + most == 100 or (used * 100) % allocatable != 0


@pytest.mark.parametrize("requested", [0, 1, 2**40])
def test_a_resource_without_allocatable_scores_0(requested: int) -> None:
    """least_allocated.go / most_allocated.go: ``if capacity == 0 { return 0 }``."""
    assert least_requested_score(requested, 0) == 0
    assert most_requested_score(requested, 0) == 0
