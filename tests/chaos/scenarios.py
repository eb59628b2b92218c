"""The chaos scenarios (issue 7): each injects one kind of fault into a live cluster with the
operator running, waits for convergence and checks the invariants (``invariants.check``).

Each returns a ``Row`` of figures. Sizes and trial counts are arguments: ``make chaos``
(``bench/chaos.py``) runs them at full size, ``tests/chaos/test_chaos.py`` runs each small in
``make test``. Nothing here sleeps before asserting: faults happen at random moments, outcomes
are polled for.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import ssl
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from controller.api.models import GROUP, PLURAL, VERSION
from tests.chaos.invariants import Snapshot, Violation
from tests.chaos.lab import Lab, Row, node, retry
from tests.integration.harness import OperatorProcess

NO_LEASE = "--no-leader-elect"
RELISTED = "relisting"


# -- a stream of user changes ---------------------------------------------------------------


class Stream:
    """Random creates, scale changes, resizes, deletes, cordons and node replacements, the way
    users and node churn produce them, bounded to ``max_workloads`` live Workloads."""

    def __init__(
        self,
        lab: Lab,
        namespace: str,
        node_prefix: str,
        rng: random.Random,
        resizes: bool = True,
        node_changes: bool = True,
        max_workloads: int = 40,
    ) -> None:
        self.lab, self.namespace, self.prefix, self.rng = lab, namespace, node_prefix, rng
        self.resizes, self.node_changes = resizes, node_changes
        self.max_workloads = max_workloads
        self.kinds: dict[str, str] = {}  # live Workloads we created: name -> kind
        self.resized: set[str] = set()  # namespace/name of every Workload ever resized
        self.node_names: list[str] = []
        self.cordoned: set[str] = set()
        self.serial = 0
        self.done = 0
        self.history: list[str] = []  # every change made, in order (dumped on a violation)

    def add_nodes(self, count: int) -> None:
        objs = [self._node() for _ in range(count)]
        self.lab.create_nodes(objs)

    def _node(self) -> dict[str, Any]:
        name = f"{self.prefix}-{self.serial:04d}"
        self.serial += 1
        self.node_names.append(name)
        tags = [t for t in ("ssd", "wasm") if self.rng.random() < 0.5]
        return node(name, cpu=self.rng.choice(["2", "4"]), tags=tags)

    def spec(self, kind: str | None = None) -> dict[str, Any]:
        kind = kind or self.rng.choices(["Job", "Service", "DaemonSet"], [5, 4, 1])[0]
        spec: dict[str, Any] = {"kind": kind}
        spec["resources"] = {
            "cpu": self.rng.choice(
                ["100m", "250m"] if kind == "DaemonSet" else ["250m", "500m", "1"]
            ),
            "memory": self.rng.choice(["256Mi", "1Gi"]),
        }
        if kind == "Service":
            spec["count"] = self.rng.randint(1, 4)
        if self.rng.random() < 0.3:
            spec["constraints"] = ['"ssd" in node.tags']
        if self.rng.random() < 0.15:
            spec["runtime"] = {"oneOf": ["wasm"]}
        return spec

    def create(self) -> None:
        name = f"w{self.serial:05d}"
        self.serial += 1
        spec = self.spec()
        self.lab.create_workload(self.namespace, name, spec)
        self.kinds[name] = spec["kind"]
        self.history.append(f"create {name} {json.dumps(spec)}")

    def populate(self, count: int) -> None:
        for _ in range(count):
            self.create()

    def step(self) -> None:
        """One random change (API errors from a restarting server are retried)."""
        names = sorted(self.kinds)
        services = [n for n in names if self.kinds[n] == "Service"]
        choices: list[tuple[float, Callable[[], None]]] = [
            (4.0 if len(names) < self.max_workloads else 0.5, self.create),
            (2.0 if services else 0.0, lambda: self._scale(services)),
            (1.0 if self.resizes and names else 0.0, lambda: self._resize(names)),
            (2.0 if len(names) > 5 else 0.0, lambda: self._delete(names)),
            (1.0 if self.node_changes else 0.0, self._cordon),
            (0.5 if self.node_changes else 0.0, self._replace_node),
        ]
        weights = [w for w, _ in choices]
        action = self.rng.choices([a for _, a in choices], weights)[0]
        action()
        self.done += 1

    def burst(self, count: int) -> None:
        for _ in range(count):
            self.step()

    def _scale(self, services: list[str]) -> None:
        name = self.rng.choice(services)
        count = self.rng.randint(1, 5)
        self.lab.patch_workload(self.namespace, name, {"count": count})
        self.history.append(f"scale {name} {count}")

    def _resize(self, names: list[str]) -> None:
        name = self.rng.choice(names)
        cpu = self.rng.choice(["250m", "500m", "1", "1500m"])
        self.lab.patch_workload(self.namespace, name, {"resources": {"cpu": cpu}})
        self.resized.add(f"{self.namespace}/{name}")
        self.history.append(f"resize {name} cpu={cpu}")

    def _delete(self, names: list[str]) -> None:
        name = self.rng.choice(names)
        self.lab.delete_workload(self.namespace, name)
        del self.kinds[name]
        self.history.append(f"delete {name}")

    def _cordon(self) -> None:
        name = self.rng.choice(self.node_names)
        cordon = name not in self.cordoned
        retry(lambda: self.lab.core.patch_node(name, {"spec": {"unschedulable": cordon}}))
        (self.cordoned.add if cordon else self.cordoned.discard)(name)
        self.history.append(f"{'cordon' if cordon else 'uncordon'} {name}")

    def _replace_node(self) -> None:
        """A node leaves (deleted with its placements) and a new one joins."""
        name = self.rng.choice(self.node_names)
        retry(lambda: self.lab.core.delete_node(name))
        self.node_names.remove(name)
        self.cordoned.discard(name)
        self.lab.create_nodes([self._node()])
        self.history.append(f"replace node {name} by {self.node_names[-1]}")

    def in_background(self, count: int) -> threading.Thread:
        thread = threading.Thread(target=self.burst, args=(count,), daemon=True)
        thread.start()
        return thread


def _record(row: Row, seen: set[str], violations: list[Violation]) -> None:
    """Count each distinct violation once (one that persists across trials is one)."""
    for v in violations:
        if str(v) not in seen:
            seen.add(str(v))
            row.violations.append(v)


def _converged(row: Row, seconds: float | None, violations: list[Violation]) -> None:
    if seconds is None:
        row.notes.append("did not converge: " + "; ".join(str(v) for v in violations[:3]))
    else:
        row.converge.append(seconds)


# -- 1. kill -9 of the operator --------------------------------------------------------------


def _dump(
    lab: Lab,
    namespace: str,
    name: str,
    violations: list[Violation],
    before: Snapshot,
    history: list[str],
) -> None:
    """Everything needed to understand a violation, beside the operator logs."""
    path = lab.workdir / f"violation-{name}.json"
    state = {
        "violations": [str(v) for v in violations],
        "history": history[-60:],
        "before": [vars(p) for p in before.placed],
        "workloads": lab.workloads(namespace),
        "nodes": lab.nodes(),
    }
    path.write_text(json.dumps(state, indent=1, default=str))


def _undecided(workloads: list[dict[str, Any]]) -> int:
    return sum(
        1
        for w in workloads
        if (w.get("status") or {}).get("observedGeneration") != w["metadata"].get("generation")
    )


def operator_kills(
    lab: Lab, trials: int, nodes: int = 12, ops: int = 8, resizes: bool = True, seed: int = 1
) -> Row:
    """SIGKILL the operator at a random moment of a burst of changes, restart it, converge.

    The operator is frozen (SIGSTOP) just before the change the kill follows, wherever it is
    (mid-write included), so that change is still undecided when it dies: running, it decided
    each change within the milliseconds between the change and the kill, often all four times
    (CI saw "kills with decisions still pending: 0/4")."""
    row = Row("operator-kill")
    rng = random.Random(seed)
    seen: set[str] = set()
    pending_at_kill = 0
    with lab.scoped("kill") as ns:
        stream = Stream(lab, ns, "kill", rng, resizes=resizes)
        stream.add_nodes(nodes)
        stream.populate(15)
        op = lab.operator(ns, NO_LEASE)
        for _ in range(trials):
            kill_at = rng.randrange(ops)  # the random moment: right after this change
            for i in range(ops):
                if i == kill_at:
                    op.process.send_signal(signal.SIGSTOP)
                stream.step()
                if i == kill_at:
                    op.kill()
                    row.faults += 1
                    stream.history.append("kill -9 operator")
                    # Provably mid-flight: changes made before the kill, still undecided.
                    pending_at_kill += _undecided(lab.workloads(ns)) > 0
            before = lab.snapshot(ns)
            restarted = time.monotonic()
            op = lab.operator(ns, NO_LEASE)
            seconds, violations = lab.converge(ns, before, known=seen)
            if seconds is not None:  # from the restart, start-up included
                seconds = time.monotonic() - restarted
            stream.history.append("operator restarted")
            _converged(row, seconds, violations)
            fresh = [v for v in violations if str(v) not in seen]
            _record(row, seen, violations)
            if fresh:
                _dump(lab, ns, f"operator-kill-{row.trials}", fresh, before, stream.history)
            row.trials += 1
        op.stop()
    row.notes.append(f"kills with decisions still pending: {pending_at_kill}/{trials}")
    row.notes.append(f"{stream.done} changes ({len(stream.resized)} Workloads resized)")
    return row


# -- 2. kill -9 of kube-apiserver and of etcd ------------------------------------------------


def server_kills(lab: Lab, trials: int, nodes: int = 8, ops: int = 6, seed: int = 2) -> Row:
    """SIGKILL kube-apiserver, then etcd, at random moments under changes; restart each on its
    port after a random outage; the operator (leader-elected) must ride through, same pid."""
    row = Row("apiserver/etcd-kill")
    rng = random.Random(seed)
    seen: set[str] = set()
    with lab.scoped("srv") as ns:
        stream = Stream(lab, ns, "srv", rng, resizes=False, node_changes=False)
        stream.add_nodes(nodes)
        stream.populate(10)
        op = lab.operator(ns)
        seconds, violations = lab.converge(ns)
        for _ in range(trials):
            for server in ("kube-apiserver", "etcd"):
                before = lab.snapshot(ns)
                burst = stream.in_background(ops)
                time.sleep(rng.uniform(0.0, 1.0))
                lab.plane.kill_server(server)
                row.faults += 1
                time.sleep(rng.uniform(1.0, 4.0))  # the outage
                lab.plane.restart_server(server)
                burst.join()
                seconds, violations = lab.converge(ns, before, known=seen)
                _converged(row, seconds, violations)
                _record(row, seen, violations)
            row.trials += 1
        if op.process.poll() is not None:
            row.violations.append(Violation("operator-exited", ns, op.log()[-300:]))
        restarts = 0 if op.process.poll() is None else 1
        row.notes.append(f"operator restarts: {restarts} (same pid {op.process.pid})")
        op.stop()
    return row


# -- 3. a watch that expires (410 Gone) ---------------------------------------------------------


def _count_in_log(op: OperatorProcess, text: str) -> int:
    return op.log_path.read_text(errors="replace").count(text)


def watch_expiry(lab: Lab, trials: int, nodes: int = 4, seed: int = 3) -> Row:
    """Freeze the operator and cut its watches (kube-apiserver restarted), change the cluster
    (deletes included, which a re-LIST cannot replay), compact etcd and restart kube-apiserver
    again so the watches resume from a resourceVersion neither etcd nor the watch cache holds
    (410 Gone); thaw: it must relist and lose nothing.

    Capacity is exact: every slot is taken, the deletes free exactly what the new Workloads
    need, so a deleted Workload the operator still believes in strands one of them."""
    row = Row("watch-expiry")
    rng = random.Random(seed)
    seen: set[str] = set()
    expiries = 0
    job = {"kind": "Job", "resources": {"cpu": "1"}}
    with lab.scoped("watch") as ns:
        serial = 0
        lab.create_nodes([node(f"watch-{i}", cpu="2") for i in range(nodes)])
        live = [f"fill-{i}" for i in range(2 * nodes)]  # every slot taken
        for name in live:
            lab.create_workload(ns, name, job)
        op = lab.operator(ns)
        lab.converge(ns)
        for trial in range(trials):
            before = lab.snapshot(ns)
            relists = _count_in_log(op, RELISTED)
            op.freeze()
            # Its watch connections drop now, before the changes: none of their events can
            # wait in its socket buffers for the thaw.
            lab.plane.kill_server("kube-apiserver")
            lab.plane.restart_server("kube-apiserver")
            # While it sleeps: two Workloads deleted (only a LIST shows it after 410), a
            # busy node replaced by an empty one, two new Workloads for the freed room.
            for name in rng.sample(live, 2):
                lab.delete_workload(ns, name)
                live.remove(name)
            busy = sorted({p.node for p in before.placed})
            gone = rng.choice(busy)
            retry(lambda gone=gone: lab.core.delete_node(gone))  # type: ignore[misc]
            lab.create_nodes([node(f"watch-{nodes + trial}", cpu="2")])
            for _ in range(2):
                live.append(f"late-{serial}")
                lab.create_workload(ns, live[-1], job)
                serial += 1
            lab.plane.compact_etcd()  # the operator's resourceVersions are history in etcd ...
            lab.plane.kill_server("kube-apiserver")  # ... and in a fresh watch cache
            lab.plane.restart_server("kube-apiserver")
            op.thaw()
            row.faults += 1
            thawed = time.monotonic()
            seconds, violations = lab.converge(ns, before, timeout=90, known=seen)
            if seconds is not None:
                seconds = time.monotonic() - thawed
            _converged(row, seconds, violations)
            _record(row, seen, violations)
            expiries += _count_in_log(op, RELISTED) > relists
            row.trials += 1
        op.stop()
    row.notes.append(f"trials where the operator relisted after the expiry: {expiries}/{trials}")
    return row


# -- 4. split brain ---------------------------------------------------------------------------


def _audit_writes(path: Path, user: str, after: float) -> list[str]:
    """Status writes and Event creates by ``user`` the API server received after ``after``."""
    found = []
    for line in path.read_text().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if (entry.get("user") or {}).get("username") != user:
            continue
        received = datetime.fromisoformat(entry["requestReceivedTimestamp"].replace("Z", "+00:00"))
        if received.timestamp() > after and entry.get("verb") in ("create", "patch", "update"):
            ref = entry.get("objectRef") or {}
            found.append(f"{entry['verb']} {ref.get('resource')}/{ref.get('name')}")
    return found


def _leader_of(ops: list[OperatorProcess], timeout: float = 120.0) -> OperatorProcess:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for op in ops:
            try:
                if op.metrics().get("orca_leader") == 1.0:
                    return op
            except OSError:
                pass
        time.sleep(0.2)
    raise AssertionError("no replica became leader")


def _create_jobs(lab: Lab, namespace: str, names: list[str]) -> None:
    for name in names:
        lab.create_workload(namespace, name, {"kind": "Job", "resources": {"cpu": "1"}})


def split_brain(lab: Lab, trials: int, seed: int = 4) -> Row:
    """Two replicas; freeze the leader mid-burst past its Lease; the standby takes over and
    fills the last free capacity; thaw the old leader: the API server's audit log must show
    no write from it after the thaw, and no node is over capacity."""
    row = Row("split-brain")
    rng = random.Random(seed)
    seen: set[str] = set()
    audit = lab.workdir / "audit.log"
    users = {}
    with lab.scoped("split") as ns:
        lab.create_nodes([node(f"split-{i}", cpu="4") for i in range(2)])  # 8 x 1 cpu
        replicas = []
        for user in ("orca-a", "orca-b"):
            kubeconfig = lab.plane.mint_kubeconfig(user, ["system:masters"])
            replicas.append(lab.operator(ns, kubeconfig=kubeconfig))
            users[replicas[-1].process.pid] = user
        serial = 0
        fenced_total = 0
        for _ in range(trials):
            old = _leader_of(replicas)
            new = next(op for op in replicas if op is not old)
            written = old.written()
            names = []
            for _ in range(6):  # more than fits once the others are placed
                names.append(f"j{serial}")
                serial += 1
            burst = threading.Thread(target=_create_jobs, args=(lab, ns, names))
            burst.start()
            deadline = time.monotonic() + 60
            while old.written() <= written and time.monotonic() < deadline:
                time.sleep(0.02)  # freeze once it has started writing this burst
            old.freeze()
            frozen = time.monotonic()
            burst.join()
            row.faults += 1
            placed = [
                w["metadata"]["name"]
                for w in lab.workloads(ns)
                if (w.get("status") or {}).get("placements")
            ]
            if placed:  # free one slot: the last free capacity goes to the new leader
                lab.delete_workload(ns, rng.choice(placed))
            _leader_of([new])
            seconds, violations = lab.converge(ns, known=seen)
            if seconds is not None:  # from the freeze: the Lease takeover included
                seconds = time.monotonic() - frozen
            thawed_at = time.time()
            old.thaw()
            # The old leader wakes with its queue and buffered watch events: wait until it
            # has stepped down and drained its queue, then read the audit log.
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                m = old.metrics()
                if m.get("orca_leader") == 0.0 and m.get("orca_queue_depth", 0.0) == 0.0:
                    break
                time.sleep(0.2)
            fenced_total += int(
                old.metrics().get('orca_status_writes_total{outcome="fenced"}', 0.0)
            )
            late = _audit_writes(audit, users[old.process.pid], thawed_at)
            for write in late:
                row.violations.append(Violation("write-after-thaw", users[old.process.pid], write))
            _converged(row, seconds, violations)
            _record(row, seen, lab.check(ns))
            row.trials += 1
        for op in replicas:
            op.stop()
    row.notes.append(f"queued writes refused by the fence after thaw: {fenced_total}")
    return row


# -- 5. a burst ---------------------------------------------------------------------------------


def burst(lab: Lab, workloads: int, nodes: int, seed: int = 7) -> Row:
    """``workloads`` Workloads created at once (32 concurrent POSTs) onto ``nodes`` Nodes: all
    decided, invariants hold; the operator's peak RSS."""
    from bench.bench_operator import create_all, node_objects, rss_peak_mb, workload_objects
    from controller.operator.kube import KubeApi, load_configuration

    row = Row("burst")
    rng = random.Random(seed)
    with lab.scoped("burst") as ns:
        objects = node_objects(nodes, rng)
        for obj in objects:
            obj["metadata"]["name"] = f"burst-{obj['metadata']['name']}"

        def api() -> KubeApi:
            return KubeApi(load_configuration(str(lab.plane.kubeconfig_path)), max_connections=32)

        asyncio.run(create_all(api(), "/api/v1/nodes", objects, 32))
        op = lab.operator(ns)
        path = f"/apis/{GROUP}/{VERSION}/namespaces/{ns}/{PLURAL}"
        started = time.monotonic()
        asyncio.run(create_all(api(), path, workload_objects(workloads, ns, rng), 32))
        row.faults = 1
        seconds, violations = lab.converge(ns, timeout=1800, interval=5.0)
        if seconds is not None:  # counted from the first create, not the last
            seconds = time.monotonic() - started
        _converged(row, seconds, violations)
        _record(row, set(), violations)
        row.trials = 1
        phases: dict[str, int] = {}
        for w in lab.workloads(ns):
            phase = (w.get("status") or {}).get("phase") or "none"
            phases[phase] = phases.get(phase, 0) + 1
        row.notes.append(f"{workloads} Workloads at {nodes} Nodes, phases {phases}")
        row.notes.append(f"operator peak RSS {rss_peak_mb(op.process.pid):.0f} MB")
        op.stop()
    return row


