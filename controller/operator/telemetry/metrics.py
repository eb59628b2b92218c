"""Every metric the operator exports, declared in one place (names prefixed ``orca_``).

Where kube-scheduler has a metric for the same thing, ours mirrors its meaning and label
values (``pkg/scheduler/metrics/metrics.go``): ``orca_schedule_attempts_total{result}`` is
``scheduler_schedule_attempts_total``, ``orca_pending_workloads{queue}`` is
``scheduler_pending_pods``, ``orca_unschedulable_workloads{plugin}`` is
``scheduler_unschedulable_pods``. Conventions: base units in the name (seconds, bytes, cores),
``_total`` on counters, bounded labels only. A Workload's name is never a label; a Node's name
is a label only on the ``orca_node_*`` gauges, whose series are removed when the Node goes, and
a namespace's only on ``orca_workloads``, whose series go with the namespace's last Workload.

The label *values* are constants here too, so the code that counts, the docs, the alert
rules and the dashboard speak one vocabulary; docs/monitoring.md lists every metric.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from prometheus_client import REGISTRY, Counter, Gauge, Histogram, Metric
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from controller.api.models import Phase, WorkloadKind

# -- label values ------------------------------------------------------------------------------

#: ``result`` of a scheduling attempt, kube-scheduler's words where it has one.
RESULT_SCHEDULED: Final = "scheduled"
RESULT_PARTIAL: Final = "partial"
RESULT_UNSCHEDULABLE: Final = "unschedulable"
RESULT_INVALID: Final = "invalid"
RESULT_ERROR: Final = "error"  # an internal error while deciding (a bug: see the logs)
RESULT_BY_PHASE: Final = {
    Phase.SCHEDULED: RESULT_SCHEDULED,
    Phase.PARTIALLY_SCHEDULED: RESULT_PARTIAL,
    Phase.UNSCHEDULABLE: RESULT_UNSCHEDULABLE,
    Phase.INVALID: RESULT_INVALID,
}
KIND_UNKNOWN: Final = "unknown"  # a Workload whose spec does not parse

#: ``outcome`` of a status write.
WRITE_WRITTEN: Final = "written"
WRITE_CONFLICT: Final = "conflict"  # 409: the object changed since the decision; retried
WRITE_NOT_FOUND: Final = "not_found"  # 404: the Workload is gone; its bookings go with it
WRITE_FAILED: Final = "failed"  # anything else (5xx, timeouts, refused connections); retried
WRITE_FENCED: Final = "fenced"  # not sent: this replica's leader Lease lapsed (write fencing)

#: ``outcome`` of an informer's LIST.
RELIST_LISTED: Final = "listed"
RELIST_FAILED: Final = "failed"

#: ``queue`` of ``orca_pending_workloads`` (kube-scheduler's ``scheduler_pending_pods``).
QUEUE_ACTIVE: Final = "active"  # waiting for the scheduling loop
QUEUE_BACKOFF: Final = "backoff"  # waiting out a retry delay after a failed write or error
QUEUE_UNSCHEDULABLE: Final = "unschedulable"  # decided, not all placed, parked until a change

# -- scheduling --------------------------------------------------------------------------------

SCHEDULE_ATTEMPTS = Counter(
    "orca_schedule_attempts_total",
    "Scheduling decisions, by Workload kind and result: 'scheduled' (all replicas placed), "
    "'partial', 'unschedulable' (none placed), 'invalid' (the spec cannot be scheduled), "
    "'error' (an internal error while deciding). Unchanged decisions count too.",
    ["kind", "result"],
)
SCHEDULE_UNCHANGED = Counter(
    "orca_schedule_unchanged_total",
    "Scheduling decisions that matched the status already recorded, so nothing was written "
    "(a subset of orca_schedule_attempts_total, same labels).",
    ["kind", "result"],
)
SCHEDULING_ALGORITHM_DURATION = Histogram(
    "orca_scheduling_algorithm_duration_seconds",
    "Time to compute one decision (the pure scheduler, not the status write).",
    buckets=(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
)
E2E_SCHEDULING_DURATION = Histogram(
    "orca_e2e_scheduling_duration_seconds",
    "End to end: from a Workload event seen (or listed) to its status written, retries "
    "included (kube-scheduler's pod_scheduling_sli_duration_seconds).",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0),
)
QUEUE_DEPTH = Gauge("orca_queue_depth", "Workloads waiting in the scheduling queue right now.")
PENDING_WORKLOADS = Gauge(
    "orca_pending_workloads",
    "Workloads waiting, by queue: 'active' (for the scheduling loop), 'backoff' (a retry "
    "delay), 'unschedulable' (decided, replicas short, parked until capacity or a spec or "
    "node change).",
    ["queue"],
)
WORKLOADS = Gauge(
    "orca_workloads",
    "Workloads known to the operator, by namespace and status.phase ('Pending': not decided "
    "yet). Every phase of a namespace that holds Workloads has a series (zeros included); a "
    "namespace without Workloads has none.",
    ["namespace", "phase"],
)
"""Per namespace, so an alert can say where Workloads wait (``OrcaWorkloadsNotPlaced``) and
``kubectl get orcawl -n NS --field-selector status.phase=...`` names them: bounded by the
namespaces in use, never a Workload's name. The label is ``namespace`` on purpose, the label
kube-prometheus-stack's Alertmanager groups and routes by; the ServiceMonitor scrapes with
``honorLabels`` so the Workload's namespace is kept rather than renamed ``exported_namespace``
next to the target's own (the operator's) namespace."""
UNSCHEDULABLE_WORKLOADS = Gauge(
    "orca_unschedulable_workloads",
    "Workloads with replicas short, by the filter plugin that rejected nodes for them; a "
    "Workload counts once under every plugin that rejected some node.",
    ["plugin"],
)

# -- nodes -------------------------------------------------------------------------------------

NODES = Gauge("orca_nodes", "Nodes known to the operator, by eligibility.", ["eligible"])
NODE_READ_ERRORS = Counter(
    "orca_node_read_errors_total",
    "Node objects orca could not read (each name and resourceVersion once); such a Node is "
    "treated as not ready until a readable version arrives.",
)


@dataclass(frozen=True)
class NodeSnapshot:
    """Per-node figures as of one gauge refresh, in the node table's (hostname) order."""

    names: tuple[str, ...] = ()
    placements: tuple[int, ...] = ()
    allocatable_cpu_cores: tuple[float, ...] = ()
    allocatable_memory_bytes: tuple[int, ...] = ()
    free_cpu_cores: tuple[float, ...] = ()
    free_memory_bytes: tuple[int, ...] = ()
    #: Per (node, scalar resource the node offers): (node, resource, unit, allocatable, free).
    scalars: tuple[tuple[str, str, str, float, float], ...] = ()


