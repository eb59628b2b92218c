"""Which existing replicas stay (``placement.keep``, docs/design.md 5), each rule on the
smallest cluster that shows it. The expectations follow the rules of ``keep``'s docstring:
count down drops the highest indexes, a DaemonSet keeps one replica per node, capacity never
evicts yet a replica that grew stays only where its node holds the new size, and replicas that
did not grow are settled first."""

from __future__ import annotations

from typing import Any

import numpy as np

from controller.scheduler.ledger import Booking, alloc_id
from controller.scheduler.nodes import NodeInfo
from controller.scheduler.placement import keep, release
from tests.support.factories import GiB, cycle_for, ledger_for, node, workload

CORE = 1000  # millicores


def kept_after(
    nodes: list[NodeInfo], existing: list[tuple[int, str, int, int]], **spec: Any
) -> tuple[dict[int, str], list[int]]:
    """``keep`` as the scheduler runs it (the Workload's bookings counted on their nodes,
    given back, then kept where ``keeps`` holds: everywhere here), for ``existing`` as
    (index, node, booked cpu, booked memory) in the order its status lists them. Returns the
    kept replicas' nodes by index and each node's free cpu afterwards."""
    w = workload(name="web", **spec)
    bookings = [
        Booking(n, alloc_id(w.metadata.namespace, w.metadata.name, i), c, m)
        for i, n, c, m in existing
    ]
    ledger = ledger_for(*nodes)
    ledger.load(w.key, bookings)
    cycle = cycle_for(w, ledger)
    release(cycle, bookings)
    kept = keep(cycle, bookings, np.ones(len(nodes), dtype=np.bool_))
    return {i: b.node for i, b in kept.items()}, cycle.free_cpu.tolist()


def test_count_down_drops_the_highest_indexes_in_whatever_order_the_status_lists_them() -> None:
    kept, _ = kept_after(
        [node("a"), node("b"), node("c")],
        [(2, "c", CORE, 0), (0, "a", CORE, 0), (1, "b", CORE, 0)],
        kind="Service",
        count=2,
        resources={"cpu": "1"},
    )
    assert kept == {0: "a", 1: "b"}


def test_a_daemonset_keeps_one_replica_per_node() -> None:
    """Two replicas on a (a status written by hand, or a node renamed): the first listed stays,
    the other leaves, and b's replica after them still stays."""
    kept, free = kept_after(
        [node("a"), node("b")],
        [(0, "a", CORE, 0), (1, "a", CORE, 0), (2, "b", CORE, 0)],
        kind="DaemonSet",
        resources={"cpu": "1"},
    )
    assert kept == {0: "a", 2: "b"}
    assert free == [3 * CORE, 3 * CORE]


def test_replicas_that_did_not_grow_are_settled_before_those_that_grew() -> None:
    """a (3 cores) holds replica 0 booked at 1 core and replica 1 already at the new 2: replica
    1 stays first; replica 0 needs 2 cores where 1 is left, so it is placed again."""
    kept, free = kept_after(
        [node("a", cpu="3")],
        [(0, "a", CORE, 0), (1, "a", 2 * CORE, 0)],
        kind="Service",
        count=2,
        resources={"cpu": "2"},
    )
    assert kept == {1: "a"}
    assert free == [CORE]


def test_a_replica_that_grew_in_memory_stays_only_where_the_memory_is() -> None:
    kept, _ = kept_after(
        [node("a", cpu="4", memory="1Gi")],
        [(0, "a", CORE, GiB // 2)],
        kind="Service",
        count=1,
        resources={"cpu": "1", "memory": "2Gi"},
    )
    assert kept == {}


def test_a_grown_replica_that_does_not_fit_leaves_the_next_one_in_place() -> None:
    """Replica 0 grew past a's 1 core; replica 1 grew too and b holds it: only 0 moves."""
    kept, _ = kept_after(
        [node("a", cpu="1"), node("b", cpu="4")],
        [(0, "a", CORE // 2, 0), (1, "b", CORE // 2, 0)],
        kind="Service",
        count=2,
        resources={"cpu": "2"},
    )
    assert kept == {1: "b"}


def test_a_replica_listed_twice_is_kept_once() -> None:
    """A status that lists one placement twice (written by hand) books it once."""
    kept, free = kept_after(
        [node("a")],
        [(0, "a", CORE, 0), (0, "a", CORE, 0)],
        kind="Service",
        count=1,
        resources={"cpu": "1"},
    )
    assert kept == {0: "a"}
    assert free == [3 * CORE]
