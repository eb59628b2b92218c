"""How orca's costs grow with the cluster: one Node count at a time, the stored Workloads grown
from one count to the next, kube-scheduler's backlog beside orca's.

For ``--nodes`` N, on a living cluster (``ControlPlane``: etcd, kube-apiserver,
kube-controller-manager, kwok playing the kubelets) with ``bench_vs_kube_scheduler``'s Nodes
(a zone each, ``ssd`` on about half, 8 or 16 cpus, 110 Pods), for each count of
``--workloads`` in turn, orca as its Deployment's Pod runs it (the shipped ServiceAccount and
RBAC; leader election off, as in ``bench_vs_kube_scheduler``), one step after the other:

1. **Backlog.** The Workloads stored (``bench_vs_kube_scheduler``'s: Jobs asking 100m and
   128Mi with two CEL constraints, ~3/8 of the Nodes pass them), this bench's watch of them
   listed, then orca started: the first decision seen after its process started, every
   Workload decided, orca's CPU per placement (start-up included) and peak RSS (VmHWM); every
   placement checked (constraints, no node over its cpu, memory or Pods: exit 1 otherwise).
2. **A restart.** orca stopped (SIGTERM: the Events it still held are dropped) and started
   again on the placed Workloads: the first decision after its process started (its log's
   "initial listing complete", then its own counter of decisions: a confirmation that nothing
   needs writing counts, as a write would), every Workload decided again, its peak RSS.
3. **At rest**, that restarted orca, once its failure domains' answer is made
   (``--resilience-interval``, on by default: a start always computes one, after every
   Workload is decided; its CPU and wall time are printed, from orca's log; nothing changes
   after it, so it is not computed again: every answer in the log by the end of step 4 is
   printed, with the decisions orca made meanwhile, both of which would be in the windows'
   CPU, and are none at rest): its CPU over ``--seconds`` (as a share of one
   core), its resident set (VmRSS), and that per stored Workload: less what orca holds on the
   Nodes alone (measured first, with no Workload), divided by the count; after step 4, its
   peak RSS since its start (VmHWM: the listing, every decision again, the answer, both
   windows).
4. **A Node update at rest.** This bench PATCHes the Nodes' status (every condition's
   ``lastHeartbeatTime``, what a kubelet sends: ``bench_heartbeats``' driver) at ``--updates``
   a second for ``--seconds``: orca's CPU over that window less the quiet one's, per update
   the API server acknowledged (orca receives each one on its Node watch).
5. The Workloads deleted (and their Events) before the next count, not after the last (the
   control plane goes with it). The API server's pace for that varies by machine: 10,000
   took 15 minutes on one (ff8771f) and about 32 s on another (3e51191, 15,000 Nodes, read
   from the log's times), so a run of 100,000 after a smaller count may wait long for it
   where a plane of its own (``--workloads 100000``) would not.

Reading orca's counters means a scrape of its ``/metrics`` (5 series per Node): step 2
scrapes every ``METRICS_POLL`` seconds until every Workload is decided again; the windows of
3 and 4 scrape nothing (the decisions are read before the first and after the second).

kube-scheduler (``--kube``: the counts at which it runs beside) gets a control plane of its own
with the same Nodes and the same heartbeats, and the same objects as Pods with the equivalent
required node affinity: the backlog only (step 1; its first bind after its start, every Pod
bound, CPU per placement, peak RSS; every placement checked the same way), the Pods deleted
between counts.

Heartbeats: kwok renews every Node's Lease each quarter of ``--lease-seconds`` (one write
each): at the default 40 s, 15,000 Nodes would renew 1,500 a second, more writes than the two
cores take besides the schedulers. The default here is 40 s per 1,000 Nodes (at least 40 s):
100 renewals a second at every size, what 1,000 Nodes cost at a real cluster's timing, and
the controller manager's grace periods scaled with it (``NodeTiming.scaled``), the same for
both schedulers; the table says which Lease each size ran with. orca does not watch Leases:
what reaches it of a heartbeat is a Node update (step 3).

Figures are recorded per size (N nodes, W workloads; "no workloads" for orca on the Nodes
alone) and merged with the other sizes' runs (``record(merge=True)``): each column below says
which command measured it. A size's column is replaced whole, so a run that leaves out a side
the recorded column holds (kube-scheduler beside orca, say) is refused before it starts,
naming what it would blank; ``--replace`` records it all the same.

    python bench/bench_scale.py --nodes 1000 --workloads 10000,30000 --kube 10000,30000
    python bench/bench_scale.py --nodes 5000 --workloads 10000,30000,100000 --kube 30000
    python bench/bench_scale.py --nodes 15000 --workloads 10000,30000,100000 --kube 30000
    python bench/bench_scale.py --nodes 50 --workloads 200 --kube 200 --seconds 5   # a check
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_heartbeats import HeartbeatDriver, clear
from bench.bench_vs_kube_scheduler import (
    KUBE,
    NAMESPACE,
    ORCA,
    SIDES,
    KubeScheduler,
    Orca,
    Side,
    as_deployed,
    capacity,
    create_all,
    node_objects,
    validate,
    wait_default_service_account,
    wait_not_ready_lifted,
)
from bench.common import RESULTS, command_line, cpu_seconds, load_average, peak_rss_mb, record
from controller.devcluster.controlplane import (
    LARGE_CLUSTER_CONTROLLER_MANAGER_ARGS,
    ControlPlane,
    NodeTiming,
)
from controller.operator.kube import KubeApi, TransportError, load_configuration
from tests.support.harness import REPO_ROOT

#: Seconds between two scrapes of orca's counters while it decides again after a restart.
METRICS_POLL = 2.0
#: What orca logs once every informer has listed (``handlers.StartupGate``), and once it has
#: answered for its failure domains (``resilience.ResilienceLoop``).
LISTED = "initial listing complete"
ANSWERED = re.compile(r"failure domains of \S+: .*; ([\d.]+) s of CPU over ([\d.]+) s")
DECISIONS = "orca_schedule_attempts_total"


def default_lease(nodes: int) -> int:
    """40 s per 1,000 Nodes, at least a real cluster's 40 s: 100 Lease renewals a second."""
    return max(NodeTiming.lease_seconds, round(NodeTiming.lease_seconds * nodes / 1000))


