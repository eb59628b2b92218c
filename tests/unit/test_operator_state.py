"""The operator's pure-ish parts: work queue semantics, state merging, freed capacity."""

from __future__ import annotations

import asyncio
import copy
import logging
from typing import Any, cast

import pytest
from prometheus_client import REGISTRY

from controller.operator.app import Operator
from controller.operator.kube import KubeApi
from controller.operator.state import ClusterState
from controller.operator.workqueue import WorkQueue
from controller.scheduler.ledger import Booking, gives_back
from tests.support.factories import node_object, stored_workload


def wl_obj(
    name: str, version: str, placements: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    spec = {"kind": "Job", "resources": {"cpu": "1"}}
    return stored_workload(name, version, spec, {"placements": placements or []})


def test_giving_back_counts_replicas_not_just_nodes() -> None:
    two = (Booking("a", "ns/w-0", 1000, 0), Booking("a", "ns/w-1", 1000, 0))
    assert gives_back(two, two[:1])  # scale down on one node frees a replica's worth
    assert not gives_back(two[:1], two)
    assert gives_back((Booking("a", "ns/w-0", 1000, 0),), (Booking("b", "ns/w-0", 1000, 0),))
    assert not gives_back((Booking("a", "ns/w-0", 0, 0),), ())  # zero-sized: nothing to give back


def test_queue_deduplicates_and_requeues_a_key_added_while_processing() -> None:
    async def scenario() -> list[str]:
        queue = WorkQueue()
        queue.add_all(["a", "b", "a"])
        assert len(queue) == 2
        first = await queue.get()
        queue.add(first)  # changed while being processed: not handed out twice at once
        second = await queue.get()
        assert len(queue) == 0
        queue.done(first)  # now it comes back
        third = await queue.get()
        queue.done(second)
        queue.done(third)
        return [first, second, third]

    assert asyncio.run(scenario()) == ["a", "b", "a"]


def test_queue_backoff_grows_and_resets() -> None:
    async def scenario() -> list[float]:
        queue = WorkQueue(base_delay=0.01, max_delay=0.05)
        delays = [queue.add_rate_limited("k") for _ in range(4)]
        queue.forget("k")
        delays.append(queue.add_rate_limited("k"))
        assert await asyncio.wait_for(queue.get(), 1) == "k"
        return delays

    assert asyncio.run(scenario()) == [0.01, 0.02, 0.04, 0.05, 0.01]


def test_state_rebuilds_the_ledger_from_status_and_ignores_stale_events() -> None:
    state = ClusterState()
    state.upsert_node(node_object("a", cpu="4"))
    placed = [{"node": "a", "allocId": "ns/w-0", "score": 50}]
    assert state.upsert_workload(wl_obj("w", "10", placed)) is not None
    state.table()
    assert int(state.ledger.used_cpu[0]) == 1000
    assert state.upsert_workload(wl_obj("w", "9", [])) is None  # older: ignored
    assert state.upsert_workload(wl_obj("w", "10", placed)) is None  # already known
    assert int(state.ledger.used_cpu[0]) == 1000


def test_kopf_serves_no_resource() -> None:
    """kopf runs the process (login, start-up, clean-up) and registers no resource handler:
    the informers list and watch every kind, so none of kopf's per-object machinery (watch
    streams, worker queues, diff-bases, progress storage, finalizers) runs, and it scans for
    nothing (no CRD or namespace watch of its own)."""
    import kopf

    from controller.operator.app import configure_kopf, kopf_registry

    async def login(**_: Any) -> kopf.ConnectionInfo:
        return kopf.ConnectionInfo(server="https://127.0.0.1")

    async def activity(**_: Any) -> None:
        return None

    registry = kopf_registry(login, activity, activity)
    assert registry._watching.get_all_handlers() == []
    assert registry._changing.get_all_handlers() == []
    assert registry._indexing.get_all_handlers() == []
    assert registry._spawning.get_all_handlers() == []
    assert registry._webhooks.get_all_handlers() == []
    assert len(registry._activities.get_all_handlers()) == 3  # login, start-up, clean-up
    settings = kopf.OperatorSettings()
    configure_kopf(settings)
    assert settings.scanning.disabled


# -- Nodes orca cannot read; Workloads the models refuse -------------------------------------------


def read_errors() -> float:
    return REGISTRY.get_sample_value("orca_node_read_errors_total") or 0.0


def versioned(obj: dict[str, Any], version: str) -> dict[str, Any]:
    obj["metadata"]["resourceVersion"] = version
    return obj


def test_an_unreadable_node_after_a_good_one_is_not_eligible_and_counted_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    state = ClusterState()
    assert state.upsert_node(versioned(node_object("a", cpu="4"), "1")) == "a"
    placed = [{"node": "a", "allocId": "ns/w-0", "score": 50}]
    state.upsert_workload(wl_obj("w", "5", placed))
    assert state.table().eligible.tolist() == [True]
    errors = read_errors()

    broken = versioned(node_object("a", cpu="8Ei"), "2")  # orca's bound, not the API server's
    with caplog.at_level(logging.WARNING, logger="orca.nodes"):
        assert state.upsert_node(broken) == "a"  # changed: replicas on it are requeued
        assert state.upsert_node(copy.deepcopy(broken)) is None  # the same event again
        state.upsert_workload(wl_obj("w", "5", placed))  # and its Workload again (a relist)
    table = state.table()
    assert table.eligible.tolist() == [False]  # the old 4-cpu NodeInfo is gone, not stale
    assert state.nodes["a"].cpu == 0
    assert state.keys_on_node("a") == {"ns/w"}  # its replica is still booked, to move
    assert read_errors() == errors + 1
    logged = [r.getMessage() for r in caplog.records]
    assert len(logged) == 1 and "status.allocatable.cpu" in logged[0] and "Node a" in logged[0]

    state.upsert_node(versioned(node_object("a", cpu="9Ei"), "3"))  # a new version, still bad
    assert read_errors() == errors + 2
    assert state.upsert_node(versioned(node_object("a", cpu="4"), "4")) == "a"  # fixed
    assert state.table().eligible.tolist() == [True]


def test_a_stale_unreadable_event_changes_nothing() -> None:
    state = ClusterState()
    state.upsert_node(versioned(node_object("a"), "7"))
    errors = read_errors()
    assert state.upsert_node(versioned(node_object("a", cpu="-1"), "6")) is None
    assert state.nodes["a"].eligible
    assert read_errors() == errors


def test_an_unparseable_workload_keeps_its_placements_booked_and_is_written_invalid() -> None:
    state = ClusterState()
    state.upsert_node(node_object("a", cpu="4"))
    body = wl_obj("odd", "10", [{"node": "a", "allocId": "ns/odd-0", "score": 5}])
    body["spec"]["count"] = 2  # the models refuse count on a Job (an older CRD let it in)
    record = state.upsert_workload(body)
    assert record is not None and record.workload is None
    assert record.error is not None and "count is only allowed" in record.error
    state.table()
    assert int(state.ledger.used_cpu[0]) == 1000  # spec.resources read on its own

    api = FakeApi()
    operator = Operator.wire(cast(KubeApi, api), state, now=lambda: "2026-01-01T00:00:00Z")

    async def decide() -> None:
        assert await operator.loop.process("ns/odd")

    asyncio.run(decide())
    (written,) = api.patches
    assert written["phase"] == "Invalid"
    assert "count is only allowed" in written["message"]
    assert written["placements"] == [{"node": "a", "allocId": "ns/odd-0", "score": 5}]
    assert int(state.ledger.used_cpu[0]) == 1000


class FakeApi:
    """Records status PATCHes and answers with a new resourceVersion."""

    def __init__(self) -> None:
        self.patches: list[dict[str, Any]] = []

    async def patch_workload_status(
        self, namespace: str, name: str, status: dict[str, Any], resource_version: str | None
    ) -> dict[str, Any]:
        self.patches.append(status)
        return {"metadata": {"resourceVersion": str(100 + len(self.patches))}}


def test_the_default_retry_backoff_stops_at_kube_schedulers_10s() -> None:
    """A Workload whose status writes failed again and again (the API server away) is tried
    again at most 10 s after the last failure, as kube-scheduler retries a Pod
    (``PodMaxBackoffSeconds`` defaults to 10, pkg/scheduler/apis/config/v1/defaults.go)."""

    async def scenario() -> list[float]:
        queue = WorkQueue()
        return [queue.add_rate_limited("k") for _ in range(12)]

    delays = asyncio.run(scenario())
    assert delays[:3] == [0.05, 0.1, 0.2]
    assert delays[-4:] == [10.0] * 4
