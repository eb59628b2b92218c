"""orca vs kube-scheduler, side by side, each on a fresh control plane with the same Nodes.

Each side gets its own living cluster (``ControlPlane``, as ``orca dev-cluster`` starts it:
etcd, kube-apiserver, kube-controller-manager, kwok heartbeating the Nodes), the same Nodes
(zone, an ``ssd`` tag on about half, two sizes) and the same number of single-replica objects
with the same requests (100m cpu, 128Mi) and the same two hard constraints:

- kube-scheduler: Pods with required nodeAffinity ``tag.orca.cloudinit.dev/ssd`` Exists and
  ``topology.kubernetes.io/zone`` In [eu-1a, eu-1b, eu-1c]; placed when ``spec.nodeName`` is set
  (kube-scheduler binds through the binding subresource);
- orca: Workloads (kind Job) with the equivalent CEL; placed when ``status.phase`` is set.

Modes: ``backlog`` stores every object first, then starts the scheduler (the clock starts
when its process does; the first decision's time after it is printed too); ``burst`` starts
the scheduler, waits until it placed a probe object, then creates every object with
``--concurrency`` concurrent POSTs (the clock starts at the first create; the lag after the
last create is printed too); ``steady`` does the same at ``--rate`` creates a second, evenly
spaced, for ``--seconds``, each create sent on time however long the others take to answer
(users, not one client). In ``burst`` and ``steady`` every object's latency is timed, the
one users feel: from its create (the POST sent) to its placement (seen on this bench's watch:
kube-scheduler's bind, orca's status write), p50 and p99 (nearest rank).

Per side it prints: objects/s; the scheduler process's CPU per placement (utime + stime from
/proc, start-up included in backlog mode); API server + etcd CPU per placement over the same
window (burst mode: the creates included, the same on both sides); the scheduler's peak RSS
(VmHWM); and a validity check of every placement (constraints hold, no node over-committed in
cpu, memory or pods), which fails the run (exit 1) if anything is wrong. Then the ratios.
Progress is followed with one watch per side (no polling LISTs stealing the measured CPU).

Both schedulers post a ``Scheduled`` Event per placement. kube-scheduler posts each as it
binds; orca paces its Events (20/s) while its status writes are in flight (status first), so
most of them come after its last placement. Each side's CPU is therefore printed twice:
over the placements' window, and over the window extended until every placement's Event was
posted (``--events-timeout``), which is the whole cost of the run. A watch on the Events of
the namespace (one per side) follows them.

The API server's ``TaintNodesByCondition`` admission puts ``node.kubernetes.io/not-ready`` on
new Nodes and the node lifecycle controller lifts it once they are Ready, as in any cluster: the
bench waits for that (and for the namespaces' ``default`` ServiceAccount, which ServiceAccount
admission asks of every Pod) before the clock starts. The API server + etcd CPU includes kwok's
heartbeats (a Lease renewal per Node every 10 s), on both sides alike. (Taking out an idle
rate measured before the clock does not work on 2 cores: the API server's background work is
deferred while it is saturated, and the difference came out negative for kube-scheduler.)

orca runs as its Deployment's Pod does (``--orca-as pod``, the default): the shipped
ServiceAccount and RBAC, a token file and the service variables; kube-scheduler, as built, with
the admin kubeconfig. ``--orca-as kubeconfig`` gives orca that kubeconfig too.

``--floor`` adds a third side, each run on its own control plane like the others: no
scheduler at all, ``status_writer.py`` writing each Workload's status (orca's write, orca's
status, a Node in turn among those that pass the constraints) as soon as its watch shows the
Workload, with the admin kubeconfig and no Events. It is the floor under any controller that
records its placements in a custom resource's status on this server: where it is slower than
kube-scheduler, no such controller is faster, whatever it decides and however.

    python bench/bench_vs_kube_scheduler.py --mode backlog --nodes 1000 --objects 5000
    python bench/bench_vs_kube_scheduler.py --mode burst --nodes 1000 --objects 2000
    python bench/bench_vs_kube_scheduler.py --side orca --mode backlog --nodes 500 --objects 1000
    python bench/bench_vs_kube_scheduler.py --mode backlog --nodes 5000 --objects 10000 \
        --extended example.com/gpu
    python bench/bench_vs_kube_scheduler.py --mode burst --nodes 200 --objects 500 --runs 5
    python bench/bench_vs_kube_scheduler.py --mode burst --nodes 200 --objects 500 --runs 5 \
        --floor
    python bench/bench_vs_kube_scheduler.py --mode steady --nodes 5000 --rate 50 --seconds 120
    python bench/bench_vs_kube_scheduler.py --mode backlog --nodes 15000 --objects 30000 \
        --lease-seconds 600

``--runs N`` runs each side N times, each on a fresh control plane, the sides' order
alternating from one run to the next (the shared machine's load drifts); the recorded figures
are each side's median run by rate, and every run's rate ratio. ``--lease-seconds`` slows
kwok's heartbeats, the same on both sides: a Node's Lease (renewed every quarter of it) and
the controller manager's grace periods scaled with it (``NodeTiming.scaled``): at the default
40 s, 15,000 Nodes renew 1,500 Leases a second, more writes than the two cores can take
besides the schedulers; at 600 s, 100/s, what 1,000 Nodes cost at the default. Each setting
(mode, sizes, Lease) is recorded apart (``record(merge=True)``), so a burst run does not
replace the backlog's figures, and every group says which command measured it.

``--extended NAME`` adds one extended resource: every other Node offers 16 of it, every other
object asks one (a Pod as its request and limit, a Workload in ``spec.resources``), and the
validity check counts it too.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import command_line, cpu_seconds, peak_rss_mb, record
from controller.api.models import quantity_to_int
from controller.devcluster.controlplane import (
    LARGE_CLUSTER_CONTROLLER_MANAGER_ARGS,
    ControlPlane,
    NodeTiming,
)
from controller.operator.kube import ApiError, KubeApi, load_configuration
from tests.support.harness import RBAC, REPO_ROOT, OperatorProcess, as_a_pod

ZONES = ["eu-1a", "eu-1b", "eu-1c", "us-2a"]
ALLOWED_ZONES = ["eu-1a", "eu-1b", "eu-1c"]
ZONE_LABEL = "topology.kubernetes.io/zone"
SSD_LABEL = "tag.orca.cloudinit.dev/ssd"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
CPU, MEMORY = "100m", "128Mi"
NAMESPACE, PROBE_NAMESPACE = "bench", "bench-probe"
KUBE, ORCA = "kube-scheduler", "orca"
WRITER = "status writer"  # ``--floor``: ``status_writer.py``, no scheduler
WORKLOADS = "/apis/orca.cloudinit.dev/v1alpha1"
EVENTS = "/api/v1/namespaces/{ns}/events"


# -- the objects ------------------------------------------------------------------------------


#: ``--extended NAME``: every other Node offers this many of it, every other object asks one.
EXTENDED_PER_NODE = "16"


def node_objects(count: int, seed: int, extended: str | None = None) -> list[dict[str, Any]]:
    """The same Nodes for both sides: a zone each, ``ssd`` on about half, 8 or 16 cpus; with
    ``extended``, the even-numbered Nodes offer ``EXTENDED_PER_NODE`` of that resource."""
    rng = random.Random(seed)
    nodes = []
    for i in range(count):
        big = rng.random() < 0.5
        labels = {
            ZONE_LABEL: rng.choice(ZONES),
            "node.kubernetes.io/instance-type": "m5.2xlarge" if big else "m5.xlarge",
            "runtime.orca.cloudinit.dev/docker": "true",
        }
        if rng.random() < 0.5:
            labels[SSD_LABEL] = ""
        size = {"cpu": "16" if big else "8", "memory": "64Gi" if big else "32Gi", "pods": "110"}
        if extended is not None and i % 2 == 0:
            size[extended] = EXTENDED_PER_NODE
        nodes.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": f"node-{i:05d}", "labels": labels},
                "status": {
                    "capacity": size,
                    "allocatable": size,
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        )
    return nodes


def passes(node: dict[str, Any]) -> bool:
    """Whether a Node passes the bench's two constraints (the ``ssd`` tag, an allowed zone):
    the Nodes ``capacity`` counts and the status writer places on. ``validate`` states the
    rule again on its own: an oracle does not share the code it checks."""
    labels = node["metadata"].get("labels") or {}
    return SSD_LABEL in labels and labels.get(ZONE_LABEL) in ALLOWED_ZONES


def capacity(nodes: list[dict[str, Any]]) -> int:
    """How many of the bench's objects (without ``--extended``) the Nodes hold: on each Node
    passing both constraints, as many as its cpu, memory and Pods allow (each asks the same)."""
    cpu, memory = quantity_to_int(CPU, scale=1000), quantity_to_int(MEMORY)
    total = 0
    for node in nodes:
        if not passes(node):
            continue
        allocatable = node["status"]["allocatable"]
        total += min(
            quantity_to_int(allocatable["cpu"], scale=1000) // cpu,
            quantity_to_int(allocatable["memory"]) // memory,
            int(allocatable["pods"]),
        )
    return total


def pod_object(name: str, namespace: str, extended: str | None = None) -> dict[str, Any]:
    term = {
        "matchExpressions": [
            {"key": SSD_LABEL, "operator": "Exists"},
            {"key": ZONE_LABEL, "operator": "In", "values": ALLOWED_ZONES},
        ]
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schedulerName": "default-scheduler",
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "app",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": requests(extended), "limits": limits(extended)},
                }
            ],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
                }
            },
        },
    }


def requests(extended: str | None) -> dict[str, str]:
    """What each object asks: cpu and memory, and one of ``extended`` when given."""
    return {"cpu": CPU, "memory": MEMORY, **({extended: "1"} if extended else {})}


def limits(extended: str | None) -> dict[str, str]:
    """A Pod's limits: an extended resource cannot be overcommitted (kube's validation asks
    its limit equal to its request); nothing else is limited."""
    return {extended: "1"} if extended else {}


def workload_object(name: str, namespace: str, extended: str | None = None) -> dict[str, Any]:
    zones = ", ".join(f'"{z}"' for z in ALLOWED_ZONES)
    return {
        "apiVersion": "orca.cloudinit.dev/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "kind": "Job",
            "resources": requests(extended),
            "constraints": ['"ssd" in node.tags', f'node.labels["{ZONE_LABEL}"] in [{zones}]'],
        },
    }


@dataclass(frozen=True)
class Side:
    """What differs between the two schedulers: the object kind and how to read a decision."""

    name: str
    make: Callable[[str, str, str | None], dict[str, Any]]
    collection: Callable[[str], str]

    def decided(self, obj: dict[str, Any]) -> bool:
        if self.name == KUBE:
            return bool((obj.get("spec") or {}).get("nodeName"))
        return bool((obj.get("status") or {}).get("phase"))

    def placements(self, obj: dict[str, Any]) -> list[str]:
        """The nodes an object was placed on (one at most: single-replica objects)."""
        if self.name == KUBE:
            node = (obj.get("spec") or {}).get("nodeName")
            return [node] if node else []
        return [p["node"] for p in (obj.get("status") or {}).get("placements") or []]


SIDES = {
    KUBE: Side(KUBE, pod_object, lambda ns: f"/api/v1/namespaces/{ns}/pods"),
    ORCA: Side(ORCA, workload_object, lambda ns: f"{WORKLOADS}/namespaces/{ns}/workloads"),
    WRITER: Side(WRITER, workload_object, lambda ns: f"{WORKLOADS}/namespaces/{ns}/workloads"),
}


# -- processes ----------------------------------------------------------------------------------


class LoggedProcess:
    """A child process with a log file of its own, stopped with SIGTERM (SIGKILL 20 s on)."""

    def __init__(self, command: list[str], log: Path, cwd: Path | None = None) -> None:
        self._log = open(log, "ab")  # noqa: SIM115 (closed in stop)
        self.process = subprocess.Popen(
            command, cwd=cwd, stdout=self._log, stderr=subprocess.STDOUT
        )

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._log.close()


class KubeScheduler(LoggedProcess):
    """kube-scheduler from ``hack/testcp``'s build: no leader election, client QPS 5,000."""

    def __init__(self, plane: ControlPlane, workdir: Path) -> None:
        config = workdir / "kube-scheduler.yaml"
        config.write_text(
            "apiVersion: kubescheduler.config.k8s.io/v1\n"
            "kind: KubeSchedulerConfiguration\n"
            f"clientConnection: {{kubeconfig: {plane.kubeconfig_path}, qps: 5000, burst: 5000}}\n"
            "leaderElection: {leaderElect: false}\n"
        )
        binary = plane.bin_dir / "kube-scheduler"
        command = [str(binary), f"--config={config}", "--secure-port=0"]
        super().__init__(command, workdir / "kube-scheduler.log")


