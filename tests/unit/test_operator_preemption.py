"""Preemption in the operator (``controller.operator.preemption``): the victims' statuses are
written before the preemptor's, the preemptor's only once they all landed, and the ledger
never holds more than a node has, whatever fails. The real API server version of these is
tests/integration/test_preemption.py."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from controller.operator.app import Operator
from controller.operator.kube import ApiError, KubeApi
from controller.operator.state import ClusterState
from controller.operator.workqueue import WorkQueue
from tests.support.factories import node_object, stored_workload

CLASSES = [
    {"metadata": {"name": "high", "resourceVersion": "1"}, "value": 1000},
    {
        "metadata": {"name": "polite", "resourceVersion": "2"},
        "value": 1000,
        "preemptionPolicy": "Never",
    },
]


class RecordingApi:
    """Status writes in order; ``refuse`` names Workloads whose write gets a 409."""

    def __init__(self, refuse: frozenset[str] = frozenset()) -> None:
        self.patches: list[tuple[str, dict[str, Any]]] = []
        self.refuse = refuse

    async def write_workload_status(
        self, namespace: str, name: str, status: dict[str, Any], resource_version: str | None
    ) -> dict[str, Any]:
        if name in self.refuse:
            raise ApiError(409, "Conflict", "the object has been modified")
        self.patches.append((name, status))
        return {"metadata": {"resourceVersion": str(100 + len(self.patches))}}

    async def create_event(self, *_: Any) -> dict[str, Any]:
        return {}


def cluster(preemptor_class: str) -> ClusterState:
    """Node a (4 cpu) full with ``low`` (priority 0); ``high`` (2 cpu) names a class."""
    state = ClusterState()
    state.upsert_node(node_object("a", cpu="4"))
    low_status = {
        "phase": "Scheduled",
        "desired": 1,
        "placed": 1,
        "placements": [{"node": "a", "allocId": "ns/low-0", "score": 0}],
        "resources": {"cpu": "4"},
        "priority": 0,
    }
    state.upsert_workload(
        stored_workload("low", "5", {"kind": "Job", "resources": {"cpu": "4"}}, low_status)
    )
    spec = {"kind": "Job", "resources": {"cpu": "2"}, "priorityClassName": preemptor_class}
    state.upsert_workload(stored_workload("high", "6", spec))
    return state


def run(state: ClusterState, api: RecordingApi) -> Operator:
    queue = WorkQueue(base_delay=10.0)
    operator = Operator.wire(cast(KubeApi, api), state, queue, now=lambda: "2026-01-01T00:00:00Z")
    for priority_class in CLASSES:
        operator.priorities.upsert(priority_class)

    async def scenario() -> None:
        queue.add("ns/high")
        await operator.loop.process_next()

    asyncio.run(scenario())
    return operator


def used_cpu(state: ClusterState) -> int:
    return int(state.ledger.used_cpu[state.ledger.table.index["a"]])


def test_victims_are_written_first_then_the_preemptor() -> None:
    state = cluster("high")
    api = RecordingApi()
    operator = run(state, api)
    assert [name for name, _ in api.patches] == ["low", "high"]
    (_, low), (_, high) = api.patches
    assert low["placements"] == [] and low["phase"] == "Unschedulable"
    message = "1 replica preempted by ns/high (priority 1000) on a"
    assert low["message"] == message
    conditions = {c["type"]: c for c in low["conditions"]}
    assert conditions["Preempted"]["message"] == message
    assert high["placements"][0]["node"] == "a" and high["priority"] == 1000
    assert used_cpu(state) == 2000  # only the preemptor
    assert len(operator.queue) == 1  # the victim, queued again to land elsewhere
    queued = [operator.events.queue.get_nowait() for _ in range(operator.events.queue.qsize())]
    events = [e.body() for e in queued]
    assert [(e["involvedObject"]["name"], e["reason"], e["message"]) for e in events] == [
        ("low", "Preempted", message),
        ("high", "Scheduled", "1/1 replicas placed"),
    ]


def test_a_preemptor_that_searched_while_a_victim_was_being_decided_looks_again_after() -> None:
    """low is being decided (its budget just relaxed, say) when high searches: low is left out
    (not ours to change now), high finds nothing and waits; once low is done, high is queued
    again and preempts it. Without that, high waited for the next resync."""
    state = cluster("high")
    api = RecordingApi()
    queue = WorkQueue(base_delay=10.0)
    operator = Operator.wire(cast(KubeApi, api), state, queue, now=lambda: "2026-01-01T00:00:00Z")
    for priority_class in CLASSES:
        operator.priorities.upsert(priority_class)

    async def scenario() -> None:
        assert queue.claim("ns/low")  # being decided elsewhere
        queue.add("ns/high")
        await operator.loop.process_next()
        assert [(name, status["phase"]) for name, status in api.patches] == [
            ("high", "Unschedulable")
        ]
        assert len(queue) == 0  # nothing more to do until low is done
        queue.done("ns/low")
        assert len(queue) == 1
        await operator.loop.process_next()

    asyncio.run(scenario())
    assert [name for name, _ in api.patches] == ["high", "low", "high"]
    assert api.patches[-1][1]["placements"][0]["node"] == "a"
    assert used_cpu(state) == 2000


def test_a_failed_victim_write_holds_the_preemptor_back() -> None:
    state = cluster("high")
    api = RecordingApi(refuse=frozenset({"low"}))
    operator = run(state, api)
    assert api.patches == []  # nothing written: not the preemptor either
    assert used_cpu(state) == 4000  # the victim's booking is back, the preemptor's gone
    assert state.ledger.bookings("ns/high") == ()
    assert operator.queue.backing_off == 1  # the preemptor retries with backoff
    assert not state.ledger.assumed("ns/high") and not state.ledger.assumed("ns/low")


def test_preemption_policy_never_waits_instead() -> None:
    state = cluster("polite")
    api = RecordingApi()
    run(state, api)
    assert [(name, status["phase"]) for name, status in api.patches] == [("high", "Unschedulable")]
    assert used_cpu(state) == 4000


def test_only_the_victims_where_the_preemptor_lands_are_written() -> None:
    """Topology spread lets one replica of ``boss`` into zone z1 and c (z2) stays full: the
    first plan's second victim (on b) is given back before anything is written."""
    state = ClusterState()
    for name, zone in (("a", "z1"), ("b", "z1"), ("c", "z2")):
        state.upsert_node(node_object(name, cpu="1", labels={"zone": zone}))
    placed = [{"node": n, "allocId": f"ns/low-{i}", "score": 0} for i, n in enumerate("abc")]
    low_spec = {"kind": "Service", "count": 3, "resources": {"cpu": "1"}}
    low_status = {"phase": "Scheduled", "desired": 3, "placed": 3, "placements": placed}
    state.upsert_workload(
        stored_workload("low", "5", low_spec, {**low_status, "resources": {"cpu": "1"}})
    )
    spread = [{"topologyKey": "zone", "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}]
    boss_spec = {
        "kind": "Service",
        "count": 2,
        "resources": {"cpu": "1"},
        "topologySpread": spread,
        "priorityClassName": "high",
    }
    state.upsert_workload(stored_workload("high", "6", boss_spec))
    api = RecordingApi()
    run(state, api)
    assert [name for name, _ in api.patches] == ["low", "high"]
    (_, low), (_, high) = api.patches
    assert [p["node"] for p in low["placements"]] == ["b", "c"]
    assert [p["node"] for p in high["placements"]] == ["a"]
    assert all(used_on(state, n) <= 1000 for n in "abc")


def used_on(state: ClusterState, name: str) -> int:
    return int(state.ledger.used_cpu[state.ledger.table.index[name]])


def test_the_victim_created_last_is_chosen_between_equal_nodes() -> None:
    """kube's latestStartTime rule with orca's stand-in, the victim Workload's
    creationTimestamp, as the operator reads it from the object: nodes a and b each hold one
    equal replica; the one created later (on b) is preempted, though a sorts first."""
    state = ClusterState()
    for name in ("a", "b"):
        state.upsert_node(node_object(name, cpu="4"))
    for name, at, created in (
        ("old", "a", "2024-01-01T00:00:00Z"),
        ("new", "b", "2025-06-01T00:00:00Z"),
    ):
        status = {
            "phase": "Scheduled",
            "desired": 1,
            "placed": 1,
            "placements": [{"node": at, "allocId": f"ns/{name}-0", "score": 0}],
            "resources": {"cpu": "4"},
            "priority": 0,
        }
        obj = stored_workload(name, "5", {"kind": "Job", "resources": {"cpu": "4"}}, status)
        obj["metadata"]["creationTimestamp"] = created
        state.upsert_workload(obj)
    spec = {"kind": "Job", "resources": {"cpu": "2"}, "priorityClassName": "high"}
    state.upsert_workload(stored_workload("high", "6", spec))
    api = RecordingApi()
    run(state, api)
    assert [name for name, _ in api.patches] == ["new", "high"]
    assert api.patches[1][1]["placements"][0]["node"] == "b"
