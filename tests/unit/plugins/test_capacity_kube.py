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

Issue 46: those two tables and fit_test.go's ``TestFitScore`` whole, case by case under kube's
names, through ``CapacityScore(resources=...)`` (weights, extended resources:
``resourceAllocationScorer``), each case kube's answer or orca's documented one, or skipped
with its reason; and a property of the weighted score over any resource against
``kube_allocation_score``, transcribed.
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
CPU = 1000  # millicores per core


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


# -- kube's scoring tables, whole: resources with weights, extended resources -----------------
# ``least_allocated_test.go`` (TestLeastAllocatedScoringStrategy), ``most_allocated_test.go``
# (TestMostAllocatedScoringStrategy) and fit_test.go's TestFitScore, case by case with kube's
# names as ids, through ``CapacityScore(resources=...)`` (kube's ``ScoringStrategy.Resources``;
# cpu 1 and memory 1 is the plugin's default path, any other list its weighted one). Units as
# kube's tables write them: cpu "4000" is 4,000 cores, memory "10000" 10,000 bytes, an
# extended resource a count. A Pod's request is the sum of its containers' (``Req`` adds one);
# each existing Pod is one booking. kube scores with ``NonZeroRequested``, whose defaults
# (100m, 200MB) apply only to a container without a request: every case below but one writes
# its requests out (``"memory": "0"`` included), so they do not arise; the one that relies on
# them is translated with orca's answer (it scores requests as written).

XYZ = "abc.com/xyz"  # util_test.go's extendedRes
KUBE_DEFAULT = (("cpu", 1), ("memory", 1))  # util_test.go's defaultResources
EXTENDED_SET = (("cpu", 1), ("memory", 1), (XYZ, 1))  # extendedResourceSet

Existing = list[tuple[str, int, int]]
"""kube's existingPods: (node, millicores, bytes), one booking each."""


def weighted_scores(
    strategy: str,
    nodes: dict[str, dict[str, str]],
    request: dict[str, str],
    existing: Existing,
    resources: tuple[tuple[str, int], ...],
) -> dict[str, int]:
    """``CapacityScore(resources)``'s score of every node for a Job asking ``request``, with
    ``existing`` booked (Score runs on every node, as kube's table loop does, fit or not)."""
    infos = [
        node(
            name,
            cpu=capacity.get("cpu", "0"),
            memory=capacity.get("memory", "0"),
            allocatable={k: v for k, v in capacity.items() if k not in ("cpu", "memory")},
        )
        for name, capacity in nodes.items()
    ]
    ledger = ledger_for(*infos)
    for i, (at, millis, memory) in enumerate(existing):
        ledger.load(f"kube/pod-{i}", [Booking(at, f"kube/pod-{i}-0", millis, memory)])
    cycle = cycle_for(workload(kind="Job", strategy=strategy, resources=request), ledger)
    part = CapacityScore(resources=resources).score(cycle, np.arange(len(ledger.table)))
    return dict(zip(ledger.table.hostnames, part.tolist(), strict=True))


def refused(resources: tuple[tuple[str, int], ...], why: str) -> Any:
    """A case whose args kube refuses (``ValidateNodeResourcesFitArgs``: a weight of 1 to
    100) or cannot score with (no resources: an Error status per node); orca refuses both when
    the plugin is made, as kube checks args once at construction."""
    return (None, None, None, why, resources, None)


def kube_skip(name: str, reason: str) -> Any:
    return pytest.param(
        None, None, None, None, None, None, id=name, marks=pytest.mark.skip(reason=reason)
    )


SMALL = {"cpu": "4000", "memory": "10000"}
MID = {"cpu": "6000", "memory": "10000"}
BIG = {"cpu": "10000", "memory": "20000"}
ASKS_3000_5000 = {"cpu": "3000", "memory": "5000"}  # Req(1000, 2000) + Req(2000, 3000)
NO_WEIGHT = "is not a resource to score with a weight of 1 to 100"