class Orca:
    """``orca run`` without leader election, watching every namespace; with ``py_spy``, a
    sampling profile of it from its start (py-spy's raw format: collapsed stacks, one per
    line, with its count) written there when it stops.

    ``pod``: the command and environment of ``orca`` as the Deployment's Pod runs it
    (``as_a_pod``); None: the admin kubeconfig, as kube-scheduler gets."""

    def __init__(
        self,
        plane: ControlPlane,
        workdir: Path,
        py_spy: Path | None = None,
        pod: tuple[tuple[str, ...], dict[str, str]] | None = None,
    ) -> None:
        if pod is not None:
            in_pod, env = pod
            self.operator = OperatorProcess(
                None, workdir / "orca.log", extra=["--no-leader-elect"], env=env, command=in_pod
            )
        else:
            self.operator = OperatorProcess(
                plane.kubeconfig_path, workdir / "orca.log", extra=["--no-leader-elect"]
            )
        self.process = self.operator.process
        self.profiler = None
        if py_spy is not None:
            command = [
                py_spy_command(), "record", "--pid", str(self.process.pid), "--rate", "100",
                "--format", "raw", "--output", str(py_spy), "--nonblocking",
            ]  # fmt: skip
            self.profiler = subprocess.Popen(
                command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )

    def stop(self) -> None:
        self.operator.stop()
        if self.profiler is not None:
            try:  # it writes its file when the process it samples is gone
                self.profiler.wait(60)
            except subprocess.TimeoutExpired:
                self.profiler.terminate()
                self.profiler.wait()


