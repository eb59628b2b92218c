"""TopologySpread: DoNotSchedule's filter (reasons, codes, live domains), ScheduleAnyway's
score, and how both meet the Service placement (2/2/1, kept replicas, the diagnosis)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from controller.api.models import Phase
from controller.scheduler.explain import explain
from controller.scheduler.framework import Code, CycleState
from controller.scheduler.ledger import Ledger
from controller.scheduler.plugins.topology_spread import TopologySpread
from controller.scheduler.scheduler import Scheduler
from tests.support.factories import NOW, ledger_for, node, rejected, workload

ZONE = "topology.kubernetes.io/zone"
SKEW = f"node(s) didn't match pod topology spread constraints ({ZONE})"
MISSING = f"node(s) didn't match pod topology spread constraints (missing required label {ZONE})"


def spread(max_skew: int = 1, when: str = "DoNotSchedule", key: str = ZONE) -> dict[str, Any]:
    return {"topologyKey": key, "maxSkew": max_skew, "whenUnsatisfiable": when}


def zoned(name: str, zone: str | None, **kwargs: Any) -> Any:
    return node(name, labels={ZONE: zone} if zone else {}, **kwargs)


def prepared(ledger: Ledger, own: list[int] | None = None, **spec: Any) -> CycleState:
    """A cycle after the static filters (as the per-replica filters see it), with ``own``
    replicas of this Workload per node as if the cycle had placed them."""
    prepared = Scheduler().prepare(workload(kind="Service", **spec), ledger, now=NOW)
    assert prepared.filtered is not None, prepared.errors
    if own is not None:
        prepared.cycle.own[:] = own
    return prepared.cycle


# -- the filter ----------------------------------------------------------------------------------

THREE_ZONES = (zoned("a1", "a"), zoned("a2", "a"), zoned("b1", "b"), zoned("c1", "c"))


@pytest.mark.parametrize(
    ("own", "max_skew", "skewed"),
    [
        ([0, 0, 0, 0], 1, []),  # nothing placed: every domain is at the minimum
        ([1, 0, 0, 0], 1, [0, 1]),  # zone a has 1, b and c 0: a would reach 2 - 0 > 1
        ([1, 0, 1, 0], 1, [0, 1, 2]),  # a and b have 1, c has 0: only c
        ([1, 0, 1, 0], 2, []),  # maxSkew 2: 2 - 0 is allowed
        ([2, 1, 0, 0], 2, [0, 1]),  # a has 3: 4 - 0 > 2
        ([1, 0, 1, 1], 1, []),  # 1/1/1: every domain at the minimum again
    ],
    ids=["empty", "a-ahead", "only-c", "skew-2", "a-far-ahead", "even"],
)
def test_do_not_schedule_allows_only_where_the_skew_stays_within_max_skew(
    own: list[int], max_skew: int, skewed: list[int]
) -> None:
    cycle = prepared(ledger_for(*THREE_ZONES), own, topologySpread=[spread(max_skew)])
    verdict = TopologySpread().filter(cycle)
    assert rejected(verdict) == {SKEW: skewed}  # every node has the key: no MISSING reason


def test_nodes_without_the_key_are_unresolvable_and_the_skew_unschedulable() -> None:
    cycle = prepared(
        ledger_for(*THREE_ZONES, zoned("x", None)), [1, 0, 0, 0, 0], topologySpread=[spread()]
    )
    verdict = TopologySpread().filter(cycle)
    assert rejected(verdict) == {MISSING: [4], SKEW: [0, 1]}
    codes = {r.reason: r.code for r in verdict.rejections}
    assert codes == {MISSING: Code.UNRESOLVABLE, SKEW: None}  # None: the plugin's code
    plugin = TopologySpread()
    assert (plugin.code, plugin.per_replica, plugin.evicts) == (Code.UNSCHEDULABLE, True, False)


def test_a_cordoned_zone_counts_by_default_and_not_when_taints_are_honoured() -> None:
    # Zone c's only node is cordoned. kube counts a cordoned node's domain unless
    # nodeTaintsPolicy is Honor (its node.kubernetes.io/unschedulable taint), so with the
    # default c holds the minimum at 0; a domain no node of which passes the constraints
    # does not count (nodeAffinityPolicy: Honor, the default).
    ledger = ledger_for(zoned("a1", "a"), zoned("b1", "b"), zoned("c1", "c", cordoned=True))
    cycle = prepared(ledger, [1, 1, 0], topologySpread=[spread()])
    assert rejected(TopologySpread().filter(cycle)) == {SKEW: [0, 1]}
    honour = {**spread(), "nodeTaintsPolicy": "Honor"}
    cycle = prepared(ledger, [1, 1, 0], topologySpread=[honour])
    assert rejected(TopologySpread().filter(cycle)) == {SKEW: []}
    constrained = prepared(
        ledger, [1, 1, 0], topologySpread=[spread()], constraints=[f'node.labels["{ZONE}"] != "c"']
    )
    assert rejected(TopologySpread().filter(constrained)) == {SKEW: []}


def test_a_full_domain_still_counts_so_its_nodes_hold_the_minimum() -> None:
    # Capacity is not one of the "other filters": zone b has no room, yet it is live.
    ledger = ledger_for(zoned("a1", "a"), zoned("a2", "a"), zoned("b1", "b", cpu="100m"))
    cycle = prepared(ledger, [1, 0, 0], topologySpread=[spread()], resources={"cpu": "1"})
    assert rejected(TopologySpread().filter(cycle)) == {SKEW: [0, 1]}


def test_every_do_not_schedule_constraint_must_hold() -> None:
    host = "kubernetes.io/hostname"
    nodes = [
        node(name, labels={ZONE: zone, host: name})
        for name, zone in [("a1", "a"), ("a2", "a"), ("b1", "b")]
    ]
    cycle = prepared(ledger_for(*nodes), [1, 0, 0], topologySpread=[spread(), spread(key=host)])
    assert rejected(TopologySpread().filter(cycle)) == {
        SKEW: [0, 1],
        f"node(s) didn't match pod topology spread constraints ({host})": [0],
    }


def test_a_workload_without_topology_spread_gets_nothing_from_the_plugin() -> None:
    cycle = prepared(ledger_for(*THREE_ZONES), [3, 0, 0, 0])
    plugin = TopologySpread()
    assert plugin.filter(cycle).rejections == ()
    assert plugin.score(cycle, np.arange(4)) is None
    soft_only = prepared(
        ledger_for(*THREE_ZONES), [3, 0, 0, 0], topologySpread=[spread(when="ScheduleAnyway")]
    )
    assert plugin.filter(soft_only).rejections == ()


# -- the score -----------------------------------------------------------------------------------


def test_schedule_anyway_scores_the_least_loaded_domain_best() -> None:
    cycle = prepared(
        ledger_for(*THREE_ZONES, zoned("x", None)),
        [1, 1, 1, 0, 0],  # zone a 2, b 1, c 0
        topologySpread=[spread(when="ScheduleAnyway")],
    )
    score = TopologySpread().score(cycle, np.arange(5))
    assert score is not None
    # kube's scoring.go: weight ln(3 domains + 2); raw a 2*ln 5 = 3.22 -> 3, b 1.61 -> 2,
    # c 0; normalised 100*(3+0-s)/3: a 0, b 33, c 100; x lacks the key: 0; all shifted -100
    assert score.tolist() == [-100, -100, -67, 0, -100]


def test_schedule_anyway_never_filters() -> None:
    ledger = ledger_for(zoned("a1", "a"), zoned("a2", "a"), zoned("b1", "b", cpu="100m"))
    w = workload(
        kind="Service",
        count=3,
        resources={"cpu": "1"},
        topologySpread=[spread(when="ScheduleAnyway")],
    )
    decision = Scheduler().schedule(w, ledger, now=NOW)
    assert decision.phase is Phase.SCHEDULED
    assert sorted(p.node for p in decision.placements) == ["a1", "a1", "a2"]


# -- with the Service placement ------------------------------------------------------------------


def six_nodes_three_zones(**kwargs: Any) -> Ledger:
    return ledger_for(*(zoned(f"{z}{i}", z, **kwargs) for z in "abc" for i in (1, 2)))


def test_five_replicas_over_three_zones_land_two_two_one_on_distinct_nodes() -> None:
    decision = Scheduler().schedule(
        workload(kind="Service", count=5, topologySpread=[spread()]),
        six_nodes_three_zones(),
        now=NOW,
    )
    assert decision.phase is Phase.SCHEDULED
    nodes = [p.node for p in decision.placements]
    assert len(set(nodes)) == 5  # the node-level anti-affinity still applies within zones
    assert sorted(n[0] for n in nodes) == ["a", "a", "b", "b", "c"]


def test_an_unsatisfiable_constraint_says_so_and_waits_for_capacity() -> None:
    # Only zone a has room: one replica there, then a would be 2 ahead of b and c.
    ledger = ledger_for(
        zoned("a1", "a"),
        zoned("a2", "a"),
        zoned("b1", "b", cpu="100m"),
        zoned("c1", "c", cpu="100m"),
    )
    w = workload(kind="Service", count=3, resources={"cpu": "1"}, topologySpread=[spread()])
    decision = Scheduler().schedule(w, ledger, now=NOW)
    assert decision.phase is Phase.PARTIALLY_SCHEDULED
    assert decision.message == (
        f"1/3 replicas placed; 0/4 nodes are available: 2 {SKEW}, 2 Insufficient cpu."
    )
    assert decision.code is Code.UNSCHEDULABLE  # freed room in b or c cures it


def test_nodes_that_all_lack_the_key_are_unresolvable() -> None:
    ledger = ledger_for(zoned("x1", None), zoned("x2", None))
    decision = Scheduler().schedule(
        workload(kind="Service", count=2, topologySpread=[spread()]), ledger, now=NOW
    )
    assert decision.phase is Phase.UNSCHEDULABLE
    assert decision.message == f"0/2 nodes are available: 2 {MISSING}."
    assert decision.code is Code.UNRESOLVABLE


def test_existing_replicas_stay_when_the_skew_grows_and_new_ones_fill_the_minimum() -> None:
    # Two replicas sit in zone a (placed before the constraint); adding it moves nothing,
    # and the third replica goes to the least-loaded zone.
    ledger = six_nodes_three_zones()
    before = Scheduler().schedule(workload(kind="Service", count=2), ledger, now=NOW)
    ledger.load("shop/web", before.bookings)
    assert [p.node for p in before.placements] == ["a1", "a2"]
    after = Scheduler().schedule(
        workload(kind="Service", count=3, topologySpread=[spread()]), ledger, now=NOW
    )
    assert after.phase is Phase.SCHEDULED
    assert [p.node for p in after.placements] == ["a1", "a2", "b1"]


def test_explain_shows_the_spread_reason_for_the_next_replica() -> None:
    ledger = six_nodes_three_zones()
    w = workload(kind="Service", count=2, topologySpread=[spread()])
    ledger.load(w.key, Scheduler().schedule(w, ledger, now=NOW).bookings)  # a1 and b1
    explanation = explain(Scheduler(), w, ledger, now=NOW)
    rejected_by = {v.node: (v.filter, v.reason) for v in explanation.nodes if v.filter}
    assert rejected_by == {n: ("TopologySpread", SKEW) for n in ["a1", "a2", "b1", "b2"]}
    passing = [v for v in explanation.nodes if v.filter is None]
    assert [v.node for v in passing] == ["c1", "c2"]
    assert all(v.scores["TopologySpread"] == 0 for v in passing)


def test_both_behaviours_keep_their_own_domains_within_a_cycle() -> None:
    """DoNotSchedule over zone (maxSkew 5: it never binds here) and ScheduleAnyway over rack
    in one spec: the score counts racks, not zones, even after the filter prepared the zones.
    Rack r1 (a, b) holds the one replica, r2 (c) none: raw round(1 * ln(2 + 2)) = 1 on a and
    b, 0 on c; normalised and shifted, -100, -100, 0."""
    ledger = ledger_for(
        node("a", labels={ZONE: "z1", "rack": "r1"}),
        node("b", labels={ZONE: "z2", "rack": "r1"}),
        node("c", labels={ZONE: "z1", "rack": "r2"}),
    )
    cycle = prepared(
        ledger,
        own=[1, 0, 0],
        topologySpread=[spread(max_skew=5), spread(when="ScheduleAnyway", key="rack")],
    )
    plugin = TopologySpread()
    assert rejected(plugin.filter(cycle)) == {SKEW: []}
    part = plugin.score(cycle, np.arange(3))
    assert part is not None and part.tolist() == [-100, -100, 0]


def test_the_spread_asks_for_the_static_filters_first() -> None:
    cycle = Scheduler().snapshot(
        workload(kind="Service", topologySpread=[spread()]), ledger_for(node("a")), NOW
    )
    with pytest.raises(RuntimeError, match=r"^TopologySpread runs after Framework\.filter$"):
        TopologySpread().filter(cycle)