class NodeCollector(Collector):
    """The ``orca_node_*`` gauges, served from the latest ``NodeSnapshot`` the gauge refresh
    published. One reference swap per refresh instead of five labelled-gauge lookups per Node
    (191 ms per refresh at 5,000 Nodes, on the scheduling loop's thread; see
    bench/bench_metrics.py); a scrape (the HTTP server's thread) reads the snapshot it finds.
    A Node missing from the snapshot has no series any more; with no snapshot (before the
    first refresh, or ever with ``orca run --no-node-metrics``) the families are not served at
    all."""

    FAMILIES: Final = (
        ("orca_node_placements", "Replicas placed on the node (the ledger).", "placements"),
        (
            "orca_node_allocatable_cpu_cores",
            "The node's allocatable cpu.",
            "allocatable_cpu_cores",
        ),
        (
            "orca_node_allocatable_memory_bytes",
            "The node's allocatable memory.",
            "allocatable_memory_bytes",
        ),
        (
            "orca_node_free_cpu_cores",
            "Allocatable cpu minus every placement on the node.",
            "free_cpu_cores",
        ),
        (
            "orca_node_free_memory_bytes",
            "Allocatable memory minus every placement on the node.",
            "free_memory_bytes",
        ),
    )

    def __init__(self) -> None:
        self.snapshot: NodeSnapshot | None = None

    def publish(self, snapshot: NodeSnapshot | None) -> None:
        self.snapshot = snapshot

    #: Every other resource a node offers (ephemeral-storage, huge pages, extended resources
    #: such as nvidia.com/gpu), as kube-state-metrics labels ``kube_node_status_allocatable``:
    #: by ``resource`` and ``unit``; series only where a node offers the resource.
    SCALAR_FAMILIES: Final = (
        (
            "orca_node_allocatable_resource",
            "The node's allocatable of a resource other than cpu and memory.",
            3,
        ),
        (
            "orca_node_free_resource",
            "Allocatable minus every placement on the node, of a resource other than cpu and "
            "memory.",
            4,
        ),
    )
    SCALAR_LABELS: Final = ("node", "resource", "unit")

    def describe(self) -> Iterator[Metric]:
        for name, doc, _ in self.FAMILIES:
            yield GaugeMetricFamily(name, doc, labels=["node"])
        for name, doc, _column in self.SCALAR_FAMILIES:
            yield GaugeMetricFamily(name, doc, labels=list(self.SCALAR_LABELS))

    def collect(self) -> Iterator[Metric]:
        snapshot = self.snapshot
        if snapshot is None:
            return
        for name, doc, field in self.FAMILIES:
            family = GaugeMetricFamily(name, doc, labels=["node"])
            for node, value in zip(snapshot.names, getattr(snapshot, field), strict=True):
                family.add_metric([node], value)
            yield family
        for name, doc, column in self.SCALAR_FAMILIES:
            family = GaugeMetricFamily(name, doc, labels=list(self.SCALAR_LABELS))
            for node, resource, unit, allocatable, free in snapshot.scalars:
                family.add_metric([node, resource, unit], allocatable if column == 3 else free)
            yield family


