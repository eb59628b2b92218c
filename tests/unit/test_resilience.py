"""The resilience what-if (``controller.scheduler.resilience``): a failure domain's loss is the
drain of its nodes, and the incremental answer equals the full one.

The oracle is the existing drain what-if (``WhatIf.answer``, which ``orca plan --drain``
prints): it plans every Workload on the cluster without the drained nodes. The property test
draws clusters already placed by a first plan (so statuses hold placements), then disturbs
them as a live cluster is (Workloads resized up and down, new ones waiting, a node cordoned,
priorities high enough to preempt) and asks every domain of several labels, every node alone,
and a random set of nodes, comparing the two answers whole.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.api.models import Workload
from controller.scheduler.ledger import Ledger, ledger_from_statuses
from controller.scheduler.nodes import NodeInfo, NodeTable, node_info_from_node
from controller.scheduler.plan import plan
from controller.scheduler.priority import (
    NO_CLASSES,
    PreemptionPolicy,
    PriorityClass,
    PriorityClasses,
)
from controller.scheduler.resilience import (
    MAX_DOMAINS,
    UNLABELLED,
    DomainLoss,
    ResilienceError,
    domains_of,
)
from controller.scheduler.scheduler import Scheduler
from controller.scheduler.whatif import Answer, Question, WhatIf
from tests.support.factories import node, workload
from tests.support.properties import examples
from tests.unit.test_properties import node_objects, specs

NOW = "2026-12-01T10:00:00Z"
CLASSES = PriorityClasses.of(
    [
        PriorityClass("low", -10),
        PriorityClass("high", 1000),
        PriorityClass("polite", 500, preemption_policy=PreemptionPolicy.NEVER),
    ]
)


def same_answer(fast: Answer, full: Answer, base: Ledger) -> None:
    """The two answers say the same; each Workload the incremental one planned decided as in
    the full plan, and every other one holds in the full plan what it held (bar its replicas
    on the drained nodes, which end: a DaemonSet's)."""
    assert fast.moved == full.moved
    assert fast.unplaced == full.unplaced
    assert fast.ended == full.ended
    assert fast.displaced == full.displaced
    assert fast.budgets == full.budgets
    by_key = {r.workload.key: r for r in full.results}
    for result in fast.results:
        assert result == by_key[result.workload.key], result.workload.key
    planned = {r.workload.key for r in fast.results}
    drained = full.question.drain
    for key, result in by_key.items():
        if key in planned:
            continue
        held = [(b.node, b.alloc_id) for b in base.bookings(key) if b.node not in drained]
        now = [(p.node, p.alloc_id) for p in result.status.placements]
        assert sorted(now) == sorted(held), key


def placed_cluster(
    objects: list[dict[str, Any]], batch: list[dict[str, Any]], changes: list[int]
) -> tuple[list[NodeInfo], list[Workload]]:
    """The batch planned once (its statuses: a cluster as the operator left it), then changed
    as ``changes`` says per Workload: 0 nothing, 1 its cpu request grown, 2 shrunk, 3 a new
    Workload of the same spec waiting beside it; and the first node cordoned when the first
    change is odd (its replicas then move in every plan)."""
    nodes = [node_info_from_node(o) for o in objects]
    first = [workload(f"w{i}", **s) for i, s in enumerate(batch)]
    results = plan(nodes, first, classes=CLASSES, now=NOW)
    by_key = {r.workload.key: r.status for r in results}
    workloads: list[Workload] = []
    for i, (w, change) in enumerate(zip(first, changes, strict=False)):
        spec: dict[str, Any] = w.spec.model_dump(by_alias=True, exclude_none=True, mode="json")
        if change in (1, 2):
            spec["resources"] = {**spec.get("resources", {}), "cpu": "1" if change == 1 else "10m"}
        placed = workload(w.metadata.name, **spec)
        workloads.append(placed.model_copy(update={"status": by_key[w.key]}))
        if change == 3:
            workloads.append(workload(f"new{i}", **spec))
    workloads += first[len(changes) :]
    if changes and changes[0] % 2 and nodes:
        nodes[0] = nodes[0].model_copy(update={"unschedulable": True})
    return nodes, workloads


def with_budget(spec: dict[str, Any], kind: int) -> dict[str, Any]:
    """``spec`` with, by ``kind``: nothing (0, 1), a disruption budget (2: minAvailable 1, 3:
    maxUnavailable 0%), or, for a Service, a gang of every replica (4)."""
    if kind == 2:
        return {**spec, "disruption": {"minAvailable": 1}}
    if kind == 3:
        return {**spec, "disruption": {"maxUnavailable": "0%"}}
    if kind == 4 and spec.get("kind") == "Service":
        return {**spec, "gang": {"minCount": spec.get("count", 1)}}
    return spec


prioritised_specs = st.tuples(
    specs(), st.sampled_from([None, None, "low", "high", "polite"]), st.integers(0, 4)
).map(
    lambda t: with_budget(
        {**t[0], **({"priorityClassName": t[1]} if t[1] else {})},
        t[2],
    )
)
clusters = st.lists(
    node_objects(sick=6),
    min_size=1,
    max_size=7,
    unique_by=lambda o: o["metadata"]["name"],
)


def counted(answer: Answer) -> tuple[int, int, bool]:
    """What the operator's gauges read of an answer: replicas without a place, displaced,
    settled."""
    return len(answer.unplaced), answer.displaced, answer.settled


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    clusters,
    st.lists(prioritised_specs, min_size=1, max_size=8),
    st.lists(st.integers(0, 3), max_size=8),
    st.data(),
)
def test_a_domains_loss_is_exactly_the_drain_of_its_nodes(
    objects: list[dict[str, Any]],
    batch: list[dict[str, Any]],
    changes: list[int],
    data: st.DataObject,
) -> None:
    nodes, workloads = placed_cluster(objects, batch, changes)
    ledger = ledger_from_statuses(nodes, workloads)
    loss = DomainLoss(ledger, workloads, now=NOW, classes=CLASSES)
    oracle = WhatIf(ledger, workloads, Scheduler(gang_grace=False), CLASSES, NOW)
    names = sorted(n.hostname for n in nodes)
    drains = [frozenset({n}) for n in names]
    for key in ("zone", "rack"):
        drains += [d.nodes for d in domains_of(key, nodes)]
    drains.append(frozenset(data.draw(st.sets(st.sampled_from(names), min_size=1))))
    for drain in drains:
        answer = loss.answer(drain)
        same_answer(answer, oracle.answer(Question(drain=drain)), ledger)
        # ``figures`` (the operator's, which keeps no decision) counts what the answer lists.
        figures = loss.figures(drain)
        found = (figures.unplaced, figures.displaced, figures.settled)
        assert found == counted(answer), drain