# -- 6. ServiceAccount token rotation --------------------------------------------------------

#: Runs ``orca`` with the in-cluster token and CA files moved to paths given on the command
#: line: the kubernetes client reads them from fixed /var/run/secrets paths otherwise.
IN_CLUSTER = (
    "import sys, kubernetes.config.incluster_config as c;"
    "c.SERVICE_TOKEN_FILENAME, c.SERVICE_CERT_FILENAME = sys.argv.pop(1), sys.argv.pop(1);"
    "from controller.cli import main; sys.exit(main(sys.argv[1:]))"
)


def _create_token(lab: Lab) -> str:
    out = lab.plane.kubectl(
        "create", "token", "orca-controller", "-n", "orca-system", "--duration=10m", check=True
    )
    return out.stdout.strip()


def _token_accepted(lab: Lab, token: str) -> bool:
    context = ssl.create_default_context(cafile=str(lab.plane.pki.ca_cert))
    request = urllib.request.Request(
        f"{lab.plane.server_url}/apis/{GROUP}/{VERSION}/{PLURAL}?limit=1",
        headers={"Authorization": f"Bearer {token}"},
    )
    try:
        with urllib.request.urlopen(request, context=context, timeout=10):
            return True
    except urllib.error.HTTPError as exc:
        if exc.code == 401:
            return False
        raise