# -- following the objects ------------------------------------------------------------------


class Decided:
    """This bench's view of one collection's decisions: a LIST in pages (``listed`` is set
    after it, before the scheduler starts, so the bench's own LIST of 100,000 objects does not
    compete with the scheduler's), then a watch; when each object was first seen decided."""

    def __init__(self, api: KubeApi, side: Side, namespace: str) -> None:
        self.api, self.side, self.path = api, side, side.collection(namespace)
        self.listed = asyncio.Event()
        self.stamps: dict[str, float] = {}  # name -> time.perf_counter() first seen decided

    def _saw(self, obj: dict[str, Any]) -> None:
        if self.side.decided(obj):
            self.stamps.setdefault(str(obj["metadata"]["name"]), time.perf_counter())

    async def until(self, count: int, timeout: float) -> float:
        """Follow until ``count`` objects are decided; ``time.perf_counter()`` then."""
        deadline = time.perf_counter() + timeout
        version = await self.api.list_objects(self.path, self._saw)
        self.listed.set()
        while len(self.stamps) < count:
            try:
                async for event in self.api.watch(self.path, version, 300):
                    version = (
                        (event.get("object") or {})
                        .get("metadata", {})
                        .get("resourceVersion", version)
                    )
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        self._saw(event.get("object") or {})
                        if len(self.stamps) >= count:
                            break
                    if time.perf_counter() > deadline:
                        raise TimeoutError(f"{len(self.stamps)}/{count} decided after {timeout}s")
            except TransportError:
                await asyncio.sleep(0.5)  # watch again from the last version seen
        return time.perf_counter()


# -- orca's process -------------------------------------------------------------------------


