"""Property tests of issue 46 over random clusters and Workloads (hypothesis), against
``tests.support.oracles`` (which imports nothing of orca).

Clusters: a few Nodes with random allocatable cpu and memory, ``pods`` stated or not (not:
orca's documented "no limit"), and one or two extended resources (``nvidia.com/gpu``,
``example.com/fpga``) and ``ephemeral-storage``, each offered or not. Workloads: Jobs,
Services and DaemonSets asking for any of those resources, Services with gangs
(``minCount``, ``timeoutSeconds`` 0, 5 or 300), disruption budgets of every form
(``minAvailable``/``maxUnavailable``, a number or a percentage) and priorities from three
PriorityClasses.

Three promises, each checked after ``orca plan``'s ``plan`` on fresh Workloads, after a plan
of the same Workloads (with the statuses the first plan wrote) joined by higher-priority ones
that preempt, and after a drain what-if (``WhatIf.answer``) of those:

- a gang's placed count is never strictly between 0 and its ``minCount`` (``plan`` and the
  what-ifs give a gang no grace: ``controller.scheduler.gang``);
- no node's booked amount of any resource (cpu, memory, each extended resource,
  ephemeral-storage, and the Pods, one per replica) exceeds its allocatable, summed by the
  oracle from the specs and the placements, never from the ledger;
- no preemption takes a Workload below its disruption budget (the desired-healthy count,
  PodDisruptionBudget's rounding, ``oracles.desired_healthy``) or a gang below its
  ``minCount``: walking the results in planning order, each Workload's replicas are counted
  down by every preemption of them and must stay at or above what it needs.

Two bugs these found, each kept as its minimal case at the end:

- ``WhatIf``'s default scheduler and ``orca plan``'s gave a gang the operator's grace, so a
  drain left it half placed (``test_a_drain_what_if_leaves_no_gang_half_placed``);
- the budgets counted a victim's replicas booked on drained nodes as placed
  (``test_a_preemption_counts_no_replica_on_a_drained_node``).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, target
from hypothesis import strategies as st

from controller.api.models import Disruption, Workload
from controller.scheduler.ledger import ledger_from_statuses
from controller.scheduler.nodes import NodeInfo, node_info_from_node
from controller.scheduler.plan import PlanResult, plan
from controller.scheduler.priority import PriorityClass, PriorityClasses
from controller.scheduler.scheduler import Scheduler
from controller.scheduler.whatif import Question, WhatIf
from tests.support import oracles
from tests.support.cli import Orca, write
from tests.support.factories import node_object, workload, workload_obj
from tests.support.oracles import Spec
from tests.support.properties import examples

NOW = "2025-01-01T00:00:00Z"
NAMESPACE = "shop"
GPU = "nvidia.com/gpu"
FPGA = "example.com/fpga"
STORAGE = "ephemeral-storage"

CLASSES = PriorityClasses.of(
    [PriorityClass("low", 10), PriorityClass("mid", 100), PriorityClass("high", 1000)]
)
PRIORITY = {None: 0, "low": 10, "mid": 100, "high": 1000}

# -- clusters ------------------------------------------------------------------------------------

_OPTIONAL = {
    "pods": st.sampled_from(["0", "1", "2", "3", "5", "8"]),
    GPU: st.sampled_from(["0", "1", "2", "4"]),
    FPGA: st.sampled_from(["1", "2"]),
    STORAGE: st.sampled_from(["20Gi", "100Gi"]),
}


@st.composite
def _node(draw: st.DrawFn) -> dict[str, Any]:
    extra = draw(st.fixed_dictionaries({}, optional=_OPTIONAL))
    return node_object(
        f"node-{draw(st.integers(0, 20))}",
        cpu=draw(st.sampled_from(["1", "2", "4", "1500m"])),
        memory=draw(st.sampled_from(["2Gi", "4Gi", "8Gi"])),
        cordoned=draw(st.sampled_from([False] * 7 + [True])),
        allocatable=extra,
    )


clusters = st.lists(_node(), min_size=1, max_size=4, unique_by=lambda o: o["metadata"]["name"])

# -- Workloads -----------------------------------------------------------------------------------

_REQUESTS = {
    "cpu": st.sampled_from(["0", "500m", "1", "2"]),
    "memory": st.sampled_from(["512Mi", "1Gi", "3Gi"]),
    GPU: st.sampled_from(["0", "1", "2"]),
    FPGA: st.just("1"),
    STORAGE: st.sampled_from(["10Gi", "30Gi"]),
}
# Small numbers and percentages that round (25% of 3 is 0.75: 1), so budgets bind often.
_COUNT_OR_PERCENT = st.one_of(
    st.integers(0, 3), st.sampled_from(["0%", "25%", "34%", "50%", "60%", "100%"])
)
_DISRUPTION = st.one_of(
    st.builds(lambda v: {"minAvailable": v}, _COUNT_OR_PERCENT),
    st.builds(lambda v: {"maxUnavailable": v}, _COUNT_OR_PERCENT),
)


def specs(classes: Sequence[str | None]) -> st.SearchStrategy[dict[str, Any]]:
    """Workload specs as a user writes them, at one of ``classes``' priorities."""

    @st.composite
    def draw_spec(draw: st.DrawFn) -> dict[str, Any]:
        kind = draw(st.sampled_from(["Job", "Service", "Service", "DaemonSet"]))
        spec: dict[str, Any] = {"kind": kind}
        if resources := draw(st.fixed_dictionaries({}, optional=_REQUESTS)):
            spec["resources"] = resources
        if kind == "Service":
            count = spec["count"] = draw(st.integers(1, 6))
            if draw(st.booleans()):
                spec["gang"] = {
                    "minCount": draw(st.integers(1, count)),
                    "timeoutSeconds": draw(st.sampled_from([0, 5, 300])),
                }
        if draw(st.booleans()):
            spec["disruption"] = draw(_DISRUPTION)
        if (chosen := draw(st.sampled_from(classes))) is not None:
            spec["priorityClassName"] = chosen
        return spec

    return draw_spec()