PER_NODE = NodeCollector()
REGISTRY.register(PER_NODE)

RESOURCE_ALLOCATABLE = Gauge(
    "orca_resource_allocatable",
    "Allocatable over the eligible nodes (Ready, not cordoned), by resource (cpu in cores, "
    "bytes, counts: unit), every resource a node offers, and pods.",
    ["resource", "unit"],
)
RESOURCE_FREE = Gauge(
    "orca_resource_free",
    "Allocatable minus every placement, over the eligible nodes, by resource and unit: the "
    "room new replicas have.",
    ["resource", "unit"],
)

# -- failure domains (``orca run --resilience-key``) ---------------------------------------------


@dataclass(frozen=True)
class DomainRow:
    """One failure domain's loss, as of the last answer."""

    domain: str
    unplaceable: int  # replicas with a place now that would find none
    displaced: int  # Job and Service replicas on the domain's nodes


class FailureDomainCollector(Collector):
    """``orca_failure_domain_unplaceable_replicas{topology_key,domain}`` and
    ``orca_failure_domain_displaced_replicas``, served from the last answer the resilience
    loop published (``controller.operator.resilience``): one reference swap per answer, and a
    domain that went (or every domain, when this replica stops leading) has no series any
    more. The domains are bounded by the nodes: one label value each at most."""

    FAMILIES: Final = (
        (
            "orca_failure_domain_unplaceable_replicas",
            "Replicas that have a place now and would find none if every node of this domain "
            "(this value of the node label topology_key) were lost at once: the drain what-if "
            "of its nodes, as orca plan --resilience answers it.",
            "unplaceable",
        ),
        (
            "orca_failure_domain_displaced_replicas",
            "Job and Service replicas on this domain's nodes: what its loss would displace "
            "(those that find a place elsewhere move; DaemonSet replicas end with their node).",
            "displaced",
        ),
    )

    def __init__(self) -> None:
        self.key = ""
        self.rows: tuple[DomainRow, ...] = ()

    def publish(self, key: str, rows: tuple[DomainRow, ...]) -> None:
        self.key, self.rows = key, rows

    def describe(self) -> Iterator[Metric]:
        for name, doc, _ in self.FAMILIES:
            yield GaugeMetricFamily(name, doc, labels=["topology_key", "domain"])

    def collect(self) -> Iterator[Metric]:
        key, rows = self.key, self.rows
        for name, doc, field in self.FAMILIES:
            family = GaugeMetricFamily(name, doc, labels=["topology_key", "domain"])
            for row in rows:
                family.add_metric([key, row.domain], getattr(row, field))
            yield family


