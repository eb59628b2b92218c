"""The gauges that describe the state as a whole, refreshed every few seconds (``refresh``),
and the CEL counters the scheduling loop brings up to date after each decision.

Counters move where things happen (the loop, the status writes, the kube client, the leader);
these gauges are a snapshot of ``ClusterState`` instead: Workloads by namespace and phase
and by the plugin that rejects them, the pending queues, and per Node the placements and the
allocatable and free capacity, computed from the ledger (the same numbers the scheduler
decides on), published as one snapshot (``metrics.PER_NODE``), and per resource (cpu, memory,
pods and every resource a node offers: ``nvidia.com/gpu``...) the allocatable and free room
over the eligible nodes. The Workloads' counts are kept by the state as its records change
(``ClusterState.counts``), so a refresh is one pass over the node table, not over every
Workload; a Node that left, a resource no node offers any more, or a namespace whose last
Workload went, has no series any more, so it does not linger on a dashboard with its last
values. Without per-Node series
(``orca run --no-node-metrics``: five series per Node is 5,000 at 1,000 Nodes, and kube-scheduler
exports none per Node) the snapshot is neither computed nor served; ``orca_nodes`` and the
per-resource totals stay.
"""

from __future__ import annotations

import asyncio

import numpy as np

from controller.api import resources as names
from controller.api.models import Phase
from controller.operator.state import ClusterState
from controller.operator.telemetry import metrics
from controller.operator.workqueue import WorkQueue
from controller.scheduler.celexpr import CelEvaluator
from controller.scheduler.nodes import NO_POD_LIMIT, BoolArray, IntArray

MILLI = 1000.0
#: Seconds between refreshes: well under a scrape interval, and rare enough that the pass (30-45 ms
#: at 5,000 Nodes and 10,000 Workloads, bench/bench_metrics.py) costs the loop under 1%.
INTERVAL = 5.0