class StatusWriter(LoggedProcess):
    """``status_writer.py`` (``--floor``): each Workload's status written as soon as the
    watch shows it, with the admin kubeconfig, as kube-scheduler runs."""

    def __init__(self, plane: ControlPlane, workdir: Path) -> None:
        kubeconfig = str(plane.kubeconfig_path)
        command = [sys.executable, "-m", "bench.status_writer", "--kubeconfig", kubeconfig]
        super().__init__(command, workdir / "status-writer.log", cwd=REPO_ROOT)


#: What ``start`` runs for a side: a process to measure (``.process``) and stop (``.stop()``).
Scheduler = KubeScheduler | Orca | StatusWriter


def py_spy_command() -> str:
    """py-spy beside this interpreter (the virtualenv's) or on PATH."""
    beside = Path(sys.executable).with_name("py-spy")
    found = str(beside) if beside.exists() else shutil.which("py-spy")
    if found is None:
        raise SystemExit("--py-spy needs py-spy: .venv/bin/pip install py-spy")
    return found


# -- talking to the API server ------------------------------------------------------------------


async def create_all(
    api: KubeApi,
    objects: list[tuple[str, dict[str, Any]]],
    width: int,
    sent: dict[str, float] | None = None,
) -> None:
    """POST every (path, object), ``width`` at a time; ``sent``: each object's name -> when its
    POST was sent (``time.perf_counter()``)."""
    pending = iter(objects)

    async def worker() -> None:
        for path, obj in pending:
            if sent is not None:
                sent[obj["metadata"]["name"]] = time.perf_counter()
            await api.request("POST", path, obj)

    await asyncio.gather(*(worker() for _ in range(width)))


