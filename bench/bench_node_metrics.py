"""What a scrape of the operator returns at N Nodes, with and without ``--no-node-metrics``.

Starts a living cluster, creates N Nodes (kwok heartbeats them), and runs ``orca run`` on it
twice, once as shipped and once with ``--no-node-metrics``; when the operator counts all N
Nodes (``orca_nodes``), /metrics is scraped and its series counted: every sample line, and
those of the ``orca_node_*{node}`` families. Prints the series per scrape, the per-Node ones,
and the series per Node (the per-Node ones over N). Counts, not times: nothing here depends on
the machine. docs/metrics.md quotes the figures.

    python bench/bench_node_metrics.py --nodes 1000
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import command_line, print_table, record
from controller.devcluster.controlplane import LARGE_CLUSTER_CONTROLLER_MANAGER_ARGS, ControlPlane
from tests.support.harness import OperatorProcess

PER_NODE = "orca_node_"  # the per-Node families' prefix ({node} label); orca_nodes is not one


def node_objects(count: int) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": f"node-{i:05d}",
                "labels": {"topology.kubernetes.io/zone": f"zone-{i % 3}"},
            },
            "status": {
                "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
        for i in range(count)
    ]


def scrape(port: int) -> list[str]:
    """The sample lines of one scrape (plain HTTP: ``--metrics-insecure``)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
        text: str = response.read().decode()
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def nodes_counted(samples: list[str]) -> float:
    return sum(float(s.rsplit(" ", 1)[1]) for s in samples if s.startswith("orca_nodes{"))


def measure(plane: ControlPlane, nodes: int, workdir: Path, extra: list[str]) -> dict[str, Any]:
    log = workdir / f"operator-{len(extra)}.log"
    operator = OperatorProcess(plane.kubeconfig_path, log, extra=extra)
    try:
        operator.wait_live(120)
        deadline = time.monotonic() + 300
        samples = scrape(operator.metrics_port)
        # the gauges refresh every 5 s: wait for a refresh that saw every Node
        while nodes_counted(samples) < nodes or (
            not extra and sum(s.startswith(PER_NODE + "placements") for s in samples) < nodes
        ):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the operator never counted {nodes} Nodes:\n{operator.log()}")
            time.sleep(1)
            samples = scrape(operator.metrics_port)
    finally:
        operator.stop()
    per_node = [s for s in samples if s.startswith(PER_NODE) and "{node=" in s]
    return {
        "series": len(samples),
        "per-Node series": len(per_node),
        "series per Node": len(per_node) / nodes,
        "other series": len(samples) - len(per_node),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    args = parser.parse_args(argv)
    figures: dict[str, dict[str, Any]] = {}
    with (
        tempfile.TemporaryDirectory(prefix="orca-bench-") as tmp,
        ControlPlane(
            Path(tmp) / "cp", controller_manager_args=LARGE_CLUSTER_CONTROLLER_MANAGER_ARGS
        ) as plane,
    ):
        plane.kubectl("apply", "-k", str(Path(__file__).resolve().parents[1] / "crds"), check=True)
        for start in range(0, args.nodes, 200):
            batch = node_objects(args.nodes)[start : start + 200]
            body = "\n---\n".join(json.dumps(n) for n in batch)
            plane.kubectl("create", "-f", "-", input=body, check=True)
        for label, extra in (("as shipped", []), ("--no-node-metrics", ["--no-node-metrics"])):
            figures[f"{args.nodes} Nodes, {label}"] = measure(plane, args.nodes, Path(tmp), extra)
    print_table(
        ["run", "series", "per-Node series", "series per Node", "other series"],
        [[k, *v.values()] for k, v in figures.items()],
    )
    record("bench_node_metrics", figures, command_line(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
