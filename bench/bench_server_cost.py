"""What the API server + etcd spend to store one object: a Pod, a Workload (the CRD as shipped)
and a Workload under the same CRD without its CEL validation rules, with nothing watching.

The burst mode of ``bench_vs_kube_scheduler.py`` counts the creates in each side's server CPU;
this separates what a custom resource costs the server to create from what orca's writes and
watch cost it. Each kind in its own namespace, ``--rounds`` times in turn (the machine is
shared: compare within a round).

    python bench/bench_create_cost.py --objects 2000 --rounds 2
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_vs_kube_scheduler import cpu_seconds, create_all, pod_object, workload_object
from controller.devcluster.controlplane import ControlPlane
from controller.operator.kube import KubeApi, load_configuration

CRD = Path(__file__).resolve().parents[1] / "crds" / "workloads.orca.cloudinit.dev.yaml"
KINDS = {"Pod": "pods", "Workload": "workloads", "Workload, no CEL rules": "bare-workloads"}
WORKLOADS = "/apis/orca.cloudinit.dev/v1alpha1/namespaces/{ns}/workloads"


def without_rules(node: Any) -> Any:
    """The CRD document with every ``x-kubernetes-validations`` removed."""
    if isinstance(node, dict):
        return {k: without_rules(v) for k, v in node.items() if k != "x-kubernetes-validations"}
    if isinstance(node, list):
        return [without_rules(v) for v in node]
    return node


def install(plane: ControlPlane, document: dict[str, Any], workdir: Path) -> None:
    path = workdir / "crd.yaml"
    path.write_text(yaml.safe_dump(document))
    plane.kubectl("apply", "-f", str(path), check=True)
    established = "--for=condition=established"
    plane.kubectl("wait", established, "crd/workloads.orca.cloudinit.dev", check=True)


async def cost(
    plane: ControlPlane,
    api: KubeApi,
    path: str,
    make: Callable[[str, str], dict[str, Any]],
    namespace: str,
    count: int,
) -> tuple[float, float]:
    """(objects/s, API server + etcd CPU ms per object) for ``count`` creates, 32 at a time."""
    objects = [(path, make(f"o{i:05d}", namespace)) for i in range(count)]
    before = sum(cpu_seconds(p) for p in plane.pids.values())
    started = time.perf_counter()
    await create_all(api, objects, 32)
    seconds = time.perf_counter() - started
    cpu = sum(cpu_seconds(p) for p in plane.pids.values()) - before
    return count / seconds, cpu / count * 1000


async def run(plane: ControlPlane, workdir: Path, count: int, rounds: int) -> None:
    shipped = yaml.safe_load(CRD.read_text())
    api = KubeApi(load_configuration(str(plane.kubeconfig_path)), max_connections=64)
    try:
        for round_ in range(rounds):
            for kind in ("Pod", "Workload", "Workload, no CEL rules"):
                namespace = (
                    f"r{round_}-{kind.split(',')[0].lower()}{'-bare' if ',' in kind else ''}"
                )
                plane.kubectl("create", "namespace", namespace, check=True)
                if kind == "Pod":
                    path, make = f"/api/v1/namespaces/{namespace}/pods", pod_object
                else:
                    install(
                        plane, shipped if kind == "Workload" else without_rules(shipped), workdir
                    )
                    await asyncio.sleep(3)  # the new schema served by every handler
                    path, make = WORKLOADS.format(ns=namespace), workload_object
                rate, ms = await cost(plane, api, path, make, namespace, count)
                print(
                    f"round {round_}  {kind:24s} {rate:6.0f}/s  "
                    f"API server + etcd {ms:.2f} ms per create",
                    flush=True,
                )
    finally:
        await api.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    with (
        tempfile.TemporaryDirectory(prefix="orca-create-cost-") as tmp,
        ControlPlane(Path(tmp) / "cp") as plane,
    ):
        asyncio.run(run(plane, Path(tmp), args.objects, args.rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
