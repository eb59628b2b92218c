"""Preemption's node choice and victims against kube-scheduler's DefaultPreemption, v1.36.3.

Expected victims are computed by hand from kube's Go code, never from orca's:

- ``pkg/scheduler/framework/preemption/preemption.go``, ``pickOneNodeForPreemption``: the
  score functions, in order (each keeps the nodes with the best score; the next one breaks
  the tie): fewest PDB violations (orca has no PDBs: all equal), ``minHighestPriority``
  (the node whose highest victim priority is lowest), ``minSumPriorities`` (the smallest sum
  of ``priority + MaxInt32 + 1`` over the victims), ``minNumPods`` (the fewest victims),
  ``latestStartTime`` (the node whose earliest start among its highest-priority victims,
  ``util.GetEarliestPodStartTime``, is latest); then "the first node in the list" (map
  order in kube; the lowest hostname in orca);
- ``pkg/scheduler/util/utils.go``: ``GetPodStartTime`` (a Pod without a start time counts as
  started now), ``MoreImportantPod`` (higher priority, then the earlier start);
- ``pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go``,
  ``SelectVictimsOnNode``: remove every lower-priority Pod, then reprieve them most important
  first while the preemptor still fits.

orca's start-time stand-in is the victim Workload's ``metadata.creationTimestamp``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.scheduler.framework import Code
from controller.scheduler.ledger import Booking, Ledger
from controller.scheduler.nodes import NodeTable
from controller.scheduler.plan import plan as plan_offline
from controller.scheduler.preemption import Demand, Victim, select_victims, victims_on_node
from controller.scheduler.priority import PriorityClass, PriorityClasses
from controller.scheduler.scheduler import Scheduler
from tests.support.factories import NOW, node, workload
from tests.support.properties import examples

CPU = 1000
MAX_INT32 = 2**31 - 1


def t(year: int) -> datetime:
    return datetime(year, 1, 1, tzinfo=UTC)


def choose(
    nodes: dict[str, str],
    replicas: list[tuple[str, str, int]],
    priorities: dict[str, int],
    started: dict[str, datetime],
    request: str,
    boss_priority: int = MAX_INT32 - 1,
) -> list[tuple[str, str]]:
    """(node, allocId) of the victims a Job asking ``request`` cpu picks. ``replicas``:
    (Workload key, node, millicores); AllocIDs ``<key>-<n>`` in the order given."""
    ledger = Ledger(NodeTable([node(name, cpu=cpu) for name, cpu in nodes.items()]))
    per_key: dict[str, list[Booking]] = {}
    for key, at, millis in replicas:
        bookings = per_key.setdefault(key, [])
        bookings.append(Booking(at, f"{key}-{len(bookings)}", millis, 0))
    for key, bookings in per_key.items():
        ledger.load(key, bookings)
    scheduler = Scheduler()
    boss = workload("boss", kind="Job", resources={"cpu": request})
    decision = scheduler.schedule(boss, ledger, now=NOW)
    assert decision.code is Code.UNSCHEDULABLE
    plan = select_victims(
        scheduler, boss, ledger, decision, boss_priority, priorities, started, now=NOW
    )
    assert plan is not None
    return sorted((n.node, v.booking.alloc_id) for n in plan.nominations for v in n.victims)


CASES = [
    pytest.param(
        {"a": "2", "b": "2"},
        [("ns/mid", "a", 2000), ("ns/low", "b", 2000)],
        {"ns/mid": 50, "ns/low": 10},
        {},
        # minHighestPriority: a 50, b 10 -> b
        [("b", "ns/low-0")],
        id="lowest-highest-victim-priority",
    ),
    pytest.param(
        {"a": "2", "b": "2"},
        [
            ("ns/ten", "a", 1000),
            ("ns/ten", "a", 1000),
            ("ns/ten", "b", 1000),
            ("ns/zero", "b", 1000),
        ],
        {"ns/ten": 10, "ns/zero": 0},
        {},
        # both: highest 10, 2 victims; minSumPriorities: a 2*(10+2^31), b (10+2^31)+(0+2^31)
        # -> b (hostname alone, or fewest victims alone, would say a)
        [("b", "ns/ten-2"), ("b", "ns/zero-0")],
        id="smallest-sum-of-priorities",
    ),
    pytest.param(
        {"a": "3", "b": "3"},
        [
            ("ns/top", "a", 1500),
            ("ns/top", "a", 1500),
            ("ns/top", "b", 1000),
            ("ns/bottom", "b", 1000),
            ("ns/bottom", "b", 1000),
        ],
        {"ns/top": 1000, "ns/bottom": -2_000_000_000},
        {},
        # both: highest 1000. sums: a 2*(1000+2^31) = 4294969296;
        # b (1000+2^31) + 2*(-2e9+2^31) = 2442451944 -> b, although it has 3 victims
        [("b", "ns/bottom-0"), ("b", "ns/bottom-1"), ("b", "ns/top-2")],
        id="sum-comes-before-the-number-of-victims",
    ),
    pytest.param(
        {"a": "2", "b": "2"},
        [("ns/neg", "a", 2000), ("ns/neg", "b", 1000), ("ns/neg", "b", 1000)],
        {"ns/neg": -5},
        {},
        # highest -5 both. Raw sums would be a -5, b -10 (b); shifted by 2^31: a 2^31-5,
        # b 2*(2^31-5) -> a: "a node with a few pods with negative priority is not picked
        # over a node with a smaller number of pods with the same negative priority"
        [("a", "ns/neg-0")],
        id="negative-priorities-shifted-before-summing",
    ),
    pytest.param(
        {"a": "2", "b": "2", "c": "2"},
        [("ns/x", "a", 1000), ("ns/x", "a", 1000), ("ns/y", "b", 2000), ("ns/z", "c", 2000)],
        {"ns/x": 0, "ns/y": 0, "ns/z": 0},
        {},
        # highest 0 everywhere; sums a 2*2^31, b 2^31, c 2^31; minNumPods b, c 1 each; no
        # start times (all "now", a tie); the first in hostname order: b
        [("b", "ns/y-0")],
        id="fewest-victims-then-hostname",
    ),
    pytest.param(
        {"a": "2", "b": "2"},
        [("ns/old", "a", 2000), ("ns/new", "b", 2000)],
        {"ns/old": 0, "ns/new": 0},
        {"ns/old": t(2020), "ns/new": t(2024)},
        # all equal up to latestStartTime: a 2020, b 2024 -> b (the latest)
        [("b", "ns/new-0")],
        id="latest-start-time",
    ),
    pytest.param(
        {"a": "2", "b": "2"},
        [("ns/dated", "a", 2000), ("ns/undated", "b", 2000)],
        {"ns/dated": 0, "ns/undated": 0},
        {"ns/dated": t(2024)},
        # GetPodStartTime: no start time = now, later than 2024 -> b
        [("b", "ns/undated-0")],
        id="an-unknown-start-is-now",
    ),
    pytest.param(
        {"a": "2", "b": "2"},
        [("ns/old", "a", 1000), ("ns/mid", "a", 1000), ("ns/x", "b", 1000), ("ns/y", "b", 1000)],
        {"ns/old": 5, "ns/mid": 5, "ns/x": 5, "ns/y": 5},
        {"ns/old": t(2018), "ns/mid": t(2023), "ns/x": t(2020), "ns/y": t(2022)},
        # GetEarliestPodStartTime among the highest-priority victims: a min(2018, 2023) =
        # 2018, b min(2020, 2022) = 2020 -> b, although a has the latest victim (2023)
        [("b", "ns/x-0"), ("b", "ns/y-0")],
        id="earliest-start-of-the-highest-priority-victims",
    ),
    pytest.param(
        {"a": "2", "b": "2"},
        [("ns/hi", "a", 1000), ("ns/lo", "a", 1000), ("ns/hi2", "b", 1000), ("ns/lo2", "b", 1000)],
        {"ns/hi": 7, "ns/lo": 3, "ns/hi2": 7, "ns/lo2": 3},
        {"ns/hi": t(2019), "ns/lo": t(2025), "ns/hi2": t(2021), "ns/lo2": t(2010)},
        # highest 7 both, sums equal, 2 victims each; only the priority-7 victims' starts
        # count: a 2019, b 2021 -> b (a's 2025 victim has priority 3 and does not count)
        [("b", "ns/hi2-0"), ("b", "ns/lo2-0")],
        id="only-the-highest-priority-victims-starts-count",
    ),
]


@pytest.mark.parametrize(("nodes", "replicas", "priorities", "started", "expected"), CASES)
def test_node_choice_is_pick_one_node_for_preemption(
    nodes: dict[str, str],
    replicas: list[tuple[str, str, int]],
    priorities: dict[str, int],
    started: dict[str, datetime],
    expected: list[tuple[str, str]],
) -> None:
    request = "2" if "3" not in nodes.values() else "3"
    assert choose(nodes, replicas, priorities, started, request) == expected


def test_the_later_started_of_equal_priorities_goes_first_on_a_node() -> None:
    """SelectVictimsOnNode reprieves the most important first (MoreImportantPod: the earlier
    start): with room for one more, the replica started in 2024 is the victim, the 2019 one
    stays, whatever their AllocIDs."""
    old = Victim("ns/b-old", Booking("a", "ns/b-old-0", 1000, 0), 0, t(2019))
    new = Victim("ns/a-new", Booking("a", "ns/a-new-0", 1000, 0), 0, t(2024))
    assert victims_on_node([1, 0, 0], Demand(1000, 0), [old, new]) == (new,)
    assert victims_on_node([1, 0, 0], Demand(1000, 0), [new, old]) == (new,)
    unknown = Victim("ns/c", Booking("a", "ns/c-0", 1000, 0), 0)  # "now": the latest
    assert victims_on_node([1, 0, 0], Demand(1000, 0), [unknown, new, old]) == (unknown,)


def test_latest_start_decides_among_nodes_whose_victims_are_needed_for_both_resources() -> None:
    """A Job asking 1 core and 1 GiB, every node full, every victim priority 0, two victims
    needed on each node. minHighestPriority (0), minSumPriorities (2 * (0 + MaxInt32 + 1))
    and minNumPods (2) tie everywhere; latestStartTime picks the node whose victims started
    latest: y (2024) over p (2020) and x (2018).

    On p one victim holds the core and the other the GiB, so a glance at its largest victim
    (1 core, 1 GiB) suggests one might do; x and y each hold two halves, so two are needed
    plainly. orca's search looks at p first for that reason and must still weigh y, whose
    start is later than p's, even though x, whose start is earlier, ranks no better."""
    gib = 1 << 30
    ledger = Ledger(NodeTable([node(n, cpu="1", memory="1Gi") for n in ("p", "x", "y")]))
    ledger.load(
        "ns/p-low", [Booking("p", "ns/p-low-0", 1000, 0), Booking("p", "ns/p-low-1", 0, gib)]
    )
    for name in ("x", "y"):
        halves = [Booking(name, f"ns/{name}-low-{i}", 500, gib // 2) for i in range(2)]
        ledger.load(f"ns/{name}-low", halves)
    priorities = {"ns/p-low": 0, "ns/x-low": 0, "ns/y-low": 0}
    started = {"ns/p-low": t(2020), "ns/x-low": t(2018), "ns/y-low": t(2024)}
    scheduler = Scheduler()
    boss = workload("boss", kind="Job", resources={"cpu": "1", "memory": "1Gi"})
    decision = scheduler.schedule(boss, ledger, now=NOW)
    plan = select_victims(scheduler, boss, ledger, decision, 10, priorities, started, now=NOW)
    assert plan is not None
    assert [(n.node, sorted(v.booking.alloc_id for v in n.victims)) for n in plan.nominations] == [
        ("y", ["ns/y-low-0", "ns/y-low-1"])
    ]


def test_plan_uses_creation_timestamps_from_the_files() -> None:
    """``orca plan``: two equal victims on two nodes; the Workload created later is
    preempted (latestStartTime), though its node sorts last."""

    def low(name: str, at: str, created: str) -> Any:
        w = workload(
            name,
            kind="Job",
            resources={"cpu": "1"},
            status={
                "placements": [{"node": at, "allocId": f"shop/{name}-0", "score": 0}],
                "resources": {"cpu": "1"},
            },
        )
        meta = w.metadata.model_copy(update={"creation_timestamp": datetime.fromisoformat(created)})
        return w.model_copy(update={"metadata": meta})

    nodes = [node("a", cpu="1"), node("b", cpu="1")]
    older = low("older", "a", "2024-01-01T00:00:00+00:00")
    newer = low("newer", "b", "2025-01-01T00:00:00+00:00")
    boss = workload("boss", kind="Job", resources={"cpu": "1"}, priorityClassName="urgent")
    classes = PriorityClasses.of([PriorityClass("urgent", 100)])
    results = {
        r.workload.key: r for r in plan_offline(nodes, [older, newer, boss], classes=classes)
    }
    assert [p.victim.booking.alloc_id for p in results["shop/boss"].victims] == ["shop/newer-0"]


# -- property: pickOneNodeForPreemption, transcribed ------------------------------------------


def pick_one_node(victims_per_node: dict[str, list[tuple[int, int | None]]]) -> str:
    """``pickOneNodeForPreemption`` over {node: [(priority, start seconds or None)]}, each
    list the node's victims; ties after the last score function go to the lowest name."""
    now = 2**40  # GetPodStartTime: time.Now() for a Pod that has not started

    def start(s: int | None) -> int:
        return now if s is None else s

    def highest(n: str) -> int:
        return -max(p for p, _ in victims_per_node[n])

    def sum_priorities(n: str) -> int:
        return -sum(p + MAX_INT32 + 1 for p, _ in victims_per_node[n])

    def num_pods(n: str) -> int:
        return -len(victims_per_node[n])

    def latest_start(n: str) -> int:
        top = max(p for p, _ in victims_per_node[n])
        return min(start(s) for p, s in victims_per_node[n] if p == top)

    candidates = sorted(victims_per_node)
    for f in (highest, sum_priorities, num_pods, latest_start):
        best = max(f(n) for n in candidates)
        candidates = [n for n in candidates if f(n) == best]
        if len(candidates) == 1:
            return candidates[0]
    return candidates[0]


_PRIORITY = st.sampled_from([-(2**31), -2_000_000_000, -5, 0, 3, 7, 1_000_000_000])
_START = st.one_of(st.none(), st.integers(0, 3))


@settings(max_examples=examples(300), deadline=None)
@given(
    per_node=st.lists(
        st.lists(st.tuples(_PRIORITY, _START), min_size=1, max_size=3), min_size=1, max_size=6
    )
)
def test_node_choice_follows_pick_one_node_for_preemption(
    per_node: list[list[tuple[int, int | None]]],
) -> None:
    """Every node full of lower-priority replicas the preemptor needs all of (it asks for a
    whole node): each node's victims are all its replicas, so the choice is exactly
    ``pickOneNodeForPreemption``'s, extreme and negative priorities and unknown starts
    included."""
    names = [f"n{i}" for i in range(len(per_node))]
    ledger = Ledger(
        NodeTable([node(n, cpu=str(len(v))) for n, v in zip(names, per_node, strict=True)])
    )
    priorities: dict[str, int] = {}
    started: dict[str, datetime] = {}
    victims: dict[str, list[tuple[int, int | None]]] = {}
    for n, replicas in zip(names, per_node, strict=True):
        for j, (priority, start) in enumerate(replicas):
            key = f"ns/{n}-w{j}"
            ledger.load(key, [Booking(n, f"{key}-0", CPU, 0)])
            priorities[key] = priority
            if start is not None:
                started[key] = datetime.fromtimestamp(start, UTC)
        victims[n] = replicas
    size = max(len(v) for v in per_node)
    boss = workload("boss", kind="Job", resources={"cpu": str(size)})
    scheduler = Scheduler()
    decision = scheduler.schedule(boss, ledger, now=NOW)
    plan = select_victims(
        scheduler, boss, ledger, decision, MAX_INT32, priorities, started, now=NOW
    )
    able = {n: v for n, v in victims.items() if len(v) == size}  # only full-size nodes fit it
    assert plan is not None
    (nomination,) = plan.nominations
    assert nomination.node == pick_one_node(able)
    assert len(nomination.victims) == size