async def create_at_rate(
    api: KubeApi, objects: list[tuple[str, dict[str, Any]]], rate: float, sent: dict[str, float]
) -> None:
    """POST the objects at ``rate`` a second, evenly spaced (each on time however long the ones
    before take to answer: a steady stream of users, not a client waiting its turn)."""
    begun = time.perf_counter()
    posts = []
    for i, (path, obj) in enumerate(objects):
        await asyncio.sleep(max(0.0, begun + i / rate - time.perf_counter()))
        sent[obj["metadata"]["name"]] = time.perf_counter()
        posts.append(asyncio.create_task(api.request("POST", path, obj)))
    await asyncio.gather(*posts)


async def wait_not_ready_lifted(api: KubeApi, timeout: float) -> int:
    """Wait until no Node carries ``node.kubernetes.io/not-ready`` (the node lifecycle
    controller lifts it once a Node is Ready); how many carried it at first."""
    deadline = time.monotonic() + timeout
    first = None
    while True:
        listed = await api.request("GET", "/api/v1/nodes")
        tainted = sum(any(t["key"] == NOT_READY_TAINT for t in _taints(n)) for n in listed["items"])
        first = tainted if first is None else first
        if not tainted:
            return first
        if time.monotonic() > deadline:
            raise SystemExit(f"{tainted} Nodes still carry {NOT_READY_TAINT} after {timeout}s")
        await asyncio.sleep(0.5)


async def wait_default_service_account(api: KubeApi, namespace: str, timeout: float) -> None:
    """Wait for the ``default`` ServiceAccount the controller manager creates in a namespace."""
    deadline = time.monotonic() + timeout
    path = f"/api/v1/namespaces/{namespace}/serviceaccounts"
    while not any(
        sa["metadata"]["name"] == "default" for sa in (await api.request("GET", path))["items"]
    ):
        if time.monotonic() > deadline:
            raise SystemExit(f"no default ServiceAccount in {namespace} after {timeout}s")
        await asyncio.sleep(0.2)


def _taints(node: dict[str, Any]) -> list[dict[str, Any]]:
    return list((node.get("spec") or {}).get("taints") or [])


async def wait_decided(
    api: KubeApi,
    side: Side,
    namespace: str,
    count: int,
    timeout: float,
    stamps: dict[str, float] | None = None,
) -> float:
    """Follow the objects of ``namespace`` until ``count`` are decided; returns
    ``time.perf_counter()`` then. ``stamps``: each object's name -> when it was first seen
    decided."""

    def decided(obj: dict[str, Any]) -> str | None:
        return str(obj["metadata"]["name"]) if side.decided(obj) else None

    await follow(api, side.collection(namespace), decided, count, timeout, "decided", None, stamps)
    return time.perf_counter()


def scheduled_event(event: dict[str, Any]) -> str | None:
    """The object a ``Scheduled`` Event is about (both schedulers post one per placement)."""
    if event.get("reason") != "Scheduled":
        return None
    return str((event.get("involvedObject") or {}).get("name") or "") or None


async def list_when_ready(api: KubeApi, path: str, deadline: float) -> dict[str, Any]:
    """LIST ``path``; a 429 (a resource's watch cache still initializing, as for a CRD just
    established: "storage is (re)initializing") is asked again a second later, until
    ``deadline``."""
    while True:
        try:
            listed: dict[str, Any] = await api.request("GET", path)
            return listed
        except ApiError as error:
            if error.status != 429 or time.perf_counter() > deadline:
                raise
        await asyncio.sleep(1.0)


async def follow(
    api: KubeApi,
    path: str,
    key: Callable[[dict[str, Any]], str | None],
    count: int,
    timeout: float,
    what: str,
    seen: set[str] | None = None,
    stamps: dict[str, float] | None = None,
) -> set[str]:
    """LIST ``path``, then watch from the list's version (again after the watch ends), until
    ``count`` distinct keys were seen (``key``: an object's key, or None to skip it). ``seen``
    is filled as they come (a caller may read it before this returns); ``stamps`` with when
    each key was first seen (``time.perf_counter()``)."""
    deadline = time.perf_counter() + timeout
    seen = set() if seen is None else seen
    stamps = {} if stamps is None else stamps

    def saw(k: str) -> None:
        if k not in seen:
            seen.add(k)
            stamps.setdefault(k, time.perf_counter())

    while True:
        listed = await list_when_ready(api, path, deadline)
        for o in listed["items"]:
            if (k := key(o)) is not None:
                saw(k)
        if len(seen) >= count:
            return seen
        version = listed["metadata"]["resourceVersion"]
        async for event in api.watch(path, version, 300):  # until the server ends it
            if event.get("type") in ("ADDED", "MODIFIED"):
                k = key(event.get("object") or {})
                if k is not None:
                    saw(k)
                    if len(seen) >= count:
                        return seen
            if time.perf_counter() > deadline:
                raise TimeoutError(f"{len(seen)}/{count} {what} after {timeout:.0f}s")


