"""Benchmark the scheduler through the same code path as ``orca plan``.

Builds a synthetic cluster (zones, tags, runtimes, two node sizes, a few proxmox nodes) and a
mixed batch of Jobs and Services (count 1-5), each with two CEL constraints drawn from a pool,
then plans the batch with ``controller.scheduler.plan.plan``. Prints workloads/s, microseconds per
(workload, node) pair, the time of one DaemonSet across every node, and peak RSS; then the time
of one Service of 5 and of 100 replicas on the loaded cluster, without and with a zone topology
spread constraint (DoNotSchedule and ScheduleAnyway), the best of ``--repeat`` runs.

"Cold" is the first plan of the batch (CEL programs compiled, filter verdicts memoised as it
goes); "warm" the same batch again on the same cluster with the caches filled, which is what
the operator sees after start-up. Microseconds per (workload, node) pair is the figure to
compare across cluster sizes. Topology spread: the filter is a few array operations per
replica and shrinks the candidates that are scored; the score adds one pass over the
candidates per replica; a Workload without ``topologySpread`` pays one attribute test per
replica (the batch's warm time with and without the plugin differs by no more than the noise).

    python bench/bench_scheduler.py                 # 500, 5,000 and 20,000 nodes
    python bench/bench_scheduler.py --nodes 5000 --workloads 4000
"""

from __future__ import annotations

import argparse
import gc
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import command_line, own_peak_rss_mb, record
from controller.api.models import Workload
from controller.scheduler.ledger import Ledger
from controller.scheduler.nodes import NodeInfo, NodeTable
from controller.scheduler.plan import plan
from controller.scheduler.scheduler import Scheduler

ZONES = ["eu-1a", "eu-1b", "eu-1c", "us-2a"]
CONSTRAINTS = [
    '"ssd" in node.tags',
    '!("gpu" in node.tags)',
    'node.labels["topology.kubernetes.io/zone"] != "eu-1c"',
    'node.labels["topology.kubernetes.io/zone"].startsWith("eu-")',
    'node.kind == "linux"',
    "node.cpu >= 8000",
    'node.labels["node.kubernetes.io/instance-type"] in ["m5.xlarge", "m5.2xlarge"]',
    "size(node.runtimes) >= 2",
]


def make_nodes(count: int, rng: random.Random) -> list[NodeInfo]:
    nodes = []
    for i in range(count):
        big = rng.random() < 0.5
        zone = rng.choice(ZONES)
        tags = tuple(sorted(t for t in ("ssd", "gpu", "edge") if rng.random() < 0.4))
        runtimes = tuple(sorted({"docker", rng.choice(["process", "wasmtime", "docker"])}))
        proxmox = rng.random() < 0.05
        labels = {
            "topology.kubernetes.io/zone": zone,
            "node.kubernetes.io/instance-type": "m5.2xlarge" if big else "m5.xlarge",
        }
        nodes.append(
            NodeInfo(
                hostname=f"node-{i:06d}",
                runtimes=runtimes,
                tags=tags,
                labels=labels,
                kind="proxmox" if proxmox else "linux",
                cpu=16000 if big else 8000,
                memory=(64 if big else 32) << 30,
            )
        )
    return nodes


def workload(name: str, spec: dict[str, Any]) -> Workload:
    return Workload.model_validate(
        {
            "apiVersion": "orca.cloudinit.dev/v1alpha1",
            "kind": "Workload",
            "metadata": {"name": name, "namespace": "bench"},
            "spec": spec,
        }
    )


def random_spec(rng: random.Random) -> dict[str, Any]:
    """A Job or a Service of 1-5 replicas with two CEL constraints (the benchmarks' mix)."""
    spec: dict[str, Any] = {
        "kind": "Job" if rng.random() < 0.5 else "Service",
        "constraints": rng.sample(CONSTRAINTS, 2),
        "resources": {"cpu": f"{rng.choice([100, 250, 500])}m", "memory": "256Mi"},
        "runtime": {"oneOf": [rng.choice(["docker", "process", "wasm"])]},
    }
    if spec["kind"] == "Service":
        spec["count"] = rng.randint(1, 5)
    if rng.random() < 0.2:
        spec["strategy"] = "BinPack"
    return spec


def make_workloads(count: int, rng: random.Random) -> list[Workload]:
    return [workload(f"w{i}", random_spec(rng)) for i in range(count)]


ZONE_SPREAD = "topology.kubernetes.io/zone"