class OrcaProcess:
    """``orca run`` as its Pod runs it (``bench_vs_kube_scheduler.Orca``), with its log read
    as it grows: when the informers had listed, and its failure domains' answers."""

    def __init__(
        self,
        plane: ControlPlane,
        workdir: Path,
        pod: tuple[tuple[str, ...], dict[str, str]],
        py_spy: Path | None = None,
    ) -> None:
        self.orca = Orca(plane, workdir, py_spy, pod)
        self.process = self.orca.process
        self.pid = self.process.pid
        self.started = time.perf_counter()
        self._log_path = self.orca.operator.log_path
        self._offset = self._log_path.stat().st_size if self._log_path.exists() else 0
        self.text = ""

    def read_log(self) -> str:
        """What the process logged since it started."""
        with open(self._log_path, errors="replace") as log:
            log.seek(self._offset)
            self.text += log.read()
            self._offset = log.tell()
        return self.text

    async def wait_for(self, found: Callable[[str], bool], what: str, timeout: float) -> float:
        """Poll the log (every 50 ms) until ``found``; ``time.perf_counter()`` then."""
        deadline = time.perf_counter() + timeout
        while not found(self.read_log()):
            if self.orca.process.poll() is not None:
                raise SystemExit(f"orca exited ({self.orca.process.returncode}):\n{self.text}")
            if time.perf_counter() > deadline:
                raise SystemExit(f"orca: no {what} after {timeout:.0f}s")
            await asyncio.sleep(0.05)
        return time.perf_counter()

    def answers(self) -> list[tuple[float, float]]:
        """Its failure domains' answers so far: (CPU seconds, wall seconds) each."""
        return [(float(c), float(w)) for c, w in ANSWERED.findall(self.read_log())]

    def counter(self, name: str) -> float:
        """One of its counters, summed over its labels (a scrape of ``/metrics``)."""
        samples = self.orca.operator.metrics()
        return sum(v for k, v in samples.items() if k.split("{", 1)[0] == name)

    def cpu(self) -> float:
        return cpu_seconds(self.pid)

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def peak_mb(self) -> float:
        return peak_rss_mb(self.pid)

    def stop(self) -> None:
        self.orca.stop()


# -- the measurements -----------------------------------------------------------------------


@dataclass
class Backlog:
    side: str
    objects: int
    seconds: float  # from the process's start until every object was decided
    first: float  # from the process's start to the first decision seen
    cpu: float
    rss_mb: float
    placed: int
    problems: list[str]

    @property
    def rate(self) -> float:
        return self.objects / self.seconds


@dataclass
class Rest:
    """orca at rest: CPU s/s quiet and with Node updates, the updates' rate, its RSS, and its
    peak RSS since it started (the listing, every decision again, the failure domains'
    answer and both windows: VmHWM read at the end)."""

    quiet: float
    updating: float
    updates_per_s: float
    rss_mb: float
    peak_mb: float
    #: Every failure domains' answer in its log by the end of the windows (CPU s, wall s):
    #: one when nothing changed after the first (a second one inside a window is in that
    #: window's CPU).
    answers: list[tuple[float, float]] = field(default_factory=list)
    #: Decisions orca made from the answer to the end of the windows: 0 at rest (a Node that
    #: changed for real, not a heartbeat, has its Workloads decided again, in the window).
    decided: int = 0

    @property
    def answer(self) -> tuple[float, float] | None:
        """The first answer, which the windows waited for."""
        return self.answers[0] if self.answers else None

    @property
    def per_update(self) -> float:
        """CPU seconds per Node update (the difference of the two windows)."""
        if self.updates_per_s <= 0:
            return float("nan")
        return (self.updating - self.quiet) / self.updates_per_s


@dataclass
class Restart:
    first: float  # from the process's start to its first decision
    listed: float  # from the process's start to its log's "initial listing complete"
    all_decided: float  # from the process's start until it had decided every Workload again
    peak_mb: float


@dataclass
class Size:
    """Everything measured at one (nodes, workloads)."""

    workloads: int
    orca: Backlog | None = None
    rest: Rest | None = None
    restart: Restart | None = None
    kube: Backlog | None = None
    problems: list[str] = field(default_factory=list)


