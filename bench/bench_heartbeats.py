"""Heartbeats cost little: orca and kube-scheduler side by side while N Nodes heartbeat.

Why: in a real cluster every Node's object is written again and again, and every scheduler
watching Nodes receives each write. orca reads a Node event into a NodeInfo and drops it when
nothing the scheduler reads changed (``ClusterState.upsert_node``); kube-scheduler updates its
node cache and requeues Pods only for changes its plugins care about. This bench shows what
receiving them costs each of them (a heartbeat decides and writes nothing on either side), at
rest and while a backlog is placed, on one living cluster (``ControlPlane``: etcd,
kube-apiserver, kube-controller-manager, kwok playing the kubelets) with ``--nodes`` kwok Nodes.

The heartbeats: a driver in this process PATCHes every Node's ``status`` subresource (a
strategic merge patch of every condition's ``lastHeartbeatTime``, the patch a kubelet sends)
once per ``--heartbeat-period`` (10 s, the kubelet's ``nodeStatusUpdateFrequency``), spread
evenly: N / period Node updates per second, each one a new resourceVersion every watcher of
Nodes receives. Why a driver and not a kwok Stage: kwok's Stages live in the control plane's
``kwok-stages.yaml`` (its own ``node-heartbeat-with-lease``, which refreshes the status only
every 10-20 minutes), and a Stage's rate is whatever kwok manages; the driver's rate is known,
counted (the rate achieved is printed), switched on and off within one run, and its own CPU
is printed (this process's, over the idle windows) so the load is seen to be real. Newer
kubelets, with Leases, write their status only on a change or every 5 minutes
(``nodeStatusReportFrequency``): a status write every 10 s is the heavy, pre-Lease case.
kwok's Lease renewals (one per Node every 10 s) go on in every phase; "without heartbeats"
means the driver is off. kwok watches the Nodes too: each update makes it match its Stages
again and postpone its own status refresh (so that one never fires while the driver runs);
its CPU is printed apart. The Nodes are registered without conditions, as kubelets register
them, and kwok's ``node-initialize`` Stage fills their status (five conditions, addresses,
nodeInfo: ~3.4 KiB of JSON, printed); a real kubelet's Node also lists up to 50 container
images, so a real heartbeat event is larger to decode than these.

One cluster, one run:

1. At rest: both schedulers run at once (orca's operator, ``orca run``; kube-scheduler,
   ``hack/testcp``'s build, client QPS 5,000), each having placed a probe object. Each
   process's CPU (utime + stime from ``/proc``, CPU seconds per second) over ``--seconds``
   without the driver, then over ``--seconds`` with it (after one period of warm-up), and the
   servers' CPU over the same windows. orca's own counters (decisions, status writes, API
   requests) over each window say whether a heartbeat made it decide or write anything.
2. Backlog: ``--objects`` single-replica objects (kube-scheduler: Pods; orca: Workloads of kind
   Job; the same requests and constraints as ``bench_vs_kube_scheduler.py``) stored first,
   then the scheduler started alone (the other one stopped), the clock running from its
   process's start until every object is decided: placed per second, start-up included, with
   the driver on and off, ``--rounds`` times (3; the order of on and off, and of the sides,
   alternates, as the shared machine's load drifts; the table shows the median run). Every
   placement is checked (constraints, no node over-committed; exit 1 otherwise), then the
   objects are deleted before the next run. orca is stopped as soon as its last Workload is
   decided, so the Events it holds back are left out (``bench_vs_kube_scheduler.py`` counts
   them).

Printed: a table of both schedulers' idle CPU, placement rates, CPU per placement and peak
RSS (VmHWM), then the cluster's CPU per window, the heartbeat rate achieved and what a
heartbeat costs each process (the difference between the two idle windows, per update).

    python bench/bench_heartbeats.py                      # 1,000 Nodes, 2,000 objects, 60 s
    python bench/bench_heartbeats.py --nodes 50 --objects 100 --seconds 10
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_living_cluster import wait_alive
from bench.bench_vs_kube_scheduler import (
    KUBE,
    NAMESPACE,
    ORCA,
    PROBE_NAMESPACE,
    SIDES,
    Orca,
    Scheduler,
    Side,
    create_all,
    node_objects,
    start,
    validate,
    wait_decided,
    wait_default_service_account,
)
from bench.common import command_line, cpu_seconds, load_average, peak_rss_mb, record
from controller.devcluster.controlplane import LARGE_CLUSTER_CONTROLLER_MANAGER_ARGS, ControlPlane
from controller.operator.kube import ApiError, KubeApi, TransportError, load_configuration
from tests.support.harness import REPO_ROOT

BENCH = "bench"  # this process: the heartbeat driver (and nothing else in the idle windows)
#: orca's counters read over each idle window: did a heartbeat make it decide or write?
ORCA_COUNTERS = {
    "decisions": "orca_schedule_attempts_total",
    "status writes": "orca_status_writes_total",
    "API requests": "orca_api_requests_total",
}


# -- the heartbeat driver -------------------------------------------------------------------


class HeartbeatDriver:
    """PATCH every Node's status once per ``period``, evenly spread: ``len(nodes) / period``
    updates per second, at most ``width`` in flight. A beat due while every slot waits on the
    API server is skipped (counted), as a late kubelet skips one, rather than queued and sent
    in a burst: over any window at most ``width`` more than the target are acknowledged (those
    in flight at its start)."""

    def __init__(
        self, api: KubeApi, nodes: dict[str, list[str]], period: float, width: int
    ) -> None:
        self.api, self.period, self.width = api, period, width
        self.nodes = sorted(nodes.items())  # (name, its condition types)
        self.slots = asyncio.Semaphore(width)
        self.done = 0  # updates the API server acknowledged
        self.unchanged = 0  # of which wrote nothing (same resourceVersion as the last one)
        self.skipped = 0  # beats dropped because the driver was behind
        self.failed = 0
        self.first_error: str | None = None
        self._versions: dict[str, str] = {}
        self._task: asyncio.Task[None] | None = None
        self._beats: set[asyncio.Task[None]] = set()

    @property
    def target(self) -> float:
        """Updates per second asked for."""
        return len(self.nodes) / self.period

    @property
    def running(self) -> bool:
        return self._task is not None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        await asyncio.gather(*self._beats, return_exceptions=True)

    async def _run(self) -> None:
        interval = self.period / len(self.nodes)
        begun, ticks, cursor = time.monotonic(), 0, 0
        while True:
            due = int((time.monotonic() - begun) / interval) + 1
            while ticks < due:
                ticks += 1
                if self.slots.locked():  # every slot waiting on the API server: skip this beat
                    self.skipped += 1
                    continue
                await self.slots.acquire()  # free: returns at once
                name, types = self.nodes[cursor % len(self.nodes)]
                cursor += 1
                beat = asyncio.create_task(self._beat(name, types))
                self._beats.add(beat)
                beat.add_done_callback(self._beats.discard)
            await asyncio.sleep(max(0.0, begun + ticks * interval - time.monotonic()))

    async def _beat(self, name: str, types: list[str]) -> None:
        """What a kubelet sends: every condition's ``lastHeartbeatTime``, nothing else."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        body = {
            "status": {
                "$setElementOrder/conditions": [{"type": t} for t in types],
                "conditions": [{"type": t, "lastHeartbeatTime": stamp} for t in types],
            }
        }
        try:
            node = await self.api.request(
                "PATCH",
                f"/api/v1/nodes/{urllib.parse.quote(name, safe='')}/status",
                body,
                content_type="application/strategic-merge-patch+json",
            )
            self.done += 1
            version = str(node["metadata"]["resourceVersion"])
            self.unchanged += self._versions.get(name) == version
            self._versions[name] = version
        except Exception as exc:  # counted and reported; the driver goes on
            self.failed += 1
            self.first_error = self.first_error or f"{type(exc).__name__}: {exc}"
        finally:
            self.slots.release()