def _write_atomically(path: Path, text: str) -> None:
    """Like the kubelet's projected volume: a new file swapped in, never a partial one."""
    tmp = path.with_suffix(".new")
    tmp.write_text(text)
    tmp.replace(path)


def token_rotation(lab: Lab) -> Row:
    """The operator runs in-cluster style (service host/port variables, a ServiceAccount token
    file); the ServiceAccount is recreated (old token refused) and the file rotated: writes
    must go on, without a restart."""
    row = Row("token-rotation")
    secrets = lab.workdir / "serviceaccount"
    secrets.mkdir(exist_ok=True)
    token_file, ca_file = secrets / "token", secrets / "ca.crt"
    ca_file.write_bytes(lab.plane.pki.ca_cert.read_bytes())
    with lab.scoped("token") as ns:
        lab.create_nodes([node("token-a")])
        _write_atomically(token_file, _create_token(lab))
        host, port = lab.plane.server_url.removeprefix("https://").rsplit(":", 1)
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        env.update(KUBERNETES_SERVICE_HOST=host, KUBERNETES_SERVICE_PORT=port)
        op = lab.operator(
            ns,
            kubeconfig=None,
            env=env,
            command=(sys.executable, "-c", IN_CLUSTER, str(token_file), str(ca_file)),
            lease_namespace="orca-system",
            lease_name="orca-controller",  # the one Lease the shipped Role lets it read and renew
        )
        lab.create_workload(ns, "before", {"kind": "Job"})
        seconds, violations = lab.converge(ns, timeout=120)
        if seconds is None:
            row.violations.extend(violations)
            row.notes.append("not working before the rotation: " + op.log()[-300:])
        old = token_file.read_text()
        lab.plane.kubectl("delete", "serviceaccount", "orca-controller", "-n", "orca-system")
        lab.plane.kubectl("create", "serviceaccount", "orca-controller", "-n", "orca-system")
        _write_atomically(token_file, _create_token(lab))
        # The API server caches token reviews for a few seconds: wait until it refuses the old.
        deadline = time.monotonic() + 90
        while _token_accepted(lab, old):
            if time.monotonic() > deadline:
                row.notes.append("the old token was still accepted: the fault was not injected")
                break
            time.sleep(0.5)
        row.faults = 1
        before = lab.snapshot(ns)
        lab.create_workload(ns, "after", {"kind": "Job"})
        seconds, violations = lab.converge(ns, before, timeout=180)
        _converged(row, seconds, violations)
        _record(row, set(), violations)
        if op.process.poll() is not None:
            row.violations.append(Violation("operator-exited", ns, op.log()[-300:]))
        refused = _count_in_log(op, "credentials refused (401")
        row.notes.append(f"requests refused with the old token, then retried: {refused}")
        row.trials = 1
        op.stop()
    return row