async def at_rest(
    api: KubeApi, orca: OrcaProcess, nodes: dict[str, list[str]], args: argparse.Namespace
) -> Rest:
    """Wait until orca's failure domains are answered, then a quiet window and one with Node
    updates (see the module's docstring)."""
    await orca.wait_for(lambda _: bool(orca.answers()), "failure domains' answer", args.timeout)
    decided = orca.counter(DECISIONS)  # a scrape, outside the windows' clocks
    await asyncio.sleep(2)
    before, clock = orca.cpu(), time.perf_counter()
    await asyncio.sleep(args.seconds)
    quiet = (orca.cpu() - before) / (time.perf_counter() - clock)
    rss = orca.rss_mb()
    driver = HeartbeatDriver(api, nodes, len(nodes) / args.updates, 32)
    driver.start()
    try:
        await asyncio.sleep(2)  # the driver at its pace
        done, before, clock = driver.done, orca.cpu(), time.perf_counter()
        await asyncio.sleep(args.seconds)
        took = time.perf_counter() - clock
        updating, updates = (orca.cpu() - before) / took, (driver.done - done) / took
    finally:
        await driver.stop()
    if driver.failed:
        print(f"  ({driver.failed} Node updates failed: {driver.first_error})", flush=True)
    again = orca.counter(DECISIONS) - decided
    return Rest(quiet, updating, updates, rss, orca.peak_mb(), orca.answers(), int(again))


async def restart(orca: OrcaProcess, count: int, args: argparse.Namespace) -> Restart:
    """From the new process's start to its first decision, and to every Workload decided
    again (see the module's docstring)."""
    listed = await orca.wait_for(lambda text: LISTED in text, "initial listing", args.timeout)
    deadline = time.perf_counter() + args.timeout
    while await asyncio.to_thread(orca.counter, DECISIONS) < 1:
        if time.perf_counter() > deadline:
            raise SystemExit(f"orca decided nothing {args.timeout:.0f}s after its listing")
        await asyncio.sleep(0.05)
    first = time.perf_counter()
    while await asyncio.to_thread(orca.counter, DECISIONS) < count:
        if time.perf_counter() > deadline:
            raise SystemExit(f"orca had not decided {count} again after {args.timeout:.0f}s")
        await asyncio.sleep(METRICS_POLL)
    decided = time.perf_counter()
    return Restart(
        first - orca.started, listed - orca.started, decided - orca.started, orca.peak_mb()
    )


async def backlog(
    api: KubeApi,
    side: Side,
    count: int,
    start: Callable[[], Any],
    args: argparse.Namespace,
) -> tuple[Backlog, Any]:
    """Store ``count`` objects, list them, start the scheduler (``start``), time it until
    every one is decided; the scheduler is returned running."""
    path = side.collection(NAMESPACE)
    objects = [(path, side.make(f"o{i:06d}", NAMESPACE, None)) for i in range(count)]
    created = time.perf_counter()
    await create_all(api, objects, args.concurrency)
    print(
        f"  [{side.name}] {count} objects stored in {time.perf_counter() - created:.0f}s",
        flush=True,
    )
    decided = Decided(api, side, NAMESPACE)
    watcher = asyncio.create_task(decided.until(count, args.timeout))
    await decided.listed.wait()
    clock = time.perf_counter()
    scheduler = start()
    done = await watcher
    cpu = cpu_seconds(scheduler.process.pid)
    rss = peak_rss_mb(scheduler.process.pid)
    first = min(decided.stamps.values()) - clock
    problems = await validate(api, side, count)
    result = Backlog(side.name, count, done - clock, first, cpu, rss, len(decided.stamps), problems)
    print(
        f"  [{side.name}] backlog of {count}: all decided in {result.seconds:.1f}s -> "
        f"{result.rate:.0f}/s, the first after {first:.2f}s; CPU "
        f"{cpu / count * 1000:.2f} ms/placement, peak RSS {rss:.0f} MB; placements "
        + ("valid" if not problems else f"INVALID ({len(problems)}: {problems[:3]})"),
        flush=True,
    )
    return result, scheduler


# -- the runs --------------------------------------------------------------------------------