fresh = st.lists(specs([None, "low", "mid", "high"]), min_size=1, max_size=6)
# Placed first, at low priorities; then joined by Workloads that may preempt them.
incumbents = st.lists(specs([None, "low"]), min_size=1, max_size=5)
newcomers = st.lists(specs(["mid", "high"]), min_size=1, max_size=3)

common = settings(
    max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

# -- driving the scheduler -----------------------------------------------------------------------


def node_infos(objects: Sequence[dict[str, Any]]) -> list[NodeInfo]:
    return [node_info_from_node(o) for o in objects]


def as_workloads(batch: Sequence[Spec], first: int = 0) -> list[Workload]:
    return [workload(name=f"w{first + i}", namespace=NAMESPACE, **s) for i, s in enumerate(batch)]


def stored(result: PlanResult) -> Workload:
    """A Workload as the API server returns it after the plan wrote its status (through
    JSON, as a relist reads it)."""
    return workload(
        name=result.workload.metadata.name,
        namespace=NAMESPACE,
        status=json.loads(result.status.model_dump_json(by_alias=True, exclude_none=True)),
        **result.workload.spec.model_dump(by_alias=True, mode="json", exclude_none=True),
    )


def placed_on(result: PlanResult) -> list[str]:
    return [p.node for p in result.status.placements]


# -- the three promises --------------------------------------------------------------------------


def gangs_are_whole(specs_by_key: Mapping[str, Spec], results: Sequence[PlanResult]) -> None:
    for result in results:
        gang = specs_by_key[result.workload.key].get("gang")
        if gang is not None:
            placed = len(result.status.placements)
            assert not 0 < placed < gang["minCount"], (result.workload.key, result.status.message)


def nothing_overbooked(
    objects: Sequence[dict[str, Any]],
    specs_by_key: Mapping[str, Spec],
    results: Sequence[PlanResult],
) -> float:
    """Per node and resource, the oracle's sum of (spec's amount x placements there) is at
    most the node's allocatable (``pods`` unstated: no limit), for every resource booked.
    Returns the fullest share of any resource of any node (to steer hypothesis to full
    nodes, where an over-booking shows)."""
    nodes = {o["metadata"]["name"]: oracles.allocatable(o) for o in objects}
    held = oracles.booked((specs_by_key[r.workload.key], placed_on(r)) for r in results)
    assert set(held) <= set(nodes), sorted(set(held) - set(nodes))
    fullest = 0.0
    for name, amounts in held.items():
        for resource, amount in amounts.items():
            capacity = nodes[name].get(resource, 0)
            if resource == "pods" and capacity is oracles.NO_POD_LIMIT:
                continue
            assert capacity is not None
            assert amount <= capacity or amount == 0, (name, resource, amount, capacity)
            if capacity:
                fullest = max(fullest, amount / capacity)
    return fullest


def needs(spec: Spec, daemon_nodes: int) -> int:
    """The replicas a preemption must leave a Workload: its disruption budget's desired
    healthy count of the desired replicas, and a gang's ``minCount``, the larger. A
    DaemonSet's desired replicas are ``daemon_nodes``, the nodes it is for whatever their
    room, as kube's DaemonSet controller counts ``desiredNumberScheduled`` (its
    ``NodeShouldRunDaemonPod`` reads no resources)."""
    kind = spec["kind"]
    expected = spec.get("count", 1) if kind != "DaemonSet" else daemon_nodes
    out = 0
    if (disruption := spec.get("disruption")) is not None:
        out = oracles.desired_healthy(disruption, expected)
    if (gang := spec.get("gang")) is not None:
        out = max(out, gang["minCount"])
    return out


def budgets_hold(
    specs_by_key: Mapping[str, Spec],
    nodes: Sequence[dict[str, Any]],
    live: Mapping[str, int],
    results: Sequence[PlanResult],
) -> tuple[int, int]:
    """Walking ``results`` in planning order from ``live`` (each Workload's replicas placed
    on a node of the cluster before the plan), every preemption's victims keep at least what
    they need (``needs``; a DaemonSet's percentages are of ``nodes`` not cordoned: the
    generated nodes are Ready and untainted, and orca's DaemonSets leave cordoned nodes).
    ``PlanResult.victims`` (what each took) and ``.preempted`` (what
    each lost) agree. Returns how many replicas were preempted, and how many preemptions left
    their victim with exactly what it needs, those of a percentage twice (to steer hypothesis
    to the budgets' edge, where an off-by-one or a rounding shows)."""
    daemon_nodes = sum(not o["spec"].get("unschedulable") for o in nodes)
    count = dict(live)
    taken_total: Counter[str] = Counter()
    tight = 0
    for result in results:
        taken = Counter(p.victim.key for p in result.victims)
        taken_total.update(taken)
        for key, lost in taken.items():
            count[key] = count.get(key, 0) - lost
            needed = needs(specs_by_key[key], daemon_nodes)
            assert count[key] >= needed, (key, specs_by_key[key], count[key], result.workload.key)
            if count[key] == needed > 0:  # no slack left; a rounded percentage counts twice
                budget = specs_by_key[key].get("disruption") or {}
                tight += 2 if any(isinstance(v, str) for v in budget.values()) else 1
        count[result.workload.key] = len(result.status.placements)
    lost_total = Counter(p.victim.key for r in results for p in r.preempted)
    assert lost_total == taken_total
    return sum(taken_total.values()), tight


# -- the budget oracle, and orca's rounding against it --------------------------------------------


def test_the_budget_oracle_agrees_with_kubernetes_cases() -> None:
    """Cases worked out by hand from kube's ``getExpectedPodCount`` (disruption.go) and
    ``GetScaledValueFromIntOrPercent`` (intstr.go, rounding up), so the oracle itself is
    checked against Kubernetes, not against orca."""
    cases: list[tuple[dict[str, int | str], int, int]] = [
        ({"minAvailable": 2}, 5, 2),  # a number is the count, whatever is expected
        ({"minAvailable": 7}, 5, 7),  # more than expected: nothing may go
        ({"minAvailable": "50%"}, 3, 2),  # ceil(1.5)
        ({"minAvailable": "34%"}, 3, 2),  # ceil(1.02)
        ({"minAvailable": "100%"}, 4, 4),
        ({"minAvailable": "0%"}, 4, 0),
        ({"maxUnavailable": 1}, 3, 2),  # 3 - 1
        ({"maxUnavailable": 5}, 3, 0),  # 3 - 5 < 0: 0
        ({"maxUnavailable": "50%"}, 3, 1),  # 3 - ceil(1.5)
        ({"maxUnavailable": "34%"}, 3, 1),  # 3 - ceil(1.02)
        ({"maxUnavailable": "0%"}, 4, 4),
        ({"maxUnavailable": "100%"}, 4, 0),
        ({"minAvailable": "60%"}, 0, 0),  # nothing expected
    ]
    for disruption, expected, healthy in cases:
        assert oracles.desired_healthy(disruption, expected) == healthy, (disruption, expected)


def test_orca_rounds_every_budget_as_kubernetes_does() -> None:
    """Every number 0..6 and every whole percentage, of 0 to 12 desired replicas:
    ``Disruption.desired_healthy`` is the oracle's (the property below relies on the budget
    orca enforces being this one; a rounding off by one there shows only at a budget's edge)."""
    values: list[int | str] = [*range(7), *(f"{p}%" for p in range(101))]
    for field in ("minAvailable", "maxUnavailable"):
        for value in values:
            rule = Disruption.model_validate({field: value})
            for expected in range(13):
                want = oracles.desired_healthy({field: value}, expected)
                assert rule.desired_healthy(expected) == want, (field, value, expected)


# -- the properties ------------------------------------------------------------------------------


@common
@given(clusters, fresh)
def test_a_plan_places_gangs_whole_and_overbooks_nothing(
    objects: list[dict[str, Any]], batch: list[Spec]
) -> None:
    """``orca plan`` on fresh Workloads: no gang half placed, no resource over-booked."""
    workloads = as_workloads(batch)
    results = plan(node_infos(objects), workloads, classes=CLASSES, now=NOW)
    by_key = {w.key: s for w, s in zip(workloads, batch, strict=True)}
    gangs_are_whole(by_key, results)
    target(nothing_overbooked(objects, by_key, results), label="the fullest resource")


@common
@given(clusters, incumbents, newcomers, st.data())
def test_preemption_and_drains_keep_gangs_whole_budgets_and_capacity(
    objects: list[dict[str, Any]], first: list[Spec], later: list[Spec], data: st.DataObject
) -> None:
    """Incumbents planned, then planned again (from their statuses) with higher-priority
    newcomers, which preempt; and a drain what-if of some nodes for the same Workloads. After
    each: no gang half placed, no resource over-booked, no budget or gang broken by a
    preemption. Hypothesis is steered towards plans that preempt (``target``)."""
    nodes = node_infos(objects)
    placing = as_workloads(first)
    arrivals = as_workloads(later, first=len(first))
    by_key = {w.key: s for w, s in zip([*placing, *arrivals], [*first, *later], strict=True)}
    before = [stored(r) for r in plan(nodes, placing, classes=CLASSES, now=NOW)]
    workloads = [*before, *arrivals]
    names = {o["metadata"]["name"] for o in objects}
    live = {w.key: sum(p.node in names for p in w.status.placements) for w in before if w.status}

    again = plan(nodes, workloads, classes=CLASSES, now=NOW)
    gangs_are_whole(by_key, again)
    fullest = nothing_overbooked(objects, by_key, again)
    preempted, tight = budgets_hold(by_key, objects, live, again)

    drained = data.draw(st.sets(st.sampled_from(sorted(names)), max_size=len(names)), label="drain")
    whatif = WhatIf(
        ledger_from_statuses(nodes, before),
        workloads,
        scheduler=Scheduler(gang_grace=False),
        classes=CLASSES,
        now=NOW,
    )
    answer = whatif.answer(Question(drain=frozenset(drained)))
    remaining = [o for o in objects if o["metadata"]["name"] not in drained]
    gangs_are_whole(by_key, answer.results)
    fullest = max(fullest, nothing_overbooked(remaining, by_key, answer.results))
    left = {
        w.key: sum(p.node in names - drained for p in w.status.placements)
        for w in before
        if w.status
    }
    more, edge = budgets_hold(by_key, remaining, left, answer.results)
    target(float(preempted + more), label="replicas preempted")
    target(float(tight + edge), label="preemptions that left a budget with no slack")
    target(fullest, label="the fullest resource")


# -- the bugs the properties found, each its minimal example --

GANG_OF_3: dict[str, Any] = {
    "kind": "Service",
    "count": 3,
    "resources": {"cpu": "1"},
    "gang": {"minCount": 3},
}


def test_a_drain_what_if_leaves_no_gang_half_placed() -> None:
    """A gang of 3 (minCount 3, 1 cpu each) on a, b, c (1 cpu each); drain a. Nowhere for
    web-0: 2 of 3 would stay, fewer than minCount, so none is placed (the issue: "placed is
    always 0 or at least M ... in every what-if"; controller.scheduler.gang: what-ifs give no
    grace). ``WhatIf`` built as ``orca plan --drain`` builds it, with its default scheduler."""
    nodes = [node_object(n, cpu="1") for n in ("a", "b", "c")]
    web = workload_obj("web", placed={0: "a", 1: "b", 2: "c"}, **GANG_OF_3)
    stored_web = workload(name="web", status=web["status"], **web["spec"])
    ledger = ledger_from_statuses(node_infos(nodes), [stored_web])
    answer = WhatIf(ledger, [stored_web], now=NOW).answer(Question(drain=frozenset({"a"})))
    (result,) = answer.results
    assert placed_on(result) == [], result.status.message


def test_orca_plan_drain_releases_a_gang_that_falls_below_its_min_count(
    tmp_path: Path, orca: Orca
) -> None:
    """The same gang through the command: draining a leaves web-0 without a place, so the
    gang is released and all three of its replicas are unplaced."""
    nodes = write(tmp_path, "nodes.yaml", [node_object(n, cpu="1") for n in ("a", "b", "c")])
    web = workload_obj("web", placed={0: "a", 1: "b", 2: "c"}, **GANG_OF_3)
    workloads = write(tmp_path, "workloads.yaml", [web])
    code, out, _ = orca(
        "plan",
        "--nodes",
        nodes,
        "--workloads",
        workloads,
        "--now",
        NOW,
        "--drain",
        "a",
        "-o",
        "json",
    )
    assert code == 1
    unplaced = sorted(u["allocId"] for u in json.loads(out)["unplaced"])
    assert unplaced == ["shop/web-0", "shop/web-1", "shop/web-2"]


@pytest.mark.parametrize(
    "rule",
    [{"disruption": {"minAvailable": 1}}, {"gang": {"minCount": 1}}],
    ids=["minAvailable-1", "gang-minCount-1"],
)
def test_a_preemption_counts_no_replica_on_a_drained_node(rule: dict[str, Any]) -> None:
    """web (2 x 1 cpu, minAvailable 1, or a gang of minCount 1) on a and b (1 cpu each);
    drain a, and a high-priority Job of 1 cpu arrives. web keeps one live replica, on b:
    exactly what its budget needs (kube's disruptionsAllowed = currentHealthy 1 - desired
    healthy 1 = 0), so no preemption may take it; the Job stays unplaced and web keeps b.
    orca counts web-0, booked on the drained a, as placed (2 - 1 = 1 allowed) and preempts
    web-1: web is left with nothing. (The same with ``plan`` on a node list without a, and
    in the operator while a deleted node's bookings wait to be rescheduled:
    ``budget_of(w, len(ledger.bookings(key)))``.)"""
    nodes = node_infos([node_object(n, cpu="1") for n in ("a", "b")])
    web = workload(
        name="web",
        kind="Service",
        count=2,
        resources={"cpu": "1"},
        status={
            "placements": [
                {"node": "a", "allocId": "shop/web-0", "score": 0},
                {"node": "b", "allocId": "shop/web-1", "score": 0},
            ],
            "resources": {"cpu": "1"},
        },
        **rule,
    )
    boss = workload(name="boss", kind="Job", resources={"cpu": "1"}, priorityClassName="high")
    whatif = WhatIf(
        ledger_from_statuses(nodes, [web]),
        [web, boss],
        scheduler=Scheduler(gang_grace=False),
        classes=CLASSES,
        now=NOW,
    )
    results = {r.workload.key: r for r in whatif.answer(Question(drain=frozenset({"a"}))).results}
    assert results["shop/boss"].victims == ()
    assert placed_on(results["shop/web"]) == ["b"]
