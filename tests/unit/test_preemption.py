"""Preemption (``controller.scheduler.preemption``): which lower-priority replicas a short Workload
removes, on which node; and the victim's status afterwards.

The property test re-states kube-scheduler's DefaultPreemption in plain Python, from
``defaultpreemption/default_preemption.go`` (``SelectVictimsOnNode``: remove every lower
priority, reprieve the most important first while it still fits; importance =
``util.MoreImportantPod``: priority, then the earlier start) and ``preemption/preemption.go``
(``pickOneNodeForPreemption``: lowest highest-victim priority, smallest sum of priorities each
plus 2^31, fewest victims, latest earliest-start of the highest-priority victims; then orca's
hostname), and checks the module against it over random clusters, plus what the rule promises:
never an equal or higher priority, never over capacity, the preemptor placed afterwards, the
same answer whatever order the nodes are listed in. Hand-computed cases:
``test_preemption_kube.py``.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from controller.api.models import Phase, WorkloadStatus
from controller.scheduler.decision import Decision
from controller.scheduler.framework import Code
from controller.scheduler.ledger import Booking, Ledger
from controller.scheduler.nodes import NodeInfo, NodeTable
from controller.scheduler.plan import plan as plan_offline
from controller.scheduler.preemption import (
    Demand,
    PreemptionPlan,
    Victim,
    gained_nodes,
    may_preempt,
    preempt,
    preempted_status,
    select_victims,
    start_key,
    victims_on_node,
)
from controller.scheduler.priority import Priority, PriorityClass, PriorityClasses
from controller.scheduler.scheduler import Scheduler
from controller.scheduler.vocabulary import CONDITION_PREEMPTED, CONDITION_SCHEDULED
from tests.support.factories import NOW, GiB, node, workload
from tests.support.properties import examples

CPU = 1000  # millicores per core


def _booking(node_name: str, key: str, index: int, cores: int, gib: int = 0) -> Booking:
    return Booking(node_name, f"{key}-{index}", cores * CPU, gib * GiB)


def _plan(
    ledger: Ledger, priorities: dict[str, int], priority: int, **spec: Any
) -> PreemptionPlan | None:
    scheduler = Scheduler()
    boss = workload("boss", **spec)
    decision = scheduler.schedule(boss, ledger, now=NOW)
    assert decision.code is Code.UNSCHEDULABLE
    return select_victims(scheduler, boss, ledger, decision, priority, priorities, now=NOW)


def _victims(plan: PreemptionPlan | None) -> list[tuple[str, str]]:
    assert plan is not None
    return [(n.node, v.booking.alloc_id) for n in plan.nominations for v in n.victims]


def test_chooses_the_node_whose_highest_victim_is_lowest() -> None:
    ledger = Ledger(NodeTable([node("a", cpu="4"), node("b", cpu="4")]))
    ledger.load("ns/mid", [_booking("a", "ns/mid", 0, 4)])
    ledger.load("ns/low", [_booking("b", "ns/low", 0, 4)])
    plan = _plan(ledger, {"ns/mid": 50, "ns/low": 10}, 100, kind="Job", resources={"cpu": "2"})
    assert _victims(plan) == [("b", "ns/low-0")]


def test_then_the_fewest_victims_then_the_hostname() -> None:
    ledger = Ledger(NodeTable([node("a", cpu="4"), node("b", cpu="4"), node("c", cpu="4")]))
    ledger.load("ns/x", [_booking("a", "ns/x", i, 1) for i in range(4)])
    ledger.load("ns/y", [_booking("b", "ns/y", 0, 4)])
    ledger.load("ns/z", [_booking("c", "ns/z", 0, 4)])
    plan = _plan(ledger, {"ns/x": 0, "ns/y": 0, "ns/z": 0}, 1, kind="Job", resources={"cpu": "2"})
    assert _victims(plan) == [("b", "ns/y-0")]


def test_reprieves_the_replicas_not_needed() -> None:
    """Lowest first: 1 core (p1) is not enough, 3 cores (p2) more is; then p1 goes back."""
    pool = [
        Victim("ns/p1", _booking("a", "ns/p1", 0, 1), 1),
        Victim("ns/p2", _booking("a", "ns/p2", 0, 3), 2),
    ]
    assert victims_on_node([1, 0, 0], Demand(3 * CPU, 0), pool) == (pool[1],)
    assert victims_on_node([1, 0, 0], Demand(5 * CPU, 0), pool) is None  # all of them is not enough
    assert victims_on_node([1, 0, 0], Demand(1 * CPU, 0), pool) == (pool[0],)


def test_reprieves_the_most_important_first_with_three_victims() -> None:
    """kube's ``SelectVictimsOnNode``, by hand: a full 4-core node holds p1 (priority 1, 1
    core), p2 (2, 1 core), p3 (3, 2 cores); a 3-core replica comes. All three are removed (4
    free), then reprieved most important first: p3 back leaves 2 (< 3): a victim; p2 back
    leaves 3: reprieved; p1 back leaves 2: a victim. Victims p1 and p3. Reprieving least
    important first would keep p1 and remove p2 and p3, a more important replica."""
    pool = [
        Victim("ns/p2", _booking("a", "ns/p2", 0, 1), 2),
        Victim("ns/p3", _booking("a", "ns/p3", 0, 2), 3),
        Victim("ns/p1", _booking("a", "ns/p1", 0, 1), 1),
    ]
    victims = victims_on_node([1, 0, 0], Demand(3 * CPU, 0), pool)
    assert victims is not None
    assert sorted(v.key for v in victims) == ["ns/p1", "ns/p3"]


def test_never_touches_equal_or_higher_priority() -> None:
    ledger = Ledger(NodeTable([node("a", cpu="4")]))
    ledger.load("ns/peer", [_booking("a", "ns/peer", 0, 2)])
    ledger.load("ns/boss2", [_booking("a", "ns/boss2", 0, 2)])
    priorities = {"ns/peer": 100, "ns/boss2": 200}
    assert _plan(ledger, priorities, 100, kind="Job", resources={"cpu": "1"}) is None


def test_leaves_out_what_the_caller_cannot_touch() -> None:
    ledger = Ledger(NodeTable([node("a", cpu="4")]))
    ledger.load("ns/busy", [_booking("a", "ns/busy", 0, 4)])
    assert _plan(ledger, {}, 100, kind="Job", resources={"cpu": "1"}) is None


def test_a_service_takes_one_node_per_missing_replica_and_reuses_leftovers() -> None:
    ledger = Ledger(NodeTable([node("a", cpu="4"), node("b", cpu="4")]))
    ledger.load("ns/low", [_booking("a", "ns/low", 0, 4), _booking("b", "ns/low", 1, 4)])
    plan = _plan(ledger, {"ns/low": 0}, 10, kind="Service", count=2, resources={"cpu": "2"})
    assert plan is not None
    assert [(n.node, len(n.victims)) for n in plan.nominations] == [("a", 1), ("a", 0)]
    assert plan.remaining(ledger) == {"ns/low": (_booking("b", "ns/low", 1, 4),)}


def test_only_nodes_that_pass_the_other_filters() -> None:
    ledger = Ledger(NodeTable([node("a", cpu="4", runtimes=("process",)), node("b", cpu="4")]))
    ledger.load("ns/low", [_booking("a", "ns/low", 0, 4), _booking("b", "ns/low", 1, 4)])
    spec = {"kind": "Job", "resources": {"cpu": "1"}, "runtime": {"oneOf": ["docker"]}}
    assert _victims(_plan(ledger, {"ns/low": 0}, 10, **spec)) == [("b", "ns/low-1")]


def test_a_daemonset_preempts_on_each_node_it_wants_that_lacks_room() -> None:
    ledger = Ledger(
        NodeTable(
            [
                node("a", cpu="2"),
                node("b", cpu="2"),
                node("c", cpu="2"),
                node("d", cpu="2", runtimes=("process",)),
            ]
        )
    )
    low = [_booking("a", "ns/low", 0, 2), _booking("b", "ns/low", 1, 1)]
    ledger.load("ns/low", [*low, _booking("d", "ns/low", 2, 2)])
    ledger.load("ns/peer", [_booking("b", "ns/peer", 0, 1)])  # b: full, half of it equal
    spec: dict[str, Any] = {
        "kind": "DaemonSet",
        "resources": {"cpu": "1"},
        "runtime": {"oneOf": ["docker"]},
    }
    priorities = {"ns/low": 0, "ns/peer": 10}
    plan = _plan(ledger, priorities, 10, **spec)
    # a: low goes; b: low goes (peer is equal: stays); c has room; d does not want it.
    assert _victims(plan) == [("a", "ns/low-0"), ("b", "ns/low-1")]
    assert plan is not None
    assert (plan.preemptor, plan.priority) == ("shop/boss", 10)  # what the victims are told
    for key, kept in plan.remaining(ledger).items():
        ledger.load(key, kept)
    after = Scheduler().schedule(workload("boss", **spec), ledger, now=NOW)
    assert sorted(p.node for p in after.placements) == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("kind", "priority", "code", "expected"),
    [
        pytest.param("Job", Priority(10), Code.UNSCHEDULABLE, True, id="job"),
        pytest.param("Job", Priority(10, preempts=False), Code.UNSCHEDULABLE, False, id="never"),
        pytest.param("Job", Priority(10), Code.UNRESOLVABLE, False, id="no-node-wants-it"),
        pytest.param("DaemonSet", Priority(10), Code.UNSCHEDULABLE, True, id="daemonset"),
        pytest.param("DaemonSet", Priority(10), Code.UNRESOLVABLE, False, id="daemonset-no-room"),
    ],
)
def test_may_preempt(kind: str, priority: Priority, code: Code, expected: bool) -> None:
    ledger = Ledger(NodeTable([node("a", cpu="1")]))
    w = workload("boss", kind=kind, resources={"cpu": "2"})
    decision = Scheduler().schedule(w, ledger, now=NOW)
    assert may_preempt(w, replace(decision, code=code), priority) is expected


def test_a_job_with_every_replica_placed_does_not_preempt() -> None:
    """Only a Job or Service short of replicas preempts, whatever its code says."""
    ledger = Ledger(NodeTable([node("a", cpu="2")]))
    w = workload("boss", kind="Job", resources={"cpu": "1"})
    decision = Scheduler().schedule(w, ledger, now=NOW)
    assert decision.placed == decision.desired == 1
    assert may_preempt(w, replace(decision, code=Code.UNSCHEDULABLE), Priority(10)) is False


@pytest.mark.parametrize(
    "started",
    [
        datetime(2026, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
        datetime(2026, 1, 1, 0, 0, 0, 1),  # naive: taken as UTC
        datetime(2026, 1, 1, 2, 0, 0, 1, tzinfo=timezone(timedelta(hours=2))),
    ],
)
def test_a_start_is_ordered_by_its_microseconds_since_the_epoch(started: datetime) -> None:
    """2026-01-01T00:00:00Z is 1,767,225,600 s after the epoch; one microsecond later."""
    key = start_key(started)
    assert type(key) is int
    assert key == 1_767_225_600_000_001


def test_preempted_status_names_the_preemptor() -> None:
    previous = WorkloadStatus.model_validate(
        {
            "phase": "Scheduled",
            "desired": 2,
            "placed": 2,
            "placements": [
                {"node": "a", "allocId": "ns/low-0", "score": 1},
                {"node": "b", "allocId": "ns/low-1", "score": 1},
            ],
            "conditions": [
                {
                    "type": "Scheduled",
                    "status": "True",
                    "reason": "AllPlaced",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
            "priority": 0,
        }
    )
    victim = Victim("ns/low", Booking("a", "ns/low-0", 1000, 0), 0)
    status = preempted_status(previous, [victim], "ns/boss", 1000, "2026-01-02T00:00:00Z")
    message = "1 replica preempted by ns/boss (priority 1000) on a"
    assert (status.phase, status.placed, status.message) == (
        Phase.PARTIALLY_SCHEDULED,
        1,
        message,
    )
    assert [p.alloc_id for p in status.placements] == ["ns/low-1"]
    conditions = {c.type: c for c in status.conditions}
    assert conditions[CONDITION_SCHEDULED].reason == "Preempted"
    assert conditions[CONDITION_SCHEDULED].status == "False"
    assert conditions[CONDITION_SCHEDULED].last_transition_time == "2026-01-02T00:00:00Z"
    assert (conditions[CONDITION_PREEMPTED].status, conditions[CONDITION_PREEMPTED].message) == (
        "True",
        message,
    )


def test_preempted_status_of_several_replicas_replaces_the_last_preemption() -> None:
    """Two of three replicas preempted, on two nodes: the message counts them and names the
    nodes sorted; ``desired`` absent from the old status means the replicas it had (3); the
    Preempted condition of an earlier preemption is replaced, not kept beside the new one;
    a condition orca does not own stays."""
    previous = WorkloadStatus.model_validate(
        {
            "phase": "Scheduled",
            "placed": 3,
            "placements": [
                {"node": "b", "allocId": "ns/low-0", "score": 1},
                {"node": "c", "allocId": "ns/low-1", "score": 1},
                {"node": "a", "allocId": "ns/low-2", "score": 1},
            ],
            "conditions": [
                {
                    "type": "Preempted",
                    "status": "False",
                    "reason": "Preempted",
                    "message": "1 replica preempted by ns/old (priority 5) on c",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                },
                {
                    "type": "example.com/Audited",
                    "status": "True",
                    "reason": "Seen",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                },
            ],
        }
    )
    removed = [
        Victim("ns/low", Booking("b", "ns/low-0", 1000, 0), 0),
        Victim("ns/low", Booking("a", "ns/low-2", 1000, 0), 0),
    ]
    status = preempted_status(previous, removed, "ns/boss", 1000, "2026-01-02T00:00:00Z")
    message = "2 replicas preempted by ns/boss (priority 1000) on a, b"
    assert (status.phase, status.placed, status.message, status.nodes) == (
        Phase.PARTIALLY_SCHEDULED,
        1,
        message,
        "c",
    )
    summary = "1/3 replicas placed; see Preempted"
    assert [(c.type, c.status, c.reason, c.message) for c in status.conditions] == [
        ("Ready", "False", "Preempted", summary),
        (
            "Reconciling",
            "True",
            "Preempted",
            "waiting to be placed again after a preemption; see Preempted",
        ),
        ("Scheduled", "False", "Preempted", summary),
        ("example.com/Audited", "True", "Seen", None),
        ("Preempted", "True", "Preempted", message),
    ]


def test_preempted_status_counts_against_the_desired_replicas_it_recorded() -> None:
    """A victim that recorded ``desired`` 4 with 2 placed, one preempted: 1/4, partially."""
    previous = WorkloadStatus.model_validate(
        {
            "phase": "PartiallyScheduled",
            "desired": 4,
            "placed": 2,
            "placements": [
                {"node": "a", "allocId": "ns/low-0", "score": 1},
                {"node": "a", "allocId": "ns/low-1", "score": 1},
            ],
        }
    )
    victim = Victim("ns/low", Booking("a", "ns/low-1", 1000, 0), 0)
    status = preempted_status(previous, [victim], "ns/boss", 1000, "2026-01-02T00:00:00Z")
    assert (status.phase, status.placed) == (Phase.PARTIALLY_SCHEDULED, 1)
    ready = next(c for c in status.conditions if c.type == "Ready")
    assert ready.message == "1/4 replicas placed; see Preempted"


def test_gained_nodes_are_where_the_decision_without_victims_holds_more_replicas() -> None:
    """Where preempting helped: a node counts only where the preemptor holds more replicas
    than before (a kept replica is no gain, and a node it already had must gain another)."""

    def decided(*nodes: str) -> Decision:
        bookings = tuple(Booking(n, f"ns/boss-{i}", 1000, 0) for i, n in enumerate(nodes))
        return Decision(Phase.SCHEDULED, "", len(nodes), (), "", bookings=bookings)

    assert gained_nodes(decided("a", "b"), decided("a", "a", "b", "c")) == {"a", "c"}
    assert gained_nodes(decided("a", "b"), decided("b", "a")) == set()


# -- the rule, re-stated ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Replica:
    key: str
    alloc: str
    node: str
    cpu: int
    memory: int
    priority: int
    started: int = 2**62  # seconds; the default: unknown, i.e. "now" (after any real time)


SHIFT = 2**31  # kube's math.MaxInt32 + 1


def more_important_first(r: Replica) -> tuple[int, int, str]:
    """util.MoreImportantPod as a sort key (higher priority, then earlier start, first);
    then the lower AllocID, orca's total order for what kube leaves to list order."""
    return (-r.priority, r.started, r.alloc)


