"""What the metrics cost at scale: the periodic gauge refresh and the size of one scrape.

Builds the operator's state in-process (Nodes as the API returns them, Workloads with
placements in status, some of them short of replicas), then times
``GaugeExporter.export`` (the periodic refresh: phases, pending queues, per-node gauges from
the ledger) and renders ``/metrics`` as Prometheus would scrape it. Prints the figures: the
refresh's time and its share of one core at its interval, the scrape's size and series (the
per-node gauges are 5 series per Node, so the size grows with the cluster) and the time to
render it.

    python bench/bench_metrics.py                       # 1,000 and 5,000 nodes
    python bench/bench_metrics.py --nodes 5000 --workloads 10000
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

from prometheus_client import REGISTRY, generate_latest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import command_line, record
from controller.operator.state import ClusterState
from controller.operator.telemetry.gauges import INTERVAL, GaugeExporter
from controller.operator.workqueue import WorkQueue
from tests.support.factories import node_object


def workload(i: int, nodes: int, rng: random.Random) -> dict[str, Any]:
    replicas = rng.randint(1, 3)
    placed = replicas if rng.random() < 0.9 else replicas - 1
    phase = "Scheduled" if placed == replicas else "PartiallyScheduled"
    name = f"w{i}"
    return {
        "apiVersion": "orca.cloudinit.dev/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "bench", "uid": name, "resourceVersion": "1"},
        "spec": {"kind": "Service", "count": replicas, "resources": {"cpu": "100m"}},
        "status": {
            "phase": phase,
            "placements": [
                {"node": f"n{rng.randrange(nodes)}", "allocId": f"bench/{name}-{r}", "score": 50}
                for r in range(placed)
            ],
            "unschedulable": [{"reason": "Insufficient cpu", "count": 1, "plugin": "ResourcesFit"}]
            if placed < replicas
            else [],
        },
    }


def run(nodes: int, workloads: int, rounds: int = 20) -> dict[str, Any]:
    rng = random.Random(1)
    state = ClusterState()
    for n in range(nodes):
        state.upsert_node(node_object(f"n{n}", cpu="16", memory="64Gi"))
    for i in range(workloads):
        state.upsert_workload(workload(i, nodes, rng))
    gauges, queue = GaugeExporter(), WorkQueue()
    gauges.export(state, queue)  # first pass builds the table and creates the series
    started = time.perf_counter()
    for _ in range(rounds):
        gauges.export(state, queue)
    per_export = (time.perf_counter() - started) / rounds
    started = time.perf_counter()
    body = generate_latest(REGISTRY)
    render = time.perf_counter() - started
    series = sum(1 for line in body.decode().splitlines() if line.startswith("orca_"))
    print(
        f"nodes={nodes} workloads={workloads}: gauge refresh {per_export * 1000:.1f} ms "
        f"(every {INTERVAL:.0f} s: {per_export / INTERVAL * 100:.2f}% of one core); "
        f"/metrics {len(body) / 1024:.0f} KiB, {series} orca_ series, "
        f"rendered in {render * 1000:.0f} ms"
    )
    return {
        "gauge refresh_ms": per_export * 1000,
        "gauge refresh, share of one core_percent": per_export / INTERVAL * 100,
        "/metrics size_kib": len(body) / 1024,
        "orca series": series,
        "/metrics rendering_ms": render * 1000,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, action="append")
    parser.add_argument("--workloads", type=int, default=0, help="default: 2 per node")
    args = parser.parse_args(argv)
    figures = {}
    for nodes in args.nodes or [1000, 5000]:
        workloads = args.workloads or 2 * nodes
        figures[f"{nodes} nodes, {workloads} workloads"] = run(nodes, workloads)
    record("bench_metrics", figures, command_line(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