def test_a_preemption_victim_is_planned_again_though_nothing_of_it_was_drained() -> None:
    # a1 and b1, 4 cores each: boss (high, 3 cores) on a1, filler (low, 3 cores) on b1, and
    # rest (low, 1 core) on b1. Losing a1: boss has 1 core free on b1 and preempts filler
    # (the lowest, and enough), lands on b1; filler, settled and not on a1, is a victim:
    # planned again at its turn, it finds 0 cores free (boss 3 + rest 1) and no place.
    boss = workload("boss", kind="Job", resources={"cpu": "3"}, priorityClassName="high")
    filler = workload("filler", kind="Job", resources={"cpu": "3"}, priorityClassName="low")
    rest = workload("rest", kind="Job", resources={"cpu": "1"}, priorityClassName="low")
    nodes = [node("a1"), node("b1")]
    where = {"boss": "a1", "filler": "b1", "rest": "b1"}
    workloads = []
    for w in (boss, filler, rest):
        status = plan(
            [n for n in nodes if n.hostname == where[w.metadata.name]],
            [w],
            classes=CLASSES,
            now=NOW,
        )[0].status
        workloads.append(w.model_copy(update={"status": status}))
    ledger = ledger_from_statuses(nodes, workloads)
    answer = DomainLoss(ledger, workloads, now=NOW, classes=CLASSES).answer(frozenset({"a1"}))
    assert [(m.alloc_id, m.source, m.target) for m in answer.moved] == [("shop/boss-0", "a1", "b1")]
    assert [(u.alloc_id, u.source) for u in answer.unplaced] == [("shop/filler-0", "b1")]
    assert "Insufficient cpu" in answer.unplaced[0].reason
    assert sorted(r.workload.key for r in answer.results) == ["shop/boss", "shop/filler"]
    oracle = WhatIf(ledger, workloads, Scheduler(gang_grace=False), CLASSES, NOW).answer(
        Question(drain=frozenset({"a1"}))
    )
    same_answer(answer, oracle, ledger)
    figures = DomainLoss(ledger, workloads, now=NOW, classes=CLASSES).figures(frozenset({"a1"}))
    assert (figures.unplaced, figures.displaced, figures.settled) == (1, 1, False)


