"""Each metric moves when the operator does the thing it counts.

The operator is driven in-process (its real loop, state, queue, ledger and scheduler) over a
fake API that answers like the API server would; values are read from prometheus_client's
registry as deltas, since the registry is process-wide.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from importlib import metadata
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from kubernetes import client as k8s_client
from prometheus_client import REGISTRY, generate_latest

from controller.operator.app import Operator
from controller.operator.events import PendingEvent
from controller.operator.handlers import StartupGate, WorkloadEvents
from controller.operator.kube import ApiError, KubeApi, TransportError
from controller.operator.kube.informer import Informer
from controller.operator.state import ClusterState
from controller.operator.telemetry import metrics
from controller.operator.workqueue import WorkQueue
from controller.scheduler.nodes import Taint
from controller.scheduler.plugins import (
    constraints,
    eligibility,
    resources,
    runtime,
    taints,
    topology_spread,
)
from controller.scheduler.scheduler import Scheduler
from tests.support.factories import job, node_object, service


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


class Delta:
    """``with Delta(name, **labels) as d: ...`` then ``d.value``: how much a sample moved."""

    def __init__(self, name: str, **labels: str) -> None:
        self.name, self.labels = name, labels
        self.value = 0.0

    def __enter__(self) -> Delta:
        self._before = sample(self.name, **self.labels)
        return self

    def __exit__(self, *_exc: object) -> None:
        self.value = sample(self.name, **self.labels) - self._before


class FakeApi:
    """Answers the operator's calls like an API server: LISTs from ``nodes``/``workloads``,
    status writes succeed (new resourceVersion) unless ``fail_with`` holds an error."""

    def __init__(self, nodes: list[dict[str, Any]], workloads: list[dict[str, Any]]) -> None:
        self.nodes, self.workloads = nodes, workloads
        self.fail_with: Exception | None = None
        self.list_error: Exception | None = None
        self.version = 100

    async def list_objects(self, path: str, each: Any, page: int = 500) -> str:
        if self.list_error is not None:
            raise self.list_error
        for obj in self.nodes if path.endswith("/nodes") else self.workloads:
            each(obj)
        return "50"

    async def write_workload_status(
        self, namespace: str, name: str, status: Mapping[str, Any], version: str | None
    ) -> dict[str, Any]:
        if self.fail_with is not None:
            raise self.fail_with
        self.version += 1
        return {"metadata": {"resourceVersion": str(self.version)}}

    async def create_event(self, namespace: str, event: Mapping[str, Any]) -> dict[str, Any]:
        return {}


def operator_for(
    workloads: list[dict[str, Any]], scheduler: Scheduler | None = None
) -> tuple[Operator, FakeApi]:
    api = FakeApi([node_object("a", cpu="4", memory="8Gi")], workloads)
    state = ClusterState()
    for node in api.nodes:
        state.upsert_node(node)
    for obj in workloads:
        state.upsert_workload(obj)
    operator = Operator.wire(api, state, WorkQueue(), scheduler)  # type: ignore[arg-type]
    return operator, api


async def decide(operator: Operator, key: str) -> None:
    await operator.loop.process(key)


def export_gauges(operator: Operator) -> None:
    operator.gauges.export(operator.state, operator.queue)


ATTEMPTS = "orca_schedule_attempts_total"


@pytest.mark.parametrize(
    ("spec", "kind", "result"),
    [
        ({"kind": "Job", "resources": {"cpu": "1"}}, "Job", "scheduled"),
        ({"kind": "Service", "count": 3, "resources": {"cpu": "2"}}, "Service", "partial"),
        ({"kind": "Job", "resources": {"cpu": "16"}}, "Job", "unschedulable"),
        ({"kind": "Job", "constraints": ["node.nope"]}, "Job", "invalid"),
    ],
    ids=["scheduled", "partial", "unschedulable", "invalid"],
)
def test_attempts_count_each_decision_by_kind_and_result(
    spec: dict[str, Any], kind: str, result: str
) -> None:
    operator, _ = operator_for([job("w", **spec)])
    with (
        Delta(ATTEMPTS, kind=kind, result=result) as attempts,
        Delta("orca_scheduling_algorithm_duration_seconds_count") as timed,
        Delta("orca_status_writes_total", outcome="written") as written,
        Delta("orca_schedule_unchanged_total", kind=kind, result=result) as unchanged,
    ):
        asyncio.run(decide(operator, "ns/w"))
    assert (attempts.value, timed.value, written.value, unchanged.value) == (1, 1, 1, 0)
    with (
        Delta(ATTEMPTS, kind=kind, result=result) as again,
        Delta("orca_schedule_unchanged_total", kind=kind, result=result) as unchanged,
    ):
        asyncio.run(decide(operator, "ns/w"))  # same state, same decision: nothing written
    assert (again.value, unchanged.value) == (1, 1)


def test_end_to_end_latency_is_observed_once_per_event_answered() -> None:
    operator, _ = operator_for([job("w")])
    with Delta("orca_e2e_scheduling_duration_seconds_count") as e2e:
        asyncio.run(decide(operator, "ns/w"))
        asyncio.run(decide(operator, "ns/w"))  # unchanged: no write, nothing to observe
    assert e2e.value == 1
    assert operator.state.records["ns/w"].seen is None


def test_an_internal_error_counts_as_result_error_and_backs_off() -> None:
    class Broken(Scheduler):
        def schedule(self, *_: Any, **__: Any) -> Any:
            raise RuntimeError("a bug")

    async def scenario() -> int:
        operator, _ = operator_for([job("w")], Broken())
        operator.queue.add("ns/w")
        operator.gate.ready.set()  # every informer has listed (the start-up gate)
        loop = asyncio.create_task(operator.loop.run())
        for _ in range(100):
            await asyncio.sleep(0.01)
            if operator.queue.backing_off:
                break
        export_gauges(operator)
        backoff = sample("orca_pending_workloads", queue="backoff")
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)
        return int(backoff)

    logging.getLogger("orca.scheduler").disabled = True  # the expected traceback
    try:
        with Delta(ATTEMPTS, kind="Job", result="error") as errors:
            backoff = asyncio.run(scenario())
    finally:
        logging.getLogger("orca.scheduler").disabled = False
    assert errors.value >= 1 and backoff == 1


def test_lists_are_counted_per_resource_and_outcome() -> None:
    """Each informer counts its own LISTs: the one that failed, then the one that worked."""
    operator, api = operator_for([job("w")])
    state, queue = operator.state, operator.queue
    handler = WorkloadEvents(state, queue, StartupGate(state, queue))
    informer = Informer(api, "/apis/orca.cloudinit.dev/v1alpha1/workloads", "workloads", handler)  # type: ignore[arg-type]
    api.list_error = ApiError(500, "InternalError", "etcd")
    labels = {"resource": "workloads"}
    with (
        Delta("orca_relists_total", **labels, outcome="failed") as failed,
        Delta("orca_relists_total", **labels, outcome="listed") as listed,
        Delta("orca_relists_total", resource="nodes", outcome="listed") as nodes,
    ):
        with pytest.raises(ApiError):
            asyncio.run(informer.list_once())
        api.list_error = None
        asyncio.run(informer.list_once())
    assert (failed.value, listed.value, nodes.value) == (1, 1, 0)


def test_free_room_by_resource_follows_the_ledger_and_drops_what_no_node_offers() -> None:
    """Per resource, over the eligible nodes: cpu in cores, memory in bytes, pods and GPUs as
    counts (kube-state-metrics' units); per node, the resources beside cpu and memory, only
    where the node offers them."""
    operator, _ = operator_for(
        [
            service("train", 3, resources={"cpu": "1", "nvidia.com/gpu": 2}),
            service("web", 2, cpu="500m"),
        ]
    )
    state = operator.state
    gpus = {"pods": "10", "nvidia.com/gpu": "8"}
    state.upsert_node(node_object("g", cpu="8", memory="4Gi", allocatable=gpus))
    state.upsert_node(node_object("cordoned", cpu="8", cordoned=True, allocatable=gpus))
    for key in sorted(state.records):
        asyncio.run(decide(operator, key))
    export_gauges(operator)
    # train: three replicas of 2 GPUs, only g has GPUs (a holds none): 3 x 2 = 6 of 8 taken.
    assert (
        sample(
            "orca_node_allocatable_resource", node="g", resource="nvidia.com/gpu", unit="integer"
        )
        == 8.0
    )
    assert (
        sample("orca_node_free_resource", node="g", resource="nvidia.com/gpu", unit="integer")
        == 2.0
    )
    assert (
        REGISTRY.get_sample_value(
            "orca_node_free_resource",
            {"node": "a", "resource": "nvidia.com/gpu", "unit": "integer"},
        )
        is None
    )  # a offers none: no series
    # Over the eligible nodes (a and g; the cordoned one is left out).
    assert sample("orca_resource_allocatable", resource="nvidia.com/gpu", unit="integer") == 8.0
    assert sample("orca_resource_free", resource="nvidia.com/gpu", unit="integer") == 2.0
    assert sample("orca_resource_allocatable", resource="cpu", unit="core") == 12.0
    assert sample("orca_resource_free", resource="cpu", unit="core") == 12.0 - 3 - 1.0
    # Only g states pods: 10, holding the 3 train replicas and maybe a web one.
    held_on_g = sample("orca_node_placements", node="g")
    assert sample("orca_resource_allocatable", resource="pods", unit="integer") == 10.0
    assert sample("orca_resource_free", resource="pods", unit="integer") == 10.0 - held_on_g
    state.delete_node("g")
    state.delete_node("cordoned")
    export_gauges(operator)
    assert (
        REGISTRY.get_sample_value(
            "orca_resource_free", {"resource": "nvidia.com/gpu", "unit": "integer"}
        )
        is None
    )


@pytest.mark.parametrize(
    ("error", "outcome", "code"),
    [
        (ApiError(409, "Conflict", "changed"), "conflict", "409"),
        (ApiError(404, "NotFound", "gone"), "not_found", "404"),
        (ApiError(500, "InternalError", "etcd"), "failed", "500"),
        (
            TransportError("PATCH w", aiohttp.ServerDisconnectedError()),
            "failed",
            "ServerDisconnectedError",  # the cause's class: what went wrong, in a bounded set
        ),
    ],
    ids=["conflict", "not_found", "5xx", "disconnected"],
)
def test_status_write_outcomes(error: Exception, outcome: str, code: str) -> None:
    operator, api = operator_for([job("w")])
    api.fail_with = error
    with (
        Delta("orca_status_writes_total", outcome=outcome) as writes,
        Delta("orca_status_write_failures_total", code=code) as failures,
        Delta("orca_e2e_scheduling_duration_seconds_count") as e2e,
    ):
        asyncio.run(decide(operator, "ns/w"))
    assert (writes.value, failures.value, e2e.value) == (1, 1, 0)


def test_cel_errors_and_cost_limit_hits_are_counted_as_they_grow() -> None:
    zone = job("w", constraints=['node.labels["zone"] == "x"'])  # no such label: an error
    operator, _ = operator_for([zone])
    with Delta("orca_cel_evaluation_errors_total") as errors:
        asyncio.run(decide(operator, "ns/w"))
    assert errors.value >= 1
    # The evaluator's running total of cost-limit hits (read with getattr until it lands).
    cel = operator.loop.scheduler.cel
    with Delta("orca_cel_cost_limit_hits_total") as hits:
        cel.cost_limit_hits = 3
        asyncio.run(decide(operator, "ns/w"))
        asyncio.run(decide(operator, "ns/w"))  # no new hits: no new counts
    assert hits.value == 3


def test_gauges_follow_the_ledger_per_node_and_drop_deleted_nodes() -> None:
    operator, _ = operator_for(
        [
            service("web", 2, cpu="1500m"),
            job("big", resources={"cpu": "16"}),
            job("wasm", runtime={"oneOf": ["wasm"]}),
        ]
    )
    state = operator.state
    state.upsert_node(node_object("b", cpu="2", memory="4Gi"))
    for key in sorted(state.records):
        asyncio.run(decide(operator, key))
    export_gauges(operator)
    assert sample("orca_node_allocatable_cpu_cores", node="a") == 4.0
    assert sample("orca_node_allocatable_memory_bytes", node="b") == 4 * 2**30
    free = {n: sample("orca_node_free_cpu_cores", node=n) for n in ("a", "b")}
    assert sorted(free.values()) == [0.5, 2.5]  # one web replica on each
    assert sample("orca_node_placements", node="a") == 1.0
    assert sample("orca_node_free_memory_bytes", node="a") == 7 * 2**30
    assert sample("orca_workloads", namespace="ns", phase="Scheduled") == 1.0
    assert sample("orca_workloads", namespace="ns", phase="Unschedulable") == 2.0
    assert sample("orca_pending_workloads", queue="unschedulable") == 2.0
    assert sample("orca_unschedulable_workloads", plugin="ResourcesFit") == 1.0
    assert sample("orca_unschedulable_workloads", plugin="Runtime") == 1.0
    assert sample("orca_nodes", eligible="true") == 2.0

    state.delete_node("b")
    export_gauges(operator)
    assert REGISTRY.get_sample_value("orca_node_free_cpu_cores", {"node": "b"}) is None
    assert REGISTRY.get_sample_value("orca_node_placements", {"node": "b"}) is None
    assert sample("orca_node_allocatable_cpu_cores", node="a") == 4.0


def test_workloads_by_namespace_and_phase_and_a_namespace_without_workloads_has_no_series() -> None:
    """One series per phase for every namespace that holds Workloads (so an alert can name the
    namespace); none for a namespace whose last Workload went (bounded by the namespaces in
    use, not by every namespace ever seen)."""
    placed, short, gone = (
        job("web", resources={"cpu": "1"}),
        job("big", resources={"cpu": "16"}),
        job("lone", resources={"cpu": "16"}),
    )
    placed["metadata"]["namespace"] = short["metadata"]["namespace"] = "team-a"
    gone["metadata"]["namespace"] = "team-b"
    operator, _ = operator_for([placed, short, gone])
    for key in sorted(operator.state.records):
        asyncio.run(decide(operator, key))
    export_gauges(operator)

    def by_phase(namespace: str) -> dict[str, float | None]:
        return {
            phase: REGISTRY.get_sample_value(
                "orca_workloads", {"namespace": namespace, "phase": phase}
            )
            for phase in ("Pending", "Scheduled", "PartiallyScheduled", "Unschedulable", "Invalid")
        }

    zero = dict.fromkeys(("Pending", "PartiallyScheduled", "Invalid"), 0.0)
    assert by_phase("team-a") == {**zero, "Scheduled": 1.0, "Unschedulable": 1.0}
    assert by_phase("team-b") == {**zero, "Scheduled": 0.0, "Unschedulable": 1.0}

    operator.state.delete_workload("team-b/lone")
    export_gauges(operator)
    assert by_phase("team-b") == dict.fromkeys(by_phase("team-b"))  # every value None
    assert by_phase("team-a") == {**zero, "Scheduled": 1.0, "Unschedulable": 1.0}


ZONE = "topology.kubernetes.io/zone"
PLUGINS = (
    "NodeEligibility",
    "TaintToleration",
    "Runtime",
    "CelConstraints",
    "TopologySpread",
    "ResourcesFit",
)
SPREAD = [{"topologyKey": ZONE, "maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}]


@pytest.mark.parametrize(
    ("node", "spec", "plugin", "reason"),
    [
        ({"cordoned": True}, {}, "NodeEligibility", eligibility.REASON_CORDONED),
        ({"ready": False}, {}, "NodeEligibility", eligibility.REASON_NOT_READY),
        (
            {"taints": [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]},
            {},
            "TaintToleration",
            taints.reason_untolerated(Taint(key="dedicated", value="ml", effect="NoSchedule")),
        ),
        (
            {},
            {"constraints": ['node.labels["zone"] == "x"']},
            "CelConstraints",
            constraints.reason_constraint_error('node.labels["zone"] == "x"'),
        ),
        (
            {},
            {"constraints": ['"ssd" in node.tags']},
            "CelConstraints",
            constraints.reason_constraint('"ssd" in node.tags'),
        ),
        ({}, {"runtime": {"oneOf": ["wasm"]}}, "Runtime", runtime.reason_runtime(["wasm"])),
        ({}, {"resources": {"cpu": "16"}}, "ResourcesFit", resources.REASON_INSUFFICIENT_CPU),
        (
            {},
            {"resources": {"memory": "64Gi"}},
            "ResourcesFit",
            resources.REASON_INSUFFICIENT_MEMORY,
        ),
        (
            {},
            {"kind": "Service", "count": 1, "topologySpread": SPREAD},
            "TopologySpread",
            topology_spread.reason_missing_label(ZONE),
        ),
        (
            {"labels": {ZONE: "z1"}, "cpu": "1"},
            {"kind": "Service", "count": 3, "resources": {"cpu": "500m"}, "topologySpread": SPREAD},
            "TopologySpread",
            topology_spread.reason_skew(ZONE),
        ),
    ],
    ids=[
        "cordoned",
        "not-ready",
        "taint",
        "constraint-error",
        "constraint",
        "runtime",
        "cpu",
        "memory",
        "spread-missing-label",
        "spread-skew",
    ],
)
def test_each_rejection_carries_its_plugin_to_the_status_and_the_gauge(
    node: dict[str, Any], spec: dict[str, Any], plugin: str, reason: str
) -> None:
    """The plugin that rejected a node is passed along with its reason (``diagnose``), never
    recovered from the reason's text: the status names it, and
    ``orca_unschedulable_workloads{plugin}`` counts under it; both TopologySpread reasons
    too (recovered from the text, they counted as "Other")."""
    obj = job("w", **spec)
    operator, _ = operator_for([obj])
    state = operator.state
    state.delete_node("a")
    if spec.get("kind") == "Service" and node.get("labels"):
        for other in ("b", "c"):  # one domain with room (z1), one without (z2)
            labels = {ZONE: "z1" if other == "b" else "z2"}
            state.upsert_node(
                node_object(other, cpu="4" if other == "b" else "100m", labels=labels)
            )
    state.upsert_node(node_object("a", **node))
    asyncio.run(decide(operator, "ns/w"))
    status = state.records["ns/w"].status
    assert status is not None
    assert (reason, plugin) in {(r.reason, r.plugin) for r in status.unschedulable}
    for any_plugin in (*PLUGINS, "Other"):  # the gauge is process-wide: start from zero
        metrics.UNSCHEDULABLE_WORKLOADS.labels(plugin=any_plugin).set(0)
    export_gauges(operator)
    assert sample("orca_unschedulable_workloads", plugin=plugin) == 1
    assert sample("orca_unschedulable_workloads", plugin="Other") == 0


def test_queue_depth_follows_the_queue() -> None:
    async def scenario() -> list[float]:
        queue = WorkQueue()
        queue.add_all(["a", "b"])
        seen = [sample("orca_queue_depth")]
        await queue.get()
        seen.append(sample("orca_queue_depth"))
        return seen

    assert asyncio.run(scenario()) == [2.0, 1.0]


def _api(host: str) -> KubeApi:
    configuration = k8s_client.Configuration()
    configuration.host = host
    configuration.verify_ssl = False
    return KubeApi(configuration)


def test_api_requests_are_counted_by_verb_resource_and_code() -> None:
    answers = [web.json_response({"metadata": {}}), web.json_response({}, status=409)]

    async def handler(_request: web.Request) -> web.Response:
        return answers.pop(0)

    async def scenario() -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        async with _api(f"http://127.0.0.1:{port}") as api:
            await api.write_workload_status("ns", "w", {"phase": "Scheduled"}, "1")
            with pytest.raises(ApiError):
                await api.write_workload_status("ns", "w", {"phase": "Scheduled"}, "1")
        await runner.cleanup()
        async with _api(f"http://127.0.0.1:{port}") as api:  # nothing listens any more
            with pytest.raises(TransportError) as refused:
                await api.request("GET", "/api/v1/nodes")
            assert isinstance(refused.value.cause, aiohttp.ClientConnectorError)

    labels = {"verb": "PUT", "resource": "workloads/status"}
    with (
        Delta("orca_api_requests_total", **labels, code="200") as ok,
        Delta("orca_api_requests_total", **labels, code="409") as conflict,
        Delta("orca_api_requests_total", verb="GET", resource="nodes", code="error") as refused,
    ):
        asyncio.run(scenario())
    assert (ok.value, conflict.value, refused.value) == (1, 1, 1)


def test_leader_gauge_follows_the_lease() -> None:
    from controller.operator.kube.leader import LeaderElector

    elector = LeaderElector(None, "ns", "lease")  # type: ignore[arg-type]
    elector._set(True)
    assert sample("orca_leader") == 1.0
    elector._set(False)
    assert sample("orca_leader") == 0.0


def test_build_info_carries_the_installed_version_and_labelled_series_start_at_zero() -> None:
    from controller.version import version

    assert version() == metadata.version("orca-controller")
    metrics.initialize(version())  # what operate() does at start
    assert sample("orca_build_info", version=version()) == 1.0
    for result in ("scheduled", "partial", "unschedulable", "invalid", "error"):
        assert (
            REGISTRY.get_sample_value(ATTEMPTS, {"kind": "DaemonSet", "result": result}) is not None
        )
    for outcome in ("written", "conflict", "not_found", "failed"):
        assert (
            REGISTRY.get_sample_value("orca_status_writes_total", {"outcome": outcome}) is not None
        )


def test_events_that_do_not_fit_their_queue_are_counted_as_dropped() -> None:
    operator, _ = operator_for([job("w")])
    full: asyncio.Queue[PendingEvent] = asyncio.Queue(maxsize=1)
    full.put_nowait(PendingEvent("other", "ns", None, "1", "Scheduled", "", False, "", "me"))
    operator.events.queue = full
    with Delta("orca_events_dropped_total") as dropped:
        asyncio.run(decide(operator, "ns/w"))  # Pending -> Scheduled: an Event is due
    assert dropped.value == 1


def _series(prefix: str) -> list[str]:
    """The sample lines a scrape of the process's registry returns whose names start so."""
    text = generate_latest(REGISTRY).decode()
    return [line for line in text.splitlines() if line.startswith(prefix)]


def test_without_node_metrics_no_per_node_series_and_the_cluster_wide_stay() -> None:
    """``orca run --no-node-metrics`` (``Operator.wire(per_node_metrics=False)``): a scrape
    has no ``orca_node_*{node}`` line at all, not even their HELP; ``orca_nodes`` and the
    rest are as before. The same state with the default serves five series per Node."""
    workloads = [service("web", 2, cpu="1500m")]
    on, _ = operator_for(workloads)
    on.state.upsert_node(node_object("b", cpu="2", memory="4Gi"))
    export_gauges(on)
    per_node = [line for line in _series("orca_node_") if "{node=" in line]
    assert len(per_node) == 5 * 2  # two Nodes

    api = FakeApi([node_object("a", cpu="4", memory="8Gi"), node_object("b")], workloads)
    off = Operator.wire(api, per_node_metrics=False)  # type: ignore[arg-type]
    for node in api.nodes:
        off.state.upsert_node(node)
    for obj in workloads:
        off.state.upsert_workload(obj)
    export_gauges(off)
    assert [line for line in _series("orca_node_") if "{node=" in line] == []
    help_lines = [line for line in _series("# HELP orca_node_") if "read_errors" not in line]
    assert help_lines == []
    assert sample("orca_nodes", eligible="true") == 2.0
    assert sample("orca_workloads", namespace="ns", phase="Pending") == 1.0
    # The room per resource is cluster-wide: it stays (a 4-core and a default 4-core Node).
    assert sample("orca_resource_allocatable", resource="cpu", unit="core") == 8.0


def test_orca_run_takes_no_node_metrics_as_its_switch() -> None:
    from controller.cli import build_parser

    assert build_parser().parse_args(["run"]).node_metrics is True
    assert build_parser().parse_args(["run", "--no-node-metrics"]).node_metrics is False