def oracle(
    capacity: dict[str, tuple[int, int]],
    replicas: list[Replica],
    request: tuple[int, int],
    missing: int,
    priority: int,
) -> list[tuple[str, list[str]]]:
    """kube's DefaultPreemption in plain Python: per missing replica, per node, the victims
    of ``remove_then_reprieve``; pick the node by (highest victim priority, sum of priorities
    + 2^31 each, number of victims, latest earliest-start of the highest-priority victims,
    hostname)."""
    cpu, memory = request

    def fits(free: list[int]) -> bool:
        return (cpu == 0 or free[0] >= cpu) and (memory == 0 or free[1] >= memory)

    free = {n: [c, m] for n, (c, m) in capacity.items()}
    for r in replicas:
        free[r.node][0] -= r.cpu
        free[r.node][1] -= r.memory
    left = [r for r in replicas if r.priority < priority]
    freed: set[str] = set()
    chosen: list[tuple[str, list[str]]] = []
    for _ in range(missing):
        options = []
        for n in sorted(capacity):
            found = remove_then_reprieve(free[n], [r for r in left if r.node == n], fits)
            if found is None or (not found[0] and n not in freed):
                continue
            needed, room = found
            if needed:
                top = max(r.priority for r in needed)
                total = sum(r.priority + SHIFT for r in needed)
                earliest = min(r.started for r in needed if r.priority == top)
                rank = (top, total, len(needed), -earliest, n)
            else:
                rank = (-(2**63), 0, 0, 0, n)  # room left by this plan: no victim needed
            options.append((rank, n, needed, room))
        if not options:
            break
        _, n, needed, room = min(options, key=lambda o: o[0])
        free[n] = [room[0] - cpu, room[1] - memory]
        freed.add(n)
        left = [r for r in left if r not in needed]
        chosen.append((n, sorted(r.alloc for r in needed)))
    return chosen