def spread_service(count: int, when: str | None) -> Workload:
    """A Service like the batch's, spread over zones with ``when`` (None: no constraint)."""
    spec: dict[str, Any] = {
        "kind": "Service",
        "count": count,
        "resources": {"cpu": "100m", "memory": "64Mi"},
        "constraints": ['node.kind == "linux"'],
    }
    if when is not None:
        spec["topologySpread"] = [
            {"topologyKey": ZONE_SPREAD, "maxSkew": 1, "whenUnsatisfiable": when}
        ]
    return workload(f"spread-{count}-{when or 'none'}".lower(), spec)


def best_ms(scheduler: Scheduler, w: Workload, ledger: Ledger, repeat: int) -> float:
    """The fastest of ``repeat`` scheduling cycles (the first warms the caches)."""
    scheduler.schedule(w, ledger, now=time.time())
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        decision = scheduler.schedule(w, ledger, now=time.time())
        times.append(time.perf_counter() - started)
    assert decision.placed == w.spec.replicas, decision.message
    return min(times) * 1000


def run(nodes_count: int, workloads_count: int, seed: int, repeat: int) -> dict[str, Any]:
    rng = random.Random(seed)
    nodes = make_nodes(nodes_count, rng)
    workloads = make_workloads(workloads_count, rng)
    gc.collect()

    started = time.perf_counter()
    results = plan(nodes, workloads)
    elapsed = time.perf_counter() - started
    placed = sum(r.status.placed or 0 for r in results)
    replicas = sum(r.status.desired or 0 for r in results)

    # Steady state: the same cluster, CEL caches warm (what the operator sees after start-up).
    ledger = Ledger(NodeTable(nodes))
    scheduler = Scheduler()
    plan(nodes, workloads[: min(50, len(workloads))], ledger=ledger, scheduler=scheduler)
    ledger = Ledger(ledger.table)
    started = time.perf_counter()
    plan(nodes, workloads, ledger=ledger, scheduler=scheduler)
    warm = time.perf_counter() - started

    daemon = workload("agent", {"kind": "DaemonSet", "resources": {"cpu": "10m"}})
    started = time.perf_counter()
    (result,) = plan(nodes, [daemon], ledger=ledger, scheduler=scheduler)
    daemon_ms = (time.perf_counter() - started) * 1000

    pairs = workloads_count * nodes_count
    print(
        f"nodes={nodes_count:>6}  workloads={workloads_count:>5}  "
        f"cold: {workloads_count / elapsed:8.0f} wl/s {elapsed / pairs * 1e6:7.3f} us/pair  "
        f"warm: {workloads_count / warm:8.0f} wl/s {warm / pairs * 1e6:7.3f} us/pair  "
        f"replicas {placed}/{replicas}  "
        f"daemonset {result.status.placed} nodes in {daemon_ms:6.1f} ms  "
        f"peak RSS {own_peak_rss_mb():6.0f} MB",
        flush=True,
    )
    figures: dict[str, Any] = {
        "cold_workloads_per_s": workloads_count / elapsed,
        "cold_us_per_pair": elapsed / pairs * 1e6,
        "warm_workloads_per_s": workloads_count / warm,
        "warm_us_per_pair": warm / pairs * 1e6,
        "replicas placed": placed,
        "replicas wanted": replicas,
        "one DaemonSet over every node_ms": daemon_ms,
        "peak RSS_mb": own_peak_rss_mb(),
    }
    shown = []
    for count in (5, 100):
        row = [best_ms(scheduler, spread_service(count, when), ledger, repeat) for when in WHENS]
        shown.append(f"x{count}: " + " / ".join(f"{ms:6.2f}" for ms in row) + " ms")
        for when, ms in zip(WHENS, row, strict=True):
            figures[f"one Service of {count}, {when or 'no spread'}_ms"] = ms
    print(
        f"nodes={nodes_count:>6}  one Service, no spread / zone DoNotSchedule / zone "
        f"ScheduleAnyway (best of {repeat}): " + "   ".join(shown),
        flush=True,
    )
    return figures


WHENS: tuple[str | None, ...] = (None, "DoNotSchedule", "ScheduleAnyway")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, action="append", help="node counts (repeatable)")
    parser.add_argument("--workloads", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=20, help="runs per spread figure")
    args = parser.parse_args(argv)
    figures = {
        f"{count} nodes, {args.workloads} workloads": run(
            count, args.workloads, args.seed, args.repeat
        )
        for count in args.nodes or [500, 5000, 20000]
    }
    record("bench_scheduler", figures, command_line(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
