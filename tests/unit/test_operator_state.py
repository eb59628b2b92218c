"""The operator's pure-ish parts: work queue semantics, state merging, freed capacity."""

from __future__ import annotations

import asyncio
import copy
import gc
import logging
from collections import Counter
from decimal import Decimal
from typing import Any, cast

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import REGISTRY
from pydantic import ValidationError

from controller.api.messages import validation_message
from controller.api.models import Phase, Workload, WorkloadStatus, key_of
from controller.operator import state as state_module
from controller.operator.app import Operator
from controller.operator.handlers import NodeEvents, StartupGate, WorkloadEvents
from controller.operator.kube import KubeApi
from controller.operator.state import ClusterState
from controller.operator.workqueue import WorkQueue
from controller.scheduler.budgets import budget_of, expected
from controller.scheduler.framework import Code
from controller.scheduler.ledger import Booking, Ledger, gives_back
from controller.scheduler.nodes import NodeTable
from controller.scheduler.nodes import node_info_from_node as real_node_info
from tests.support.factories import job, node_object, stored_workload, table_columns
from tests.support.properties import examples


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
    # A zero-sized replica still gives its Pod back (a node's allocatable pods).
    assert gives_back((Booking("a", "ns/w-0", 0, 0),), ())
    assert not gives_back((Booking("a", "ns/w-0", 0, 0),), (Booking("a", "ns/w-1", 0, 0),))
    gpu = (("nvidia.com/gpu", 1),)
    assert gives_back(
        (Booking("a", "ns/w-0", 0, 0, scalars=gpu),), (Booking("a", "ns/w-0", 0, 0),)
    )  # the same replica, holding a GPU less


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
    assert len(logged) == 1 and "status.allocatable.cpu" in logged[0]
    assert logged[0].startswith("Node a (resourceVersion 2) cannot be read, treated as not ready: ")

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


def heartbeat(obj: dict[str, Any], version: str, beat: str) -> dict[str, Any]:
    """The same Node after a kubelet's status update: new heartbeat times, addresses, images;
    nothing orca reads."""
    beaten = versioned(copy.deepcopy(obj), version)
    for condition in beaten["status"]["conditions"]:
        condition["lastHeartbeatTime"] = beat
    beaten["status"]["addresses"] = [{"type": "InternalIP", "address": "10.0.0.1"}]
    beaten["status"]["images"] = [{"names": [f"app@{beat}"], "sizeBytes": 1}]
    beaten["metadata"]["annotations"] = {"kwok.x-k8s.io/node": "fake"}
    return beaten


def test_a_heartbeat_is_dropped_before_the_node_is_read_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reads: list[str] = []

    def counting(obj: Any, **how: Any) -> Any:
        reads.append(obj["metadata"]["resourceVersion"])
        return real_node_info(obj, **how)

    monkeypatch.setattr(state_module, "node_info_from_node", counting)
    state = ClusterState()
    first = versioned(node_object("a", since="2026-12-01T09:00:00Z"), "1")
    assert state.upsert_node(first) == "a"
    for version in ("2", "3"):
        assert state.upsert_node(heartbeat(first, version, f"2026-12-01T10:00:0{version}Z")) is None
    assert reads == ["1"]  # read once; the heartbeats were compared, not read
    assert state.node_versions["a"] == "3"  # their versions are recorded all the same
    assert state.upsert_node(versioned(copy.deepcopy(first), "2")) is None  # stale
    assert state.node_versions["a"] == "3" and reads == ["1"]


CHANGES = {
    "a label": lambda n: n["metadata"]["labels"].update(zone="b"),
    "a label removed": lambda n: n["metadata"]["labels"].pop("runtime.orca.cloudinit.dev/docker"),
    "allocatable cpu": lambda n: n["status"]["allocatable"].update(cpu="8"),
    "allocatable memory": lambda n: n["status"]["allocatable"].update(memory="16Gi"),
    "cordoned": lambda n: n["spec"].update(unschedulable=True),
    "a taint": lambda n: n["spec"].update(taints=[{"key": "k", "effect": "NoSchedule"}]),
    "not ready": lambda n: n["status"]["conditions"][0].update(status="False"),
    "ready since another time": lambda n: n["status"]["conditions"][0].update(
        status="Unknown", lastTransitionTime="2026-12-01T09:30:00Z"
    ),
}


@pytest.mark.parametrize("change", CHANGES, ids=list(CHANGES))
def test_a_change_to_what_orca_reads_is_read(change: str) -> None:
    state = ClusterState()
    first = versioned(node_object("a", since="2026-12-01T09:00:00Z"), "1")
    state.upsert_node(first)
    changed = heartbeat(first, "2", "2026-12-01T10:00:00Z")
    CHANGES[change](changed)
    assert state.upsert_node(changed) == "a"
    assert state.nodes["a"] == real_node_info(changed)