def remove_then_reprieve(
    free: list[int], pool: list[Replica], fits: Callable[[list[int]], bool]
) -> tuple[list[Replica], list[int]] | None:
    """One node, as ``SelectVictimsOnNode``: remove every lower-priority replica; if the
    replica does not fit then, None; else give back the most important first while it still
    fits. (victims, room left)."""
    room = [free[0] + sum(r.cpu for r in pool), free[1] + sum(r.memory for r in pool)]
    if not fits(room):
        return None
    needed = []
    for r in sorted(pool, key=more_important_first):
        after = [room[0] - r.cpu, room[1] - r.memory]
        if fits(after):
            room = after
        else:
            needed.append(r)
    return needed, room


def daemon_oracle(
    capacity: dict[str, tuple[int, int]],
    replicas: list[Replica],
    holding: set[str],
    request: tuple[int, int],
    priority: int,
) -> list[tuple[str, list[str]]]:
    """A DaemonSet: on every node without it and without room, in hostname order, the same
    one-node rule; no node to choose."""
    cpu, memory = request

    def fits(free: list[int]) -> bool:
        return (cpu == 0 or free[0] >= cpu) and (memory == 0 or free[1] >= memory)

    chosen = []
    for n in sorted(capacity):
        free = [capacity[n][0], capacity[n][1]]
        for r in replicas:
            if r.node == n:
                free = [free[0] - r.cpu, free[1] - r.memory]
        if n in holding or fits(free):
            continue
        pool = [r for r in replicas if r.node == n and r.priority < priority]
        found = remove_then_reprieve(free, pool, fits)
        if found is not None and found[0]:
            chosen.append((n, sorted(r.alloc for r in found[0])))
    return chosen