def held(name: str, cpu: str, *nodes: str) -> dict[str, Any]:
    """A status recording replicas ``<name>-0``, ``-1``... on ``nodes``, sized ``cpu``."""
    placements = [
        {"node": n, "allocId": f"shop/{name}-{i}", "score": 0} for i, n in enumerate(nodes)
    ]
    return {"placements": placements, "resources": {"cpu": cpu}}


@pytest.mark.parametrize("taker", ["DaemonSet", "freeCpu constraint"])
def test_a_workload_that_freed_room_could_help_is_planned_in_every_answer(taker: str) -> None:
    # a1 holds boss (high, 4 cores) and late (low, 3 cores), full; b1 (8 cores) holds victim
    # (low, 7 cores): 1 core free. The taker (priority 0, 2 cores) holds nothing on b1: an
    # agent DaemonSet for lack of room there (on a1, 9 cores, beside the others), or a Job
    # waiting for a node with 4 free cores (a constraint over node.freeCpu). Neither is on
    # b1, yet losing a1 changes their turn: boss preempts victim on b1 (1 + 7 free >= 4;
    # victim the only one there), leaving 4 free; the taker, next in priority order, takes 2
    # of them (the agent: a node it wants with room; the Job: freeCpu 4000 >= 4000); late
    # (3 cores) then finds 2: no place, and victim (7) none either. Had the taker not been
    # planned, late would have moved to b1.
    if taker == "DaemonSet":
        a1 = node("a1", cpu="9")
        agent = workload(
            "agent", kind="DaemonSet", resources={"cpu": "2"}, status=held("agent", "2", "a1")
        )
    else:
        a1 = node("a1", cpu="7")
        agent = workload(
            "agent", kind="Job", resources={"cpu": "2"}, constraints=["node.freeCpu >= 4000"]
        )
    boss = workload(
        "boss",
        kind="Job",
        resources={"cpu": "4"},
        priorityClassName="high",
        status=held("boss", "4", "a1"),
    )
    late = workload(
        "late",
        kind="Job",
        resources={"cpu": "3"},
        priorityClassName="low",
        status=held("late", "3", "a1"),
    )
    victim = workload(
        "victim",
        kind="Job",
        resources={"cpu": "7"},
        priorityClassName="low",
        status=held("victim", "7", "b1"),
    )
    workloads = [boss, agent, late, victim]
    ledger = ledger_from_statuses([a1, node("b1", cpu="8")], workloads)
    loss = DomainLoss(ledger, workloads, now=NOW, classes=CLASSES)
    answer = loss.answer(frozenset({"a1"}))
    assert [(m.alloc_id, m.source, m.target) for m in answer.moved] == [("shop/boss-0", "a1", "b1")]
    assert [(u.alloc_id, u.source) for u in answer.unplaced] == [
        ("shop/late-0", "a1"),
        ("shop/victim-0", "b1"),
    ]
    assert [e.alloc_id for e in answer.ended] == (["shop/agent-0"] if taker == "DaemonSet" else [])
    assert answer.displaced == 2
    oracle = WhatIf(ledger, workloads, Scheduler(gang_grace=False), CLASSES, NOW)
    same_answer(answer, oracle.answer(Question(drain=frozenset({"a1"}))), ledger)


# -- domains --------------------------------------------------------------------------------------