def test_a_node_read_as_unreadable_is_read_again_whatever_changed() -> None:
    state = ClusterState()
    broken = versioned(node_object("a", cpu="8Ei"), "1")
    assert state.upsert_node(broken) == "a" and not state.nodes["a"].readable
    assert "a" not in state.node_parts  # nothing to compare an update with
    fixed = versioned(node_object("a", cpu="4"), "2")
    assert state.upsert_node(fixed) == "a" and state.nodes["a"].readable
    assert state.upsert_node(heartbeat(fixed, "3", "2026-12-01T10:00:00Z")) is None


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
    """Records status writes and answers with a new resourceVersion."""

    def __init__(self) -> None:
        self.patches: list[dict[str, Any]] = []

    async def write_workload_status(
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


def test_a_mass_node_change_walks_the_workloads_once_and_queues_each_concerned_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Five hundred Nodes turn NotReady in one turn of the event loop (a watch chunk, a
    relist page): who to queue is worked out once, and is what one Node at a time queued:
    the Workloads on those Nodes, DaemonSets, and whatever a node could cure."""

    async def scenario() -> tuple[set[str], int]:
        state, queue = ClusterState(), WorkQueue()
        gate = StartupGate(state, queue)
        events = NodeEvents(state, queue, gate)
        for i in range(500):
            events.added(versioned(node_object(f"n{i}"), "1"))
        placed = [{"node": "n7", "allocId": "ns/on-7-0", "score": 1}]
        state.upsert_workload(wl_obj("on-7", "2", placed))
        elsewhere = [{"node": "x", "allocId": "ns/elsewhere-0", "score": 1}]
        state.upsert_workload(wl_obj("elsewhere", "3", elsewhere))
        for key in ("ns/on-7", "ns/elsewhere"):
            state.decided(state.records[key], Code.SUCCESS)  # decided: only its Nodes concern it
        daemon = stored_workload("ds", spec={"kind": "DaemonSet"})
        state.upsert_workload(daemon)
        state.decided(state.records["ns/ds"], Code.SUCCESS)
        gate.ready.set()
        walks = [0]
        real = state.daemon_keys

        def counted() -> set[str]:
            walks[0] += 1
            return real()

        monkeypatch.setattr(state, "daemon_keys", counted)
        for i in range(500):
            events.modified(versioned(node_object(f"n{i}", ready=False), "9"))
        assert len(queue) == 0  # not yet: once, when this turn of the loop ends
        await asyncio.sleep(0)
        keys = set()
        while len(queue):
            key = await queue.get()
            queue.done(key)
            keys.add(key)
        return keys, walks[0]

    keys, walks = asyncio.run(scenario())
    assert keys == {"ns/on-7", "ns/ds"} and walks == 1


def test_a_deleted_node_is_forgotten_whole_and_only_once() -> None:
    """Deleting a Node: True the first time (its replicas must move), False for a Node orca
    never had or has forgotten already; nothing of it stays behind (its version, its parts,
    its unreadable mark), so Nodes coming and going do not grow the state."""
    state = ClusterState()
    state.upsert_node(versioned(node_object("a"), "1"))
    state.upsert_node(versioned(node_object("b", cpu="8Ei"), "2"))  # unreadable
    assert state.delete_node("a") and state.delete_node("b")
    assert not state.delete_node("a") and not state.delete_node("never")
    assert state.table().hostnames == ()
    assert (state.nodes, state.node_versions, state.node_parts, state.unreadable_nodes) == (
        {},
        {},
        {},
        {},
    )


def recount(state: ClusterState) -> tuple[dict[tuple[str, str], int], int, dict[str, int]]:
    """What the gauges read of the records, by a walk of every record (as they once did)."""
    phases: Counter[tuple[str, str]] = Counter()
    plugins: Counter[str] = Counter()
    parked = 0
    for record in state.records.values():
        phase = record.phase or Phase.PENDING
        phases[record.namespace, phase.value] += 1
        if phase in (Phase.UNSCHEDULABLE, Phase.PARTIALLY_SCHEDULED) and record.status:
            parked += 1
            plugins.update({r.plugin or "Other" for r in record.status.unschedulable})
    return dict(phases), parked, dict(plugins)


def test_the_workload_counts_follow_every_change_of_the_records() -> None:
    """``ClusterState.counts`` (the gauges' per namespace and phase, the parked Workloads and
    who rejected them) equals a walk of every record after each way a record changes: added
    with or without a status, a spec orca cannot read, a newer version, our own write landing
    (``set_status``), a write landing on a record replaced meanwhile, deleted, recreated."""
    state = ClusterState()
    refused = {
        "phase": "Unschedulable",
        "unschedulable": [
            {"reason": "Insufficient cpu", "count": 2, "plugin": "ResourcesFit"},
            {"reason": "no runtime", "count": 1},
        ],
    }

    def agrees() -> None:
        counts = state.counts
        assert (dict(counts.phases), counts.parked, dict(counts.plugins)) == recount(state)

    state.upsert_workload(stored_workload("pending"))
    state.upsert_workload(stored_workload("placed", status={"phase": "Scheduled"}))
    state.upsert_workload(stored_workload("short", status=refused))
    state.upsert_workload(stored_workload("odd", spec={"kind": "Job", "count": "many"}))
    other = stored_workload("elsewhere", status=refused)
    other["metadata"]["namespace"] = "other"
    state.upsert_workload(other)
    agrees()
    assert state.counts.parked == 2 and state.counts.plugins == {"ResourcesFit": 2, "Other": 2}
    record = state.records["ns/short"]
    state.set_status(record, WorkloadStatus(phase=Phase.SCHEDULED))
    agrees()
    state.upsert_workload(stored_workload("placed", "2", status=refused))
    agrees()
    stale = state.records["ns/placed"]
    state.upsert_workload(stored_workload("placed", "3", status={"phase": "Scheduled"}))
    state.set_status(stale, WorkloadStatus(phase=Phase.INVALID))  # no longer the record
    agrees()
    state.delete_workload("other/elsewhere")
    state.delete_workload("ns/pending")
    agrees()
    assert ("other", "Unschedulable") not in state.counts.phases  # gone, not counted as 0
    state.upsert_workload(stored_workload("short", "9", status=refused, uid="another"))
    agrees()


def test_a_deleted_workload_frees_its_room_and_says_whether_it_held_any() -> None:
    state = ClusterState()
    state.upsert_node(versioned(node_object("a", cpu="2"), "1"))
    state.table()
    state.upsert_workload(wl_obj("w", "5", [{"node": "a", "allocId": "ns/w-0", "score": 1}]))
    state.upsert_workload(wl_obj("idle", "6"))
    assert int(state.ledger.used_cpu[0]) == 1000
    assert state.delete_workload("ns/w")  # held a's cpu: who waits for room is woken
    assert not state.delete_workload("ns/idle")  # held nothing
    assert not state.delete_workload("ns/never")
    assert state.records == {} and state.ledger.bookings("ns/w") == ()
    assert state.table().hostnames == ("a",) and int(state.ledger.used_cpu[0]) == 0


def test_who_is_woken_follows_the_bookings_told_or_else_what_the_ledger_books() -> None:
    """``woken_by(key, before, after)``: the Workloads waiting for capacity when ``key``'s
    bookings went from ``before`` to ``after`` and that gave room back; without ``after``,
    to what the ledger books now (a write that landed says what it decided; a deletion or a
    read-back, what the ledger holds). Nobody when nothing was given back."""
    state = ClusterState()
    state.upsert_node(versioned(node_object("a", cpu="4"), "1"))
    one = [{"node": "a", "allocId": "ns/w-0", "score": 1}]
    two = [*one, {"node": "a", "allocId": "ns/w-1", "score": 1}]
    state.upsert_workload(wl_obj("w", "5", two))
    state.upsert_workload(wl_obj("waiting", "6"))  # not decided yet: waits for capacity
    booked = state.ledger.bookings("ns/w")
    assert len(booked) == 2
    assert state.woken_by("ns/w", booked) == set()  # the ledger books as much as before
    state.ledger.load("ns/w", booked[:1])
    assert state.woken_by("ns/w", booked) == {"ns/waiting"}  # the ledger books one less
    assert state.woken_by("ns/w", booked, booked) == set()  # told: nothing given back
    assert state.woken_by("ns/w", booked[:1], booked) == set()  # told: one more booked


def test_a_node_without_a_usable_name_is_logged_and_counted_once_per_version(
    caplog: pytest.LogCaptureFixture,
) -> None:
    state = ClusterState()
    nameless = versioned(node_object("a", cpu="8Ei"), "9")
    del nameless["metadata"]["name"]
    errors = read_errors()
    with caplog.at_level(logging.WARNING, logger="orca.nodes"):
        assert state.upsert_node(nameless) is None
        assert state.upsert_node(copy.deepcopy(nameless)) is None  # the same event again
    assert state.nodes == {} and read_errors() == errors + 1
    assert [r.getMessage() for r in caplog.records] == [
        "Node (no valid name) (resourceVersion 9) cannot be read, treated as not ready: "
        "metadata.name is required"
    ]


def test_a_refused_spec_keeps_the_status_it_records_for_the_invalid_status_written() -> None:
    """A Workload whose spec does not parse is recorded with its status as written (its
    phase and message, so the Invalid status orca writes keeps what it replaces), or, when
    the status does not parse either, with the placements that do (the ones booked)."""
    state = ClusterState()
    placed = [{"node": "a", "allocId": "ns/w-0", "score": 7}]
    refused = {"kind": "Job", "count": 3, "resources": {"cpu": "1"}}
    status = {"phase": "Scheduled", "placements": placed, "message": "1/1 replicas placed"}
    record = state.upsert_workload(stored_workload("w", "5", refused, status))
    assert record is not None and record.workload is None and record.status is not None
    assert (record.status.phase, record.status.message) == (Phase.SCHEDULED, "1/1 replicas placed")
    assert [p.alloc_id for p in record.status.placements] == ["ns/w-0"]

    garbled = {"phase": "Sideways", "placements": [*placed, {"node": "b"}]}
    record = state.upsert_workload(stored_workload("w", "6", refused, garbled))
    assert record is not None and record.status is not None
    assert record.status.phase is None and record.status.message is None
    assert [(p.node, p.alloc_id, p.score) for p in record.status.placements] == [("a", "ns/w-0", 7)]


@pytest.mark.parametrize(
    ("candidate", "known", "newer"),
    [
        ("5", "5", True),  # the same version again is not older (a LIST and a watch both)
        ("6", "5", True),
        ("4", "5", False),  # a stale event, after what a LIST already told
        ("10", "9", True),  # integers, not strings: "10" < "9" as text
        (None, "5", True),
        ("5", None, True),
        ("abc", "5", True),  # not an etcd integer: opaque, so it counts as new
    ],
)
def test_is_newer_orders_etcd_resource_versions_and_trusts_anything_else(
    candidate: str | None, known: str | None, newer: bool
) -> None:
    assert state_module.is_newer(candidate, known) is newer


def test_an_update_keeps_what_the_operator_learnt_of_the_workload() -> None:
    """A newer event replaces the record's object and version and takes its generation (the
    status's observedGeneration), but keeps what the operator learnt: who can cure its last
    decision (so it stays among those waiting for capacity), the version its own last write
    produced, and when its first unanswered event came (the end-to-end latency's start)."""
    state = ClusterState()
    first = state.upsert_workload(wl_obj("w", "5"))
    assert first is not None and first.seen is not None and first.generation == 1
    first.code, first.written_version, first.seen = Code.UNSCHEDULABLE, "4", 123.0
    changed = wl_obj("w", "6")
    changed["metadata"]["generation"] = 2
    record = state.upsert_workload(changed)
    assert record is not None and record is not first
    assert (record.resource_version, record.generation) == ("6", 2)
    assert (record.code, record.written_version, record.seen) == (Code.UNSCHEDULABLE, "4", 123.0)
    assert "ns/w" in state.keys_waiting_for_capacity()
    record.seen = None  # answered by a write: the next event starts a new clock
    again = state.upsert_workload(wl_obj("w", "7"))
    assert again is not None and again.seen is not None and again.seen != 123.0


def test_a_noexecute_taint_without_a_time_counts_from_when_it_was_first_seen() -> None:
    """kube's taint-eviction controller counts a NoExecute taint from when it first saw it:
    the state stamps the taint with its clock when it arrives, and keeps that time through
    the Node's later updates (a relabel at a later clock does not restart the count)."""
    now = [1000.0]
    state = ClusterState(clock=lambda: now[0])
    taint = [{"key": "maintenance", "effect": "NoExecute"}]
    state.upsert_node(versioned(node_object("a", taints=taint), "1"))
    now[0] = 2000.0
    state.upsert_node(versioned(node_object("a", taints=taint, labels={"x": "y"}), "2"))
    assert [(t.key, t.time_added) for t in state.nodes["a"].taints] == [("maintenance", 1000.0)]


@pytest.mark.parametrize("metadata", ["a", {"name": ["a"], "resourceVersion": "3"}], ids=str)
def test_a_node_whose_metadata_cannot_be_read_is_counted_not_stored(metadata: object) -> None:
    state = ClusterState()
    errors = read_errors()
    obj = node_object("a")
    obj["metadata"] = metadata
    assert state.upsert_node(obj) is None
    assert state.nodes == {} and read_errors() == errors + 1


def unlabelled(cpu: str, version: str) -> dict[str, Any]:
    obj = versioned(node_object("a", cpu=cpu), version)
    obj["metadata"].pop("labels", None)
    return obj


@pytest.mark.parametrize("first_good", [False, True], ids=["broken-first", "good-first"])
def test_an_unreadable_node_without_labels_is_read_again_when_it_changes(first_good: bool) -> None:
    """A Node that becomes readable again is read again, even with the very labels and parts
    it had before it broke (nothing of the broken one is kept to compare with), and its
    unreadable mark is gone."""
    state = ClusterState()
    if first_good:
        assert state.upsert_node(unlabelled("4", "1")) == "a"
    assert state.upsert_node(unlabelled("8Ei", "2")) == "a"
    assert not state.nodes["a"].eligible and "a" in state.unreadable_nodes
    assert state.upsert_node(unlabelled("4", "3")) == "a"
    assert state.nodes["a"].eligible and state.nodes["a"].cpu == 4000
    assert state.unreadable_nodes == {}


def test_a_stale_event_does_not_revive_an_unreadable_node() -> None:
    """An event older than the unreadable version already seen (a LIST told 7, a delayed
    watch event brings 6) changes nothing: the Node stays unreadable until a newer one."""
    state = ClusterState()
    assert state.upsert_node(unlabelled("8Ei", "7")) == "a"
    assert state.upsert_node(unlabelled("4", "6")) is None
    assert not state.nodes["a"].eligible


def test_an_event_during_a_write_in_flight_leaves_the_assumption_booked() -> None:
    """While a status write of w is in flight its assumption is w's booking (the
    transaction settles it): an event of w meanwhile (an older status, without the decision)
    updates the record but must not book over the assumption."""
    state = ClusterState()
    state.upsert_node(versioned(node_object("a", cpu="4"), "1"))
    state.table()
    state.upsert_workload(wl_obj("w", "5"))
    decided = (Booking("a", "ns/w-0", 1000, 0),)
    state.ledger.assume("ns/w", decided)
    relabelled = wl_obj("w", "6")
    relabelled["metadata"]["labels"] = {"team": "x"}
    record = state.upsert_workload(relabelled)
    assert record is not None and record.resource_version == "6"
    assert state.ledger.bookings("ns/w") == decided
    assert int(state.ledger.used_cpu[0]) == 1000


async def drain(queue: WorkQueue) -> set[str]:
    """Every key queued, handed out and done (what the workers would decide next)."""
    keys = set()
    while len(queue):
        key = await queue.get()
        queue.done(key)
        keys.add(key)
    return keys


def test_node_changes_in_two_turns_are_flushed_once_each_with_the_workloads_on_them() -> None:
    """One flush per turn of the event loop, not one for good: a Node changed in a later turn
    queues the Workloads booked on it (and a deleted Node those booked on it), not those of
    the Nodes flushed before."""

    async def scenario() -> list[set[str]]:
        state, queue = ClusterState(), WorkQueue()
        gate = StartupGate(state, queue)
        events = NodeEvents(state, queue, gate)
        for name in ("a", "b", "c"):
            events.added(versioned(node_object(name), "1"))
        for name in ("a", "b", "c"):
            placed = [{"node": name, "allocId": f"ns/on-{name}-0", "score": 1}]
            state.upsert_workload(wl_obj(f"on-{name}", "2", placed))
            state.decided(state.records[f"ns/on-{name}"], Code.SUCCESS)
        gate.ready.set()
        flushes = [0]
        real = events.flush

        def counted() -> None:
            flushes[0] += 1
            real()

        events.flush = counted  # type: ignore[method-assign]
        seen = []
        events.modified(versioned(node_object("a", ready=False), "3"))
        events.modified(versioned(node_object("a", ready="Unknown"), "4"))
        await asyncio.sleep(0)
        seen.append(await drain(queue))
        events.modified(versioned(node_object("b", cpu="8"), "5"))
        await asyncio.sleep(0)
        seen.append(await drain(queue))
        events.deleted(versioned(node_object("c"), "6"))
        await asyncio.sleep(0)
        seen.append(await drain(queue))
        await asyncio.sleep(0)
        seen.append({str(flushes[0])})
        return seen

    assert asyncio.run(scenario()) == [{"ns/on-a"}, {"ns/on-b"}, {"ns/on-c"}, {"3"}]


def test_nothing_is_queued_for_node_or_workload_events_before_the_startup_gate_opens() -> None:
    """Before every informer has listed the view is partial: Node changes, deletions and
    freed capacity queue nobody, not even a turn later (the gate queues everyone itself)."""

    async def scenario() -> int:
        state, queue = ClusterState(), WorkQueue()
        gate = StartupGate(state, queue)
        nodes, workloads = NodeEvents(state, queue, gate), WorkloadEvents(state, queue, gate)
        nodes.added(versioned(node_object("a"), "1"))
        waiting = wl_obj("waiting", "2")
        workloads.added(waiting)
        placed = [{"node": "a", "allocId": "ns/on-a-0", "score": 1}]
        workloads.added(wl_obj("on-a", "3", placed))
        nodes.modified(versioned(node_object("a", ready=False), "4"))
        workloads.deleted(wl_obj("on-a", "5", placed))
        nodes.deleted(versioned(node_object("a"), "6"))
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        return len(queue)

    assert asyncio.run(scenario()) == 0


def test_capacity_freed_many_times_in_one_turn_wakes_who_waits_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A namespace of 300 placed Workloads deleted in one watch chunk: who waits for capacity
    (Unschedulable, or not decided yet) is found by one walk and queued, those decided
    otherwise are not; capacity freed in a later turn walks again."""

    async def scenario() -> tuple[set[str], set[str], int]:
        state, queue = ClusterState(), WorkQueue()
        gate = StartupGate(state, queue)
        nodes, events = NodeEvents(state, queue, gate), WorkloadEvents(state, queue, gate)
        nodes.added(versioned(node_object("a", cpu="1000"), "1"))

        def placed(i: int) -> list[dict[str, Any]]:
            return [{"node": "a", "allocId": f"ns/p{i}-0", "score": 1}]

        for i in range(301):
            events.added(wl_obj(f"p{i}", "2", placed(i)))
            state.decided(state.records[f"ns/p{i}"], Code.SUCCESS)
        events.added(wl_obj("starved", "3"))
        state.decided(state.records["ns/starved"], Code.UNSCHEDULABLE)
        events.added(wl_obj("new", "3"))  # not decided yet
        events.added(wl_obj("bad", "3"))
        state.decided(state.records["ns/bad"], Code.INVALID)
        gate.ready.set()
        walks = [0]
        real = state.keys_waiting_for_capacity

        def counted() -> set[str]:
            walks[0] += 1
            return real()

        monkeypatch.setattr(state, "keys_waiting_for_capacity", counted)
        for i in range(300):
            events.deleted(wl_obj(f"p{i}", "4", placed(i)))
        assert len(queue) == 0  # not yet: once, when this turn of the loop ends
        await asyncio.sleep(0)
        first = await drain(queue)
        events.deleted(wl_obj("p300", "5", placed(300)))
        await asyncio.sleep(0)
        second = await drain(queue)
        return first, second, walks[0]

    first, second, walks = asyncio.run(scenario())
    assert first == second == {"ns/starved", "ns/new"}
    assert walks == 2


def test_daemon_keys_follow_a_workload_that_becomes_or_stops_being_a_daemonset() -> None:
    """Every Node change queues the DaemonSets: kept as an index with the records, so a kind
    changed either way and a deletion show in it at once."""
    state = ClusterState()
    state.upsert_workload(stored_workload("ds", "1", {"kind": "DaemonSet"}))
    state.upsert_workload(wl_obj("job", "2"))
    assert state.daemon_keys() == {"ns/ds"}
    state.upsert_workload(stored_workload("ds", "3", {"kind": "Job"}))
    state.upsert_workload(stored_workload("job", "4", {"kind": "DaemonSet"}))
    assert state.daemon_keys() == {"ns/job"}
    state.delete_workload("ns/job")
    assert state.daemon_keys() == set()


# -- the node table kept up to date row by row -------------------------------------------------

NODE_EVENTS = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c", "d"]),
        st.sampled_from(["upsert", "delete", "book"]),
        st.booleans(),  # ready
        st.sampled_from(["x", "y"]),  # zone label
        st.sampled_from(["2", "4"]),  # cpu
        st.booleans(),  # decide (take the table) after this event
    ),
    max_size=40,
)


@settings(max_examples=examples(150))
@given(NODE_EVENTS)
def test_the_table_kept_row_by_row_is_the_one_built_from_every_node(events: list[Any]) -> None:
    """Whatever the order of Nodes coming, flapping, relabelled, resized and going, with
    replicas booked on them, the table the operator decides on (built again only when a node
    comes or goes, otherwise rows replaced) and the ledger's usage are those built from the
    nodes and bookings as they are."""
    state = ClusterState()
    for version, (name, what, ready, zone, cpu, decide) in enumerate(events, start=1):
        if what == "delete":
            state.delete_node(name)
        elif what == "book":
            state.ledger.load(f"ns/{name}-{version}", [Booking(name, "x", 500, 1 << 20)])
        else:
            obj = node_object(name, cpu=cpu, ready=ready, labels={"zone": zone})
            state.upsert_node(versioned(obj, str(version)))
        if not decide:
            continue
        built = NodeTable(state.nodes.values())
        assert table_columns(state.table()) == table_columns(built)
        fresh = Ledger(built)
        for key in state.ledger.workload_keys():
            fresh.load(key, state.ledger.bookings(key))
        assert state.ledger.used_cpu.tolist() == fresh.used_cpu.tolist()
        assert state.ledger.used_memory.tolist() == fresh.used_memory.tolist()
        assert state.ledger.replicas.tolist() == fresh.replicas.tolist()


def test_a_node_going_not_ready_keeps_the_tables_shape_and_a_new_node_changes_it() -> None:
    state = ClusterState()
    state.upsert_node(versioned(node_object("a"), "1"))
    state.upsert_node(versioned(node_object("b"), "2"))
    first = state.table()
    state.upsert_node(versioned(node_object("a", ready=False), "3"))
    flapped = state.table()
    assert flapped.shape == first.shape and flapped.version != first.version
    assert flapped.ready.tolist() == [False, True]
    assert state.table() is flapped  # nothing changed since: the same table
    state.upsert_node(versioned(node_object("c"), "4"))
    grown = state.table()
    assert grown.shape != first.shape and grown.hostnames == ("a", "b", "c")


@settings(max_examples=examples(150))
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["ns/a", "ns/b", "ns/c"]),
            st.sampled_from(["upsert", "delete", "decided"]),
            st.sampled_from([None, *Code]),
        ),
        max_size=30,
    )
)
def test_who_waits_for_capacity_or_nodes_is_every_record_whose_code_a_change_can_cure(
    events: list[tuple[str, str, Code | None]],
) -> None:
    """The indexes kept with the records answer what a walk of every record would."""
    state = ClusterState()
    for version, (key, what, code) in enumerate(events, start=1):
        if what == "delete":
            state.delete_workload(key)
        elif what == "upsert":
            state.upsert_workload(wl_obj(key.partition("/")[2], str(version)))
        elif key in state.records:
            state.decided(state.records[key], code)
        waiting = {Code.UNSCHEDULABLE, None}
        assert state.keys_waiting_for_capacity() == {
            k for k, r in state.records.items() if r.code in waiting
        }
        assert state.keys_waiting_for_nodes() == {
            k for k, r in state.records.items() if r.code in {*waiting, Code.UNRESOLVABLE}
        }


def test_a_late_echo_of_our_own_write_is_dropped_even_with_opaque_versions() -> None:
    """resourceVersions are opaque by contract (``is_newer`` only orders etcd's integers):
    with an API server that issues others, the echo of the operator's own status write
    arriving after a newer change of the Workload cannot be told stale by its version. It is
    told by being the version the write produced (``written_version``, set with the record's
    version once the write landed: ``transaction._landed``), and dropped instead of rolling
    the record back to what the write replaced."""
    state = ClusterState()
    first = state.upsert_workload(wl_obj("w", "opaque-a"))
    assert first is not None
    first.written_version = first.resource_version = "opaque-w"  # our write landed
    newer = wl_obj("w", "opaque-n", [{"node": "b", "allocId": "ns/w-0", "score": 0}])
    assert state.upsert_workload(newer) is not None  # another client's change, seen first
    assert state.upsert_workload(wl_obj("w", "opaque-w")) is None  # then our write's echo
    record = state.records["ns/w"]
    assert record.resource_version == "opaque-n"
    assert record.status is not None and [p.node for p in record.status.placements] == ["b"]


def test_a_landed_write_is_what_the_next_decision_reads_of_the_workload() -> None:
    """The echo of our own status write is dropped as already known, so the write landing
    (``set_status``) is the only way the parsed Workload learns what it now records, and the
    decisions read it there: a gang's hold starts at its recorded ``BelowMinCount``
    (``gang.below_since``), and ``budget_of`` given no count of its own takes a DaemonSet's
    percentages of the ``desired`` it records (``budgets.expected``; a preemption now gives
    the nodes it is for, ``preemption.victim_budget``). Before, the record's status moved and
    the parsed Workload kept the one from before: a budget of 50 % of 6 agents was read as
    50 % of 2."""
    state = ClusterState()
    spec = {"kind": "DaemonSet", "disruption": {"minAvailable": "50%"}}
    before = {
        "phase": "Scheduled",
        "desired": 2,
        "placements": [{"node": n, "allocId": f"ns/agents-{n}", "score": 0} for n in "ab"],
    }
    record = state.upsert_workload(stored_workload("agents", "1", spec, before))
    assert record is not None and record.workload is not None
    assert expected(record.workload) == 2
    budget = budget_of(record.workload, 2)
    assert budget is not None and budget.needs == 1
    nodes = "abcdef"
    written = WorkloadStatus.model_validate(
        {
            "phase": "Scheduled",
            "desired": 6,
            "placements": [{"node": n, "allocId": f"ns/agents-{n}", "score": 0} for n in nodes],
        }
    )
    state.set_status(record, written)
    assert record.workload.status == written == record.status
    assert expected(record.workload) == 6
    budget = budget_of(record.workload, 6)
    assert budget is not None and budget.needs == 3


def test_workloads_with_the_same_spec_share_one_parsed_spec() -> None:
    state = ClusterState()
    a = state.upsert_workload(wl_obj("a", "1"))
    # The same spec with its keys in another order, as another client may write it.
    b_body = stored_workload("b", "2", {"resources": {"cpu": "1"}, "kind": "Job"}, {})
    b = state.upsert_workload(b_body)
    c = state.upsert_workload(stored_workload("c", "3", {"kind": "Job"}, {}))
    assert a is not None and b is not None and c is not None
    assert a.workload is not None and b.workload is not None and c.workload is not None
    assert a.workload.spec is b.workload.spec
    assert c.workload.spec is not a.workload.spec and c.workload.spec.resources is None
    # Shared or not, each record says what a parse of its own object says.
    assert b.workload == Workload.model_validate(b_body)
    assert b.workload.metadata.name == "b" and a.workload.metadata.name == "a"
    assert len(state.parts) == 2


def test_a_spec_no_workload_holds_is_let_go() -> None:
    state = ClusterState()
    state.upsert_workload(wl_obj("a", "1"))
    state.upsert_workload(stored_workload("c", "3", {"kind": "Job"}, {}))
    assert len(state.parts) == 2
    state.delete_workload("ns/c")
    gc.collect()
    assert len(state.parts) == 1


def test_a_shared_spec_does_not_hide_an_invalid_one() -> None:
    state = ClusterState()
    state.upsert_workload(wl_obj("a", "1"))
    bad = state.upsert_workload(
        stored_workload("bad", "2", {"kind": "Job", "resources": {"cpu": "lots"}}, {})
    )
    assert bad is not None and bad.workload is None
    assert bad.error is not None and "spec.resources[cpu]" in bad.error


def placed_as_listed(name: str, node: str, since: str, generation: Any = 1) -> dict[str, Any]:
    """A Job placed on ``node`` with orca's Ready condition changed at ``since``, read as a
    LIST's page is read (orjson): every string a copy of its own."""
    condition = {
        "type": "Ready",
        "status": "True",
        "reason": "AllPlaced",
        "message": "1/1 replicas placed",
        "lastTransitionTime": since,
        "observedGeneration": generation,
    }
    status = {
        "phase": "Scheduled",
        "placements": [{"node": node, "allocId": f"ns/{name}-0", "score": 9}],
        "conditions": [condition],
        "message": "1/1 replicas placed",
        "nodes": node,
        "resources": {"cpu": "1"},
    }
    body = stored_workload(name, "1", {"kind": "Job", "resources": {"cpu": "1"}}, status)
    parsed: dict[str, Any] = orjson.loads(orjson.dumps(body))
    return parsed


def test_what_equal_statuses_hold_alike_is_held_once() -> None:
    state = ClusterState()
    bodies = [
        placed_as_listed("a", "node-1", "2026-12-01T10:00:00Z"),
        placed_as_listed("b", "node-1", "2026-12-01T10:00:00Z"),
        placed_as_listed("c", "node-2", "2026-12-01T10:00:01Z"),
    ]
    a, b, c = (state.upsert_workload(body) for body in bodies)
    assert a is not None and b is not None and c is not None
    assert a.status is not None and b.status is not None and c.status is not None
    assert a.status.conditions[0] is b.status.conditions[0]
    assert a.status.conditions[0] is not c.status.conditions[0]  # another time: its own
    assert a.status.resources is b.status.resources is c.status.resources
    assert a.status.placements[0].node is b.status.placements[0].node
    assert a.status.nodes is b.status.nodes and a.status.message is c.status.message
    assert a.workload is not None and c.workload is not None
    assert a.workload.api_version is c.workload.api_version
    assert a.workload.kind is c.workload.kind
    assert a.workload.metadata.namespace is c.workload.metadata.namespace is c.namespace
    assert c.name is c.workload.metadata.name
    # Shared or not, each record says what a parse of its own object says.
    for record, body in zip((a, b, c), bodies, strict=True):
        assert record.workload == Workload.model_validate(body)
        assert (record.key, record.namespace, record.name) == (
            key_of(body),
            "ns",
            body["metadata"]["name"],
        )


def test_a_shared_part_reads_as_its_own_parse_whatever_its_values_types() -> None:
    """``1``, ``1.0``, ``True`` and ``"1"`` are read alike by pydantic's lax parse (and the
    first three are one key in a Python dict): a shared condition is what the Workload's own
    parse makes of each."""
    state = ClusterState()
    for i, generation in enumerate((1, 1.0, True, "1", 2)):
        body = placed_as_listed(f"w{i}", "node-1", "2026-12-01T10:00:00Z", generation)
        record = state.upsert_workload(body)
        assert record is not None and record.workload == Workload.model_validate(body)


def test_a_status_part_that_does_not_parse_is_refused_as_before() -> None:
    """A condition or ``status.resources`` that does not parse is left to the Workload's own
    parse: the record says what that parse says, beside a valid one shared."""
    state = ClusterState()
    state.upsert_workload(placed_as_listed("good", "node-1", "2026-12-01T10:00:00Z"))
    no_type = placed_as_listed("no-type", "node-1", "2026-12-01T10:00:00Z")
    del no_type["status"]["conditions"][0]["type"]
    lots = placed_as_listed("lots", "node-1", "2026-12-01T10:00:00Z")
    lots["status"]["resources"] = {"cpu": "lots"}
    for body, where in ((no_type, "status.conditions[0].type"), (lots, "status.resources")):
        record = state.upsert_workload(body)
        assert record is not None and record.workload is None
        with pytest.raises(ValidationError) as refused:
            Workload.model_validate(body)
        assert record.error == validation_message(refused.value)
        assert record.error.startswith(where), record.error


def test_a_spec_that_is_not_json_is_parsed_on_its_own() -> None:
    """A body built in Python (not read from the API server) may hold a value JSON has no
    form for, such as a Decimal quantity: it cannot be keyed, and is parsed as it is."""
    state = ClusterState()
    body = stored_workload("dec", "1", {"kind": "Job", "resources": {"cpu": Decimal("2")}}, {})
    record = state.upsert_workload(body)
    assert record is not None and record.error is None and record.workload is not None
    assert record.workload.spec.resources is not None
    assert record.workload.spec.resources.cpu_millis == 2000
    assert len(state.parts) == 0  # nothing to share it by


def budgeted_web(version: str, generation: int, minimum: int) -> dict[str, Any]:
    """web: 3 replicas of 2 cpu placed on a, b and c, its disruption budget minAvailable
    ``minimum``, as the API server returns it."""
    spec = {
        "kind": "Service",
        "count": 3,
        "resources": {"cpu": "2"},
        "disruption": {"minAvailable": minimum},
    }
    placements = [{"node": n, "allocId": f"ns/web-{i}", "score": 1} for i, n in enumerate("abc")]
    obj = stored_workload("web", version, spec, {"placements": placements})
    obj["metadata"]["generation"] = generation
    return obj


def test_a_budget_relaxed_wakes_who_waits_for_capacity() -> None:
    """boss waits for capacity (its preemption was refused by web's minAvailable 3); web's
    budget becomes minAvailable 2: one replica may now go, so boss must be decided again, as
    when web is deleted or shrinks."""

    async def scenario() -> set[str]:
        state, queue = ClusterState(), WorkQueue()
        gate = StartupGate(state, queue)
        nodes, events = NodeEvents(state, queue, gate), WorkloadEvents(state, queue, gate)
        for i, name in enumerate("abc"):
            nodes.added(versioned(node_object(name, cpu="2"), str(i + 1)))
        events.added(budgeted_web("4", 1, 3))
        state.decided(state.records["ns/web"], Code.SUCCESS)
        events.added(wl_obj("boss", "5"))
        state.decided(state.records["ns/boss"], Code.UNSCHEDULABLE)
        gate.ready.set()
        events.modified(budgeted_web("6", 2, 2))
        await asyncio.sleep(0)
        return await drain(queue)

    assert asyncio.run(scenario()) == {"ns/web", "ns/boss"}


def test_a_new_leader_queues_the_undecided_before_the_placed() -> None:
    """``undecided_first``: placed for an older generation, unplaced, or never decided come
    first, in the records' order; then the wholly placed ones, also in order."""
    state = ClusterState()
    state.upsert_node(node_object("a", cpu="8"))
    state.upsert_workload(job("placed-1", cpu="1", node="a", observed=1))
    state.upsert_workload(job("new", cpu="1"))
    state.upsert_workload(job("stale", cpu="1", node="a", observed=0))
    state.upsert_workload(job("placed-2", cpu="1", node="a", observed=1))
    assert state.undecided_first() == [
        "ns/new",
        "ns/stale",
        "ns/placed-1",
        "ns/placed-2",
    ]