LEAST = [
    pytest.param(
        {"node1": SMALL, "node2": SMALL},
        {},
        [],
        # cpu (4000 - 0) * 100 / 4000 = 100, memory 100 -> 100 on both
        {"node1": 100, "node2": 100},
        KUBE_DEFAULT,
        None,
        id="nothing scheduled, nothing requested",
    ),
    pytest.param(
        {"node1": SMALL, "node2": MID},
        ASKS_3000_5000,
        [],
        # node1: cpu (4000 - 3000) * 100 / 4000 = 25, memory (10000 - 5000) * 100 / 10000
        # = 50 -> (25 + 50) / 2 = 37; node2: cpu 3000 * 100 / 6000 = 50, memory 50 -> 50
        {"node1": 37, "node2": 50},
        KUBE_DEFAULT,
        None,
        id="nothing scheduled, resources requested, differently sized nodes",
    ),
    pytest.param(
        *refused((), "needs distinct resources"),
        id="Resources not set, pods scheduled with error",
    ),
    pytest.param(
        {"node1": SMALL, "node2": SMALL},
        {},
        [("node1", 0, 0), ("node1", 0, 0), ("node2", 0, 0), ("node2", 0, 0)],
        # Pods without containers hold nothing: 100 on both
        {"node1": 100, "node2": 100},
        KUBE_DEFAULT,
        None,
        id="no resources requested, pods scheduled",
    ),
    pytest.param(
        {"node1": BIG, "node2": BIG},
        {},
        [
            ("node1", 3000 * CPU, 0),
            ("node1", 3000 * CPU, 0),
            ("node2", 3000 * CPU, 0),
            ("node2", 3000 * CPU, 5000),
        ],
        # node1: cpu (10000 - 6000) * 100 / 10000 = 40, memory 100 -> 70;
        # node2: cpu 40, memory (20000 - 5000) * 100 / 20000 = 75 -> 115 / 2 = 57
        {"node1": 70, "node2": 57},
        KUBE_DEFAULT,
        None,
        id="no resources requested, pods scheduled with resources",
    ),
    pytest.param(
        {"node1": BIG, "node2": BIG},
        ASKS_3000_5000,
        [("node1", 3000 * CPU, 0), ("node2", 3000 * CPU, 5000)],
        # node1: cpu (10000 - 6000) -> 40, memory (20000 - 5000) -> 75: 57;
        # node2: cpu 40, memory (20000 - 10000) -> 50: 45
        {"node1": 57, "node2": 45},
        KUBE_DEFAULT,
        None,
        id="resources requested, pods scheduled with resources",
    ),
    pytest.param(
        {"node1": BIG, "node2": {"cpu": "10000", "memory": "50000"}},
        ASKS_3000_5000,
        [("node1", 3000 * CPU, 0), ("node2", 3000 * CPU, 5000)],
        # node1 57 as above; node2: cpu 40, memory (50000 - 10000) * 100 / 50000 = 80 -> 60
        {"node1": 57, "node2": 60},
        KUBE_DEFAULT,
        None,
        id="resources requested, pods scheduled with resources, differently sized nodes",
    ),
    pytest.param(
        {"node1": SMALL, "node2": SMALL},
        {"cpu": "3000", "memory": "0"},
        [("node1", 3000 * CPU, 0), ("node2", 3000 * CPU, 5000)],
        # cpu 6000 > 4000 -> 0 on both; memory node1 100 -> 50, node2 (10000 - 5000) -> 50
        # -> 25
        {"node1": 50, "node2": 25},
        KUBE_DEFAULT,
        None,
        id="requested resources exceed node capacity",
    ),
    pytest.param(
        {"node1": {}, "node2": {}},
        {},
        [("node1", 3000 * CPU, 0), ("node2", 3000 * CPU, 5000)],
        # no allocatable: every resource left out, weightSum 0 -> 0
        {"node1": 0, "node2": 0},
        KUBE_DEFAULT,
        None,
        id="zero node resources, pods scheduled with resources",
    ),
    pytest.param(
        {"node1": SMALL, "node2": MID},
        ASKS_3000_5000,
        [],
        # node1: cpu 25, memory 50 -> (25 * 1 + 50 * 2) / 3 = 125 / 3 = 41;
        # node2: cpu 50, memory 50 -> 150 / 3 = 50
        {"node1": 41, "node2": 50},
        (("memory", 2), ("cpu", 1)),
        None,
        id="nothing scheduled, resources requested with different weight on CPU and memory, "
        "differently sized nodes",
    ),
    pytest.param(
        *refused((("memory", -1), ("cpu", 1)), NO_WEIGHT), id="resource with negative weight"
    ),
    pytest.param(*refused((("memory", 1), ("cpu", 0)), NO_WEIGHT), id="resource with zero weight"),
    pytest.param(
        *refused((("memory", 1), ("cpu", 101)), NO_WEIGHT),
        id="resource weight larger than MaxNodeScore",
    ),
    pytest.param(
        {"node1": MID, "node2": {**MID, XYZ: "4"}},
        ASKS_3000_5000,
        [],
        # xyz not requested: left out (calculateNodeAllocatableRequest skips a scalar
        # resource the Pod does not ask for); cpu (6000 - 3000) -> 50, memory 50 -> 50 both
        {"node1": 50, "node2": 50},
        EXTENDED_SET,
        None,
        id="bypass extended resource if the pod does not request",
    ),
    pytest.param(
        {"node1": {**MID, XYZ: "4"}, "node2": {**MID, XYZ: "10"}},
        {**ASKS_3000_5000, XYZ: "2"},
        [],
        # cpu 50, memory 50; xyz node1 (4 - 2) * 100 / 4 = 50 -> 150 / 3 = 50;
        # node2 (10 - 2) * 100 / 10 = 80 -> 180 / 3 = 60
        {"node1": 50, "node2": 60},
        EXTENDED_SET,
        None,
        id="honor extended resource if the pod requests",
    ),
    pytest.param(
        {"node1": MID, "node2": {**MID, XYZ: "4"}},
        {"cpu": "3000", "memory": "4000"},
        [],
        # xyz (weight 2) not requested: left out; cpu 50, memory (10000 - 4000) -> 60;
        # (50 + 60) / 2 = 55 both
        {"node1": 55, "node2": 55},
        ((XYZ, 2), ("cpu", 1), ("memory", 1)),
        None,
        id="if the node doesn't have a resource",
    ),
]