class GaugeExporter:
    """Sets the snapshot gauges; remembers the plugins it exported (to zero the gone ones) and
    the namespaces (to remove the series of a namespace whose last Workload went)."""

    def __init__(self, per_node: bool = True) -> None:
        self.per_node = per_node
        self._plugins: set[str] = set()
        self._namespaces: set[str] = set()
        self._resources: set[tuple[str, str]] = set()

    async def refresh(self, state: ClusterState, queue: WorkQueue, every: float = INTERVAL) -> None:
        """``export`` every ``every`` seconds, for ever: one pass over the state, cheap next to
        a scrape interval."""
        while True:
            self.export(state, queue)
            await asyncio.sleep(every)

    def export(self, state: ClusterState, queue: WorkQueue) -> None:
        """Set the snapshot gauges (phases, pending queues, per node) from the state."""
        self._workloads(state, queue)
        self._nodes_from_ledger(state)

    def _workloads(self, state: ClusterState, queue: WorkQueue) -> None:
        counts = state.counts  # kept as the records change: no walk of every record here
        phases, plugins, parked = counts.phases, counts.plugins, counts.parked
        namespaces = {namespace for namespace, _ in phases}
        for namespace in self._namespaces - namespaces:
            for value in Phase:
                metrics.WORKLOADS.remove(namespace, value.value)
        for namespace in namespaces:
            for value in Phase:
                count = phases.get((namespace, value.value), 0)
                metrics.WORKLOADS.labels(namespace=namespace, phase=value.value).set(count)
        self._namespaces = namespaces
        metrics.PENDING_WORKLOADS.labels(queue=metrics.QUEUE_ACTIVE).set(len(queue))
        metrics.PENDING_WORKLOADS.labels(queue=metrics.QUEUE_BACKOFF).set(queue.backing_off)
        metrics.PENDING_WORKLOADS.labels(queue=metrics.QUEUE_UNSCHEDULABLE).set(parked)
        for plugin in self._plugins - set(plugins):
            metrics.UNSCHEDULABLE_WORKLOADS.labels(plugin=plugin).set(0)
        for plugin, count in plugins.items():
            metrics.UNSCHEDULABLE_WORKLOADS.labels(plugin=plugin).set(count)
        self._plugins |= set(plugins)

    def _nodes_from_ledger(self, state: ClusterState) -> None:
        eligible = sum(1 for n in state.nodes.values() if n.eligible)
        metrics.NODES.labels(eligible="true").set(eligible)
        metrics.NODES.labels(eligible="false").set(len(state.nodes) - eligible)
        table = state.table()
        ledger = state.ledger
        free_cpu, free_memory = ledger.free()
        rows: list[tuple[str, str, str, float, float]] = []
        totals: dict[tuple[str, str], tuple[float, float]] = {
            (names.CPU, unit_of(names.CPU)): _over(table.eligible, table.cpu, free_cpu, MILLI),
            (names.MEMORY, unit_of(names.MEMORY)): _over(table.eligible, table.memory, free_memory),
        }
        limited = table.pods != NO_POD_LIMIT  # a Node that states no pods has no limit to sum
        totals[names.PODS, unit_of(names.PODS)] = _over(
            table.eligible & limited, table.pods, ledger.free_pods()
        )
        for name, allocatable in sorted(table.scalars.items()):
            free = ledger.free_scalar(name)
            unit = unit_of(name)
            totals[name, unit] = _over(table.eligible, allocatable, free)
            if self.per_node:
                for i in np.flatnonzero(allocatable).tolist():
                    row = (table.hostnames[i], name, unit, float(allocatable[i]), float(free[i]))
                    rows.append(row)
        if not self.per_node:
            metrics.PER_NODE.publish(None)
        else:
            metrics.PER_NODE.publish(
                metrics.NodeSnapshot(
                    names=table.hostnames,
                    placements=tuple(ledger.replicas.tolist()),
                    allocatable_cpu_cores=tuple((table.cpu / MILLI).tolist()),
                    allocatable_memory_bytes=tuple(table.memory.tolist()),
                    free_cpu_cores=tuple((free_cpu / MILLI).tolist()),
                    free_memory_bytes=tuple(free_memory.tolist()),
                    scalars=tuple(rows),
                )
            )
        for resource, unit in self._resources - set(totals):
            metrics.RESOURCE_ALLOCATABLE.remove(resource, unit)
            metrics.RESOURCE_FREE.remove(resource, unit)
        for (resource, unit), (allocatable_total, free_total) in totals.items():
            metrics.RESOURCE_ALLOCATABLE.labels(resource=resource, unit=unit).set(allocatable_total)
            metrics.RESOURCE_FREE.labels(resource=resource, unit=unit).set(free_total)
        self._resources = set(totals)


def unit_of(resource: str) -> str:
    """kube-state-metrics' unit label: ``core`` for cpu, ``byte`` for memory, storage and huge
    pages, ``integer`` for pods and extended resources."""
    if resource == names.CPU:
        return "core"
    if resource == names.PODS or names.is_extended(resource):
        return "integer"
    return "byte"


def _over(
    where: BoolArray, allocatable: IntArray, free: IntArray, scale: float = 1.0
) -> tuple[float, float]:
    """(allocatable, free) summed over the nodes ``where`` holds, free counted from 0 (a node
    over-committed adds no room and takes none from the others), divided by ``scale``."""
    return (
        float(allocatable[where].sum()) / scale,
        float(np.clip(free[where], 0, None).sum()) / scale,
    )


class CelCounters:
    """The CEL evaluator keeps running totals (errors, cost-limit hits, cycles whose budget ran
    out); ``update`` adds to the counters what is new since last time."""

    def __init__(self, cel: CelEvaluator) -> None:
        self.cel = cel
        self._seen: dict[str, int] = {}

    def update(self) -> None:
        cel = self.cel
        for counter, total, seen in (
            (metrics.CEL_ERRORS, cel.errors, "errors"),
            (metrics.CEL_COST_LIMIT_HITS, cel.cost_limit_hits, "cost_limit_hits"),
            (metrics.CEL_CYCLE_BUDGET_HITS, cel.cycle_budget_hits, "cycle_budget_hits"),
        ):
            new = total - self._seen.get(seen, 0)
            if new > 0:
                counter.inc(new)
                self._seen[seen] = total