# -- measurements -----------------------------------------------------------------------------


@dataclass
class Window:
    """One idle window: CPU s/s per process, heartbeats achieved, orca's counters."""

    seconds: float
    cpu: dict[str, float]  # process -> CPU seconds per second
    heartbeats: float  # updates per second acknowledged (0: driver off)
    orca: dict[str, float]  # counter -> increase over the window
    rss_mb: dict[str, float] = field(default_factory=dict)


@dataclass
class Run:
    """One backlog: placed per second, the scheduler's CPU and peak RSS."""

    side: str
    heartbeats: bool
    objects: int
    seconds: float
    heartbeat_rate: float  # achieved during the run (0: driver off)
    scheduler_cpu: float
    server_cpu: float  # API server + etcd
    rss_mb: float
    problems: list[str]

    @property
    def rate(self) -> float:
        return self.objects / self.seconds


def orca_counters(orca: Orca) -> dict[str, float]:
    samples = orca.operator.metrics()
    return {
        label: sum(v for k, v in samples.items() if k.split("{", 1)[0] == name)
        for label, name in ORCA_COUNTERS.items()
    }


async def idle_window(
    plane: ControlPlane,
    schedulers: dict[str, Scheduler],
    driver: HeartbeatDriver | None,
    seconds: float,
) -> Window:
    """CPU s/s of every process over ``seconds`` with nothing else happening."""
    orca = schedulers[ORCA]
    assert isinstance(orca, Orca)
    pids = {name: s.process.pid for name, s in schedulers.items()}
    pids |= plane.pids
    pids[BENCH] = os.getpid()
    counters = await asyncio.to_thread(orca_counters, orca)  # outside the CPU window
    done = driver.done if driver else 0
    before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    clock = time.perf_counter()
    await asyncio.sleep(seconds)
    cpu = {name: cpu_seconds(pid) for name, pid in pids.items()}
    took = time.perf_counter() - clock
    beats = (driver.done - done) / took if driver else 0.0
    after = await asyncio.to_thread(orca_counters, orca)
    return Window(
        took,
        {name: (cpu[name] - before[name]) / took for name in pids},
        beats,
        {label: after[label] - counters[label] for label in counters},
        {name: peak_rss_mb(pid) for name, pid in pids.items() if name in schedulers},
    )