MOST = [
    pytest.param(
        {"node1": SMALL, "node2": SMALL},
        {},
        [],
        # cpu 0 * 100 / 4000 = 0, memory 0 -> 0 on both
        {"node1": 0, "node2": 0},
        KUBE_DEFAULT,
        None,
        id="nothing scheduled, nothing requested",
    ),
    pytest.param(
        {"node1": SMALL, "node2": MID},
        ASKS_3000_5000,
        [],
        # node1: cpu 3000 * 100 / 4000 = 75, memory 5000 * 100 / 10000 = 50 -> 62;
        # node2: cpu 3000 * 100 / 6000 = 50, memory 50 -> 50
        {"node1": 62, "node2": 50},
        KUBE_DEFAULT,
        None,
        id="nothing scheduled, resources requested, differently sized nodes",
    ),
    pytest.param(
        *refused((), "needs distinct resources"),
        id="Resources not set, pods scheduled with error",
    ),
    pytest.param(
        {"node1": BIG, "node2": BIG},
        {},
        [
            ("node1", 3000 * CPU, 0),
            ("node1", 3000 * CPU, 0),
            ("node2", 3000 * CPU, 0),
            ("node2", 3000 * CPU, 5000),
        ],
        # node1: cpu 6000 * 100 / 10000 = 60, memory 0 -> 30; node2: cpu 60, memory
        # 5000 * 100 / 20000 = 25 -> 85 / 2 = 42
        {"node1": 30, "node2": 42},
        KUBE_DEFAULT,
        None,
        id="no resources requested, pods scheduled with resources",
    ),
    pytest.param(
        {"node1": BIG, "node2": BIG},
        ASKS_3000_5000,
        [("node1", 3000 * CPU, 0), ("node2", 3000 * CPU, 5000)],
        # node1: cpu 60, memory 5000 -> 25: 85 / 2 = 42; node2: cpu 60, memory 10000 -> 50: 55
        {"node1": 42, "node2": 55},
        KUBE_DEFAULT,
        None,
        id="resources requested, pods scheduled with resources",
    ),
    pytest.param(
        {"node1": {"cpu": "5000", "memory": "10000"}, "node2": {"cpu": "10000", "memory": "9000"}},
        {"cpu": "5000", "memory": "9000"},
        [],
        # node1: cpu 100, memory 9000 * 100 / 10000 = 90 -> 95; node2: cpu 50, memory 100
        # -> 75
        {"node1": 95, "node2": 75},
        KUBE_DEFAULT,
        None,
        id="resources requested equal node capacity",
    ),
    pytest.param(
        {"node1": SMALL, "node2": MID},
        ASKS_3000_5000,
        [],
        # node1: (75 * 1 + 50 * 2) / 3 = 175 / 3 = 58; node2: (50 + 100) / 3 = 50
        {"node1": 58, "node2": 50},
        (("memory", 2), ("cpu", 1)),
        None,
        # kube's table names this case as the second one (pytest numbers the two ids)
        id="nothing scheduled, resources requested, differently sized nodes",
    ),
    pytest.param(
        {
            "node1": {"cpu": "250m", "memory": "1000Mi"},
            "node2": {"cpu": "250m", "memory": "1000Mi"},
        },
        {},
        [("node1", 0, 0), ("node1", 0, 0)],
        # kube: 80 and 30, from the non-zero defaults (100m, 200MB) of containers without
        # requests. orca scores requests as written (docs/design.md 4; capacity.py): nothing
        # is requested anywhere, so cpu 0 and memory 0 -> 0 on both
        {"node1": 0, "node2": 0},
        KUBE_DEFAULT,
        None,
        id="no resources requested, pods scheduled, nonzero request for resource",
    ),
    pytest.param(
        *refused((("memory", -1), ("cpu", 1)), NO_WEIGHT), id="resource with negative weight"
    ),
    pytest.param(*refused((("memory", 1), ("cpu", 0)), NO_WEIGHT), id="resource with zero weight"),
    pytest.param(
        *refused((("memory", 101),), NO_WEIGHT), id="resource weight larger than MaxNodeScore"
    ),
    pytest.param(
        {"node1": MID, "node2": {**MID, XYZ: "4"}},
        ASKS_3000_5000,
        [],
        # xyz not requested: left out; cpu 3000 * 100 / 6000 = 50, memory 50 -> 50 both
        {"node1": 50, "node2": 50},
        EXTENDED_SET,
        None,
        id="bypass extended resource if the pod does not request",
    ),
    pytest.param(
        {"node1": {**MID, XYZ: "4"}, "node2": {**MID, XYZ: "10"}},
        {**ASKS_3000_5000, XYZ: "2"},
        [],
        # cpu 50, memory 50; xyz node1 2 * 100 / 4 = 50 -> 50; node2 2 * 100 / 10 = 20
        # -> 120 / 3 = 40
        {"node1": 50, "node2": 40},
        EXTENDED_SET,
        None,
        id="honor extended resource if the pod request",
    ),
    pytest.param(
        {"node1": MID, "node2": {**MID, XYZ: "4"}},
        {"cpu": "3000", "memory": "4000"},
        [],
        # xyz not requested: left out; cpu 50, memory 4000 * 100 / 10000 = 40 -> 45 both
        {"node1": 45, "node2": 45},
        ((XYZ, 2), ("cpu", 1), ("memory", 1)),
        None,
        id="if the node doesn't have a resource",
    ),
]