# -- one side ------------------------------------------------------------------------------------


@dataclass
class Events:
    """The same window extended until every placement's ``Scheduled`` Event was posted: both
    schedulers post one per placement, and orca paces its Events while its status writes are in
    flight (status first), so the placements' window alone leaves most of orca's Events out."""

    seen: int  # placements with their Event posted at the end of the window
    after: float  # seconds from the last placement to the end of the window
    scheduler_cpu: float
    server_cpu: float


@dataclass
class Result:
    side: str
    objects: int
    seconds: float  # from the clock's start until all were decided
    lag: float | None  # burst: from the last create until all were decided
    scheduler_cpu: float
    server_cpu: float
    rss_mb: float
    untainted: int
    events: Events
    problems: list[str] = field(default_factory=list)
    #: burst and steady: each object's create (sent) to its decision (seen), sorted, seconds
    latencies: list[float] = field(default_factory=list)
    #: from the clock's start to the first object seen decided (backlog: the process's start)
    first: float | None = None

    @property
    def rate(self) -> float:
        return self.objects / self.seconds

    def latency(self, quantile: float) -> float | None:
        """A quantile of ``latencies`` (nearest rank), None without any."""
        if not self.latencies:
            return None
        rank = max(0, min(len(self.latencies) - 1, round(quantile * len(self.latencies)) - 1))
        return self.latencies[rank]


def run_side(name: str, args: argparse.Namespace) -> Result:
    side = SIDES[name]
    with tempfile.TemporaryDirectory(prefix=f"orca-vs-{name}-") as tmp:
        workdir = Path(tmp)
        try:
            with ControlPlane(
                workdir / "cp",
                controller_manager_args=LARGE_CLUSTER_CONTROLLER_MANAGER_ARGS,
                node_timing=NodeTiming.scaled(args.lease_seconds),
            ) as plane:
                return asyncio.run(_run_side(side, plane, workdir, args))
        finally:
            if args.logs:  # the schedulers' logs outlive the run's control plane
                args.logs.mkdir(parents=True, exist_ok=True)
                for log in workdir.glob("*.log"):
                    shutil.copy(log, args.logs / log.name)


async def _run_side(
    side: Side, plane: ControlPlane, workdir: Path, args: argparse.Namespace
) -> Result:
    kubectl = plane.kubectl
    for namespace in (NAMESPACE, PROBE_NAMESPACE):
        kubectl("create", "namespace", namespace, check=True)
    if side.name != KUBE:  # Workloads
        kubectl("apply", "-k", str(REPO_ROOT / "crds"), check=True)
        kubectl("wait", "--for=condition=established", "crd/workloads.orca.cloudinit.dev")
    pod = as_deployed(plane, workdir) if side.name == ORCA and args.orca_as == "pod" else None
    api = KubeApi(load_configuration(str(plane.kubeconfig_path)), max_connections=64)
    try:
        started = time.perf_counter()
        nodes = [("/api/v1/nodes", n) for n in node_objects(args.nodes, args.seed, args.extended)]
        await create_all(api, nodes, args.concurrency)
        untainted = await wait_not_ready_lifted(api, args.timeout)
        for namespace in (NAMESPACE, PROBE_NAMESPACE):
            await wait_default_service_account(api, namespace, args.timeout)
        print(
            f"  [{side.name}] {args.nodes} nodes created and Ready in "
            f"{time.perf_counter() - started:.1f}s ({untainted} had the not-ready taint, lifted "
            "by the controller manager)",
            flush=True,
        )
        path = side.collection(NAMESPACE)
        count = objects_of(args)
        objects = [
            (path, side.make(f"o{i:05d}", NAMESPACE, asks(i, args.extended))) for i in range(count)
        ]
        # The API server and etcd: what the placements cost the cluster's store (the
        # controller manager's and kwok's own CPU is the same on both sides).
        servers = {n: pid for n, pid in plane.pids.items() if n in ("etcd", "kube-apiserver")}
        lag = None
        posted: set[str] = set()  # the objects with a Scheduled Event
        events = asyncio.create_task(
            follow(
                api,
                EVENTS.format(ns=NAMESPACE),
                scheduled_event,
                count,
                1e9,
                "Events",
                posted,
            )
        )
        sent: dict[str, float] = {}  # object -> when its create was sent (perf_counter)
        placed: dict[str, float] = {}  # object -> when the watch saw it decided
        if args.mode == "backlog":
            await create_all(api, objects, args.concurrency)
            print(f"  [{side.name}] {count} objects stored", flush=True)
            server_before = sum(cpu_seconds(p) for p in servers.values())
            everyone = {**plane.pids, "this bench": os.getpid()}
            cluster_before = {n: cpu_seconds(p) for n, p in everyone.items()}
            clock = time.perf_counter()
            scheduler = start(side, plane, workdir, args.py_spy, pod)
            done = await wait_decided(api, side, NAMESPACE, count, args.timeout, placed)
            cpu_before = 0.0
            scheduler_cpu = cpu_seconds(scheduler.process.pid)
        else:
            scheduler = start(side, plane, workdir, args.py_spy, pod)
            probe = [(side.collection(PROBE_NAMESPACE), side.make("probe", PROBE_NAMESPACE, None))]
            await create_all(api, probe, 1)
            await wait_decided(api, side, PROBE_NAMESPACE, 1, args.timeout)
            watcher = asyncio.create_task(
                wait_decided(api, side, NAMESPACE, count, args.timeout, placed)
            )
            server_before = sum(cpu_seconds(p) for p in servers.values())
            everyone = {**plane.pids, "this bench": os.getpid()}
            cluster_before = {n: cpu_seconds(p) for n, p in everyone.items()}
            cpu_before = cpu_seconds(scheduler.process.pid)
            clock = time.perf_counter()
            if args.mode == "burst":
                await create_all(api, objects, args.concurrency, sent)
            else:
                await create_at_rate(api, objects, args.rate, sent)
            last_create = time.perf_counter()
            done = await watcher
            lag = done - last_create
            scheduler_cpu = cpu_seconds(scheduler.process.pid) - cpu_before
        server_cpu = sum(cpu_seconds(p) for p in servers.values()) - server_before
        cluster = {n: cpu_seconds(p) - cluster_before[n] for n, p in everyone.items()}
        cluster[side.name] = scheduler_cpu
        shares = ", ".join(f"{n} {c / (done - clock):.2f}" for n, c in cluster.items())
        print(f"  [{side.name}] CPU s/s over the placements' window: {shares}", flush=True)
        with contextlib.suppress(TimeoutError):  # then say how many were posted
            # The status writer posts none.
            wait = 0 if side.name == WRITER else args.events_timeout
            await asyncio.wait_for(asyncio.shield(events), wait)
        with_events = Events(
            len(posted),
            time.perf_counter() - done,
            cpu_seconds(scheduler.process.pid) - cpu_before,
            sum(cpu_seconds(p) for p in servers.values()) - server_before,
        )
        events.cancel()
        rss = peak_rss_mb(scheduler.process.pid)
        scheduler.stop()
        problems = await validate(api, side, count, args.extended)
    finally:
        await api.close()
    latencies = sorted(placed[k] - sent[k] for k in sent if k in placed)
    first = min(placed.values()) - clock if placed else None
    return Result(
        side.name, count, done - clock, lag, scheduler_cpu, server_cpu, rss, untainted,
        with_events, problems, latencies, first,
    )  # fmt: skip