FAILURE_DOMAINS = FailureDomainCollector()
REGISTRY.register(FAILURE_DOMAINS)
FAILURE_DOMAIN_COMPUTATION = Histogram(
    "orca_failure_domain_computation_cpu_seconds",
    "CPU time of one answer of the failure domains' what-ifs (a settling pass over every "
    "Workload, then one what-if per domain), spread over its wall time so that it stays "
    "within its share of a core.",
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0),
)

# -- CEL ---------------------------------------------------------------------------------------

CEL_ERRORS = Counter(
    "orca_cel_evaluation_errors_total", "CEL evaluations that raised (per distinct value)."
)
CEL_COST_LIMIT_HITS = Counter(
    "orca_cel_cost_limit_hits_total",
    "CEL evaluations stopped by the runtime cost limit (they count as errors too).",
)
CEL_CYCLE_BUDGET_HITS = Counter(
    "orca_cel_cycle_budget_exhausted_total",
    "Scheduling cycles in which a Workload spent its CEL budget before every node was seen "
    "(the nodes left are rejected as not evaluated).",
)

# -- preemption (kube-scheduler's scheduler_preemption_attempts_total / _victims) ---------------

PREEMPTION_ATTEMPTS = Counter(
    "orca_preemption_attempts_total",
    "Preemption attempts: a Workload short of room searched for lower-priority replicas to "
    "remove, whether or not it found any (not counted when no class is below its priority).",
)
PREEMPTION_VICTIMS = Histogram(
    "orca_preemption_victims",
    "Replicas removed per preemption that went ahead (victims selected).",
    buckets=(1, 2, 4, 8, 16, 32, 64),
)

# -- the API server ----------------------------------------------------------------------------

STATUS_WRITES = Counter(
    "orca_status_writes_total",
    "Status writes, by outcome: written, conflict (409, retried), not_found (404, the "
    "Workload is gone), failed (anything else, retried).",
    ["outcome"],
)
STATUS_WRITE_FAILURES = Counter(
    "orca_status_write_failures_total",
    "Status writes that did not land, by HTTP status (or error type).",
    ["code"],
)
API_REQUESTS = Counter(
    "orca_api_requests_total",
    "API requests the operator makes (kopf's own, at start-up, excluded), by verb, resource "
    "and HTTP status code ('error' when no answer came).",
    ["verb", "resource", "code"],
)


@functools.cache
def api_requests(verb: str, resource: str, code: str) -> Counter:
    """``API_REQUESTS``' series for these labels, looked up once per label set: every API
    call counts itself, and ``labels()`` validates its arguments and takes a lock each time
    (a bounded set: a few verbs, the resources of ``kube.api_resource`` and HTTP codes)."""
    return API_REQUESTS.labels(verb=verb, resource=resource, code=code)


#: The ``resource`` of the informers' metrics: the kinds the operator lists and watches.
INFORMED: Final = ("nodes", "priorityclasses", "workloads")