async def setup(
    plane: ControlPlane, api: KubeApi, nodes: list[dict[str, Any]], args: argparse.Namespace
) -> dict[str, list[str]]:
    """The Nodes created, Ready and untainted; the namespace and its ServiceAccount. Returns
    each Node's condition types (what the Node updates of step 3 touch)."""
    plane.kubectl("create", "namespace", NAMESPACE, check=True)
    started = time.perf_counter()
    await create_all(api, [("/api/v1/nodes", n) for n in nodes], args.concurrency)
    tainted = await wait_not_ready_lifted(api, args.timeout)
    await wait_default_service_account(api, NAMESPACE, args.timeout)
    print(
        f"  {len(nodes)} Nodes created and Ready in {time.perf_counter() - started:.0f}s "
        f"({tainted} had the not-ready taint, lifted by the controller manager)",
        flush=True,
    )
    conditions: dict[str, list[str]] = {}
    await api.list_objects(
        "/api/v1/nodes",
        lambda n: conditions.__setitem__(
            n["metadata"]["name"], [c["type"] for c in n["status"].get("conditions") or []]
        ),
    )
    return conditions


async def orca_run(
    plane: ControlPlane, workdir: Path, args: argparse.Namespace
) -> tuple[Rest, float, list[Size]]:
    """orca on the Nodes alone, then each Workload count in turn; (its rest on the Nodes
    alone, its start-up to listed then, the sizes)."""
    plane.kubectl("apply", "-k", str(REPO_ROOT / "crds"), check=True)
    plane.kubectl("wait", "--for=condition=established", "crd/workloads.orca.cloudinit.dev")
    pod = as_deployed(plane, workdir)
    api = KubeApi(load_configuration(str(plane.kubeconfig_path)), max_connections=64)
    side = SIDES[ORCA]
    try:
        conditions = await setup(plane, api, node_objects(args.nodes, args.seed), args)
        orca = OrcaProcess(plane, workdir, pod)
        try:
            listed = await orca.wait_for(lambda t: LISTED in t, "initial listing", args.timeout)
            listed -= orca.started
            empty = await at_rest(api, orca, conditions, args)
        finally:
            orca.stop()
        print(
            f"  [orca] Nodes alone: listed {listed:.2f}s after its start; at rest "
            f"{empty.quiet * 100:.2f} % of a core, {empty.per_update * 1e6:.0f} us per Node "
            f"update ({empty.updates_per_s:.0f}/s), RSS {empty.rss_mb:.0f} MB",
            flush=True,
        )
        sizes = []
        for count in args.workloads:
            size = Size(count)
            spy = args.py_spy.with_suffix(f".{count}.txt") if args.py_spy else None
            size.orca, orca = await backlog(
                api, side, count, functools.partial(OrcaProcess, plane, workdir, pod, spy), args
            )
            orca.stop()
            spy = args.py_spy.with_suffix(f".{count}.restart.txt") if args.py_spy else None
            orca = OrcaProcess(plane, workdir, pod, spy)
            try:
                size.restart = await restart(orca, count, args)
                again = size.restart
                print(
                    f"  [orca] restart on {count}: listed after {again.listed:.2f}s, first "
                    f"decision after {again.first:.2f}s, all decided again after "
                    f"{again.all_decided:.1f}s; peak RSS {again.peak_mb:.0f} MB",
                    flush=True,
                )
                size.rest = await at_rest(api, orca, conditions, args)
            finally:
                orca.stop()
            print(
                f"  [orca] {count} at rest: {size.rest.quiet * 100:.2f} % of a core, "
                f"{size.rest.per_update * 1e6:.0f} us per Node update "
                f"({size.rest.updates_per_s:.0f}/s), RSS {size.rest.rss_mb:.0f} MB (peak "
                f"{size.rest.peak_mb:.0f} MB since its start); failure "
                f"domains' answers (CPU s, wall s) {size.rest.answers}; decisions during the "
                f"windows {size.rest.decided}",
                flush=True,
            )
            size.problems = size.orca.problems
            sizes.append(size)
            if count != args.workloads[-1]:  # the plane goes with the last: no deletion
                await clear(api, side, args.timeout)
        return empty, listed, sizes
    finally:
        await api.close()


async def kube_run(plane: ControlPlane, workdir: Path, args: argparse.Namespace) -> list[Backlog]:
    """kube-scheduler's backlog at each ``--kube`` count, on the same Nodes."""
    api = KubeApi(load_configuration(str(plane.kubeconfig_path)), max_connections=64)
    side = SIDES[KUBE]
    try:
        await setup(plane, api, node_objects(args.nodes, args.seed), args)
        out = []
        for count in args.kube:
            result, scheduler = await backlog(
                api, side, count, lambda: KubeScheduler(plane, workdir), args
            )
            await asyncio.to_thread(scheduler.stop)
            out.append(result)
            if count != args.kube[-1]:  # the plane goes with the last: no deletion
                await clear(api, side, args.timeout)
        return out
    finally:
        await api.close()