def objects_of(args: argparse.Namespace) -> int:
    """How many objects a run creates: ``--objects``, or ``--rate`` x ``--seconds``."""
    return int(args.rate * args.seconds) if args.mode == "steady" else int(args.objects)


def as_deployed(plane: ControlPlane, workdir: Path) -> tuple[tuple[str, ...], dict[str, str]]:
    """``orca`` with the credentials its Deployment's Pod has: the shipped ServiceAccount and
    RBAC (``manifests/rbac``), a token of it in a file, the service variables (``as_a_pod``).
    The process then never imports the kubernetes client."""
    plane.kubectl("create", "namespace", "orca-system", check=True)
    plane.kubectl("apply", "-k", str(RBAC), check=True)
    token = plane.kubectl(
        "create", "token", "orca-controller", "-n", "orca-system", "--duration=2h", check=True
    ).stdout.strip()
    return as_a_pod(plane, workdir / "serviceaccount", token)


def start(
    side: Side,
    plane: ControlPlane,
    workdir: Path,
    py_spy: Path | None = None,
    pod: tuple[tuple[str, ...], dict[str, str]] | None = None,
) -> Scheduler:
    if side.name == KUBE:
        return KubeScheduler(plane, workdir)
    if side.name == WRITER:
        return StatusWriter(plane, workdir)
    return Orca(plane, workdir, py_spy, pod)


def asks(index: int, extended: str | None) -> str | None:
    """The extended resource object ``index`` asks one of: every other object's."""
    return extended if extended is not None and index % 2 == 1 else None


async def validate(api: KubeApi, side: Side, count: int, extended: str | None = None) -> list[str]:
    """Every object placed exactly once, on a node that passes both constraints, and no node
    over its allocatable cpu, memory, pods or ``extended``. Returns what is wrong (empty: all
    valid)."""
    nodes: dict[str, dict[str, Any]] = {}
    listed: list[dict[str, Any]] = []

    def by_name(obj: dict[str, Any]) -> None:
        nodes[obj["metadata"]["name"]] = obj

    await api.list_objects("/api/v1/nodes", by_name)
    await api.list_objects(side.collection(NAMESPACE), listed.append)  # in pages: 100,000 fit
    problems: list[str] = []
    if len(listed) != count:
        problems.append(f"{len(listed)} objects listed, {count} created")
    used: dict[str, list[int]] = {name: [0, 0, 0, 0] for name in nodes}
    cpu, memory = quantity_to_int(CPU, scale=1000), quantity_to_int(MEMORY)
    for obj in listed:
        name = obj["metadata"]["name"]
        placed = side.placements(obj)
        if len(placed) != 1:
            problems.append(f"{name}: placed on {placed}, expected exactly one node")
            continue
        node = nodes.get(placed[0])
        if node is None:
            problems.append(f"{name}: placed on {placed[0]}, which does not exist")
            continue
        labels = node["metadata"].get("labels") or {}
        if SSD_LABEL not in labels or labels.get(ZONE_LABEL) not in ALLOWED_ZONES:
            problems.append(f"{name}: placed on {placed[0]}, which fails the constraints")
        usage = used[placed[0]]
        usage[0] += cpu
        usage[1] += memory
        usage[2] += 1
        usage[3] += int(asks(int(name.removeprefix("o")), extended) is not None)
    for name, (cpu_used, memory_used, pods, extra) in used.items():
        allocatable = nodes[name]["status"]["allocatable"]
        limits = (
            quantity_to_int(allocatable["cpu"], scale=1000),
            quantity_to_int(allocatable["memory"]),
            int(allocatable["pods"]),
            int(allocatable.get(extended, 0)) if extended else 0,
        )
        if cpu_used > limits[0] or memory_used > limits[1] or pods > limits[2] or extra > limits[3]:
            problems.append(
                f"{name}: over-committed ({cpu_used}m, {memory_used} B, {pods} pods, "
                f"{extra} {extended or 'extended'})"
            )
    return problems