RELISTS = Counter(
    "orca_relists_total",
    "LISTs an informer made, by resource ('nodes', 'priorityclasses', 'workloads': each kind "
    "lists only itself) and outcome: 'listed' or 'failed'. One each at start-up, then after "
    "a watch expired and every --resync-seconds.",
    ["resource", "outcome"],
)
WATCH_RESTARTS = Counter(
    "orca_watch_restarts_total",
    "Watch streams restarted, by resource and reason: 'expired' (410 Gone: the "
    "resourceVersion was too old, listed again), 'broken' (the connection failed or was cut).",
    ["resource", "reason"],
)
EVENTS_DROPPED = Counter(
    "orca_events_dropped_total",
    "Kubernetes Events not posted: their queue was full, or the Workload had its share "
    "(client-go's spam filter: 25, then one per 5 minutes).",
)

# -- the rebalancer ----------------------------------------------------------------------------

#: ``outcome`` of a planned move (``orca run --rebalance-interval``).
MOVE_MOVED: Final = "moved"  # its status write landed
MOVE_CHANGED: Final = "changed"  # the Workload changed (or was busy) since the plan: re-planned
MOVE_STALE: Final = "stale"  # no longer valid or no longer improving when checked again
MOVE_CONFLICT: Final = "conflict"  # 409: its owner changed it meanwhile; re-planned, not forced
MOVE_FAILED: Final = "failed"  # the write failed otherwise (or was fenced); retried next plan
MOVE_OUTCOMES: Final = (MOVE_MOVED, MOVE_CHANGED, MOVE_STALE, MOVE_CONFLICT, MOVE_FAILED)

REBALANCE_MOVES = Counter(
    "orca_rebalance_moves_total",
    "Replica moves the rebalancer planned and tried, by outcome: moved (written), changed "
    "(the Workload changed since the plan), stale (no longer valid or improving when checked "
    "again), conflict (409: changed by its owner), failed. A move not made drops its "
    "Workload's later moves from the pass.",
    ["outcome"],
)
REBALANCE_PLANNING_DURATION = Histogram(
    "orca_rebalance_planning_duration_seconds",
    "Time to plan one rebalancing pass over the operator's ledger.",
    buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)

# -- the process -------------------------------------------------------------------------------

IS_LEADER = Gauge("orca_leader", "1 while this replica holds the leader Lease (or runs alone).")
BUILD_INFO = Gauge("orca_build_info", "Always 1; the version of orca-controller.", ["version"])


def initialize(version: str) -> None:
    """Create every labelled series the code can produce, at zero, when the operator starts.
    Prometheus' ``increase``/``rate`` cannot see a series' first increment (it has no earlier
    sample), so without this the first scheduling error would never fire an alert."""
    BUILD_INFO.labels(version=version).set(1)
    for kind in (*(k.value for k in WorkloadKind), KIND_UNKNOWN):
        for result in (*RESULT_BY_PHASE.values(), RESULT_ERROR):
            SCHEDULE_ATTEMPTS.labels(kind=kind, result=result)
            if result != RESULT_ERROR:
                SCHEDULE_UNCHANGED.labels(kind=kind, result=result)
    for outcome in (WRITE_WRITTEN, WRITE_CONFLICT, WRITE_NOT_FOUND, WRITE_FAILED, WRITE_FENCED):
        STATUS_WRITES.labels(outcome=outcome)
    for queue in (QUEUE_ACTIVE, QUEUE_BACKOFF, QUEUE_UNSCHEDULABLE):
        PENDING_WORKLOADS.labels(queue=queue)
    for resource in INFORMED:
        for outcome in (RELIST_LISTED, RELIST_FAILED):
            RELISTS.labels(resource=resource, outcome=outcome)
    for outcome in MOVE_OUTCOMES:
        REBALANCE_MOVES.labels(outcome=outcome)


#: The ``plugin`` of a rejection whose status does not name one (written by an orca before
#: ``status.unschedulable[].plugin``; decided again, it names it).
PLUGIN_OTHER: Final = "Other"
