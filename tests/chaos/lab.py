"""The chaos suite's bench: one control plane, API clients, operators, and the ``Monitor``
that watches a scenario from its first change to its end.

The control plane is the real one (``controller.devcluster``), started with durable etcd (a
SIGKILLed etcd must come back with what it acknowledged) and an audit log of every write to
Workload status, Events and Leases (who wrote what, when: the ground truth of the split-brain
and API-outage scenarios).

The cluster is a living one: kwok plays the kubelets (a Lease per Node as its heartbeat, the
Ready condition) and kube-controller-manager's node lifecycle controller marks a silent Node
``Unknown`` and taints it. ``CHAOS_NODE_TIMING`` says why no scenario's fault turns into node
loss; ``node`` and ``Lab.create_nodes`` register Nodes as kubelets do and wait until they can
take replicas.

Every observation the ``Monitor`` makes (a LIST of the Workloads, then of the Nodes, every
half second, from a thread of its own) is checked for the safety invariants
(``invariants.Observer``), whatever the scenario is doing at the time; each violation is
recorded and fails the scenario, even if a later observation no longer shows it. It also
records a Node the cluster took away (``NodeLoss``): no scenario tests node loss, so one that
caused it by accident fails rather than pass while testing something else.
``Monitor.converge`` waits for an observation where the liveness invariants hold too.
"""

from __future__ import annotations

import json
import random
import statistics
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from controller.api.models import GROUP, PLURAL, VERSION
from controller.devcluster.controlplane import (
    LARGE_CLUSTER_CONTROLLER_MANAGER_ARGS,
    ControlPlane,
    NodeTiming,
)
from tests.chaos.invariants import Observer, Snapshot, Violation, check, liveness
from tests.support.harness import INSTALL, OperatorProcess

NAMESPACED_MODE_RBAC = """
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: orca-controller-namespaced-mode}
rules:
  - {apiGroups: [""], resources: [namespaces], verbs: [list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: orca-controller-namespaced-mode}
roleRef:
  {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: orca-controller-namespaced-mode}
subjects: [{kind: ServiceAccount, name: orca-controller, namespace: orca-system}]
"""

T = TypeVar("T")

#: kwok's Lease renewals (kube-node-lease) are left out of the audit log: no scenario reads them,
#: and at the burst's 5,000 Nodes they would be most of its lines (written synchronously, in
#: blocking mode) and of what ``scenarios._audit`` parses.
AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: None
    namespaces: [kube-node-lease]
    resources:
      - group: coordination.k8s.io
        resources: [leases]
  - level: Request
    verbs: [create, update, patch]
    resources:
      - group: orca.cloudinit.dev
        resources: [workloads/status]
  - level: Metadata
    verbs: [create, update, patch]
    resources:
      - group: ""
        resources: [events]
      - group: coordination.k8s.io
        resources: [leases]
  - level: None