def test_domains_are_the_labels_values_sorted_then_the_nodes_without_it() -> None:
    nodes = [
        node("c", labels={"zone": "b"}),
        node("a", labels={"zone": "b"}),
        node("x"),
        node("b", labels={"zone": "a"}),
    ]
    assert [(d.name, sorted(d.nodes)) for d in domains_of("zone", nodes)] == [
        ("a", ["b"]),
        ("b", ["a", "c"]),
        (UNLABELLED, ["x"]),
    ]
    assert domains_of("zone", []) == []


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("zone=a", "'zone=a' is not a valid label key"),
        ("-zone", "'-zone' is not a valid label key"),
        ("Bad_Prefix/zone", "'Bad_Prefix/zone' has a prefix that is not a DNS-1123 subdomain"),
        ("", "'' is not a valid label key"),
    ],
)
def test_a_key_that_is_not_a_label_key_is_refused_in_one_line(key: str, message: str) -> None:
    with pytest.raises(ResilienceError) as caught:
        domains_of(key, [node("a")])
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


def test_more_domains_than_the_bound_are_refused_before_any_plan() -> None:
    nodes = [node(f"n{i}", labels={"id": str(i)}) for i in range(MAX_DOMAINS + 1)]
    with pytest.raises(ResilienceError) as caught:
        domains_of("id", nodes)
    assert str(caught.value) == (
        f"'id' has {MAX_DOMAINS + 1} values; at most {MAX_DOMAINS} domains are planned"
    )


# -- the table without some nodes -----------------------------------------------------------------


@settings(max_examples=examples(60), deadline=None)
@given(
    st.lists(node_objects(), max_size=8, unique_by=lambda o: o["metadata"]["name"]),
    st.data(),
)
def test_a_table_without_some_nodes_is_the_table_of_the_others(
    objects: list[dict[str, Any]], data: st.DataObject
) -> None:
    nodes = [node_info_from_node(o) for o in objects]
    table = NodeTable(nodes)
    gone = data.draw(st.sets(st.sampled_from([n.hostname for n in nodes] + ["absent"])))
    smaller = table.without(gone)
    built = NodeTable(n for n in nodes if n.hostname not in gone)
    assert columns(smaller) == columns(built)
    assert smaller.version != table.version and smaller.shape != table.shape


def columns(table: NodeTable) -> dict[str, Any]:
    """Every attribute of a table but its cache keys, as plain values: a column added to
    ``NodeTable`` later is compared too."""
    return {
        name: value.tolist() if hasattr(value, "tolist") else value
        for name, value in vars(table).items()
        if name not in ("version", "shape", "changed_since")
    }


def test_a_daemonsets_budget_is_of_its_desired_count_after_the_plan_in_the_figures() -> None:
    # a1 (zone a), b1, b2 (zone b), 4 cores each; ds (maxUnavailable 0%) holds all three at
    # 1 core (its status: 3 desired), then grows to 2: b2, where filler takes 3 cores, no
    # longer wants it. Losing zone a, it keeps b1 only, of the 2 it held outside the zone:
    # below a budget of 3, but its decision wants 1 node, and that is the count its budget is
    # of: no budget broken, as the full answer says. The figures keep that count of its
    # decision (and no status): read from the Workload's status, they said unsettled.
    nodes = [node("a1", labels={"zone": "a"}), node("b1", labels={"zone": "b"})]
    nodes.append(node("b2", labels={"zone": "b"}))
    budget: dict[str, Any] = {"disruption": {"maxUnavailable": "0%"}}
    small = workload("ds", kind="DaemonSet", resources={"cpu": "1"}, **budget)
    filler = workload("filler", kind="Job", resources={"cpu": "3"})
    placed = plan(nodes, [small], now=NOW)[0].status
    assert placed.desired == 3
    grown = workload("ds", kind="DaemonSet", resources={"cpu": "2"}, **budget)
    workloads = [
        grown.model_copy(update={"status": placed}),
        filler.model_copy(update={"status": plan(nodes[2:], [filler], now=NOW)[0].status}),
    ]
    ledger = ledger_from_statuses(nodes, workloads)
    loss = DomainLoss(ledger, workloads, now=NOW)
    oracle = WhatIf(ledger, workloads, Scheduler(gang_grace=False), NO_CLASSES, NOW)
    lost = frozenset({"a1"})
    full = oracle.answer(Question(drain=lost))
    ds = next(r for r in full.results if r.workload.key == "shop/ds")
    assert ([p.node for p in ds.status.placements], ds.status.desired) == (["b1"], 1)
    figures = loss.figures(lost)
    assert (figures.unplaced, figures.displaced, figures.settled) == counted(full) == (0, 0, True)
