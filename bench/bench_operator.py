"""End-to-end benchmark: the operator against a real kube-apiserver + etcd.

Starts a living cluster (or reuses ``--kubeconfig``), creates N Nodes (kwok heartbeats them;
the bench waits until the controller manager lifted their not-ready taint), starts ``orca run`` in a
subprocess, creates M Workloads in one burst (32 concurrent POSTs) and waits until every one
has a decision. Prints the time, workloads/s, API requests per Workload (status writes and
Events counted by the API server itself, plus the operator's own counter) and the operator's
peak RSS.

Two more figures put the operator's against the API server's: the *backlog* (the Workloads
already stored, an operator started on them: its own throughput with no creates competing
for the machine), and the *floor*: the same number of creates and status writes sent by a
plain client with no operator, whose API server + etcd CPU per create + status write bounds
the rate of any operator on this machine (printed as Workloads/s on its cores).

    python bench/bench_operator.py --nodes 1000 --workloads 2000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_scheduler import ZONES, random_spec
from bench.bench_vs_kube_scheduler import wait_not_ready_lifted
from bench.common import command_line, cpu_seconds, peak_rss_mb, record
from controller.api.models import workload_path
from controller.devcluster.controlplane import LARGE_CLUSTER_CONTROLLER_MANAGER_ARGS, ControlPlane
from controller.operator.kube import KubeApi, load_configuration
from tests.support.harness import REPO_ROOT, OperatorProcess, phase


def node_objects(count: int, rng: random.Random) -> list[dict[str, Any]]:
    nodes = []
    for i in range(count):
        big = rng.random() < 0.5
        labels = {
            "topology.kubernetes.io/zone": rng.choice(ZONES),
            "node.kubernetes.io/instance-type": "m5.2xlarge" if big else "m5.xlarge",
            "runtime.orca.cloudinit.dev/docker": "true",
            f"runtime.orca.cloudinit.dev/{rng.choice(['process', 'wasmtime'])}": "true",
        }
        for tag in ("ssd", "gpu", "edge"):
            if rng.random() < 0.4:
                labels[f"tag.orca.cloudinit.dev/{tag}"] = ""
        nodes.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": f"node-{i:05d}", "labels": labels},
                "status": {
                    "allocatable": {
                        "cpu": "16" if big else "8",
                        "memory": "64Gi" if big else "32Gi",
                    },
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        )
    return nodes


def workload_objects(count: int, namespace: str, rng: random.Random) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "orca.cloudinit.dev/v1alpha1",
            "kind": "Workload",
            "metadata": {"name": f"w{i:05d}", "namespace": namespace},
            "spec": random_spec(rng),
        }
        for i in range(count)
    ]


async def create_all(api: KubeApi, path: str, objects: list[dict[str, Any]], width: int) -> None:
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    for obj in objects:
        queue.put_nowait(obj)

    async def worker() -> None:
        while not queue.empty():
            await api.request("POST", path, queue.get_nowait())

    try:
        await asyncio.gather(*(worker() for _ in range(width)))
    finally:
        await api.close()


def apiserver_counts(plane: ControlPlane) -> dict[str, float]:
    """``apiserver_request_total`` for Workload status writes (PUT or PATCH) and Event POSTs."""
    raw = plane.kubectl("get", "--raw", "/metrics", check=True).stdout
    counts = {"status_write": 0.0, "event_post": 0.0, "workload_other": 0.0}
    for line in raw.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels, value = line.rsplit(" ", 1)
        if 'resource="workloads"' in labels and 'subresource="status"' in labels:
            if 'verb="PATCH"' in labels or 'verb="PUT"' in labels:
                counts["status_write"] += float(value)
        elif 'resource="events"' in labels and 'verb="POST"' in labels:
            counts["event_post"] += float(value)
    return counts


async def not_ready_lifted(plane: ControlPlane) -> int:
    """Wait until no Node carries the not-ready taint admission gives every new one (the node
    lifecycle controller lifts it once the Node is Ready): placements start on a settled
    cluster. How many carried it."""
    api = KubeApi(load_configuration(str(plane.kubeconfig_path)), max_connections=4)
    try:
        return await wait_not_ready_lifted(api, 900)
    finally:
        await api.close()


def store_pids(plane: ControlPlane) -> dict[str, int]:
    """The API server's and etcd's pids: the cluster's store, whose CPU bounds any operator
    (the controller manager and kwok, running beside them, are measured with the run)."""
    return {n: pid for n, pid in plane.pids.items() if n in ("etcd", "kube-apiserver")}


def run(
    plane: ControlPlane, nodes: int, workloads: int, seed: int, workdir: Path
) -> dict[str, Any]:
    rng = random.Random(seed)
    kubectl = plane.kubectl
    kubectl("apply", "-k", str(REPO_ROOT / "crds"), check=True)
    kubectl("wait", "--for=condition=established", "crd/workloads.orca.cloudinit.dev", check=True)
    namespace = f"bench-{seed}"
    kubectl("create", "namespace", namespace, check=False)
    api = KubeApi(load_configuration(str(plane.kubeconfig_path)), max_connections=32)
    started = time.perf_counter()
    asyncio.run(create_all(api, "/api/v1/nodes", node_objects(nodes, rng), 32))
    print(f"created {nodes} nodes in {time.perf_counter() - started:.1f}s", flush=True)
    started = time.perf_counter()
    lifted = asyncio.run(not_ready_lifted(plane))
    print(
        f"the controller manager lifted the not-ready taint of {lifted} of them in "
        f"{time.perf_counter() - started:.1f}s",
        flush=True,
    )
    baseline_ns = f"{namespace}-baseline"
    kubectl("create", "namespace", baseline_ns, check=False)
    baseline = workload_objects(workloads, baseline_ns, random.Random(seed + 1))
    server_cpu = {name: cpu_seconds(pid) for name, pid in store_pids(plane).items()}
    started = time.perf_counter()
    asyncio.run(
        create_all(
            KubeApi(load_configuration(str(plane.kubeconfig_path)), max_connections=32),
            f"/apis/orca.cloudinit.dev/v1alpha1/namespaces/{baseline_ns}/workloads",
            baseline,
            32,
        )
    )
    alone = time.perf_counter() - started
    server_cpu = {n: cpu_seconds(pid) - server_cpu[n] for n, pid in store_pids(plane).items()}
    print(
        f"baseline: the API server alone creates {workloads} Workloads in {alone:.1f}s "
        f"({workloads / alone:.0f}/s), using "
        + ", ".join(f"{n} {cpu:.1f}" for n, cpu in server_cpu.items())
        + " CPU seconds: the ceiling for any operator on this machine",
        flush=True,
    )

    operator = start_operator(plane, workdir / "operator.log", namespace)
    before = apiserver_counts(plane)
    pids = {**plane.pids, "operator": operator.process.pid, "bench client": os.getpid()}
    cpu_before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    objects = workload_objects(workloads, namespace, rng)
    path = f"/apis/orca.cloudinit.dev/v1alpha1/namespaces/{namespace}/workloads"
    api = KubeApi(load_configuration(str(plane.kubeconfig_path)), max_connections=32)
    started = time.perf_counter()
    asyncio.run(create_all(api, path, objects, 32))
    burst = time.perf_counter() - started
    # Poll the operator's own write counter (cheap), not a LIST of every Workload (which
    # would steal the CPU being measured); then check the outcome once with a real LIST.
    deadline = started + 600
    while operator.metrics().get(WRITTEN, 0) < workloads and time.perf_counter() < deadline:
        time.sleep(0.05)
    elapsed = time.perf_counter() - started
    cpu_after = {name: cpu_seconds(pid) for name, pid in pids.items()}
    while True:
        items = json.loads(
            kubectl("get", "workloads", "-n", namespace, "-o", "json", check=True).stdout
        )["items"]
        if all(phase(w) for w in items) or time.perf_counter() > deadline:
            break
        time.sleep(1)
    time.sleep(1)
    after = apiserver_counts(plane)
    own = operator.metrics()
    peak = peak_rss_mb(operator.process.pid)
    operator.stop()
    backlog = decide_backlog(plane, workdir, baseline_ns, workloads)
    floor_wall, floor_cpu = status_write_cost(plane, baseline_ns, baseline)
    writes = after["status_write"] - before["status_write"]
    events = after["event_post"] - before["event_post"]
    decisions = sum(v for k, v in own.items() if k.startswith("orca_schedule_attempts_total"))
    own_requests = sum(
        v
        for k, v in own.items()
        if k.startswith("orca_api_requests_total") and 'verb="GET"' not in k and "leases" not in k
    )
    phases: dict[str, int] = {}
    for w in items:
        phases[phase(w) or "none"] = phases.get(phase(w) or "none", 0) + 1
    print(
        f"nodes={nodes} workloads={workloads}: created in {burst:.1f}s, all decided after "
        f"{elapsed:.1f}s -> {workloads / elapsed:.0f} workloads/s end to end; phases {phases}\n"
        f"  status writes {writes:.0f} ({writes / workloads:.2f}/workload, "
        f"{writes / max(decisions, 1):.2f}/decision), Events posted by anyone {events:.0f}, "
        f"operator API requests {own_requests:.0f} ({own_requests / workloads:.2f}/workload, "
        f"Lease traffic excluded)\n"
        f"  operator peak RSS {peak:.0f} MB; CPU seconds during the run: "
        + ", ".join(f"{n} {cpu_after[n] - cpu_before[n]:.1f}" for n in pids)
        + f"\nbacklog: {workloads} Workloads already stored, operator started: all decided "
        f"{backlog:.1f}s after its initial listing -> {workloads / backlog:.0f} workloads/s"
        + f"\nfloor: {workloads} status writes from a plain client (no operator, no watch) take "
        f"{floor_wall:.1f}s and {floor_cpu:.1f} CPU s of API server + etcd; with the creates' "
        f"{sum(server_cpu.values()):.1f}, one create + one status write per Workload needs "
        f"{(floor_cpu + sum(server_cpu.values())) / workloads * 1000:.1f} ms of server CPU: "
        f"<= {workloads * (os.cpu_count() or 1) / (floor_cpu + sum(server_cpu.values())):.0f} "
        f"workloads/s on {os.cpu_count()} cores even with a free operator",
        flush=True,
    )
    server = floor_cpu + sum(server_cpu.values())
    return {
        "burst: all decided after_s": elapsed,
        "burst: end to end_workloads_per_s": workloads / elapsed,
        "burst: status writes per workload": writes / workloads,
        "burst: Events posted in the cluster, by every source": events,
        "burst: operator API requests per workload": own_requests / workloads,
        "burst: operator peak RSS_mb": peak,
        "burst: operator_cpu_s": cpu_after["operator"] - cpu_before["operator"],
        "backlog: all decided after_s": backlog,
        "backlog_workloads_per_s": workloads / backlog,
        "floor: server CPU per create + status write_ms": server / workloads * 1000,
        "floor: ceiling with a free operator_workloads_per_s": workloads
        * (os.cpu_count() or 1)
        / server,
    }


WRITTEN = 'orca_status_writes_total{outcome="written"}'


def status_write_cost(
    plane: ControlPlane, namespace: str, objects: list[dict[str, Any]]
) -> tuple[float, float]:
    """Wall time and API server + etcd CPU seconds for one status write per object (orca's
    own, ``KubeApi.write_workload_status``), sent by a plain client at 32 concurrent requests:
    what a status write costs the server by itself."""

    async def write_all() -> None:
        api = KubeApi(load_configuration(str(plane.kubeconfig_path)), max_connections=32)
        slots = asyncio.Semaphore(32)
        listed = await api.request("GET", workload_path(namespace))
        versions = {
            o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in listed["items"]
        }

        async def one(obj: dict[str, Any]) -> None:
            status = {"phase": "Scheduled", "message": "floor measurement", "placed": 1}
            name = obj["metadata"]["name"]
            async with slots:
                await api.write_workload_status(namespace, name, status, versions[name])

        try:
            await asyncio.gather(*(one(obj) for obj in objects))
        finally:
            await api.close()

    pids = store_pids(plane).values()
    before = sum(cpu_seconds(pid) for pid in pids)
    started = time.perf_counter()
    asyncio.run(write_all())
    return time.perf_counter() - started, sum(cpu_seconds(p) for p in pids) - before


def start_operator(plane: ControlPlane, log: Path, namespace: str) -> OperatorProcess:
    """``orca run`` scoped to ``namespace``, returned once its initial listing is done."""
    operator = OperatorProcess(
        plane.kubeconfig_path, log, namespaces=[namespace], lease_namespace=namespace
    )
    operator.wait_live()
    deadline = time.monotonic() + 60
    while "initial listing complete" not in operator.log():
        if time.monotonic() > deadline:
            raise RuntimeError(f"operator did not list the cluster:\n{operator.log()}")
        time.sleep(0.01)
    return operator


def decide_backlog(plane: ControlPlane, workdir: Path, namespace: str, count: int) -> float:
    """Start an operator on Workloads that already exist (the baseline's, never decided):
    the operator's own throughput, with no creates competing for the machine."""
    operator = start_operator(plane, workdir / "operator-backlog.log", namespace)
    try:
        started = time.perf_counter()
        while operator.metrics().get(WRITTEN, 0) < count:
            if time.perf_counter() - started > 600:
                raise RuntimeError("backlog not decided in 600 s")
            time.sleep(0.05)
        return time.perf_counter() - started
    finally:
        operator.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--workloads", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    with (
        tempfile.TemporaryDirectory(prefix="orca-bench-") as tmp,
        ControlPlane(
            Path(tmp) / "cp", controller_manager_args=LARGE_CLUSTER_CONTROLLER_MANAGER_ARGS
        ) as plane,
    ):
        figures = run(plane, args.nodes, args.workloads, args.seed, Path(tmp))
    record(
        "bench_operator",
        {f"{args.nodes} nodes, {args.workloads} workloads": figures},
        command_line(argv),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