Run = Callable[[ControlPlane, Path, argparse.Namespace], Any]


def in_plane(name: str, run: Run, args: argparse.Namespace) -> Any:
    """``run`` on a control plane of its own, with the heartbeats ``--lease-seconds`` says."""
    with tempfile.TemporaryDirectory(prefix=f"orca-scale-{name}-") as tmp:
        workdir = Path(tmp)
        with ControlPlane(
            workdir / "cp",
            controller_manager_args=LARGE_CLUSTER_CONTROLLER_MANAGER_ARGS,
            node_timing=NodeTiming.scaled(args.lease_seconds),
        ) as plane:
            return asyncio.run(run(plane, workdir, args))


# -- the record --------------------------------------------------------------------------------


def size_figures(
    lease: int, size: Size | None, empty: Rest | None, listed: float | None
) -> dict[str, Any]:
    """One column of the table, the same figures at every size (None: not measured there).
    ``size`` None: orca on the Nodes alone (``empty``, which had listed after ``listed``)."""
    orca = size.orca if size else None
    kube = size.kube if size else None
    again = size.restart if size else None
    rest = size.rest if size else empty
    per_workload = None
    if size is not None and size.rest is not None and empty is not None:
        per_workload = (size.rest.rss_mb - empty.rss_mb) * 1024 / size.workloads
    checked = [b for b in (orca, kube) if b is not None]

    def per_placement(b: Backlog | None) -> float | None:
        return b.cpu / b.objects * 1000 if b else None

    return {
        "kwok Node Lease (renewed every quarter)_s": lease,
        "orca: backlog_placed_per_s": orca.rate if orca else None,
        "kube-scheduler: backlog_placed_per_s": kube.rate if kube else None,
        "orca / kube-scheduler, backlog rate_x": orca.rate / kube.rate if orca and kube else None,
        "orca: CPU per placement (backlog)_ms": per_placement(orca),
        "kube-scheduler: CPU per placement (backlog)_ms": per_placement(kube),
        "orca: first decision after its start (backlog)_s": orca.first if orca else None,
        "kube-scheduler: first decision after its start (backlog)_s": kube.first if kube else None,
        "orca: peak RSS (backlog)_mb": orca.rss_mb if orca else None,
        "kube-scheduler: peak RSS (backlog)_mb": kube.rss_mb if kube else None,
        "every placement valid": not any(b.problems for b in checked) if checked else None,
        "orca: restart, listed after its start_s": again.listed if again else listed,
        "orca: restart, first decision after its start_s": again.first if again else None,
        "orca: restart, every Workload decided again after_s": again.all_decided if again else None,
        "orca: restart, peak RSS_mb": again.peak_mb if again else None,
        "orca: RSS at rest_mb": rest.rss_mb if rest else None,
        "orca: peak RSS from its start to the end of its rest_mb": rest.peak_mb if rest else None,
        "orca: RSS per stored Workload_kib": per_workload,
        "orca: CPU at rest, share of one core_percent": rest.quiet * 100 if rest else None,
        "orca: CPU per Node update at rest_us": rest.per_update * 1e6 if rest else None,
        "Node updates at rest_per_s": rest.updates_per_s if rest else None,
        "orca: failure domains' answer, CPU_s": rest.answer[0] if rest and rest.answer else None,
    }


def group(nodes: int, workloads: int | None) -> str:
    shown = f"{workloads:,} workloads" if workloads else "no workloads"
    return f"{nodes:,} nodes, {shown}"