RTCR = "RequestedToCapacityRatio: orca's strategies are LeastAllocated and MostAllocated"
SIDECAR = "sidecars (restartable init containers): orca has no containers"
DRA = "DRA: devices from ResourceSlices back the extended resource; orca has none"


def fit_score_case(strategy: str, name: str) -> Any:
    """TestFitScore's MostAllocated and LeastAllocated cases, PreScore run or not (orca has
    no PreScore: the same score). A Pod of cpu 1000, memory 2000; node1 4000/10000 holding
    2000/4000, node2 6000/10000 holding 1000/2000.
    MostAllocated: node1 cpu 3000 * 100 / 4000 = 75, memory 6000 * 100 / 10000 = 60 -> 67;
    node2 cpu 2000 * 100 / 6000 = 33, memory 4000 * 100 / 10000 = 40 -> 36.
    LeastAllocated: node1 cpu (4000 - 3000) -> 25, memory (10000 - 6000) -> 40: 65 / 2 = 32;
    node2 cpu (6000 - 2000) * 100 / 6000 = 66, memory 60 -> 126 / 2 = 63."""
    expected = {"node1": 67, "node2": 36} if strategy == "BinPack" else {"node1": 32, "node2": 63}
    return pytest.param(
        {"node1": SMALL, "node2": MID},
        {"cpu": "1000", "memory": "2000"},
        [("node1", 2000 * CPU, 4000), ("node2", 1000 * CPU, 2000)],
        expected,
        KUBE_DEFAULT,
        strategy,
        id=name,
    )


