"""What a living cluster costs at rest: each server's CPU while N kwok Nodes heartbeat.

One ``ControlPlane`` (as ``orca dev-cluster`` starts it, a real cluster's node timing: a Lease
renewal per Node every 10 s), no operator, no Workloads. For each N in ``--nodes`` (the cluster
grows from one to the next): create the Nodes as kubelets register them (no Ready condition),
wait until kwok reported every one Ready, the controller manager lifted every not-ready taint
and every Lease exists, let one more Lease period pass, then read each server's utime + stime
from ``/proc/<pid>/stat`` before and after ``--seconds`` of rest. Prints CPU seconds per second
(1.0 = one core busy) per server.

kwok's status refresh Stage (node-heartbeat-with-lease) fires 10-20 minutes after a Node is
set up, so a window right after set-up sees the Lease renewals alone.

    python bench/bench_living_cluster.py --nodes 10,1000 --seconds 60
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_vs_kube_scheduler import create_all
from bench.common import command_line, cpu_seconds, load_average, record
from controller.devcluster.controlplane import ControlPlane
from controller.operator.kube import KubeApi, load_configuration

NOT_READY = "node.kubernetes.io/not-ready"


def node_object(i: int) -> dict[str, Any]:
    size = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": f"node-{i:05d}", "labels": {"bench.orca/idle": "true"}},
        "status": {"capacity": size, "allocatable": size},
    }


async def wait_alive(api: KubeApi, count: int, timeout: float) -> float:
    """Seconds until ``count`` Nodes are Ready, untainted and have their Lease."""
    started = time.monotonic()
    while True:
        nodes = (await api.request("GET", "/api/v1/nodes"))["items"]
        leases = (
            await api.request(
                "GET", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
            )
        )["items"]
        ready = sum(
            any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in n["status"].get("conditions", [])
            )
            and not any(t["key"] == NOT_READY for t in n["spec"].get("taints", []))
            for n in nodes
        )
        if ready == count and len(leases) == count:
            return time.monotonic() - started
        if time.monotonic() - started > timeout:
            raise SystemExit(f"{ready}/{count} Nodes alive, {len(leases)} Leases after {timeout}s")
        await asyncio.sleep(1)


def measure(plane: ControlPlane, seconds: float) -> dict[str, float]:
    """CPU seconds per second of each server over ``seconds`` of rest."""
    before = {name: cpu_seconds(pid) for name, pid in plane.pids.items()}
    time.sleep(seconds)
    return {name: (cpu_seconds(pid) - before[name]) / seconds for name, pid in plane.pids.items()}


async def grow(plane: ControlPlane, have: int, want: int, timeout: float) -> float:
    api = KubeApi(load_configuration(str(plane.kubeconfig_path)), max_connections=32)
    try:
        nodes = [node_object(i) for i in range(have, want)]
        await create_all(api, [("/api/v1/nodes", n) for n in nodes], 32)
        return await wait_alive(api, want, timeout)
    finally:
        await api.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="10,1000", help="comma-separated, increasing")
    parser.add_argument("--seconds", type=float, default=60, help="rest measured per size")
    parser.add_argument("--timeout", type=float, default=600, help="seconds to set Nodes up")
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.nodes.split(",")]
    if sizes != sorted(sizes) or sizes[0] < 1:
        parser.error("--nodes: increasing positive counts, e.g. 10,1000")
    print(f"on {os.cpu_count()} cores (load average {load_average():.2f})", flush=True)
    figures: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="orca-living-") as tmp, ControlPlane(tmp) as plane:
        lease = plane.node_timing.lease_seconds
        have = 0
        for count in sizes:
            took = asyncio.run(grow(plane, have, count, args.timeout))
            have = count
            time.sleep(lease)  # one Lease period: the set-up's writes are behind us
            cpu = measure(plane, args.seconds)
            cells = ", ".join(f"{name} {c:.3f}" for name, c in cpu.items())
            print(
                f"{count} Nodes (alive {took:.0f}s after their creation; a renewal each every "
                f"{lease / 4:g}s): CPU s/s over {args.seconds:g}s at rest: {cells}",
                flush=True,
            )
            figures[f"{count} nodes"] = {
                "alive after creation_s": took,
                **{f"{name}_cpu_s_per_s": c for name, c in cpu.items()},
                "all servers_cpu_s_per_s": sum(cpu.values()),
            }
    record("bench_living_cluster", figures, command_line(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