cluster = st.tuples(
    st.lists(st.tuples(st.integers(1, 8), st.integers(1, 8)), min_size=1, max_size=6),
    st.lists(
        st.tuples(
            st.integers(0, 4),  # owner Workload
            st.integers(0, 5),  # node index (modulo)
            st.integers(0, 3),  # cores
            st.integers(0, 3),  # GiB
        ),
        min_size=4,
        max_size=40,
    ),
    st.lists(st.integers(-3, 3), min_size=5, max_size=5),  # priority per owner
    # creationTimestamp per owner: None (unknown: "now") or one of a few seconds, so ties
    # happen and the sum and start rules are exercised
    st.lists(st.one_of(st.none(), st.integers(0, 3)), min_size=5, max_size=5),
)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cluster=cluster,
    count=st.integers(1, 4),
    cores=st.integers(0, 4),
    gib=st.integers(0, 4),
    priority=st.integers(0, 4),
    seed=st.integers(0, 2**16),
    daemon=st.booleans(),
)
def test_preemption_follows_the_rule(
    cluster: tuple[
        list[tuple[int, int]], list[tuple[int, int, int, int]], list[int], list[int | None]
    ],
    count: int,
    cores: int,
    gib: int,
    priority: int,
    seed: int,
    daemon: bool,
) -> None:
    shapes, placed, owner_priority, owner_started = cluster
    names = [f"n{i}" for i in range(len(shapes))]
    capacity = {n: (c * CPU, g * GiB) for n, (c, g) in zip(names, shapes, strict=True)}
    infos = [node(n, cpu=str(c), memory=f"{g}Gi") for n, (c, g) in zip(names, shapes, strict=True)]
    # Only what fits: a cluster orca built is never over capacity to begin with.
    room = {n: list(capacity[n]) for n in names}
    replicas: list[Replica] = []
    for i, (owner, at, c, g) in enumerate(placed):
        n = names[at % len(names)]
        if room[n][0] >= c * CPU and room[n][1] >= g * GiB:
            room[n][0] -= c * CPU
            room[n][1] -= g * GiB
            key = f"ns/w{owner}"
            start = owner_started[owner]
            replicas.append(
                Replica(
                    key,
                    f"{key}-{i}",
                    n,
                    c * CPU,
                    g * GiB,
                    owner_priority[owner],
                    2**62 if start is None else start,
                )
            )
    priorities = {f"ns/w{o}": p for o, p in enumerate(owner_priority)}
    started = {
        f"ns/w{o}": datetime.fromtimestamp(t, UTC)
        for o, t in enumerate(owner_started)
        if t is not None
    }

    def ledger_of(order: list[NodeInfo]) -> Ledger:
        ledger = Ledger(NodeTable(order))
        for key in priorities:
            ledger.load(
                key,
                [Booking(r.node, r.alloc, r.cpu, r.memory) for r in replicas if r.key == key],
            )
        return ledger

    scheduler = Scheduler()
    resources = {"cpu": str(cores), "memory": f"{gib}Gi"}
    if daemon:
        boss = workload("boss", kind="DaemonSet", resources=resources)
    else:
        boss = workload("boss", kind="Service", count=count, resources=resources)
    ledger = ledger_of(list(infos))
    decision = scheduler.schedule(boss, ledger, now=NOW)
    if decision.code is not Code.UNSCHEDULABLE or (not daemon and decision.placed == count):
        event("fits, or not for lack of room")
        return
    plan = select_victims(scheduler, boss, ledger, decision, priority, priorities, started, now=NOW)
    request = (cores * CPU, gib * GiB)
    if daemon:
        expected = daemon_oracle(
            capacity, replicas, {b.node for b in decision.bookings}, request, priority
        )
    else:
        expected = oracle_after(
            capacity, replicas, decision.bookings, request, count - decision.placed, priority
        )
    got = (
        []
        if plan is None
        else [(n.node, sorted(v.booking.alloc_id for v in n.victims)) for n in plan.nominations]
    )
    if not any(v for _, v in expected):
        expected = []
    assert got == expected
    if plan is None:
        event("short, no victims would help")
        return
    if daemon:
        event(f"DaemonSet preempted on {len(plan.nominations)} node(s)")
    else:
        event(f"Service preempted for {len(plan.nominations)} of {count - decision.placed}")
    # Never an equal or higher priority; each victim once.
    assert all(v.priority < priority for v in plan.victims)
    assert len({v.booking.alloc_id for v in plan.victims}) == len(plan.victims)
    # Same plan whatever order the nodes are listed in.
    shuffled = list(infos)
    random.Random(seed).shuffle(shuffled)
    again = select_victims(
        scheduler, boss, ledger_of(shuffled), decision, priority, priorities, started, now=NOW
    )
    assert again == plan
    # Remove the victims: the preemptor now places one more replica per nomination, and no
    # node is over capacity.
    for key, kept in plan.remaining(ledger).items():
        ledger.load(key, kept)
    redecided = scheduler.schedule(boss, ledger, now=NOW)
    assert redecided.placed == decision.placed + len(plan.nominations)
    ledger.load(boss.key, redecided.bookings)
    free_cpu, free_memory = ledger.free()
    assert (free_cpu >= 0).all() and (free_memory >= 0).all()


