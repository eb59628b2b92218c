"""What the API server + etcd spend on each request a placement makes, kube-scheduler's and
orca's side by side, with nothing watching but the server's own cache.

Per object kind, in a namespace of its own, ``--objects`` at a time, 32 requests in flight:

- Pod: its create, kube-scheduler's placement write (the ``binding`` subresource), an Event;
- Workload (the CRD as shipped): its create, orca's placement write (a merge PATCH of
  ``/status``, preconditioned on the resourceVersion, with the status orca's own scheduler
  decides for it), an Event (the body orca posts);
- Workload under the same CRD without its CEL validation rules: create and status write.

For orca's status writes and Events it also prints this process's CPU per request: the
client is orca's own (``KubeApi``: aiohttp, TLS, orjson), so that is what each request costs
the operator. ``bench_vs_kube_scheduler.py`` measures the whole run; this splits it by
request, to show which costs orca can change and which belong to the API server (a custom
resource is JSON end to end, where a Pod and kube-scheduler's Events are protobuf). The Events
here are JSON, as orca posts them. ``--rounds`` times in turn (the machine is shared: compare
within a round).

    python bench/bench_server_cost.py --objects 2000 --rounds 2
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_vs_kube_scheduler import (
    node_objects,
    pod_object,
    wait_default_service_account,
    workload_object,
)
from bench.common import command_line, cpu_seconds, record
from controller.devcluster.controlplane import ControlPlane
from controller.inputs.manifests import parse_workload
from controller.operator.events import PendingEvent
from controller.operator.kube import KubeApi, load_configuration
from controller.scheduler.nodes import node_info_from_node
from controller.scheduler.plan import plan

CRD = Path(__file__).resolve().parents[1] / "crds" / "workloads.orca.cloudinit.dev.yaml"
POD, WORKLOAD, BARE = "Pod", "Workload", "Workload, no CEL rules"
WORKLOADS = "/apis/orca.cloudinit.dev/v1alpha1/namespaces/{ns}/workloads"
WIDTH = 32  # requests in flight


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


def orca_status(namespace: str) -> dict[str, Any]:
    """The status orca's scheduler decides for the bench's Workload, as the operator sends it."""
    nodes = [node_info_from_node(n) for n in node_objects(50, seed=7)]
    workload = parse_workload(workload_object("w", namespace), "bench")
    (result,) = plan(nodes, [workload])
    return result.status.model_dump(by_alias=True, mode="json", exclude_none=True)


def event_body(name: str, namespace: str, uid: str, version: str) -> dict[str, Any]:
    """The ``Scheduled`` Event orca posts for a placement."""
    event = PendingEvent(
        name, namespace, uid, version, "Scheduled", "Placed 1/1 replicas on node-00001", False,
        "2026-11-30T00:00:00Z", "bench",
    )  # fmt: skip
    return event.body()


@dataclass(frozen=True)
class Cost:
    rate: float  # requests/s
    server_ms: float  # API server + etcd CPU per request
    client_ms: float  # this process's CPU per request: orca's own client, ``KubeApi``


async def each(
    plane: ControlPlane, items: Iterable[Any], call: Callable[[Any], Awaitable[None]]
) -> Cost:
    """What ``call`` on every item costs, ``WIDTH`` in flight."""
    pending = list(items)
    queue = iter(pending)

    async def worker() -> None:
        for item in queue:
            await call(item)

    servers = [pid for n, pid in plane.pids.items() if n in ("etcd", "kube-apiserver")]
    before = sum(cpu_seconds(p) for p in servers)
    client_before = time.process_time()
    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(WIDTH)))
    seconds = time.perf_counter() - started
    client = time.process_time() - client_before
    cpu = sum(cpu_seconds(p) for p in servers) - before
    return Cost(len(pending) / seconds, cpu / len(pending) * 1000, client / len(pending) * 1000)


async def one_kind(
    plane: ControlPlane, api: KubeApi, kind: str, namespace: str, count: int
) -> dict[str, Cost]:
    """Create ``count`` objects of ``kind``, write each one's placement, post an Event on each."""
    names = [f"o{i:05d}" for i in range(count)]
    path = f"/api/v1/namespaces/{namespace}/pods" if kind == POD else WORKLOADS.format(ns=namespace)
    make = pod_object if kind == POD else workload_object
    created: dict[str, dict[str, Any]] = {}

    async def create(name: str) -> None:
        created[name] = await api.request("POST", path, make(name, namespace))

    costs = {"create": await each(plane, names, create)}
    if kind == POD:

        async def bind(name: str) -> None:
            target = {"apiVersion": "v1", "kind": "Node", "name": "node-00001"}
            binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name}}
            await api.request("POST", f"{path}/{name}/binding", {**binding, "target": target})

        costs["placement write"] = await each(plane, names, bind)
    else:
        status = orca_status(namespace)

        async def write(name: str) -> None:
            version = created[name]["metadata"]["resourceVersion"]
            await api.patch_workload_status(namespace, name, status, version)

        costs["placement write"] = await each(plane, names, write)
    if kind != BARE:

        async def post(name: str) -> None:
            meta = created[name]["metadata"]
            body = event_body(name, namespace, meta["uid"], meta["resourceVersion"])
            await api.create_event(namespace, body)

        costs["Event"] = await each(plane, names, post)
    return costs