FIT_SCORE = [
    kube_skip("test case for ScoringStrategy RequestedToCapacityRatio case1", RTCR),
    kube_skip("test case for ScoringStrategy RequestedToCapacityRatio case2", RTCR),
    fit_score_case("BinPack", "test case for ScoringStrategy MostAllocated"),
    fit_score_case("Spread", "test case for ScoringStrategy LeastAllocated"),
    kube_skip(
        "test case for ScoringStrategy RequestedToCapacityRatio case1 if PreScore is not called",
        RTCR,
    ),
    fit_score_case(
        "BinPack", "test case for ScoringStrategy MostAllocated if PreScore is not called"
    ),
    fit_score_case(
        "Spread", "test case for ScoringStrategy LeastAllocated if PreScore is not called"
    ),
    kube_skip("test case for ScoringStrategy MostAllocated with sidecar container", SIDECAR),
    kube_skip("test case for ScoringStrategy LeastAllocated with sidecar container", SIDECAR),
    kube_skip("test case for ScoringStrategy LeastAllocated with Extended resources", DRA),
    kube_skip(
        "test case for ScoringStrategy LeastAllocated with Extended resources if PreScore is not "
        "called",
        DRA,
    ),
]


def _check_kube_case(
    strategy: str,
    nodes: dict[str, dict[str, str]] | None,
    request: dict[str, str] | None,
    existing: Existing | None,
    expected: dict[str, int] | str | None,
    resources: tuple[tuple[str, int], ...],
) -> None:
    if nodes is None:  # args kube refuses: ``expected`` is what orca's refusal says
        with pytest.raises(ValueError, match=str(expected)):
            CapacityScore(resources=resources)
        return
    assert request is not None and existing is not None
    assert weighted_scores(strategy, nodes, request, existing, resources) == expected


@pytest.mark.parametrize(("nodes", "request_", "existing", "expected", "resources", "_"), LEAST)
def test_least_allocated_scoring_strategy(
    nodes: dict[str, dict[str, str]] | None,
    request_: dict[str, str] | None,
    existing: Existing | None,
    expected: dict[str, int] | str | None,
    resources: tuple[tuple[str, int], ...],
    _: None,
) -> None:
    """least_allocated_test.go ``TestLeastAllocatedScoringStrategy``: LeastAllocated is
    ``Spread``."""
    _check_kube_case("Spread", nodes, request_, existing, expected, resources)


@pytest.mark.parametrize(("nodes", "request_", "existing", "expected", "resources", "_"), MOST)
def test_most_allocated_scoring_strategy(
    nodes: dict[str, dict[str, str]] | None,
    request_: dict[str, str] | None,
    existing: Existing | None,
    expected: dict[str, int] | str | None,
    resources: tuple[tuple[str, int], ...],
    _: None,
) -> None:
    """most_allocated_test.go ``TestMostAllocatedScoringStrategy``: MostAllocated is
    ``BinPack``."""
    _check_kube_case("BinPack", nodes, request_, existing, expected, resources)


@pytest.mark.parametrize(
    ("nodes", "request_", "existing", "expected", "resources", "strategy"), FIT_SCORE
)
def test_fit_score(
    nodes: dict[str, dict[str, str]],
    request_: dict[str, str],
    existing: Existing,
    expected: dict[str, int],
    resources: tuple[tuple[str, int], ...],
    strategy: str,
) -> None:
    """fit_test.go ``TestFitScore``."""
    _check_kube_case(strategy, nodes, request_, existing, expected, resources)


# -- property: resourceAllocationScorer with weights and any resource, transcribed -------------

AAA = "example.com/aaa"
HUGE = "hugepages-2Mi"
PAGE = 2 * 1024 * 1024  # huge pages are drawn in pages: every score is a ratio, scale-free
SCORED = ("cpu", "memory", "ephemeral-storage", AAA, HUGE)