def blanked(args: argparse.Namespace, recorded: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The recorded figures this run would blank: a size it measures again without a side that
    the recorded size holds (orca's, or kube-scheduler's beside it). ``record(merge=True)``
    replaces a size's column whole, so that every column comes from one command."""
    orca = set(args.workloads) if args.side in ("both", ORCA) else set()
    kube = set(args.kube) if args.side in ("both", KUBE) else set()
    lost = []
    for count in sorted(orca | kube):
        name = group(args.nodes, count)
        earlier = recorded.get(name) or {}
        for side, measured in ((ORCA, orca), (KUBE, kube)):
            held = any(v is not None for k, v in earlier.items() if k.startswith(f"{side}: "))
            if held and count not in measured:
                lost.append(f"{side}'s figures at {name}")
    return lost


def order(name: str) -> tuple[int, int]:
    """Groups by Node count, then Workload count ("no workloads" first)."""
    numbers = [int(n.replace(",", "")) for n in re.findall(r"\d[\d,]*(?= )", name)]
    return numbers[0], numbers[1] if len(numbers) > 1 else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument(
        "--workloads",
        type=lambda text: [int(n) for n in text.split(",")],
        default=[10000],
        help="comma-separated counts, each measured in turn on the same Nodes",
    )
    parser.add_argument(
        "--kube",
        type=lambda text: [int(n) for n in text.split(",") if n],
        default=[],
        help="the counts at which kube-scheduler's backlog runs beside (none by default)",
    )
    parser.add_argument("--side", choices=("both", KUBE, ORCA), default="both")
    parser.add_argument(
        "--replace",
        action="store_true",
        help="record even where a size's recorded figures hold a side this run leaves out "
        "(that side's figures go)",
    )
    parser.add_argument("--seconds", type=float, default=60, help="each window at rest")
    parser.add_argument("--updates", type=float, default=100, help="Node updates a second")
    parser.add_argument(
        "--lease-seconds", type=int, help="kwok's Node Lease (default: 40 s per 1,000 Nodes)"
    )
    parser.add_argument("--concurrency", type=int, default=32, help="concurrent creates")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per wait")
    parser.add_argument(
        "--py-spy",
        type=Path,
        metavar="FILE",
        help="profile orca with py-spy (collapsed stacks): each backlog into FILE.<count>.txt, "
        "each restart and its rest after into FILE.<count>.restart.txt",
    )
    args = parser.parse_args(argv)
    if args.lease_seconds is None:
        args.lease_seconds = default_lease(args.nodes)
    results = RESULTS / "bench_scale.json"
    recorded = json.loads(results.read_text())["figures"] if results.exists() else {}
    lost = blanked(args, recorded)
    if lost and not args.replace:
        parser.error(
            f"this run would blank {'; '.join(lost)} (each size is recorded whole): measure "
            "that side too (--side both, the count in --workloads and in --kube), or pass "
            "--replace"
        )
    room = capacity(node_objects(args.nodes, args.seed))
    too_many = [n for n in args.workloads + args.kube if n > room]
    if too_many:
        parser.error(f"{too_many}: more than the {room} objects {args.nodes} Nodes hold")
    print(
        f"nodes={args.nodes} (room for {room} objects) workloads={args.workloads} "
        f"kube={args.kube} lease={args.lease_seconds}s seconds={args.seconds:g} "
        f"updates={args.updates:g}/s on {os.cpu_count()} cores "
        f"(load average {load_average():.2f})",
        flush=True,
    )
    sizes: list[Size] = []
    empty: Rest | None = None
    listed = None
    if args.side in ("both", ORCA):
        empty, listed, sizes = in_plane(ORCA, orca_run, args)
    else:
        sizes = [Size(count) for count in args.kube]
    if args.side in ("both", KUBE) and args.kube:
        print(f"kube-scheduler (load average {load_average():.2f}):", flush=True)
        by_count = {size.workloads: size for size in sizes}
        for result in in_plane(KUBE, kube_run, args):
            by_count.setdefault(result.objects, Size(result.objects)).kube = result
        sizes = sorted(by_count.values(), key=lambda s: s.workloads)
    print(f"(load average at the end {load_average():.2f})", flush=True)
    recorded = {}
    if empty is not None:
        recorded[group(args.nodes, None)] = size_figures(args.lease_seconds, None, empty, listed)
    for size in sizes:
        figures = size_figures(args.lease_seconds, size, empty, None)
        recorded[group(args.nodes, size.workloads)] = figures
    record("bench_scale", recorded, command_line(argv), merge=True, order=order)
    problems = [p for s in sizes for b in (s.orca, s.kube) if b for p in b.problems]
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