def oracle_after(
    capacity: dict[str, tuple[int, int]],
    replicas: list[Replica],
    placed: tuple[Booking, ...],
    request: tuple[int, int],
    missing: int,
    priority: int,
) -> list[tuple[str, list[str]]]:
    """The oracle, with the preemptor's own placements of this decision taking room (as
    never-preemptible replicas of its own priority)."""
    own = [Replica("ns/boss", b.alloc_id, b.node, b.cpu, b.memory, priority) for b in placed]
    return oracle(capacity, [*replicas, *own], request, missing, priority)


def test_victims_only_where_the_preemptor_lands_when_spread_says_no_elsewhere() -> None:
    """The plan nominates a and b (both zone z1) for two replicas; decided again, topology
    spread (maxSkew 1 over z1/z2) lets only one land in z1 and c (z2) stays full: only the
    replica on a is preempted, not b's for nothing (``orca plan`` and the operator alike)."""
    nodes = [
        node("a", cpu="1", labels={"zone": "z1"}),
        node("b", cpu="1", labels={"zone": "z1"}),
        node("c", cpu="1", labels={"zone": "z2"}),
    ]
    placed = [{"node": n, "allocId": f"shop/low-{i}", "score": 0} for i, n in enumerate("abc")]
    low = workload(
        "low",
        kind="Service",
        count=3,
        resources={"cpu": "1"},
        status={"placements": placed, "resources": {"cpu": "1"}},
    )
    spread = [{"topologyKey": "zone", "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}]
    boss = workload(
        "boss",
        kind="Service",
        count=2,
        resources={"cpu": "1"},
        topologySpread=spread,
        priorityClassName="urgent",
    )
    classes = PriorityClasses.of([PriorityClass("urgent", 100)])
    results = {r.workload.key: r for r in plan_offline(nodes, [low, boss], classes=classes)}
    assert [
        (p.victim.booking.node, p.victim.booking.alloc_id) for p in results["shop/boss"].victims
    ] == [("a", "shop/low-0")]
    assert [p.node for p in results["shop/boss"].status.placements] == ["a"]
    assert [p.node for p in results["shop/low"].status.placements] == ["b", "c"]


def test_preempted_status_of_a_workload_that_wants_no_node_is_unschedulable() -> None:
    """A DaemonSet whose status recorded ``desired`` 0 (no node wants it any more) is
    Unschedulable, as its decision says (``placement.place_daemonset``: 0 wanted nodes is
    Unschedulable), not Scheduled with 0/0, once its last replica is preempted."""
    previous = WorkloadStatus.model_validate(
        {
            "phase": "Unschedulable",
            "desired": 0,
            "placed": 1,
            "placements": [{"node": "a", "allocId": "ns/agent-a", "score": 1}],
        }
    )
    victim = Victim("ns/agent", Booking("a", "ns/agent-a", 1000, 0), 0)
    status = preempted_status(previous, [victim], "ns/boss", 1000, "2026-01-02T00:00:00Z")
    assert (status.phase, status.placed, status.placements) == (Phase.UNSCHEDULABLE, 0, [])


def test_no_preemption_when_deciding_again_only_moves_the_replica() -> None:
    """The plan frees a (zone z1) for boss's missing second replica. Decided again without the
    victim, the first replica prefers a (more room: Spread scores 87 against b's 75) and the
    second may go nowhere: b is in z1 too, so z1 would hold 2 against z2's 0 (maxSkew 1), and
    c (z2) is full of a Workload of boss's own priority. One replica before, one after, only
    on another node: the preemption gains nothing, so it does not stand (and is not tried
    again forever)."""
    nodes = [
        node("a", cpu="8", labels={"zone": "z1"}),
        node("b", cpu="4", labels={"zone": "z1"}),
        node("c", cpu="4", labels={"zone": "z2"}),
    ]
    ledger = Ledger(NodeTable(nodes))
    ledger.load("shop/low", [_booking("a", "shop/low", 0, 8)])
    ledger.load("shop/peer", [_booking("c", "shop/peer", 0, 4)])
    boss = workload(
        "boss",
        kind="Service",
        count=2,
        resources={"cpu": "2"},
        topologySpread=[
            {"topologyKey": "zone", "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}
        ],
        priorityClassName="urgent",
    )
    classes = PriorityClasses.of([PriorityClass("urgent", 100)])
    preemptible = {"shop/low": 0, "shop/peer": 100}
    scheduler = Scheduler()
    decision = scheduler.schedule(boss, ledger, classes, now=NOW)
    assert ([p.node for p in decision.placements], decision.code) == (["b"], Code.UNSCHEDULABLE)
    plan = select_victims(scheduler, boss, ledger, decision, 100, preemptible, now=NOW)
    assert plan is not None and _victims(plan) == [("a", "shop/low-0")]
    after = scheduler.schedule(boss, ledger.what_if(lift=plan.lifted()), classes, now=NOW)
    assert [p.node for p in after.placements] == ["a"]
    assert preempt(scheduler, boss, ledger, decision, classes, preemptible, now=NOW) is None


def test_a_daemonset_looks_past_the_nodes_that_already_hold_it() -> None:
    """a holds one of low's replicas and still has room: the DaemonSet lands there without
    preempting; b, after it in hostname order, is full of low and is where low loses one."""
    ledger = Ledger(NodeTable([node("a", cpu="2"), node("b", cpu="2")]))
    ledger.load("ns/low", [_booking("a", "ns/low", 0, 1), _booking("b", "ns/low", 1, 2)])
    plan = _plan(ledger, {"ns/low": 0}, 10, kind="DaemonSet", resources={"cpu": "1"})
    assert _victims(plan) == [("b", "ns/low-1")]


def test_a_daemonset_that_no_victim_makes_room_for_has_no_plan() -> None:
    """a is full: low's core and peer's, which has the DaemonSet's priority; removing low
    frees one core of the two it needs, so there is nothing to preempt."""
    ledger = Ledger(NodeTable([node("a", cpu="2")]))
    ledger.load("ns/low", [_booking("a", "ns/low", 0, 1)])
    ledger.load("ns/peer", [_booking("a", "ns/peer", 0, 1)])
    priorities = {"ns/low": 0, "ns/peer": 10}
    assert _plan(ledger, priorities, 10, kind="DaemonSet", resources={"cpu": "2"}) is None


def test_a_request_of_zero_fits_an_over_committed_node() -> None:
    """A zero request fits anywhere (``ledger.fits``, as ResourcesFit and kube's
    NodeResourcesFit): a node whose cpu is over-committed by a Workload that cannot be
    preempted still takes a Job asking only memory, once low's memory is freed."""
    ledger = Ledger(NodeTable([node("a", cpu="1", memory="4Gi")]))
    ledger.load("ns/peer", [_booking("a", "ns/peer", 0, 2)])  # 2 cores on a 1-core node
    ledger.load("ns/low", [_booking("a", "ns/low", 0, 0, 4)])
    plan = _plan(ledger, {"ns/low": 0, "ns/peer": 10}, 10, kind="Job", resources={"memory": "2Gi"})
    assert _victims(plan) == [("a", "ns/low-0")]


def test_a_node_with_room_but_no_use_is_passed_over_not_the_end_of_the_search() -> None:
    """boss (a Service, maxSkew 1 over zones) holds r in z1; a second replica may not go to r
    (z1 would be 2 against z2's 0), though r has room. r holds a priority -5 replica, so the
    search looks at r first (the lowest victim priority): removing nothing makes room there,
    so r is no candidate, and the search goes on to v (z2), full of low, whose replica goes."""
    ledger = Ledger(
        NodeTable(
            [node("r", cpu="2", labels={"zone": "z1"}), node("v", cpu="1", labels={"zone": "z2"})]
        )
    )
    ledger.load("ns/tiny", [_booking("r", "ns/tiny", 0, 0)])
    ledger.load("ns/low", [_booking("v", "ns/low", 0, 1)])
    spread = [{"topologyKey": "zone", "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}]
    plan = _plan(
        ledger,
        {"ns/tiny": -5, "ns/low": 0},
        10,
        kind="Service",
        count=3,
        resources={"cpu": "1"},
        topologySpread=spread,
    )
    assert _victims(plan) == [("v", "ns/low-0")]


def test_a_workload_is_never_its_own_victim_even_when_listed_below_its_priority() -> None:
    """boss, a Service of two, holds all of a with replica 0; b is full of peer, which may not
    be preempted. ``preemptible`` lists boss itself at 0 (its priority before its class was
    raised, say), under the 10 it preempts at now: removing its own replica to place another
    gains nothing, so there is no plan. (The operator and ``orca plan`` leave the preemptor
    out of ``preemptible``; select_victims does not rely on it.)"""
    ledger = Ledger(NodeTable([node("a", cpu="2"), node("b", cpu="2")]))
    ledger.load("shop/boss", [_booking("a", "shop/boss", 0, 2)])
    ledger.load("shop/peer", [_booking("b", "shop/peer", 0, 2)])
    scheduler = Scheduler()
    boss = workload("boss", kind="Service", count=2, resources={"cpu": "2"})
    decision = scheduler.schedule(boss, ledger, now=NOW)
    assert (decision.placed, decision.desired, decision.code) == (1, 2, Code.UNSCHEDULABLE)
    preemptible = {"shop/boss": 0}
    assert select_victims(scheduler, boss, ledger, decision, 10, preemptible, now=NOW) is None