# -- the report ---------------------------------------------------------------------------------


def report(result: Result) -> None:
    lag = f", all decided {result.lag:.2f}s after the last create" if result.lag is not None else ""
    valid = "valid" if not result.problems else f"INVALID ({len(result.problems)} problems)"
    first = f", the first after {result.first:.2f}s" if result.first is not None else ""
    print(
        f"{result.side:>14}: {result.objects} in {result.seconds:.1f}s -> {result.rate:.0f}/s{lag}"
        f"{first}; scheduler CPU {result.scheduler_cpu / result.objects * 1000:.2f} ms/placement, "
        f"API server + etcd CPU {result.server_cpu / result.objects * 1000:.2f} ms/placement, "
        f"scheduler peak RSS {result.rss_mb:.0f} MB; placements {valid}",
        flush=True,
    )
    if result.latencies:
        print(
            f"{'':>14}  create to placement: p50 {_ms(result.latency(0.5))}, p99 "
            f"{_ms(result.latency(0.99))}, max {_ms(result.latencies[-1])} ms",
            flush=True,
        )
    events = result.events
    print(
        f"{'':>14}  with their Events ({events.seen}/{result.objects} posted "
        f"{events.after:.1f}s after the last placement): scheduler CPU "
        f"{events.scheduler_cpu / result.objects * 1000:.2f} ms/placement, API server + etcd CPU "
        f"{events.server_cpu / result.objects * 1000:.2f} ms/placement",
        flush=True,
    )
    for problem in result.problems[:10]:
        print(f"      {problem}")


def _ms(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds * 1000:.0f}"


def ratios(kube: Result, other: Result) -> None:
    """orca (or the status writer) against kube-scheduler, in one run."""
    label = "orca / kube" if other.side == ORCA else "writer / kube"
    per = kube.objects / other.objects  # CPU totals to CPU per placement
    print(
        f"{label:>14}: throughput {other.rate / kube.rate:.2f}x, scheduler CPU per "
        f"placement {other.scheduler_cpu / kube.scheduler_cpu * per:.2f}, "
        f"API server + etcd CPU per placement {other.server_cpu / kube.server_cpu:.2f}, "
        f"peak RSS {other.rss_mb / kube.rss_mb:.2f}",
        flush=True,
    )
    kube_events, other_events = kube.events, other.events
    print(
        f"{'':>14}  with their Events: scheduler CPU per placement "
        f"{other_events.scheduler_cpu / kube_events.scheduler_cpu * per:.2f}"
        f", API server + etcd CPU per placement "
        f"{other_events.server_cpu / kube_events.server_cpu * per:.2f}",
        flush=True,
    )


def figures(result: Result) -> dict[str, float | int | bool | None]:
    """What ``report`` prints, as figures."""
    per = 1000 / result.objects
    p50, p99 = result.latency(0.5), result.latency(0.99)
    return {
        "placed_per_s": result.rate,
        "all decided after the last create_s": result.lag,
        "first decided after the start_s": result.first,
        "create to placement, p50_ms": p50 * 1000 if p50 is not None else None,
        "create to placement, p99_ms": p99 * 1000 if p99 is not None else None,
        "scheduler CPU per placement_ms": result.scheduler_cpu * per,
        "API server + etcd CPU per placement_ms": result.server_cpu * per,
        "scheduler CPU per placement, with its Events_ms": result.events.scheduler_cpu * per,
        "API server + etcd CPU per placement, with the Events_ms": result.events.server_cpu * per,
        "Events posted after the last placement_s": result.events.after,
        "scheduler peak RSS_mb": result.rss_mb,
        "every placement valid": not result.problems,
    }