"""


#: How the chaos cluster's Nodes heartbeat and when they count as lost, chosen for two needs.
#:
#: * Load. kwok renews every Node's Lease each quarter of ``lease_seconds`` (kwok v0.8.0,
#:   pkg/kwok/controllers/controller.go ``initNodeLeaseController``), each renewal an API
#:   write. At the default 40 s, the 5,000-Node burst of ``make chaos`` would be 500 writes/s
#:   (1,000 Nodes at 100/s measured ~0.6 of a core for the API server, etcd and kwok:
#:   docs/benchmarks.md, ``bench_living_cluster.py``); at 600 s (a renewal every 150 s) it
#:   is ~33/s, and the chaos test's ~20 Nodes cost nothing. The Nodes' status refresh (the
#:   heartbeat Stage) comes every 600-1210 s whatever the Lease.
#: * No node loss unless a scenario means it (none does). The node lifecycle controller marks a
#:   Node ``Unknown`` (and the operator, without ``tolerationSeconds`` yet, issue 21, moves its
#:   replicas at once) when it has seen no renewal for ``grace_period`` on its own clock
#:   (pkg/controller/nodelifecycle/node_lifecycle_controller.go ``tryUpdateNodeHealth``).
#:   During an API server outage no renewal lands, and kwok retries a failed one only a renew
#:   interval later (node_lease_controller.go ``syncWorker``); when the server is back the
#:   controller judges by the renewals it saw before. The longest silence a scenario makes is
#:   then two renew intervals plus its outage, plus the controller's watch back-off after a
#:   restart (the restarted server refuses it for a moment: up to ~30 s): 2 x 150 + 20 + 30 =
#:   350 s for the 15-20 s outage. A grace of 900 s (6 renewals, as a real cluster's 60 s for
#:   10 s renewals) leaves more than 500 s to a loaded machine. With the defaults the same sum,
#:   2 x 10 + 20 + 30 s, exceeds the 50 s grace: the outage scenario would become a node-loss
#:   scenario by chance. The same 900 s for a Node that never reported, so the burst's 5,000
#:   registering Nodes are not given up on while kwok works through them.
#: * ``monitor_period`` stays the default 5 s: a pass over the controller's informer cache,
#:   no API request while nothing changes.
#:
#: ``Monitor`` fails a scenario in which a Node was lost anyway (``NodeLoss``).
CHAOS_NODE_TIMING = NodeTiming(
    lease_seconds=600, monitor_period=5.0, grace_period=900.0, startup_grace_period=900.0
)


def chaos_control_plane(directory: Path) -> ControlPlane:
    """A control plane for fault injection: durable etcd, audited writes, ``CHAOS_NODE_TIMING``."""
    directory.mkdir(parents=True, exist_ok=True)
    policy = directory / "audit-policy.yaml"
    policy.write_text(AUDIT_POLICY)
    return ControlPlane(
        directory / "cp",
        durable_etcd=True,
        stop_timeout=10.0,
        apiserver_args=[
            f"--audit-policy-file={policy}",
            f"--audit-log-path={directory / 'audit.log'}",
            "--audit-log-mode=blocking",
        ],
        node_timing=CHAOS_NODE_TIMING,
        controller_manager_args=LARGE_CLUSTER_CONTROLLER_MANAGER_ARGS,  # the 5,000-Node burst
    )


@dataclass
class Row:
    """One scenario's figures.

    ``wanted`` is how many faults the caller asked for; ``proven`` counts those shown to have
    happened as intended, each by evidence the scenario does not make up itself (a log line
    or metric of the operator, the audit log, the state read from the API); ``trials`` counts
    every attempt, retried ones included. ``ok`` needs every wanted fault proven and no
    violation (a convergence that did not come in time is one: ``not-converged``)."""

    scenario: str
    wanted: int = 0
    trials: int = 0
    proven: int = 0
    polls: int = 0
    violations: list[Violation] = field(default_factory=list)
    converge: list[float] = field(default_factory=list)
    #: The slowest convergence and what it waited for last (its liveness violations).
    slowest: tuple[float, list[Violation]] | None = None
    figures: dict[str, int] = field(default_factory=dict)  # connections cut, restarts, ...
    notes: list[str] = field(default_factory=list)
    unproven: list[str] = field(default_factory=list)  # why a trial did not count

    def count(self, figure: str, by: int = 1) -> None:
        self.figures[figure] = self.figures.get(figure, 0) + by

    def violation(self, kind: str, subject: str, detail: str) -> None:
        self.violations.append(Violation(kind, subject, detail))

    @property
    def ok(self) -> bool:
        return not self.violations and self.proven >= self.wanted

    def problems(self) -> list[str]:
        """Why the row is not ``ok``, one line each."""
        out = [str(v) for v in self.violations[:20]]
        if self.proven < self.wanted:
            out.append(f"only {self.proven}/{self.wanted} faults proven: {self.unproven[-5:]}")
        return out + self.notes

    def line(self) -> str:
        times = sorted(self.converge)
        conv = f"median {statistics.median(times):.1f}s max {times[-1]:.1f}s" if times else "n/a"
        kinds: dict[str, int] = {}
        for v in self.violations:
            kinds[v.kind] = kinds.get(v.kind, 0) + 1
        detail = f" ({', '.join(f'{k}={n}' for k, n in sorted(kinds.items()))})" if kinds else ""
        figures = "".join(f" {k}={n}" for k, n in sorted(self.figures.items()))
        notes = f"; {'; '.join(self.notes)}" if self.notes else ""
        if self.slowest is not None and len(times) > 1:
            seconds, waited = self.slowest
            what = "; ".join(str(v) for v in waited[:3]) or "nothing (its first observation held)"
            notes += f"; the slowest ({seconds:.1f}s) waited last for: {what}"
        return (
            f"{self.scenario:<16} trials={self.trials:<3} proven={self.proven}/{self.wanted:<3} "
            f"polls={self.polls:<5} violations={len(self.violations)}{detail} "
            f"converge={conv}{figures}{notes}"
        )


def retry(action: Callable[[], T], timeout: float = 120.0) -> T:
    """Run an API call until it succeeds (the API server may be down for a while)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return action()
        except ApiException as exc:
            if exc.status in (404, 409, 422) or time.monotonic() > deadline:
                raise
        except Exception:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.2)