async def run(
    plane: ControlPlane, workdir: Path, count: int, rounds: int
) -> dict[str, dict[str, float]]:
    figures: dict[str, dict[str, float]] = {}
    shipped = yaml.safe_load(CRD.read_text())
    api = KubeApi(load_configuration(str(plane.kubeconfig_path)), max_connections=64)
    try:
        for round_ in range(rounds):
            totals: dict[str, float] = {}
            for kind in (POD, WORKLOAD, BARE):
                namespace = (
                    f"r{round_}-{kind.split(',')[0].lower()}{'-bare' if kind == BARE else ''}"
                )
                plane.kubectl("create", "namespace", namespace, check=True)
                if kind == POD:  # ServiceAccount admission asks it of every Pod
                    await wait_default_service_account(api, namespace, 60)
                else:
                    install(plane, shipped if kind == WORKLOAD else without_rules(shipped), workdir)
                    await asyncio.sleep(3)  # the new schema served by every handler
                costs = await one_kind(plane, api, kind, namespace, count)
                cells = "   ".join(
                    f"{what} {c.server_ms:.2f} ms ({c.rate:.0f}/s)" for what, c in costs.items()
                )
                print(f"round {round_}  {kind:22s} {cells}", flush=True)
                writes = [costs["placement write"], *([costs["Event"]] if "Event" in costs else [])]
                totals[kind] = sum(c.server_ms for c in writes)
                for what, c in costs.items():
                    figures.setdefault(f"round {round_}", {})[f"{kind}: {what}_ms"] = c.server_ms
                if kind == WORKLOAD:
                    client = " + ".join(f"{c.client_ms:.2f}" for c in writes)
                    print(
                        f"round {round_}  {'':22s} orca's client (KubeApi, this process) CPU per "
                        f"status write + Event: {client} ms",
                        flush=True,
                    )
            print(
                f"round {round_}  per placement, API server + etcd: kube-scheduler (binding + "
                f"Event) {totals[POD]:.2f} ms, orca (status write + Event) "
                f"{totals[WORKLOAD]:.2f} ms -> {totals[WORKLOAD] / totals[POD]:.2f}x",
                flush=True,
            )
    finally:
        await api.close()
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    if args.objects < 1 or args.rounds < 1:
        parser.error("--objects and --rounds must be at least 1")
    with (
        tempfile.TemporaryDirectory(prefix="orca-server-cost-") as tmp,
        ControlPlane(Path(tmp) / "cp") as plane,
    ):
        figures = asyncio.run(run(plane, Path(tmp), args.objects, args.rounds))
    record("bench_server_cost", figures, command_line(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