def median_run(runs: list[Result]) -> Result:
    """The run of median rate (the lower middle one of an even count)."""
    return sorted(runs, key=lambda r: r.rate)[(len(runs) - 1) // 2]


def recorded_figures(
    setting: str, runs: list[dict[str, Result]]
) -> dict[str, dict[str, float | int | bool | str | None]]:
    """Per side, one run's figures (the median run by rate of several, with every placement
    checked in each); with both sides, each run's rate ratio."""
    out: dict[str, dict[str, float | int | bool | str | None]] = {}
    for name in runs[0]:
        mine = [run[name] for run in runs]
        chosen: dict[str, float | int | bool | str | None] = {**figures(median_run(mine))}
        chosen["every placement valid"] = not any(r.problems for r in mine)
        if len(runs) > 1:
            chosen["runs (the median run's figures)"] = len(runs)
        out[f"{setting}: {name}"] = chosen
    if len(runs) > 1 and KUBE in runs[0]:
        for name in (n for n in runs[0] if n != KUBE):
            each = [run[name].rate / run[KUBE].rate for run in runs]
            out[f"{setting}: {name} / kube-scheduler, run by run"] = {
                "rate ratio, lowest_x": min(each),
                "rate ratio, median_x": statistics.median(each),
                "rate ratio, highest_x": max(each),
                "rate ratio of each run": ", ".join(f"{r:.2f}" for r in each),
            }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("backlog", "burst", "steady"), default="backlog")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--objects", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=32, help="concurrent creates")
    parser.add_argument("--rate", type=float, default=50, help="steady: creates per second")
    parser.add_argument("--seconds", type=float, default=120, help="steady: for how long")
    parser.add_argument(
        "--runs",
        type=int,
        default=1,
        help="fresh control planes per side, one run after the other, the sides' order "
        "alternating (recorded: the median run's figures, every run's ratio)",
    )
    parser.add_argument(
        "--lease-seconds",
        type=int,
        default=NodeTiming.lease_seconds,
        help="kwok's Node Lease (renewed every quarter of it) and the controller manager's "
        "grace periods scaled with it (NodeTiming.scaled), the same on both sides "
        "(default: a real cluster's, %(default)s)",
    )
    parser.add_argument("--side", choices=("both", KUBE, ORCA), default="both")
    parser.add_argument(
        "--floor",
        action="store_true",
        help="a third side, each run: no scheduler, each Workload's status written as soon as "
        "it is seen (status_writer.py), the floor under any controller that writes a status",
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--timeout", type=float, default=900, help="seconds per side")
    parser.add_argument("--logs", type=Path, help="keep each scheduler's log in this directory")
    parser.add_argument(
        "--py-spy",
        type=Path,
        metavar="FILE",
        help="profile orca's operator with py-spy (raw collapsed stacks) into FILE",
    )
    parser.add_argument(
        "--orca-as",
        choices=("pod", "kubeconfig"),
        default="pod",
        help="orca's credentials: its Pod's (ServiceAccount token, shipped RBAC: as deployed) "
        "or the admin kubeconfig kube-scheduler gets (default: %(default)s)",
    )
    parser.add_argument(
        "--extended",
        metavar="NAME",
        help="an extended resource (e.g. example.com/gpu) every other Node offers "
        f"{EXTENDED_PER_NODE} of and every other object asks one of (Pods as requests and "
        "limits, Workloads in spec.resources)",
    )
    parser.add_argument(
        "--events-timeout",
        type=float,
        default=300,
        help="seconds to wait, after the last placement, for every Scheduled Event",
    )
    args = parser.parse_args(argv)
    if min(args.nodes, args.objects, args.concurrency, args.runs) < 1 or objects_of(args) < 1:
        parser.error("--nodes, --objects, --concurrency, --runs, --rate x --seconds: at least 1")
    if args.floor and args.extended:
        parser.error("--floor places round-robin on the constraints alone: not with --extended")
    steady = f"rate={args.rate:g}/s seconds={args.seconds:g} " if args.mode == "steady" else ""
    print(
        f"mode={args.mode} nodes={args.nodes} objects={objects_of(args)} {steady}"
        f"concurrency={args.concurrency} orca-as={args.orca_as} "
        f"extended={args.extended or '-'} lease={args.lease_seconds}s runs={args.runs} on "
        f"{os.cpu_count()} cores (load average {os.getloadavg()[0]:.2f})",
        flush=True,
    )
    names: tuple[str, ...] = (KUBE, ORCA) if args.side == "both" else (args.side,)
    names += (WRITER,) if args.floor else ()
    runs: list[dict[str, Result]] = []
    for i in range(args.runs):  # the sides' order alternates: the machine's load drifts
        order = names if i % 2 == 0 else tuple(reversed(names))
        results = {name: run_side(name, args) for name in order}
        print(f"run {i + 1}/{args.runs} (load average {os.getloadavg()[0]:.2f}):", flush=True)
        for name in names:
            report(results[name])
        for name in (n for n in (ORCA, WRITER) if n in results and KUBE in results):
            ratios(results[KUBE], results[name])
        runs.append({name: results[name] for name in names})
    setting = setting_of(args)
    recorded = recorded_figures(setting, runs)
    record("bench_vs_kube_scheduler", recorded, command_line(argv), merge=True)
    return 1 if any(r.problems for run in runs for r in run.values()) else 0


def setting_of(args: argparse.Namespace) -> str:
    """The recorded groups' name: the mode and the sizes (what a later run of the same
    setting replaces)."""
    if args.mode == "steady":
        setting = f"steady {args.rate:g} creates/s for {args.seconds:g} s, {args.nodes} nodes"
    else:
        setting = f"{args.mode}, {args.nodes} nodes, {args.objects} objects"
    if args.extended:
        setting += f", {args.extended} on half the nodes and objects"
    if args.lease_seconds != NodeTiming.lease_seconds:
        setting += f", Node Leases of {args.lease_seconds} s"
    return setting


if __name__ == "__main__":
    sys.exit(main())