def kube_is_scalar(name: str) -> bool:
    """``schedutil.IsScalarResourceName`` for the names drawn here: extended resources and
    huge pages are scalar; cpu, memory and ephemeral-storage are not."""
    return "/" in name or name.startswith("hugepages-")


def kube_allocation_score(
    strategy: str,
    resources: list[tuple[str, int]],
    request: dict[str, int],
    allocatable: dict[str, int],
    used: dict[str, int],
) -> int:
    """``resourceAllocationScorer.score`` (resource_allocation.go): per configured resource,
    ``calculateNodeAllocatableRequest`` leaves out a scalar resource the Pod does not request
    and a resource the node has no allocatable of, else requested = used + request; then
    ``leastResourceScorer`` / ``mostResourceScorer``: the weighted sum over the resources
    kept, divided by their weights' sum (Go integer division), 0 when none is kept."""
    score = kube_least_requested_score if strategy == "Spread" else kube_most_requested_score
    node_score = weight_sum = 0
    for name, weight in resources:
        asked = request.get(name, 0)
        if asked == 0 and kube_is_scalar(name):
            continue
        capacity = allocatable.get(name, 0)
        if capacity == 0:
            continue
        node_score += score(used.get(name, 0) + asked, capacity) * weight
        weight_sum += weight
    return 0 if weight_sum == 0 else go_div(node_score, weight_sum)


def _amounts(high: int) -> st.SearchStrategy[dict[str, int]]:
    return st.fixed_dictionaries({}, optional={n: st.integers(0, high) for n in SCORED})


@settings(max_examples=examples(400), deadline=None)
@given(
    strategy=st.sampled_from(["Spread", "BinPack"]),
    resources=st.lists(
        st.tuples(st.sampled_from(SCORED), st.integers(1, 100)),
        min_size=1,
        max_size=len(SCORED),
        unique_by=lambda r: r[0],
    ),
    request=_amounts(8),
    nodes=st.lists(
        st.tuples(_amounts(12), st.lists(_amounts(6), max_size=3)), min_size=1, max_size=5
    ),
)
def test_weighted_scores_over_any_resource_are_kubes(
    strategy: str,
    resources: list[tuple[str, int]],
    request: dict[str, int],
    nodes: list[tuple[dict[str, int], list[dict[str, int]]]],
) -> None:
    """Any list of resources with weights 1..100 (cpu, memory, ephemeral-storage, an extended
    resource, huge pages), any allocatable (absent or 0 included), any Pods on the nodes
    (over-committed included) and any request: ``CapacityScore(resources)`` gives every node
    the oracle's score."""

    def unit(name: str, amount: int) -> str:
        return f"{amount}m" if name == "cpu" else str(amount * PAGE if name == HUGE else amount)

    infos = []
    for i, (alloc, _) in enumerate(nodes):
        infos.append(
            node(
                f"n{i}",
                cpu=unit("cpu", alloc.get("cpu", 0)),
                memory=unit("memory", alloc.get("memory", 0)),
                allocatable={n: unit(n, a) for n, a in alloc.items() if n not in ("cpu", "memory")},
            )
        )
    ledger = ledger_for(*infos)
    for i, (_, existing) in enumerate(nodes):
        for j, pod in enumerate(existing):
            key = f"kube/n{i}-{j}"
            scalars = tuple(
                sorted(
                    (n, a * PAGE if n == HUGE else a)
                    for n, a in pod.items()
                    if n not in ("cpu", "memory") and a
                )
            )
            booking = Booking(
                f"n{i}", f"{key}-0", pod.get("cpu", 0), pod.get("memory", 0), scalars=scalars
            )
            ledger.load(key, [booking])
    asked = {n: unit(n, a) for n, a in request.items()}
    cycle = cycle_for(workload(kind="Job", strategy=strategy, resources=asked), ledger)
    got = CapacityScore(resources=tuple(resources)).score(cycle, np.arange(len(nodes))).tolist()
    by_name = dict(zip(ledger.table.hostnames, got, strict=True))
    for i, (alloc, existing) in enumerate(nodes):
        used = {n: sum(p.get(n, 0) for p in existing) for n in SCORED}
        expected = kube_allocation_score(strategy, resources, request, alloc, used)
        assert by_name[f"n{i}"] == expected, (i, alloc, existing)