async def backlog(
    api: KubeApi,
    plane: ControlPlane,
    workdir: Path,
    side: Side,
    driver: HeartbeatDriver | None,
    args: argparse.Namespace,
) -> Run:
    """Store the objects, start the scheduler, time it until every object is decided."""
    path = side.collection(NAMESPACE)
    objects = [(path, side.make(f"o{i:05d}", NAMESPACE, None)) for i in range(args.objects)]
    await create_all(api, objects, args.concurrency)
    servers = [pid for name, pid in plane.pids.items() if name in ("etcd", "kube-apiserver")]
    server_before = sum(cpu_seconds(p) for p in servers)
    done_before = driver.done if driver else 0
    clock = time.perf_counter()
    scheduler = start(side, plane, workdir)
    try:
        decided = await wait_decided(api, side, NAMESPACE, args.objects, args.timeout)
        done_after = driver.done if driver else 0  # not those acknowledged while it stops
        scheduler_cpu = cpu_seconds(scheduler.process.pid)
        server_cpu = sum(cpu_seconds(p) for p in servers) - server_before
        rss = peak_rss_mb(scheduler.process.pid)
    finally:
        await asyncio.to_thread(scheduler.stop)
    seconds = decided - clock
    beats = (done_after - done_before) / seconds
    problems = await validate(api, side, args.objects)
    await clear(api, side)
    return Run(
        side.name, driver is not None, args.objects, seconds, beats, scheduler_cpu, server_cpu,
        rss, problems,
    )  # fmt: skip


async def clear(api: KubeApi, side: Side, timeout: float = 300) -> None:
    """Delete the backlog's objects (and the namespace's Events), wait until they are gone,
    at most ``timeout`` seconds. A collection's DELETE that outlasts the client's 30 s (1,000
    Pods on a busy API server did) goes on in the server: the wait below sees it through."""
    now = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
    path = side.collection(NAMESPACE)
    for collection in (path, f"/api/v1/namespaces/{NAMESPACE}/events"):
        try:
            await api.request("DELETE", collection, now)
        except TransportError as exc:
            print(f"  ({exc}: waiting for the deletion to finish)", flush=True)
    deadline = time.monotonic() + timeout
    while (await api.request("GET", path, params={"limit": "1"}))["items"]:
        if time.monotonic() > deadline:
            raise SystemExit(f"{path}: objects still there {timeout:.0f}s after their deletion")
        await asyncio.sleep(0.5)


async def probe(api: KubeApi, side: Side, timeout: float) -> None:
    """One object placed: the scheduler has synced its caches and decides."""
    path = side.collection(PROBE_NAMESPACE)
    try:
        await api.request("POST", path, side.make("probe", PROBE_NAMESPACE, None))
    except ApiError as exc:
        if exc.status != 409:  # already there from an earlier phase: decided already
            raise
    await wait_decided(api, side, PROBE_NAMESPACE, 1, timeout)


# -- the run ----------------------------------------------------------------------------------


@dataclass
class Results:
    nodes: int
    target: float  # heartbeats per second asked for
    quiet: Window  # at rest, driver off
    beating: Window  # at rest, driver on
    runs: list[Run]
    setup_seconds: float
    driver: HeartbeatDriver  # its totals over the whole run