def retry_write(action: Callable[[], object], done: int, timeout: float = 120.0) -> None:
    """``retry`` for a create (``done=409``) or a delete (``done=404``): an attempt that got no
    answer, or a 5xx (the server was killed mid-request, etcd timed out), may have landed, so
    after one the answer "already exists" / "not found" means done. Without it a stream's
    thread died on its own create landing during a server kill."""
    deadline = time.monotonic() + timeout
    unanswered = False
    while True:
        try:
            action()
            return
        except ApiException as exc:
            if exc.status == done and unanswered:
                return
            if exc.status in (404, 409, 422) or time.monotonic() > deadline:
                raise
            unanswered = unanswered or exc.status == 0 or exc.status >= 500
        except Exception:
            if time.monotonic() > deadline:
                raise
            unanswered = True
        time.sleep(0.2)


#: The node lifecycle taints (k8s.io/api core/v1 well_known_taints.go): TaintNodesByCondition
#: admission puts ``not-ready`` on every new Node, the node lifecycle controller lifts it once
#: the Node is Ready and puts ``unreachable`` on one gone ``Unknown``.
NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"


def _ready(node: dict[str, Any]) -> str:
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return str(condition.get("status") or "")
    return ""


def _lifecycle_taints(node: dict[str, Any]) -> list[str]:
    return [
        f"{t.get('key')}:{t.get('effect')}"
        for t in (node.get("spec") or {}).get("taints") or []
        if t.get("key") in (NOT_READY, UNREACHABLE)
    ]


def schedulable(node: dict[str, Any]) -> bool:
    """Registered and up, as the cluster says: Ready ``True`` (kwok, the kubelet here) and no
    node lifecycle taint left (the controller lifted ``not-ready``)."""
    return _ready(node) == "True" and not _lifecycle_taints(node)


class NodeLoss:
    """Nodes the cluster took away: seen ``schedulable`` once, then not Ready or carrying a
    node lifecycle taint (the node lifecycle controller marked it, or kwok stopped reporting
    it). A Node still registering has not been seen schedulable yet: never counted; a deleted
    one is forgotten (a Node created again under its name starts over)."""

    def __init__(self) -> None:
        self._up: set[str] = set()  # uids seen schedulable
        self.lost: dict[str, str] = {}  # name -> what was seen, the first time

    def observe(self, nodes: Sequence[dict[str, Any]]) -> list[str]:
        """Names of the Nodes lost since the previous call."""
        fresh = []
        present = set()
        for node in nodes:
            meta = node["metadata"]
            uid, name = str(meta.get("uid") or name_of(node)), name_of(node)
            present.add(uid)
            if schedulable(node):
                self._up.add(uid)
            elif uid in self._up and name not in self.lost:
                ready = _ready(node) or "none"
                self.lost[name] = f"Ready {ready}, taints {_lifecycle_taints(node)}"
                fresh.append(name)
        self._up &= present
        return fresh


