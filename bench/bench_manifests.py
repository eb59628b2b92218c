"""Benchmark reading Node manifests the way ``orca plan --nodes`` does.

Writes ``kubectl get nodes -o yaml``-shaped files (a ``List`` of Nodes with the labels,
annotations, conditions, addresses and images a kubelet reports, about 3 KB each) and times:

- ``yaml.safe_load_all`` (pure Python; what ``orca plan`` used before the bounded loader),
- ``yaml.load_all`` with ``CSafeLoader`` (libyaml, no budgets),
- ``controller.inputs.safeyaml.load_all`` (libyaml, with the budget pre-scan: depth, aliases, size),
- ``controller.inputs.manifests.load_nodes`` (the bounded load plus validation into NodeInfos).

Best of ``--runs``, CPU and wall seconds each. ``safeyaml`` builds the values straight from
libyaml's events in one bounded pass, each plain scalar built once per distinct text, so it
can beat ``CSafeLoader`` (which builds every node object first) while checking the budgets;
libyaml's parsing alone is the floor of any loader built on it. ``load_nodes`` adds the
validation into NodeInfos (each distinct label checked once).

    python bench/bench_manifests.py                  # 5,000 nodes
    python bench/bench_manifests.py --nodes 1000 20000
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import command_line, record
from controller.inputs import safeyaml
from controller.inputs.manifests import load_nodes

ZONES = ["eu-1a", "eu-1b", "eu-1c", "us-2a"]


def node_object(i: int, rng: random.Random) -> dict[str, Any]:
    """One Node as a kubelet reports it (trimmed to the usual fields)."""
    name = f"node-{i:06d}"
    big = rng.random() < 0.5
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "topology.kubernetes.io/zone": rng.choice(ZONES),
        "topology.kubernetes.io/region": "eu-1",
        "node.kubernetes.io/instance-type": "m5.2xlarge" if big else "m5.xlarge",
        "runtime.orca.cloudinit.dev/docker": "true",
        f"runtime.orca.cloudinit.dev/{rng.choice(['process', 'wasmtime'])}": "true",
        **{f"tag.orca.cloudinit.dev/{t}": "" for t in ("ssd", "gpu", "edge") if rng.random() < 0.4},
    }
    conditions = [
        {
            "type": kind,
            "status": "False",
            "reason": f"KubeletHas{kind}",
            "message": f"kubelet reports no {kind}",
            "lastHeartbeatTime": "2026-01-01T00:00:00Z",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
        for kind in ("MemoryPressure", "DiskPressure", "PIDPressure")
    ]
    conditions.append(
        {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "kubelet is posting ready status",
            "lastHeartbeatTime": "2026-01-01T00:00:00Z",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
    )
    cpu, memory = ("8", "32Gi") if big else ("4", "16Gi")
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"00000000-0000-0000-0000-{i:012d}",
            "resourceVersion": str(1000 + i),
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": labels,
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": {"podCIDR": f"10.{i // 256 % 256}.{i % 256}.0/24", "providerID": f"aws:///{name}"},
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": f"10.0.{i // 256 % 256}.{i % 256}"},
                {"type": "Hostname", "address": name},
            ],
            "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
            "capacity": {"cpu": cpu, "memory": memory, "pods": "110"},
            "conditions": conditions,
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "images": [
                {"names": [f"registry.example/app-{j}@sha256:{j:064x}"], "sizeBytes": 1000 + j}
                for j in range(5)
            ],
            "nodeInfo": {
                "architecture": "amd64",
                "kernelVersion": "6.1.0",
                "kubeletVersion": "v1.36.3",
                "operatingSystem": "linux",
                "osImage": "Debian GNU/Linux 12",
            },
        },
    }


def write_nodes(path: Path, count: int) -> int:
    rng = random.Random(7)
    items = [node_object(i, rng) for i in range(count)]
    dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    text = yaml.dump({"apiVersion": "v1", "kind": "List", "items": items}, Dumper=dumper)
    path.write_text(text)
    return len(text.encode())


def candidates(path: Path) -> dict[str, Callable[[], object]]:
    """The loaders compared, each reading ``path``'s bytes (already in memory)."""
    data = path.read_bytes()
    return {
        "yaml.safe_load_all (before)": lambda: list(yaml.safe_load_all(data)),
        "CSafeLoader, no budgets": lambda: list(yaml.load_all(data, Loader=yaml.CSafeLoader)),
        "safeyaml.load_all (after)": lambda: safeyaml.load_all(data),
        "manifests.load_nodes (after)": lambda: load_nodes(path),
    }


def best_of(runs: int, fn: Callable[[], object]) -> tuple[float, float]:
    """(wall, CPU) seconds of the fastest run; CPU time is the steadier figure on a shared
    machine, where other processes stretch the wall clock."""
    best = (float("inf"), float("inf"))
    for _ in range(runs):
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        best = min(best, (time.perf_counter() - wall, time.process_time() - cpu))
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[5000])
    parser.add_argument("--runs", type=int, default=3, help="best of N")
    args = parser.parse_args(argv)
    print(f"libyaml: {safeyaml.HAVE_LIBYAML}")
    figures: dict[str, Any] = {"libyaml": safeyaml.HAVE_LIBYAML}
    with tempfile.TemporaryDirectory() as tmp:
        for count in args.nodes:
            path = Path(tmp) / f"nodes-{count}.yaml"
            size = write_nodes(path, count)
            loaders = candidates(path)
            print(f"{count} nodes, {size / 1e6:.1f} MB:")
            group: dict[str, float] = {"file size_mb": size / 1e6}
            for name, fn in loaders.items():
                wall, cpu = best_of(args.runs, fn)
                print(
                    f"  {name:30s} {cpu:7.2f} s CPU {wall:7.2f} s wall"
                    f"  ({count / cpu:,.0f} nodes per CPU second)"
                )
                group[f"{name}: CPU_s"] = cpu
                group[f"{name}: wall_s"] = wall
            figures[f"{count} nodes"] = group
    record("bench_manifests", figures, command_line(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
