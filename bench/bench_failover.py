"""Warm failover: two replicas with leader election, the leader SIGKILLed in the middle of a
backlog; how soon the standby places, what it costs while it waits, and that no placement was
lost or doubled.

One living cluster (``ControlPlane``, as ``orca dev-cluster`` starts it) with
``bench_vs_kube_scheduler``'s Nodes and its backlog of Workloads (Jobs asking 100m and 128Mi
with two CEL constraints) stored. Then two ``orca run`` at once, as the chart's Deployment runs
its two replicas: each as its Pod (the shipped ServiceAccount and RBAC), leader election on
(the Lease ``orca-system/orca-controller``: 15 s, renewed every 2 s, a renew deadline of 10 s).
One wins the Lease and places; the other stands by, its informers and ledger following what
the leader writes. At each ``--kill-at`` share of the backlog placed, the leader is SIGKILLed
(no Lease released, writes in flight lost mid-air) and started again (a Deployment's
ReplicaSet would), as the next standby. Per kill it prints:

- **the gap**: from the kill to the first placement the standby wrote, as this bench's watch
  saw it: the first placement in a Workload version newer than etcd's revision a second after
  the kill (by then the old leader's writes in flight have landed or never will: those are
  counted apart, from the revision read right after the kill), and from the kill to the
  standby's "became leader" log line; the target is the Lease's duration + 2 s;
- **the standby while it waited**: its resident set (VmRSS, and its peak), its CPU per second
  since it listed, and whether it was warm: after the kill and before its election (6 s
  later: its gauges are refreshed every 5 s), its own ``orca_node_placements`` (the ledger,
  per Node) summed, and its ``orca_workloads{phase="Scheduled"}`` (the records), beside the
  placements this bench's watch saw: equal when its informers and ledger kept up.

Every poll (``--poll`` seconds apart, or as soon as the previous check is done) the Workloads
and the Nodes as this bench's watch holds them go through the chaos suite's checker
(``tests.chaos.invariants.Observer``: capacity, exact replica counts, unique allocIds, and no
placement lost or moved without a cause between two observations), in a thread of its own
niced to 10, so the operators get the cores first. At the end every placement is checked
again from a LIST (``bench_vs_kube_scheduler.validate``: each Workload placed exactly once,
the constraints hold, no Node over its cpu, memory or Pods). Exit 1 on any violation.

    python bench/bench_failover.py --nodes 5000 --workloads 10000 --kill-at 0.3,0.7
    python bench/bench_failover.py --nodes 50 --workloads 500 --kill-at 0.5      # a check
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_vs_kube_scheduler import (
    NAMESPACE,
    ORCA,
    SIDES,
    as_deployed,
    capacity,
    create_all,
    node_objects,
    validate,
    wait_default_service_account,
    wait_not_ready_lifted,
)
from bench.common import command_line, cpu_seconds, load_average, peak_rss_mb, record
from controller.devcluster.controlplane import (
    LARGE_CLUSTER_CONTROLLER_MANAGER_ARGS,
    ControlPlane,
    NodeTiming,
)
from controller.operator.kube import KubeApi, load_configuration
from controller.operator.kube.informer import Informer
from controller.scheduler.nodes import NODES_PATH
from tests.chaos.invariants import Observer, Violation
from tests.support.harness import REPO_ROOT, OperatorProcess

#: The Lease the chart's replicas share (manifests/rbac grants exactly this one).
LEASE_NAMESPACE, LEASE_NAME = "orca-system", "orca-controller"
#: ``LeaderElector``'s lease duration (controller/operator/kube/leader.py).
LEASE_DURATION = 15.0
#: After this long the old leader's writes in flight at the kill have landed or never will
#: (the API server had their whole request, or drops it); the standby waits out the Lease.
STRAGGLERS = 1.0
BECAME_LEADER = re.compile(r"^\[([\d-]+ [\d:]+,\d+)\].*became leader", re.MULTILINE)
LISTED = "initial listing complete"


class Cache:
    """What an informer delivered: objects by key, replaced whole on every event (a poll's
    snapshot is a list of the dicts, never mutated after)."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.on_change: list[Any] = []

    def added(self, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        self.objects[key] = obj
        for call in self.on_change:
            call(key, obj)

    modified = added

    def deleted(self, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        self.objects.pop(f"{meta.get('namespace')}/{meta.get('name')}", None)

    def listed(self, initial: bool) -> None:
        """Nothing to do: each change was delivered on its own."""


class Placements:
    """When each allocId was first seen placed on the Workloads' watch, and in which version
    of its Workload (etcd's revision when it was written)."""

    def __init__(self) -> None:
        self.first_seen: dict[str, tuple[float, int]] = {}  # allocId -> (perf_counter, rv)
        self.placed: set[str] = set()  # Workloads with a placement

    def seen(self, key: str, obj: dict[str, Any]) -> None:
        now = time.perf_counter()
        placements = (obj.get("status") or {}).get("placements") or []
        version = int(obj["metadata"]["resourceVersion"])
        for p in placements:
            self.first_seen.setdefault(str(p.get("allocId")), (now, version))
        if placements:
            self.placed.add(key)

    def written_after(self, revision: int) -> list[float]:
        """When each placement written after etcd's ``revision`` was first seen, in order."""
        return sorted(t for t, version in self.first_seen.values() if version > revision)


class Checker(threading.Thread):
    """The chaos checker at every poll, in a thread niced to 10."""

    def __init__(self, workloads: Cache, nodes: Cache, interval: float) -> None:
        super().__init__(name="checker", daemon=True)
        self.workloads, self.nodes, self.interval = workloads, nodes, interval
        self.observer = Observer()
        self.violations: list[Violation] = []
        self.seconds: list[float] = []  # each check's time
        self._halt = threading.Event()
        self._seen: set[str] = set()
        self.error: BaseException | None = None

    def run(self) -> None:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
        try:
            self.observer.nodes_read(list(self.nodes.objects.values()), time.monotonic())
            while not self._halt.is_set():
                started = time.monotonic()
                workloads = list(self.workloads.objects.values())
                nodes = list(self.nodes.objects.values())
                for v in self.observer.observe(workloads, nodes, started):
                    if str(v) not in self._seen:
                        self._seen.add(str(v))
                        self.violations.append(v)
                self.seconds.append(time.monotonic() - started)
                self._halt.wait(max(0.0, self.interval - (time.monotonic() - started)))
        except BaseException as exc:  # a bug of the checker: fail the run, loudly
            self.error = exc

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=120)
        if self.error is not None:
            raise SystemExit(f"the checker failed: {self.error!r}")


class Replica:
    """One ``orca run`` replica as its Pod (leader election on), its log read as it grows."""

    def __init__(
        self, name: str, workdir: Path, pod: tuple[tuple[str, ...], dict[str, str]]
    ) -> None:
        command, env = pod
        self.name = name
        self.log_path = workdir / f"{name}.log"
        self.operator = OperatorProcess(
            None,
            self.log_path,
            lease_namespace=LEASE_NAMESPACE,
            lease_name=LEASE_NAME,
            env=env,
            command=command,
        )
        self.process = self.operator.process
        self.started = time.perf_counter()
        self.listed_at: float | None = None
        self.cpu_at_listed = 0.0

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def elected(self) -> datetime | None:
        """When its log says it became leader (the first time), None if not yet."""
        found = BECAME_LEADER.search(self.log())
        return datetime.strptime(found.group(1), "%Y-%m-%d %H:%M:%S,%f") if found else None

    def poll_listed(self) -> None:
        if self.listed_at is None and LISTED in self.log():
            self.listed_at = time.perf_counter()
            self.cpu_at_listed = cpu_seconds(self.process.pid)

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def warm(self, namespace: str) -> tuple[float, float]:
        """(placements in its ledger, Workloads Scheduled in its records), from its gauges."""
        samples = self.operator.metrics()
        ledger = sum(v for k, v in samples.items() if k.startswith("orca_node_placements{"))
        scheduled = sum(
            v
            for k, v in samples.items()
            if k.startswith("orca_workloads{")
            and f'namespace="{namespace}"' in k
            and 'phase="Scheduled"' in k
        )
        return ledger, scheduled


@dataclass
class Kill:
    """One failover."""

    at_placed: int  # placements seen when the leader was killed
    gap: float | None  # kill -> the standby's first placement seen
    elected: float | None  # kill -> the standby's "became leader" (its log's clock)
    stragglers: int  # placements first seen within STRAGGLERS of the kill
    standby_rss_mb: float
    standby_peak_mb: float
    standby_cpu_s_per_s: float  # from its initial listing to the kill
    warm: tuple[float, float]  # the standby's ledger placements and Scheduled records
    truth: int  # placements the watch saw when the standby's gauges were read


@dataclass
class Run:
    workloads: int
    seconds: float
    kills: list[Kill] = field(default_factory=list)
    polls: int = 0
    check_seconds: list[float] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


async def revision(api: KubeApi, path: str) -> int:
    """etcd's revision now (a LIST's resourceVersion, read from etcd: one object's worth)."""
    listed = await api.request("GET", path, params={"limit": "1"})
    return int(listed["metadata"]["resourceVersion"])


async def leader_of(replicas: list[Replica], timeout: float) -> Replica:
    """The replica that logged "became leader" last (the one leading now)."""
    deadline = time.monotonic() + timeout
    while True:
        elected = [(r.elected(), r) for r in replicas if r.process.poll() is None]
        known = [(when, r) for when, r in elected if when is not None]
        if known:
            return max(known, key=lambda pair: pair[0])[1]
        if time.monotonic() > deadline:
            raise SystemExit(f"no replica became leader after {timeout:.0f}s")
        await asyncio.sleep(0.2)


async def failover(args: argparse.Namespace, plane: ControlPlane, workdir: Path) -> Run:
    kubectl = plane.kubectl
    kubectl("create", "namespace", NAMESPACE, check=True)
    kubectl("apply", "-k", str(REPO_ROOT / "crds"), check=True)
    kubectl("wait", "--for=condition=established", "crd/workloads.orca.cloudinit.dev")
    pod = as_deployed(plane, workdir)
    api = KubeApi(load_configuration(str(plane.kubeconfig_path)), max_connections=64)
    side = SIDES[ORCA]
    informers: list[asyncio.Task[None]] = []
    replicas: list[Replica] = []
    watch_api = KubeApi(load_configuration(str(plane.kubeconfig_path)), max_connections=8)
    try:
        started = time.perf_counter()
        await create_all(
            api, [("/api/v1/nodes", n) for n in node_objects(args.nodes, args.seed)], 32
        )
        await wait_not_ready_lifted(api, args.timeout)
        await wait_default_service_account(api, NAMESPACE, args.timeout)
        print(f"  {args.nodes} Nodes Ready in {time.perf_counter() - started:.0f}s", flush=True)
        path = side.collection(NAMESPACE)
        objects = [(path, side.make(f"o{i:05d}", NAMESPACE, None)) for i in range(args.workloads)]
        await create_all(api, objects, 32)
        print(f"  {args.workloads} Workloads stored", flush=True)

        workloads, nodes, placements = Cache(), Cache(), Placements()
        workloads.on_change.append(placements.seen)
        watched = [
            Informer(watch_api, path, "workloads", workloads),
            Informer(watch_api, NODES_PATH, "nodes", nodes),
        ]
        informers = [asyncio.create_task(i.run()) for i in watched]
        await asyncio.gather(*(i.synced.wait() for i in watched))
        checker = Checker(workloads, nodes, args.poll)
        checker.start()

        clock = time.perf_counter()
        replicas = [Replica(f"orca-{i}", workdir, pod) for i in range(2)]
        run = Run(args.workloads, 0.0)
        for share in args.kill_at:
            target = int(share * args.workloads)
            while len(placements.placed) < target:
                for r in replicas:
                    r.poll_listed()
                await asyncio.sleep(0.05)
            leader = await leader_of(replicas, args.timeout)
            standby = next(r for r in replicas if r is not leader)
            standby.poll_listed()
            if standby.listed_at is None:
                raise SystemExit(f"the standby {standby.name} had not listed at the kill")
            rss, peak = standby.rss_mb(), peak_rss_mb(standby.process.pid)
            waited = time.perf_counter() - standby.listed_at
            cpu = (cpu_seconds(standby.process.pid) - standby.cpu_at_listed) / waited
            at_placed = len(placements.first_seen)
            killed, killed_wall = time.perf_counter(), datetime.now()
            leader.operator.kill()
            at_kill = await revision(api, path)
            await asyncio.sleep(STRAGGLERS - (time.perf_counter() - killed))
            settled = await revision(api, path)
            await asyncio.sleep(6 - (time.perf_counter() - killed))  # gauges: every 5 s
            truth = len(placements.first_seen)
            warm = await asyncio.to_thread(standby.warm, NAMESPACE)
            while not placements.written_after(settled):
                if time.perf_counter() - killed > args.timeout:
                    raise SystemExit("the standby never placed")
                await asyncio.sleep(0.02)
            gap = placements.written_after(settled)[0] - killed
            stragglers = len(placements.written_after(at_kill)) - len(
                placements.written_after(settled)
            )
            elected_at = standby.elected()
            elected = (elected_at - killed_wall).total_seconds() if elected_at else None
            kill = Kill(
                at_placed, gap, elected, stragglers, rss, peak, cpu, warm, truth
            )  # fmt: skip
            run.kills.append(kill)
            report_kill(kill, standby.name)
            again = Replica(f"{leader.name}-again", workdir, pod)
            replicas[replicas.index(leader)] = again
            while again.listed_at is None:  # the next kill needs a warm standby
                again.poll_listed()
                await asyncio.sleep(0.05)
        while len(placements.placed) < args.workloads:
            if time.perf_counter() - clock > args.timeout:
                raise SystemExit(f"{len(placements.placed)}/{args.workloads} placed")
            await asyncio.sleep(0.1)
        run.seconds = time.perf_counter() - clock
        await asyncio.sleep(2 * args.poll + 1)  # the checker sees the end
        checker.stop()
        run.polls, run.check_seconds = checker.observer.polls, checker.seconds
        run.violations = checker.violations
        for r in replicas:
            await asyncio.to_thread(r.operator.stop)
        run.problems = await validate(api, side, args.workloads)
        return run
    finally:
        for r in replicas:
            if r.process.poll() is None:
                r.operator.kill()
        for task in informers:
            task.cancel()
        await asyncio.gather(*informers, return_exceptions=True)
        await watch_api.close()
        await api.close()


def report_kill(kill: Kill, standby: str) -> None:
    ledger, scheduled = kill.warm
    gap = f"{kill.gap:.2f}s" if kill.gap is not None else "never"
    elected = f"{kill.elected:.2f}s" if kill.elected is not None else "n/a"
    print(
        f"  kill at {kill.at_placed} placed: {standby} placed {gap} after the kill (target "
        f"{LEASE_DURATION + 2:g}s), became leader after {elected}; {kill.stragglers} placements "
        f"of the old leader landed after it; the standby waited with {kill.standby_rss_mb:.0f} MB "
        f"resident (peak {kill.standby_peak_mb:.0f}), {kill.standby_cpu_s_per_s * 100:.1f} % of "
        f"a core; warm: its ledger held {ledger:.0f} placements and its records {scheduled:.0f} "
        f"Scheduled, the API {kill.truth}",
        flush=True,
    )


def figures(run: Run) -> dict[str, Any]:
    gaps = [k.gap for k in run.kills if k.gap is not None]
    elected = [k.elected for k in run.kills if k.elected is not None]
    warm = all(k.warm == (k.truth, k.truth) for k in run.kills)
    return {
        "kills": len(run.kills),
        "kill to the standby's first placement, each_s": ", ".join(f"{g:.2f}" for g in gaps),
        "kill to the standby's first placement, worst_s": max(gaps) if gaps else None,
        "target: the Lease's duration + 2 s_s": LEASE_DURATION + 2,
        "kill to the standby's election, each_s": ", ".join(f"{e:.2f}" for e in elected),
        "old leader's placements landed after the kill": sum(k.stragglers for k in run.kills),
        "standby's RSS while it waited, highest_mb": max(k.standby_rss_mb for k in run.kills),
        "standby's CPU while it waited, highest_percent": max(
            k.standby_cpu_s_per_s for k in run.kills
        )
        * 100,
        "standby's ledger and records equal to the API's at every kill": warm,
        "backlog, two replicas and the kills_placed_per_s": run.workloads / run.seconds,
        "checker polls": run.polls,
        "checker's time per poll, median_s": statistics.median(run.check_seconds)
        if run.check_seconds
        else None,
        "violations at the polls": len(run.violations),
        "every placement valid at the end": not run.problems,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--workloads", type=int, default=10000)
    parser.add_argument(
        "--kill-at",
        type=lambda text: [float(x) for x in text.split(",")],
        default=[0.3, 0.7],
        help="shares of the backlog placed at which the leader is killed (comma-separated)",
    )
    parser.add_argument("--poll", type=float, default=1.0, help="seconds between checks")
    parser.add_argument(
        "--lease-seconds",
        type=int,
        default=NodeTiming.lease_seconds,
        help="kwok's Node Lease (NodeTiming.scaled; default: a real cluster's, %(default)s)",
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--timeout", type=float, default=900)
    args = parser.parse_args(argv)
    if sorted(args.kill_at) != args.kill_at or not all(0 < s < 1 for s in args.kill_at):
        parser.error("--kill-at: increasing shares between 0 and 1")
    room = capacity(node_objects(args.nodes, args.seed))
    if args.workloads > room:
        parser.error(f"--workloads {args.workloads}: the {args.nodes} Nodes hold {room}")
    print(
        f"nodes={args.nodes} workloads={args.workloads} kill-at={args.kill_at} "
        f"poll={args.poll:g}s lease={args.lease_seconds}s on {os.cpu_count()} cores "
        f"(load average {load_average():.2f})",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="orca-failover-") as tmp:
        workdir = Path(tmp)
        with ControlPlane(
            workdir / "cp",
            controller_manager_args=LARGE_CLUSTER_CONTROLLER_MANAGER_ARGS,
            node_timing=NodeTiming.scaled(args.lease_seconds),
        ) as plane:
            run = asyncio.run(failover(args, plane, workdir))
    print(
        f"backlog of {run.workloads} with {len(run.kills)} kills: {run.seconds:.1f}s "
        f"({run.workloads / run.seconds:.0f}/s); checker: {run.polls} polls, "
        f"{len(run.violations)} violations; placements "
        + ("valid" if not run.problems else f"INVALID: {run.problems[:5]}"),
        flush=True,
    )
    for v in run.violations[:20]:
        print(f"    {v}")
    print(f"(load average at the end {load_average():.2f})", flush=True)
    setting = f"{args.nodes} nodes, {args.workloads} workloads"
    if args.lease_seconds != NodeTiming.lease_seconds:
        setting += f", Node Leases of {args.lease_seconds} s"
    record("bench_failover", {setting: figures(run)}, command_line(argv), merge=True)
    return 1 if run.violations or run.problems else 0


if __name__ == "__main__":
    sys.exit(main())