def name_of(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["name"])


class NodesNotSchedulable(AssertionError):
    """Nodes a scenario relies on were not made schedulable in time (kwok did not report them
    Ready, or the node lifecycle controller did not lift ``not-ready``)."""


class Monitor:
    """Observes one namespace from a thread of its own, every ``interval`` seconds, until
    stopped: the Workloads (one LIST: one consistent moment), then the Nodes. Each observation
    goes through ``invariants.Observer`` (safety, nothing lost since the previous one); each
    distinct violation is kept in ``violations``. A read that fails (the API server is down)
    is counted in ``failed`` and the next one is tried; the next observation is compared with
    the last one made, however long ago. Nodes the cluster takes away (``NodeLoss``) are
    recorded in ``nodes_lost``.

    Its own API client, with short timeouts: it must never wait out a scenario's outage."""

    def __init__(self, lab: Lab, namespace: str, interval: float = 0.5) -> None:
        self.lab, self.namespace, self.interval = lab, namespace, interval
        new_client: Any = k8s_config.new_client_from_config
        self._client: Any = new_client(config_file=str(lab.plane.kubeconfig_path))
        self._core: Any = k8s.CoreV1Api(self._client)
        self._custom: Any = k8s.CustomObjectsApi(self._client)
        self.observer = Observer()
        self.node_loss = NodeLoss()
        self.violations: list[Violation] = []
        self._seen: set[str] = set()
        self.failed = 0
        self._latest: tuple[float, list[dict[str, Any]], list[dict[str, Any]]] | None = None
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"monitor-{namespace}", daemon=True)
        self._error: BaseException | None = None

    @property
    def polls(self) -> int:
        return self.observer.polls

    @property
    def nodes_lost(self) -> dict[str, str]:
        """Node name -> how it looked when first seen lost."""
        return self.node_loss.lost

    def start(self) -> Monitor:
        nodes = self._nodes_until_read()
        self.node_loss.observe(nodes)
        self.observer.nodes_read(nodes, time.monotonic())
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)
        self._client.close()
        if self._error is not None:
            raise AssertionError(f"the monitor of {self.namespace} failed") from self._error

    def _nodes(self) -> list[dict[str, Any]]:
        raw = self._core.list_node(_preload_content=False, _request_timeout=(3, 30))
        items: list[dict[str, Any]] = json.loads(raw.data)["items"]
        return items

    def _nodes_until_read(self) -> list[dict[str, Any]]:
        return retry(self._nodes)

    def _workloads(self) -> list[dict[str, Any]]:
        raw = self._custom.list_namespaced_custom_object(
            GROUP, VERSION, self.namespace, PLURAL, _preload_content=False, _request_timeout=(3, 30)
        )
        items: list[dict[str, Any]] = json.loads(raw.data)["items"]
        return items

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                started = time.monotonic()
                try:
                    workloads = self._workloads()
                    nodes = self._nodes()
                except Exception:  # the API server is down or restarting: try again
                    self.failed += 1
                else:
                    violations = self.observer.observe(workloads, nodes, started)
                    self.node_loss.observe(nodes)
                    self._record(violations, workloads, nodes)
                    with self._changed:
                        self._latest = (started, workloads, nodes)
                        self._changed.notify_all()
                self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))
        except BaseException as exc:  # a bug of the checker: fail the scenario, loudly
            self._error = exc
            with self._changed:
                self._changed.notify_all()

    def _record(
        self,
        violations: list[Violation],
        workloads: list[dict[str, Any]],
        nodes: list[dict[str, Any]],
    ) -> None:
        fresh = [v for v in violations if str(v) not in self._seen]
        for v in fresh:
            self._seen.add(str(v))
            self.violations.append(v)
        if fresh:  # everything needed to understand them, beside the operators' logs
            path = self.lab.workdir / f"violation-{self.namespace}-{self.polls}.json"
            before = self._latest or (0.0, [], [])
            state = {
                "violations": [str(v) for v in fresh],
                "at": time.time(),
                "workloads": workloads,
                "nodes": nodes,
                "previous": {"workloads": before[1], "nodes": before[2]},
            }
            path.write_text(json.dumps(state, indent=1, default=str))

    def latest(
        self, after: float, timeout: float
    ) -> tuple[float, list[dict[str, Any]], list[dict[str, Any]]] | None:
        """The first observation whose reads started after ``after`` (monotonic), waiting up
        to ``timeout`` seconds for it: (when its reads started, Workloads, Nodes); None if
        none came."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while self._latest is None or self._latest[0] <= after:
                if self._error is not None:
                    raise AssertionError(f"the monitor of {self.namespace} failed") from self._error
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._changed.wait(left)
            return self._latest

    def converge(
        self, since: float | None = None, timeout: float = 120.0, known: set[str] | None = None
    ) -> tuple[float | None, list[Violation]]:
        """Wait for an observation made after ``since`` (monotonic; default now) where every
        liveness invariant holds (but those in ``known``: already reported); return the seconds
        from ``since`` to it (None: not within ``timeout``) and the violations still open: of
        the last observation looked at when it timed out, else of the one before the success
        (what the convergence waited for last; empty when the first observation held)."""
        since = time.monotonic() if since is None else since
        deadline = time.monotonic() + timeout
        after, left = since, list[Violation]()
        while True:
            observed = self.latest(after, max(0.0, deadline - time.monotonic()))
            if observed is None:
                return None, left
            after, workloads, nodes = observed
            now = [v for v in liveness(nodes, workloads) if str(v) not in (known or set())]
            if not now:
                return time.monotonic() - since, left
            left = now


class Lab:
    """Clients and operators against one control plane; ``namespace`` scopes a scenario."""

    def __init__(self, plane: ControlPlane, workdir: Path, seed: int = 1) -> None:
        self.plane = plane
        self.workdir = workdir
        self.rng = random.Random(seed)
        new_client: Any = k8s_config.new_client_from_config  # not annotated upstream
        self.client: Any = new_client(config_file=str(plane.kubeconfig_path))
        # Typed loosely: raw dicts in and out (``_preload_content=False`` for lists).
        self.core: Any = k8s.CoreV1Api(self.client)
        self.custom: Any = k8s.CustomObjectsApi(self.client)
        self.operators: list[OperatorProcess] = []
        plane.kubectl("apply", "-k", str(INSTALL), check=True)  # CRD, RBAC, Deployment...
        # The operators here run with -n, which also needs namespaces (docs/security.md, RBAC):
        # granted to the shipped ServiceAccount beside the shipped ClusterRole, for the token
        # scenario.
        plane.kubectl("apply", "-f", "-", input=NAMESPACED_MODE_RBAC, check=True)
        plane.kubectl(
            "wait", "--for=condition=established", "crd/workloads.orca.cloudinit.dev", check=True
        )

    # -- reading ---------------------------------------------------------------------------

    def nodes(self) -> list[dict[str, Any]]:
        raw = retry(lambda: self.core.list_node(_preload_content=False))
        items: list[dict[str, Any]] = json.loads(raw.data)["items"]
        return items

    def workloads(self, namespace: str) -> list[dict[str, Any]]:
        listed = retry(
            lambda: self.custom.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
        )
        items: list[dict[str, Any]] = listed["items"]
        return items

    def check(self, namespace: str, before: Snapshot | None = None) -> list[Violation]:
        return check(self.nodes(), self.workloads(namespace), before)

    def snapshot(self, namespace: str) -> Snapshot:
        return Snapshot.take(self.workloads(namespace))

    # -- writing -------------------------------------------------------------------------------

    def namespace(self, prefix: str) -> str:
        name = f"{prefix}-{self.rng.randrange(16**6):06x}"
        retry_write(lambda: self.core.create_namespace({"metadata": {"name": name}}), 409)
        return name

    def create_nodes(self, objects: Sequence[dict[str, Any]], wait: bool = True) -> float:
        """Create Nodes (``node`` registers them as a kubelet does) and, with ``wait``, wait
        until the cluster makes each ``schedulable``: what a scenario needs before it relies on
        them taking replicas. The seconds that took (0 without ``wait``)."""
        started = time.monotonic()
        for obj in objects:
            retry_write(lambda obj=obj: self.core.create_node(obj), 409)  # type: ignore[misc]
        if not wait:
            return 0.0
        self.wait_schedulable([name_of(obj) for obj in objects])
        return time.monotonic() - started

    def wait_schedulable(self, names: Sequence[str], timeout: float | None = None) -> None:
        """Wait until every Node of ``names`` is ``schedulable``; ``NodesNotSchedulable`` names
        those that are not after ``timeout``. The default: 3 minutes (after an API server
        restart the node lifecycle controller's watches may first back off for up to 30 s),
        plus twice what the controller needs to lift ``not-ready`` from each Node at its
        default ``--kube-api-qps`` of 20: a GET and a PATCH per Node (``RemoveTaintOffNode``,
        pkg/controller/controller_utils.go), 10 Nodes/s (1,000 Nodes took 116 s, creation
        included, on the loaded 2-core VM). Many Nodes are LISTed every 5 s, not faster: the
        LIST costs the API server."""
        wanted = set(names)
        timeout = 180.0 + len(wanted) / 5 if timeout is None else timeout
        interval = 0.2 if len(wanted) <= 50 else 5.0
        deadline = time.monotonic() + timeout
        while True:
            nodes = {name_of(n): n for n in self.nodes() if name_of(n) in wanted}
            waiting = sorted(n for n in wanted if n not in nodes or not schedulable(nodes[n]))
            if not waiting:
                return
            if time.monotonic() > deadline:
                detail = [
                    f"{n}: Ready {_ready(nodes[n]) or 'none'}, taints {_lifecycle_taints(nodes[n])}"
                    if n in nodes
                    else f"{n}: not found"
                    for n in waiting[:5]
                ]
                raise NodesNotSchedulable(
                    f"{len(waiting)} of {len(wanted)} Nodes not schedulable after {timeout:.0f}s "
                    f"(kwok reports Ready, kube-controller-manager lifts {NOT_READY}): {detail}"
                )
            time.sleep(interval)

    def delete_nodes(self, prefix: str) -> None:
        for node in self.nodes():
            name = node["metadata"]["name"]
            if name.startswith(prefix):
                try:
                    retry_write(lambda name=name: self.core.delete_node(name), 404)  # type: ignore[misc]
                except ApiException as exc:
                    if exc.status != 404:
                        raise

    def create_workload(self, namespace: str, name: str, spec: dict[str, Any]) -> None:
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "Workload",
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec,
        }
        retry_write(
            lambda: self.custom.create_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, body
            ),
            409,
        )

    def patch_workload(self, namespace: str, name: str, spec: dict[str, Any]) -> None:
        retry(
            lambda: self.custom.patch_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name, {"spec": spec}
            )
        )

    def delete_workload(self, namespace: str, name: str) -> None:
        retry_write(
            lambda: self.custom.delete_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name
            ),
            404,
        )

    def delete_workloads(self, namespace: str) -> None:
        for w in self.workloads(namespace):
            try:
                self.delete_workload(namespace, w["metadata"]["name"])
            except ApiException as exc:
                if exc.status != 404:
                    raise

    @contextmanager
    def monitor(self, namespace: str, row: Row, interval: float = 0.5) -> Iterator[Monitor]:
        """A ``Monitor`` of ``namespace`` for the ``with`` block; its polls and safety
        violations go to ``row`` at the end, and a Node the cluster took away meanwhile is a
        violation too (``node-lost``): no scenario is about node loss, and the operator moves
        every replica of a lost Node at once (issue 21 will make it wait), so a scenario that
        lost one by accident would test something else than it says."""
        monitor = Monitor(self, namespace, interval).start()
        try:
            yield monitor
        finally:
            monitor.stop()
            row.polls += monitor.polls
            if monitor.failed:
                row.count("polls failed (API down)", monitor.failed)
            row.violations.extend(monitor.violations)
            for what, n in sorted(monitor.observer.exercised.items()):
                row.count(f"checked: {what}", n)
            for name, seen in sorted(monitor.nodes_lost.items()):
                row.violation("node-lost", name, f"{seen} (see lab.CHAOS_NODE_TIMING)")

    # -- operators -----------------------------------------------------------------------------

    def operator(self, namespace: str, *extra: str, **kwargs: Any) -> OperatorProcess:
        """``orca run`` scoped to ``namespace`` (Lease in it), live and listed."""
        kubeconfig = kwargs.pop("kubeconfig", self.plane.kubeconfig_path)
        op = OperatorProcess(
            kubeconfig,
            self.workdir / f"operator-{namespace}-{len(self.operators)}.log",
            namespaces=[namespace],
            lease_namespace=kwargs.pop("lease_namespace", namespace),
            lease_name=kwargs.pop("lease_name", "orca-chaos"),
            extra=extra,
            **kwargs,
        )
        self.operators.append(op)
        op.wait_live(timeout=120)
        return op

    def close(self) -> None:
        for op in self.operators:
            if op.process.poll() is None:
                op.thaw()
                op.stop()
        self.client.close()

    @contextmanager
    def scoped(self, prefix: str) -> Iterator[str]:
        """A fresh namespace; its Workloads and the scenario's Nodes are deleted after."""
        namespace = self.namespace(prefix)
        try:
            yield namespace
        finally:
            for op in self.operators:
                if op.process.poll() is None:
                    op.thaw()
                    op.stop()
            self.delete_workloads(namespace)
            self.delete_nodes(f"{prefix}-")


def node(
    name: str,
    cpu: str = "4",
    memory: str = "8Gi",
    tags: Sequence[str] = (),
    others: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A Node as a kubelet registers it (``registering``); kwok then reports it Ready.
    ``others``: more of its allocatable (``pods``, ``nvidia.com/gpu``...), as a kubelet and
    its device plugins advertise them."""
    labels = {"runtime.orca.cloudinit.dev/docker": "true"}
    labels.update({f"tag.orca.cloudinit.dev/{t}": "" for t in tags})
    if "wasm" in tags:
        labels["runtime.orca.cloudinit.dev/wasmtime"] = "true"
    return registering(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": {"cpu": cpu, "memory": memory, **(others or {})}},
        }
    )


def registering(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as a kubelet registers its Node: capacity and allocatable, no conditions (it
    reports Ready later, with heartbeats). kwok's node-initialize Stage sets up only a Node
    that is not Ready (hack/testcp/build.sh's Stages: conditions, addresses, ``phase:
    Running``, which its heartbeat Stage needs), and capacity it does not find it sets to
    1,000 CPUs. Admission taints the new Node ``not-ready``; ``Lab.create_nodes`` waits until
    it is lifted."""
    obj = json.loads(json.dumps(obj))
    status = obj.setdefault("status", {})
    status.pop("conditions", None)
    status.setdefault("capacity", dict(status.get("allocatable") or {}))
    return obj