async def run(plane: ControlPlane, workdir: Path, args: argparse.Namespace) -> Results:
    kubectl = plane.kubectl
    for namespace in (NAMESPACE, PROBE_NAMESPACE):
        kubectl("create", "namespace", namespace, check=True)
    kubectl("apply", "-k", str(REPO_ROOT / "crds"), check=True)
    kubectl("wait", "--for=condition=established", "crd/workloads.orca.cloudinit.dev")
    api = KubeApi(load_configuration(str(plane.kubeconfig_path)), max_connections=64)
    driver_api = KubeApi(load_configuration(str(plane.kubeconfig_path)), max_connections=64)
    driver: HeartbeatDriver | None = None
    try:
        started = time.monotonic()
        nodes = node_objects(args.nodes, args.seed)
        for node in nodes:  # registered as a kubelet registers: kwok's Stage makes it Ready
            del node["status"]["conditions"]
        await create_all(api, [("/api/v1/nodes", n) for n in nodes], args.concurrency)
        await wait_alive(api, args.nodes, args.timeout)
        for namespace in (NAMESPACE, PROBE_NAMESPACE):
            await wait_default_service_account(api, namespace, args.timeout)
        setup = time.monotonic() - started
        listed = (await api.request("GET", "/api/v1/nodes"))["items"]
        conditions = {
            n["metadata"]["name"]: [c["type"] for c in n["status"].get("conditions") or []]
            for n in listed
        }
        kinds = sorted({t for types in conditions.values() for t in types})
        size = sum(len(json.dumps(n)) for n in listed) / len(listed)
        print(
            f"{args.nodes} Nodes Ready, untainted, with their Leases {setup:.0f}s after their "
            f"creation (conditions: {', '.join(kinds)}; ~{size / 1024:.1f} KiB of JSON each, "
            "what every watcher of Nodes receives per heartbeat)",
            flush=True,
        )
        driver = HeartbeatDriver(driver_api, conditions, args.heartbeat_period, args.width)

        # 1. At rest, both schedulers running.
        schedulers = {name: start(SIDES[name], plane, workdir) for name in (KUBE, ORCA)}
        try:
            for name in (KUBE, ORCA):
                await probe(api, SIDES[name], args.timeout)
            settle = max(0.0, plane.node_timing.lease_seconds - (time.monotonic() - started))
            await asyncio.sleep(max(settle, 5.0))  # set-up's writes and renewals behind us
            quiet = await idle_window(plane, schedulers, None, args.seconds)
            report_window("at rest, no heartbeats", quiet)
            driver.start()
            await asyncio.sleep(args.heartbeat_period)  # every Node patched once
            beating = await idle_window(plane, schedulers, driver, args.seconds)
            report_window("at rest, heartbeats", beating)
        finally:
            for scheduler in schedulers.values():
                await asyncio.to_thread(scheduler.stop)

        # 2. Backlogs, one scheduler at a time, ``--rounds`` times; the order of heartbeats on
        # and off, and of the two sides, alternates from one round to the next.
        runs = []
        for round_ in range(args.rounds):
            order = (True, False) if round_ % 2 == 0 else (False, True)
            for beats in order:
                if beats and not driver.running:
                    driver.start()
                    await asyncio.sleep(args.heartbeat_period)  # every Node patched once
                elif not beats and driver.running:
                    await driver.stop()
                    await asyncio.sleep(2)
                for name in (KUBE, ORCA) if round_ % 2 == 0 else (ORCA, KUBE):
                    result = await backlog(
                        api, plane, workdir, SIDES[name], driver if beats else None, args
                    )
                    report_run(result)
                    runs.append(result)
        return Results(
            args.nodes, driver.target, quiet, beating, runs, setup, driver
        )  # fmt: skip
    finally:
        if driver is not None:
            await driver.stop()
        await api.close()
        await driver_api.close()


# -- the report -------------------------------------------------------------------------------


def report_window(what: str, window: Window) -> None:
    cells = ", ".join(f"{name} {cpu:.3f}" for name, cpu in window.cpu.items())
    beats = f"; {window.heartbeats:.1f} heartbeats/s" if window.heartbeats else ""
    counters = ", ".join(f"{k} +{v:g}" for k, v in window.orca.items())
    print(
        f"  {what} ({window.seconds:.0f}s{beats}): CPU s/s {cells}; orca's counters: {counters}",
        flush=True,
    )


