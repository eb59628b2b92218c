"""Score plugins: CEL affinity and Workload-name affinity (capacity: test_scheduler)."""

from __future__ import annotations

import numpy as np

from controller.core.plugins.cel_affinity import CelAffinity
from controller.core.plugins.name_affinity import NameAffinity
from controller.core.scheduler import Scheduler
from tests.factories import cycle_for, ledger_for, node, workload


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
    (error,) = CelAffinity(Scheduler().cel).pre_filter(Scheduler().snapshot(w, ledger_for()))
    assert error.startswith("spec.affinity[1].target 'node.('")


def test_name_affinity_adds_weight_per_replica_of_the_target() -> None:
    ledger = ledger_for(node("a", cpu="8"), node("b", cpu="8"), node("c", cpu="8"))
    redis = workload(name="redis", kind="Service", count=3)
    ledger.load(redis.key, Scheduler().schedule(redis, ledger).bookings)
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