def report_run(run: Run) -> None:
    beats = f"heartbeats {run.heartbeat_rate:.0f}/s" if run.heartbeats else "no heartbeats"
    valid = "valid" if not run.problems else f"INVALID ({len(run.problems)} problems)"
    print(
        f"  backlog, {beats}: {run.side} placed {run.objects} in {run.seconds:.1f}s -> "
        f"{run.rate:.0f}/s; its CPU {run.scheduler_cpu / run.objects * 1000:.2f} ms/placement, "
        f"API server + etcd {run.server_cpu / run.objects * 1000:.2f} ms/placement, peak RSS "
        f"{run.rss_mb:.0f} MB; placements {valid}",
        flush=True,
    )
    for problem in run.problems[:10]:
        print(f"      {problem}")


def table(results: Results) -> None:
    def row(label: str, kube: str, orca: str) -> None:
        print(f"| {label:<44} | {kube:>14} | {orca:>10} |")

    def runs(beats: bool) -> dict[str, Run]:
        """Per side, the median run over the rounds (by rate; RSS: the highest)."""
        chosen = {}
        for side in (KUBE, ORCA):
            mine = sorted(
                (r for r in results.runs if r.side == side and r.heartbeats == beats),
                key=lambda r: r.rate,
            )
            median = dataclasses.replace(mine[(len(mine) - 1) // 2])
            median.rss_mb = max(r.rss_mb for r in mine)
            chosen[side] = median
        return chosen

    quiet, beating = results.quiet, results.beating
    print()
    rounds = len(results.runs) // 4
    if rounds > 1:
        print(f"backlog rows: the median run of {rounds} (by rate), the highest peak RSS")
    row("", KUBE, ORCA)
    print(f"|{'-' * 46}|{'-' * 15}:|{'-' * 11}:|")
    row("idle CPU s/s, Lease renewals only", *(f"{quiet.cpu[n]:.4f}" for n in (KUBE, ORCA)))
    row(
        f"idle CPU s/s, + {beating.heartbeats:.0f} heartbeats/s",
        *(f"{beating.cpu[n]:.4f}" for n in (KUBE, ORCA)),
    )
    row(
        "CPU per heartbeat (us)",
        *(f"{per_beat(results, n) * 1e6:.0f}" for n in (KUBE, ORCA)),
    )
    median = {beats: runs(beats) for beats in (False, True)}
    for beats in (False, True):
        by_side = median[beats]
        what = "heartbeats" if beats else "no heartbeats"
        row(f"backlog placed/s, {what}", *(f"{by_side[n].rate:.0f}" for n in (KUBE, ORCA)))
        if beats:
            row(
                "  heartbeats/s during that backlog",
                *(f"{by_side[n].heartbeat_rate:.0f}" for n in (KUBE, ORCA)),
            )
        row(
            f"backlog CPU ms/placement, {what}",
            *(f"{by_side[n].scheduler_cpu / by_side[n].objects * 1000:.2f}" for n in (KUBE, ORCA)),
        )
    row(
        "peak RSS MB, at rest (heartbeats included)",
        *(f"{beating.rss_mb[n]:.0f}" for n in (KUBE, ORCA)),
    )
    for beats in (False, True):
        by_side = median[beats]
        row(
            f"peak RSS MB, backlog, {'heartbeats' if beats else 'no heartbeats'}",
            *(f"{by_side[n].rss_mb:.0f}" for n in (KUBE, ORCA)),
        )
    print()
    print("| process | CPU s/s, no heartbeats | CPU s/s, heartbeats | per heartbeat (us) |")
    print("|---|---:|---:|---:|")
    for name in quiet.cpu:
        print(
            f"| {name} | {quiet.cpu[name]:.4f} | {beating.cpu[name]:.4f} | "
            f"{per_beat(results, name) * 1e6:.0f} |"
        )
    print()
    driver = results.driver
    period = results.nodes / results.target
    print(
        f"heartbeats: asked {results.target:.1f}/s ({results.nodes} Nodes, one status PATCH "
        f"each every {period:g}s), achieved {beating.heartbeats:.1f}/s at rest; over the run "
        f"{driver.done} acknowledged, {driver.unchanged} of them without a new "
        f"resourceVersion, {driver.skipped} skipped (all {driver.width} slots busy), "
        f"{driver.failed} failed"
        + (f" (first: {driver.first_error})" if driver.first_error else "")
    )
    # What limits N: everything here grows with N (Lease renewals, heartbeats, watchers).
    cores = os.cpu_count() or 1
    kubelets = (BENCH, "kwok")  # stand-ins for the kubelets, on the Nodes in a real cluster
    cluster = sum(cpu for name, cpu in beating.cpu.items() if name not in kubelets)
    everything = sum(beating.cpu.values())
    beat = sum(per_beat(results, name) for name in quiet.cpu if name not in kubelets)
    print(
        f"a heartbeat costs {beat * 1e3:.2f} ms of CPU in the control plane and the two "
        f"schedulers ({per_beat(results, 'kube-apiserver') * 1e3:.2f} ms of it in "
        f"kube-apiserver), {(beat + sum(per_beat(results, n) for n in kubelets)) * 1e3:.2f} ms "
        "with kwok and the driver"
    )
    print(
        f"at rest with heartbeats, {results.nodes} Nodes keep {cluster:.2f} cores busy in the "
        f"control plane and the schedulers, {everything:.2f} with kwok and the driver: "
        f"linearly, {cores} cores are full at ~{cores / cluster * results.nodes:,.0f} Nodes "
        f"(~{cores / everything * results.nodes:,.0f} with the stand-ins for the kubelets on "
        "the same cores), before anything is scheduled"
    )


def per_beat(results: Results, name: str) -> float:
    """CPU seconds per heartbeat: the difference between the idle windows, per update."""
    rate = results.beating.heartbeats
    if rate <= 0:
        return float("nan")
    return (results.beating.cpu[name] - results.quiet.cpu[name]) / rate


def recorded(results: Results) -> dict[str, dict[str, float]]:
    """``table``'s figures per side (backlogs: the median rate of the rounds)."""
    out = {}
    for side in (KUBE, ORCA):
        row = {
            "idle, Lease renewals only_cpu_s_per_s": results.quiet.cpu[side],
            "idle, with the heartbeats_cpu_s_per_s": results.beating.cpu[side],
            "CPU per heartbeat_us": per_beat(results, side) * 1e6,
            "peak RSS at rest_mb": results.beating.rss_mb[side],
        }
        for beats in (False, True):
            mine = [r for r in results.runs if r.side == side and r.heartbeats == beats]
            what = "with heartbeats" if beats else "no heartbeats"
            if mine:
                row[f"backlog, {what}_placed_per_s"] = statistics.median(r.rate for r in mine)
                row[f"backlog, {what}: CPU per placement_ms"] = statistics.median(
                    r.scheduler_cpu / r.objects * 1000 for r in mine
                )
        out[side] = row
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--objects", type=int, default=2000, help="per backlog run")
    parser.add_argument("--seconds", type=float, default=60, help="each idle window")
    parser.add_argument(
        "--heartbeat-period",
        type=float,
        default=10,
        help="seconds between two status updates of a Node (the kubelet's default: 10)",
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="backlogs per side with and without heartbeats"
    )
    parser.add_argument("--width", type=int, default=32, help="heartbeats in flight at most")
    parser.add_argument("--concurrency", type=int, default=32, help="concurrent creates")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--timeout", type=float, default=900, help="seconds per wait")
    parser.add_argument("--logs", type=Path, help="keep the schedulers' logs in this directory")
    args = parser.parse_args(argv)
    if min(args.nodes, args.objects, args.rounds, args.width, args.concurrency) < 1:
        parser.error("--nodes, --objects, --rounds, --width and --concurrency must be at least 1")
    if args.seconds <= 0 or args.heartbeat_period <= 0:
        parser.error("--seconds and --heartbeat-period must be positive")
    print(
        f"nodes={args.nodes} objects={args.objects} seconds={args.seconds:g} "
        f"heartbeat-period={args.heartbeat_period:g}s on {os.cpu_count()} cores "
        f"(load average {load_average():.2f})",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="orca-heartbeats-") as tmp:
        workdir = Path(tmp)
        try:
            with ControlPlane(
                workdir / "cp", controller_manager_args=LARGE_CLUSTER_CONTROLLER_MANAGER_ARGS
            ) as plane:
                results = asyncio.run(run(plane, workdir, args))
        finally:
            if args.logs:
                args.logs.mkdir(parents=True, exist_ok=True)
                for log in workdir.glob("*.log"):
                    shutil.copy(log, args.logs / log.name)
    table(results)
    print(f"(load average at the end {load_average():.2f})")
    record("bench_heartbeats", recorded(results), command_line(argv))
    return 1 if any(r.problems for r in results.runs) else 0


if __name__ == "__main__":
    sys.exit(main())
