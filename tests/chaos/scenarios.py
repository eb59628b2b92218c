"""The chaos scenarios (issues 7 and 19): each injects one kind of fault into a live cluster
with the operator running, proves the fault happened as intended, and checks the invariants
(``invariants``) at every observation while it runs (``lab.Monitor``), then waits for the
cluster to converge.

Each returns a ``Row`` of figures. ``wanted`` faults are asked for; a trial whose fault cannot
be shown to have happened as intended (no decision pending at a kill, no write refused by the
fence, no 401 seen, no relist after the expiry...) is not counted and another is run, up to a
bound: the row then falls short and fails. The evidence is always the operator's own (its log,
its metrics), the API server's (the audit log) or the cluster's state, never a counter the
scenario increments for itself. Sizes are arguments: ``make chaos`` (``bench/chaos.py``) runs
them at full size, ``tests/chaos/test_chaos.py`` small in ``make test``. Nothing sleeps before
asserting: faults happen at random moments, outcomes are polled for, and a wait that ends on
its timeout is a failure, never a pass.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from controller.api.models import GROUP, PLURAL, VERSION
from controller.devcluster import pki
from tests.chaos.invariants import Violation
from tests.chaos.lab import Lab, Row, node, registering, retry, retry_write
from tests.chaos.proxy import FlakyProxy
from tests.support.harness import OperatorProcess, as_a_pod

NO_LEASE = "--no-leader-elect"
RENEW_DEADLINE = 10.0  # the operator's (leader.py), what the outage must outlast
RELISTED = "relisting"
WATCH_BROKE = "watch broke"
ELECTION_ERROR = "leader election:"
STEPPED_DOWN = "not renewed within"
BECAME_LEADER = "became leader"
#: The operator's lines when its write fence refuses a status write or an Event.
FENCED_LINES = ("not sent: the leader Lease lapsed", "not sent: this replica does not hold")
CREDENTIALS_REFUSED = "credentials refused (401"
WRITTEN = 'orca_status_writes_total{outcome="written"}'
WRITE_FAILED = re.compile(r"status write for \S+ failed \(")  # "...failed (why); retrying"
FENCED = 'orca_status_writes_total{outcome="fenced"}'


# -- a stream of user changes ---------------------------------------------------------------


#: The extended resource some of the Stream's Nodes offer and some of its Workloads ask.
GPU = "nvidia.com/gpu"
#: The Stream's gangs' ``timeoutSeconds``: short, so that a gang a cordon or a node replaced
#: took below its minCount is released (and placed whole again) while the faults go on, and
#: the checker's gang rules (``invariants``) are exercised, not only its arithmetic (at 10 s
#: the short runs of ``make test`` saw gangs half placed, never one released).
GANG_TIMEOUT = 3


class Stream:
    """Random creates, scale changes, resizes, deletes, cordons and node replacements, the way
    users and node churn produce them, bounded to ``max_workloads`` live Workloads.

    What they ask is what real clusters run (issue 46): some Nodes offer GPUs or state a
    ``pods`` limit (kwok keeps the allocatable a Node registers with), some Jobs and Services
    ask a GPU, some Services are gangs, some Workloads carry a disruption budget; so the
    checker's rules for every resource, the Pod, gangs and budgets are held at every poll."""

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
        self.gangs: dict[str, int] = {}  # live gangs we created: name -> minCount
        self.resized: set[str] = set()  # namespace/name of every Workload ever resized
        self.node_names: list[str] = []
        self.cordoned: set[str] = set()
        self.serial = 0
        self.done = 0
        self.replaced = 0  # nodes deleted and replaced by a new one
        self.failure: BaseException | None = None  # what ended a background stream
        self.history: list[str] = []  # every change made, in order (dumped on a violation)

    def add_nodes(self, count: int) -> None:
        """Nodes the stream starts with, registered and schedulable before it starts."""
        objs = [self._node() for _ in range(count)]
        self.lab.create_nodes(objs)

    def _node(self) -> dict[str, Any]:
        name = f"{self.prefix}-{self.serial:04d}"
        self.serial += 1
        self.node_names.append(name)
        tags = [t for t in ("ssd", "wasm") if self.rng.random() < 0.5]
        others = {}
        if self.rng.random() < 0.4:
            others[GPU] = self.rng.choice(["2", "4"])
        if self.rng.random() < 0.5:
            others["pods"] = self.rng.choice(["4", "8"])
        return node(name, cpu=self.rng.choice(["2", "4"]), tags=tags, others=others)

    def spec(self, kind: str | None = None) -> dict[str, Any]:
        kind = kind or self.rng.choices(["Job", "Service", "DaemonSet"], [5, 4, 1])[0]
        spec: dict[str, Any] = {"kind": kind}
        spec["resources"] = {
            "cpu": self.rng.choice(
                ["100m", "250m"] if kind == "DaemonSet" else ["250m", "500m", "1"]
            ),
            "memory": self.rng.choice(["256Mi", "1Gi"]),
        }
        if kind != "DaemonSet" and self.rng.random() < 0.25:
            spec["resources"][GPU] = 1
        if kind == "Service":
            spec["count"] = self.rng.randint(1, 4)
            if self.rng.random() < 0.3:  # a training job: 2-4 workers on the GPU nodes
                spec["count"] = max(spec["count"], 2)  # minCount 1 is never half placed
                minimum = self.rng.randint(2, spec["count"])
                spec["gang"] = {"minCount": minimum, "timeoutSeconds": GANG_TIMEOUT}
                spec["resources"][GPU] = 1
        if self.rng.random() < 0.3:
            spec["disruption"] = self.rng.choice(
                [{"minAvailable": 1}, {"minAvailable": "100%"}, {"maxUnavailable": "50%"}]
            )
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
        if "gang" in spec:
            self.gangs[name] = spec["gang"]["minCount"]
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
        count = self.rng.randint(self.gangs.get(name, 1), 5)  # a gang's minCount <= count
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
        self.gangs.pop(name, None)
        self.history.append(f"delete {name}")

    def _cordon(self) -> None:
        name = self.rng.choice(self.node_names)
        cordon = name not in self.cordoned
        retry(lambda: self.lab.core.patch_node(name, {"spec": {"unschedulable": cordon}}))
        (self.cordoned.add if cordon else self.cordoned.discard)(name)
        self.history.append(f"{'cordon' if cordon else 'uncordon'} {name}")

    def _replace_node(self) -> None:
        """A node leaves (deleted with its placements) and a new one joins: it registers as a
        kubelet does and the stream goes on, as node churn does; the operator places there once
        kwok reports it Ready and the controller lifts ``not-ready`` (the invariants expect
        nothing there before, and everything that fits after)."""
        name = self.rng.choice(self.node_names)
        retry_write(lambda: self.lab.core.delete_node(name), 404)
        self.node_names.remove(name)
        self.cordoned.discard(name)
        self.lab.create_nodes([self._node()], wait=False)
        self.replaced += 1
        self.history.append(f"replace node {name} by {self.node_names[-1]}")

    def in_background(self, count: int) -> threading.Thread:
        """``count`` changes from a thread of their own; ``join`` it with ``joined``."""

        def run() -> None:
            try:
                self.burst(count)
            except BaseException as exc:  # re-raised by joined(), not lost with the thread
                self.failure = exc

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread

    def joined(self, thread: threading.Thread) -> None:
        """Wait for ``in_background``'s thread; fail if the stream did (a harness bug, or
        an API server that never came back: the scenario made fewer changes than it says)."""
        thread.join()
        if self.failure is not None:
            raise AssertionError(f"the stream of changes failed after {self.done}") from (
                self.failure
            )


# -- shared -------------------------------------------------------------------------------------


def _converged(
    row: Row, seconds: float | None, left: list[Violation], known: set[str], timed: bool = True
) -> None:
    """A convergence time (``timed``: a fault's), or a violation: the liveness invariants did
    not all hold in time (they are then known, so the next trials wait only for what is
    new)."""
    if seconds is not None:
        if timed:
            row.converge.append(seconds)
            if row.slowest is None or seconds > row.slowest[0]:
                row.slowest = (seconds, left)
        return
    fresh = [v for v in left if str(v) not in known]
    known.update(str(v) for v in left)
    row.violation("not-converged", row.scenario, "; ".join(str(v) for v in fresh[:5]))


def _undecided(workloads: list[dict[str, Any]]) -> int:
    return sum(
        1
        for w in workloads
        if (w.get("status") or {}).get("observedGeneration") != w["metadata"].get("generation")
    )


def _log_count(op: OperatorProcess, *texts: str | re.Pattern[str]) -> int:
    """How many times the operator's log says any of ``texts`` (strings or patterns)."""
    log = op.log_path.read_text(errors="replace")
    return sum(
        log.count(text) if isinstance(text, str) else len(text.findall(log)) for text in texts
    )


def _last_error(op: OperatorProcess) -> str:
    lines = [line for line in op.log_path.read_text(errors="replace").splitlines() if line]
    errors = [line for line in lines if "error" in line.lower()]
    return (errors or lines or ["(empty log)"])[-1][-300:]


def _alive(row: Row, op: OperatorProcess) -> bool:
    """The operator has not exited; if it has, that is a violation (with its last words)."""
    if op.process.poll() is None:
        return True
    row.violation("operator-exited", f"pid {op.process.pid}", _last_error(op))
    return False


def _metric(op: OperatorProcess, name: str) -> float | None:
    try:
        return op.metrics().get(name)
    except OSError:
        return None


def _wait_for(condition: Callable[[], bool], timeout: float, interval: float = 0.2) -> bool:
    """Poll ``condition`` until true (True) or ``timeout`` seconds pass (False)."""
    deadline = time.monotonic() + timeout
    while True:
        if condition():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)


def _until_logged(
    op: OperatorProcess, texts: tuple[str, ...], more_than: int, timeout: float
) -> bool:
    """Wait until the operator's log holds more than ``more_than`` of these lines."""
    return _wait_for(lambda: _log_count(op, *texts) > more_than, timeout)


def _until_metrics(op: OperatorProcess, want: dict[str, float], timeout: float) -> bool:
    """Wait until each of the operator's metrics ``want`` names has that value."""
    return _wait_for(lambda: all(_metric(op, k) == v for k, v in want.items()), timeout)


def _until_written(op: OperatorProcess, more_than: float, timeout: float) -> bool:
    """Wait until the operator has completed more than ``more_than`` status writes."""
    return _wait_for(lambda: (_metric(op, WRITTEN) or 0.0) > more_than, timeout, interval=0.02)


def _leader_of(ops: list[OperatorProcess], timeout: float = 120.0) -> OperatorProcess | None:
    """The replica whose ``orca_leader`` is 1, or None when none is within ``timeout``."""
    found: list[OperatorProcess] = []

    def one() -> bool:
        found[:] = [op for op in ops if _metric(op, "orca_leader") == 1.0]
        return bool(found)

    return found[0] if _wait_for(one, timeout) else None


@dataclass
class _Audit:
    verb: str
    resource: str
    name: str
    code: int
    received: float  # seconds since the epoch

    def __str__(self) -> str:
        return f"{self.verb} {self.resource}/{self.name} -> {self.code}"


def _audit(path: Path, user: str, after: float) -> list[_Audit]:
    """The writes ``user`` made that the API server received after ``after`` (epoch seconds):
    status writes, Events and Lease updates, in order of receipt."""
    found = []
    for line in path.read_text().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if (entry.get("user") or {}).get("username") != user:
            continue
        stamp = entry["requestReceivedTimestamp"].replace("Z", "+00:00")
        received = datetime.fromisoformat(stamp).timestamp()
        if received <= after or entry.get("verb") not in ("create", "patch", "update"):
            continue
        ref = entry.get("objectRef") or {}
        resource = ref.get("resource", "") + (
            f"/{ref['subresource']}" if ref.get("subresource") else ""
        )
        code = int((entry.get("responseStatus") or {}).get("code") or 0)
        found.append(_Audit(entry["verb"], resource, ref.get("name", ""), code, received))
    return sorted(found, key=lambda a: a.received)


def late_write_landed(a: _Audit) -> bool:
    """Whether a write an old leader sent past its deadline changed a placement record: a
    status write the API server accepted. One it refused (409: the new leader wrote that
    Workload since) and an Event change no placement (``split_brain`` says why they can
    happen at all)."""
    return a.resource == "workloads/status" and 200 <= a.code < 300


def _is_write(a: _Audit) -> bool:
    """A status write or an Event: what a replica that is not the leader must never send."""
    return a.resource in ("workloads/status", "events")


# -- 1. kill -9 of the operator --------------------------------------------------------------


def operator_kills(
    lab: Lab,
    kills: int,
    nodes: int = 12,
    ops: int = 8,
    resizes: bool = True,
    seed: int = 1,
    max_trials: int | None = None,
) -> Row:
    """SIGKILL the operator at a random moment of a stream of changes, restart it, converge;
    ``kills`` of them with a decision in flight.

    The operator is frozen (SIGSTOP) just before the change the kill follows, wherever it is
    (mid-write included), so that change is still undecided when it dies: running, it decided
    each change within the milliseconds between the change and the kill (CI once saw "kills
    with decisions still pending: 0/4"). The proof is read from the API after the kill (a
    Workload whose generation the status does not describe); a kill without one (a change
    that gives the operator nothing to decide, a cordon of an empty node) does not count."""
    row = Row("operator-kill", wanted=kills)
    rng = random.Random(seed)
    known: set[str] = set()
    limit = max_trials or 2 * kills + 10
    with lab.scoped("kill") as ns, lab.monitor(ns, row) as monitor:
        stream = Stream(lab, ns, "kill", rng, resizes=resizes)
        stream.add_nodes(nodes)
        stream.populate(15)
        op = lab.operator(ns, NO_LEASE)
        _converged(row, *monitor.converge(), known, timed=False)  # the start: not a fault
        while row.proven < kills and row.trials < limit:
            row.trials += 1
            kill_at = rng.randrange(ops)  # the random moment: right after this change
            in_flight = 0
            for i in range(ops):
                if i == kill_at:
                    op.freeze()
                stream.step()
                if i == kill_at:
                    op.kill()
                    stream.history.append("kill -9 operator")
                    in_flight = _undecided(lab.workloads(ns))
            restarted = time.monotonic()
            op = lab.operator(ns, NO_LEASE)
            stream.history.append("operator restarted")
            seconds, left = monitor.converge(since=restarted, known=known)
            _converged(row, seconds, left, known)
            if in_flight:
                row.proven += 1
                row.count("decisions in flight at the kills", in_flight)
            else:
                row.unproven.append(
                    f"kill {row.trials}: nothing undecided after {stream.history[-3]}"
                )
        op.stop()
    row.notes.append(
        f"{stream.done} changes ({len(stream.resized)} Workloads resized, "
        f"{stream.replaced} nodes replaced)"
    )
    _dump_history(lab, row, stream)
    return row


def _dump_history(lab: Lab, row: Row, stream: Stream) -> None:
    """The changes made, beside the monitor's dumps, when something was violated."""
    if row.violations:
        path = lab.workdir / f"history-{row.scenario.replace('/', '-')}.json"
        path.write_text(json.dumps(stream.history, indent=1))


# -- 2. kill -9 of kube-apiserver and of etcd ------------------------------------------------


def server_kills(lab: Lab, trials: int, nodes: int = 8, ops: int = 6, seed: int = 2) -> Row:
    """SIGKILL kube-apiserver, then etcd, at random moments under changes; restart each on its
    port after a random outage of 1-4 s (shorter than the renew deadline); the operator
    (leader-elected) must ride through, same pid. Proven: the server's process was gone after
    the kill and a new one serves after the restart."""
    row = Row("apiserver/etcd-kill", wanted=2 * trials)
    rng = random.Random(seed)
    known: set[str] = set()
    with lab.scoped("srv") as ns, lab.monitor(ns, row) as monitor:
        stream = Stream(lab, ns, "srv", rng, resizes=False, node_changes=False)
        stream.add_nodes(nodes)
        stream.populate(10)
        op = lab.operator(ns)
        _converged(row, *monitor.converge(), known, timed=False)
        broke = _log_count(op, WATCH_BROKE, ELECTION_ERROR)
        for _ in range(trials):
            for server in ("kube-apiserver", "etcd"):
                row.trials += 1
                burst = stream.in_background(ops)
                time.sleep(rng.uniform(0.0, 1.0))
                pid = lab.plane.pids[server]
                lab.plane.kill_server(server)
                down = not lab.plane.servers_alive()[server]
                time.sleep(rng.uniform(1.0, 4.0))  # the outage
                lab.plane.restart_server(server)
                back = lab.plane.pids[server] != pid and lab.plane.servers_alive()[server]
                stream.joined(burst)
                seconds, left = monitor.converge(known=known)
                _converged(row, seconds, left, known)
                if down and back:
                    row.proven += 1
                else:
                    row.unproven.append(f"{server}: down {down}, back {back}")
        _alive(row, op)
        row.count(
            "transport errors the operator logged",
            _log_count(op, WATCH_BROKE, ELECTION_ERROR) - broke,
        )
        op.stop()
    return row


# -- 3. kube-apiserver down longer than the renew deadline -------------------------------------


def apiserver_outage(
    lab: Lab, trials: int, outage: tuple[float, float] = (15.0, 20.0), seed: int = 8
) -> Row:
    """kube-apiserver down for 15-20 s, longer than the leader's renew deadline (10 s), with
    decisions pending: the leader must step down during the outage, write nothing from then
    until it holds the Lease again (the audit log: no status write or Event between the kill
    and its first successful Lease update after the restart), take the Lease back once the
    server is up, and everything must converge.

    Pending decisions are made certain by freezing the operator while Workloads are created
    and thawing it only once the server is down. Proven per trial: Workloads undecided at the
    kill, the step-down seen during the outage (``orca_leader`` 0, the operator's log line)
    and the Lease taken back (``orca_leader`` 1, "became leader" once more)."""
    row = Row("apiserver-outage", wanted=trials)
    rng = random.Random(seed)
    known: set[str] = set()
    user = "orca-outage"
    kubeconfig = lab.plane.mint_kubeconfig(user, ["system:masters"])
    audit = lab.workdir / "audit.log"
    with lab.scoped("outage") as ns, lab.monitor(ns, row) as monitor:
        stream = Stream(lab, ns, "outage", rng, resizes=False, node_changes=False)
        stream.add_nodes(6)
        stream.populate(8)
        op = lab.operator(ns, kubeconfig=kubeconfig)
        if _leader_of([op]) is None:
            row.violation("no-leader", ns, "the operator never became leader")
            return row
        _converged(row, *monitor.converge(), known, timed=False)
        limit = 2 * trials + 1
        retakes: list[float] = []
        while row.proven < trials and row.trials < limit and _alive(row, op):
            row.trials += 1
            elected = _log_count(op, BECAME_LEADER)
            stepped = _log_count(op, STEPPED_DOWN)
            op.freeze()
            stream.populate(4)
            pending = _undecided(lab.workloads(ns))
            killed_at = time.time()
            lab.plane.kill_server("kube-apiserver")
            op.thaw()
            length = rng.uniform(*outage)
            stepped_down = _until_logged(op, (STEPPED_DOWN,), stepped, length) and _until_metrics(
                op, {"orca_leader": 0.0}, 1.0
            )
            time.sleep(max(0.0, killed_at + length - time.time()))  # the rest of the outage
            down = not lab.plane.servers_alive()["kube-apiserver"]
            lab.plane.restart_server("kube-apiserver")
            restarted = time.monotonic()
            if not stepped_down:  # it went on believing it leads, well past its deadline
                row.violation("no-step-down", user, f"still leader {length:.0f}s into an outage")
            back = (
                stepped_down
                and _until_logged(op, (BECAME_LEADER,), elected, 60)
                and _until_metrics(op, {"orca_leader": 1.0}, 5.0)
            )
            if stepped_down and not back:
                row.violation("lease-not-retaken", ns, _last_error(op))
            _converged(row, *monitor.converge(since=restarted, known=known), known)
            writes = _audit(audit, user, killed_at)
            retaken = next(
                (
                    a
                    for a in writes
                    if a.resource == "leases" and a.verb == "update" and a.code == 200
                ),
                None,
            )
            early = [
                a
                for a in writes
                if _is_write(a) and (retaken is None or a.received < retaken.received)
            ]
            for write in early:
                row.violation("write-while-not-leader", user, str(write))
            if retaken is not None:
                retakes.append(retaken.received - (killed_at + length))
            if down and pending and stepped_down and back and retaken is not None:
                row.proven += 1
            else:
                row.unproven.append(
                    f"trial {row.trials}: server down {down}, pending {pending}, stepped down "
                    f"{stepped_down}, leader again {back}, Lease updated {retaken is not None}"
                )
        _alive(row, op)
        op.stop()
    if retakes:
        row.notes.append(f"Lease retaken {max(retakes):.1f}s at most after the server was back")
    return row


# -- 4. a watch that expires (410 Gone) ---------------------------------------------------------


def watch_expiry(lab: Lab, trials: int, nodes: int = 4, seed: int = 3) -> Row:
    """Freeze the operator and cut its watches (kube-apiserver restarted), change the cluster
    (deletes included, which a re-LIST cannot replay), compact etcd and restart kube-apiserver
    again so the watches resume from a resourceVersion neither etcd nor the watch cache holds
    (410 Gone); thaw: it must relist and lose nothing.

    Capacity is exact: every slot is taken, the deletes free exactly what the new Workloads
    need, so a deleted Workload the operator still believes in strands one of them. That needs
    the new node schedulable before the thaw (kwok's Ready, ``not-ready`` lifted): one still
    registering would take nothing, and the invariants would expect nothing there. Proven
    per trial: the operator logged a relist after the thaw."""
    row = Row("watch-expiry", wanted=trials)
    rng = random.Random(seed)
    known: set[str] = set()
    job = {"kind": "Job", "resources": {"cpu": "1"}}
    with lab.scoped("watch") as ns, lab.monitor(ns, row) as monitor:
        serial = 0
        lab.create_nodes([node(f"watch-{i}", cpu="2") for i in range(nodes)])
        live = [f"fill-{i}" for i in range(2 * nodes)]  # every slot taken
        for name in live:
            lab.create_workload(ns, name, job)
        op = lab.operator(ns)
        _converged(row, *monitor.converge(), known, timed=False)
        limit = 2 * trials + 2
        while row.proven < trials and row.trials < limit and _alive(row, op):
            row.trials += 1
            placed = lab.snapshot(ns).placed
            if not placed:  # nothing to lose: the trial could not fail
                row.violation("nothing-placed", ns, f"{len(live)} Jobs, none placed")
                break
            relists = _log_count(op, RELISTED)
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
            gone = rng.choice(sorted({p.node for p in placed}))
            retry_write(lambda gone=gone: lab.core.delete_node(gone), 404)  # type: ignore[misc]
            # Waits until it is schedulable (the controller's watches may back off for a
            # while after the restart): the room must be there at the thaw.
            lab.create_nodes([node(f"watch-{nodes + row.trials}", cpu="2")])
            for _ in range(2):
                live.append(f"late-{serial}")
                lab.create_workload(ns, live[-1], job)
                serial += 1
            lab.plane.compact_etcd()  # the operator's resourceVersions are history in etcd ...
            lab.plane.kill_server("kube-apiserver")  # ... and in a fresh watch cache
            lab.plane.restart_server("kube-apiserver")
            op.thaw()
            thawed = time.monotonic()
            _converged(row, *monitor.converge(since=thawed, timeout=90, known=known), known)
            if _until_logged(op, (RELISTED,), relists, 30):
                row.proven += 1
            else:
                row.unproven.append(f"trial {row.trials}: no relist after the expiry")
        _alive(row, op)
        op.stop()
    return row


# -- 5. split brain ---------------------------------------------------------------------------


def _create_jobs(lab: Lab, namespace: str, names: list[str]) -> None:
    for name in names:
        lab.create_workload(namespace, name, {"kind": "Job", "resources": {"cpu": "1"}})


def split_brain(lab: Lab, trials: int, seed: int = 4) -> Row:
    """Two replicas; freeze the leader (SIGSTOP) once it is writing a burst, so it sleeps with
    writes queued; delete a Workload; the standby takes over after the Lease duration and fills
    the freed capacity; thaw the old leader. It must step down and send nothing: the API
    server's audit log shows no status write of it *landing* later than ``RENEW_DEADLINE``
    after the freeze, and no node is over capacity at any observation.

    Why "landing": the fence is asked right before a request's bytes are written, but in user
    space a check and the write after it can always be split by a freeze (SIGSTOP can land
    between the two instructions; seen once in ~50 trials: the bytes of a write whose check
    passed a few microseconds before the freeze left at the thaw, 16 s later). No client can
    close that window (client-go's leader election has the same); what makes such a straggler
    harmless is the status write's resourceVersion precondition: the new leader decides every
    Workload on election, so a write the old one had in flight meets a newer object and gets
    409. A late status write the server refused, and a late Event (informational: it changes
    no placement), are counted, not violations; one that landed is a violation.

    Proven per trial: the fence refused a write the old leader had pending (its
    ``orca_status_writes_total{outcome="fenced"}`` rose, or its log says a status write or an
    Event was not sent for want of the Lease). A freeze that caught nothing in flight does not
    count, and another trial runs."""
    row = Row("split-brain", wanted=trials)
    rng = random.Random(seed)
    known: set[str] = set()
    audit = lab.workdir / "audit.log"
    users: dict[int, str] = {}
    with lab.scoped("split") as ns, lab.monitor(ns, row) as monitor:
        lab.create_nodes([node(f"split-{i}", cpu="4") for i in range(2)])  # 8 x 1 cpu
        replicas = []
        for user in ("orca-a", "orca-b"):
            kubeconfig = lab.plane.mint_kubeconfig(user, ["system:masters"])
            replicas.append(lab.operator(ns, kubeconfig=kubeconfig))
            users[replicas[-1].process.pid] = user
        serial = 0
        limit = 3 * trials + 2
        while row.proven < trials and row.trials < limit:
            if not all(_alive(row, op) for op in replicas):
                break
            row.trials += 1
            old = _leader_of(replicas)
            if old is None:
                row.violation("no-leader", ns, "no replica became leader")
                break
            new = next(op for op in replicas if op is not old)
            user = users[old.process.pid]
            written = _metric(old, WRITTEN) or 0.0
            fenced_before = (_metric(old, FENCED) or 0.0, _log_count(old, *FENCED_LINES))
            names = [f"j{serial + i}" for i in range(12)]  # more than the 8 slots
            serial += len(names)
            burst = threading.Thread(target=_create_jobs, args=(lab, ns, names))
            burst.start()
            writing = _until_written(old, written, 60)
            old.freeze()
            frozen, frozen_at = time.time(), time.monotonic()
            burst.join()
            if not writing:
                row.unproven.append(f"trial {row.trials}: the leader wrote nothing of the burst")
            placed = [
                w["metadata"]["name"]
                for w in lab.workloads(ns)
                if (w.get("status") or {}).get("placements")
            ]
            if placed:  # free one slot: the last free capacity goes to the new leader
                lab.delete_workload(ns, rng.choice(placed))
            if _leader_of([new]) is None:
                row.violation("no-takeover", ns, "the standby never took the Lease over")
                old.thaw()
                break
            _converged(row, *monitor.converge(since=frozen_at, known=known), known)
            old.thaw()
            # It wakes with its queue, buffered watch events and pending writes: it must step
            # down, and its fence refuse what it had in flight.
            stepped = _until_metrics(old, {"orca_leader": 0.0, "orca_queue_depth": 0.0}, 60)
            if not stepped:
                row.violation("no-step-down", user, "the thawed old leader still leads")
            fence = _until_logged(old, FENCED_LINES, fenced_before[1], 15) or (
                (_metric(old, FENCED) or 0.0) > fenced_before[0]
            )
            late = [
                a
                for a in _audit(audit, user, frozen)
                if _is_write(a) and a.received > frozen + RENEW_DEADLINE
            ]
            for write in late:
                if late_write_landed(write):
                    row.violation("write-after-freeze", user, str(write))
                else:
                    row.count(f"late {write.resource} not landed or informational", 1)
            in_kernel = [a for a in _audit(audit, user, frozen) if _is_write(a) and a not in late]
            row.count("writes received just after a freeze", len(in_kernel))
            _converged(row, *monitor.converge(known=known), known, timed=False)
            if writing and fence:
                row.proven += 1
                refused = (_metric(old, FENCED) or 0.0) - fenced_before[0]
                row.count("status writes fenced", int(refused))
                row.count("fence log lines", _log_count(old, *FENCED_LINES) - fenced_before[1])
            elif writing:
                row.unproven.append(f"trial {row.trials}: no write pending at the freeze")
        for op in replicas:
            _alive(row, op)
            op.stop()
    return row


# -- 6. a burst ---------------------------------------------------------------------------------


def burst(lab: Lab, workloads: int, nodes: int, bursts: int = 1, seed: int = 7) -> Row:
    """``bursts`` times, ``workloads`` Workloads created at once (32 concurrent POSTs) onto
    ``nodes`` Nodes: all decided, invariants hold at every observation; the operator's peak
    RSS. The Nodes register as kubelets do (``lab.registering``) and the bursts start once
    every one is schedulable (the time that took is a note). Proven per burst: the API lists
    every Workload created."""
    from bench.bench_operator import create_all, node_objects, workload_objects
    from bench.common import peak_rss_mb
    from controller.operator.kube import KubeApi, load_configuration

    row = Row("burst", wanted=bursts)
    rng = random.Random(seed)
    known: set[str] = set()
    interval = 0.5 if workloads * bursts <= 2000 else 5.0
    with lab.scoped("burst") as ns, lab.monitor(ns, row, interval=interval) as monitor:
        objects = [registering(obj) for obj in node_objects(nodes, rng)]
        for obj in objects:
            obj["metadata"]["name"] = f"burst-{obj['metadata']['name']}"

        def api() -> KubeApi:
            return KubeApi(load_configuration(str(lab.plane.kubeconfig_path)), max_connections=32)

        registered = time.monotonic()
        asyncio.run(create_all(api(), "/api/v1/nodes", objects, 32))
        lab.wait_schedulable([obj["metadata"]["name"] for obj in objects])
        row.notes.append(
            f"{nodes} Nodes registered and schedulable in {time.monotonic() - registered:.0f}s"
        )
        op = lab.operator(ns)
        path = f"/apis/{GROUP}/{VERSION}/namespaces/{ns}/{PLURAL}"
        for _ in range(bursts):
            row.trials += 1
            batch = workload_objects(workloads, ns, rng)
            for obj in batch:
                obj["metadata"]["name"] = f"b{row.trials}-{obj['metadata']['name']}"
            started = time.monotonic()
            asyncio.run(create_all(api(), path, batch, 32))
            listed = len(lab.workloads(ns))
            _converged(row, *monitor.converge(since=started, timeout=1800), known)
            if listed == workloads * row.trials:
                row.proven += 1
            else:
                row.unproven.append(f"{listed} of {workloads * row.trials} Workloads listed")
        phases: dict[str, int] = {}
        for w in lab.workloads(ns):
            phase = (w.get("status") or {}).get("phase") or "none"
            phases[phase] = phases.get(phase, 0) + 1
        row.notes.append(f"{bursts} x {workloads} Workloads at {nodes} Nodes, phases {phases}")
        row.notes.append(f"operator peak RSS {peak_rss_mb(op.process.pid):.0f} MB")
        _alive(row, op)
        op.stop()
    return row


# -- 7. ServiceAccount token rotation --------------------------------------------------------

#: The operator re-reads its token file this often by itself, as client-go does: a minute less
#: the 10 s leeway of ``transport.NewCachedFileTokenSource`` (k8s.io/client-go v0.36.3).
CLIENT_TOKEN_REREAD = 50.0


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


def _until_refused(lab: Lab, token: str, timeout: float) -> bool:
    return _wait_for(lambda: not _token_accepted(lab, token), timeout, interval=0.5)


def _write_atomically(path: Path, text: str) -> None:
    """Like the kubelet's projected volume: a new file swapped in, never a partial one."""
    tmp = path.with_suffix(".new")
    tmp.write_text(text)
    tmp.replace(path)


def token_rotation(lab: Lab, trials: int = 1) -> Row:
    """The operator runs in-cluster style (service host/port variables, a ServiceAccount token
    file); the ServiceAccount is recreated (its old tokens refused) and the file rotated: a
    Workload created then must be decided without a restart, within less than the client's own
    50 s re-read of the file, through the operator's 401 -> load the credentials again path.

    Proven per trial: the old token refused by the API server, then the operator's "credentials
    refused (401" line. Each trial starts a fresh operator (its client read the file at start),
    so the rotation falls inside the client's 50 s; a trial where the client re-read the file by
    itself first (no 401 seen) does not count. The new Workload must be decided within
    ``CLIENT_TOKEN_REREAD`` - 15 s of the refusal, too soon for that re-read to be what saved
    it whenever the operator started less than 15 s before the rotation."""
    row = Row("token-rotation", wanted=trials)
    known: set[str] = set()
    secrets = lab.workdir / "serviceaccount"
    token_file = secrets / "token"
    in_pod, env = as_a_pod(lab.plane, secrets, "")  # each trial writes a token of its own
    with lab.scoped("token") as ns, lab.monitor(ns, row) as monitor:
        lab.create_nodes([node("token-a")])
        limit = 2 * trials + 1
        while row.proven < trials and row.trials < limit:
            row.trials += 1
            _write_atomically(token_file, _create_token(lab))
            op = lab.operator(
                ns,
                kubeconfig=None,
                env=env,
                command=in_pod,
                lease_namespace="orca-system",
                lease_name="orca-controller",  # the one Lease the shipped Role lets it renew
            )
            started = time.monotonic()
            lab.create_workload(ns, f"before-{row.trials}", {"kind": "Job"})
            _converged(row, *monitor.converge(since=started, known=known), known, timed=False)
            old = token_file.read_text()
            refused_before = _log_count(op, CREDENTIALS_REFUSED)
            lab.plane.kubectl("delete", "serviceaccount", "orca-controller", "-n", "orca-system")
            lab.plane.kubectl("create", "serviceaccount", "orca-controller", "-n", "orca-system")
            _write_atomically(token_file, _create_token(lab))
            # The API server caches token reviews for a few seconds: wait until it refuses the old.
            refused = _until_refused(lab, old, 45)
            refused_at = time.monotonic()
            lab.create_workload(ns, f"after-{row.trials}", {"kind": "Job"})
            seconds, left = monitor.converge(
                since=refused_at, timeout=CLIENT_TOKEN_REREAD - 15, known=known
            )
            _converged(row, seconds, left, known)
            reloaded = _log_count(op, CREDENTIALS_REFUSED) > refused_before
            rotation_age = refused_at - started
            if refused and reloaded:
                row.proven += 1
                row.count(
                    "401s answered by loading the credentials again",
                    _log_count(op, CREDENTIALS_REFUSED) - refused_before,
                )
            else:
                row.unproven.append(
                    f"trial {row.trials}: old token refused {refused}, 401 seen {reloaded} "
                    f"({rotation_age:.0f}s after the operator started)"
                )
            _alive(row, op)
            op.stop()
    return row


# -- 8. a flaky network ---------------------------------------------------------------------------


@contextmanager
def _proxied(lab: Lab, user: str) -> Iterator[tuple[FlakyProxy, Path]]:
    """A ``FlakyProxy`` in front of kube-apiserver and a kubeconfig for ``user`` through it."""
    host, port = lab.plane.server_url.removeprefix("https://").rsplit(":", 1)
    proxy = FlakyProxy((host, int(port))).start()
    path = lab.workdir / f"kubeconfig-{user}-proxied"
    kubeconfig = pki.mint_kubeconfig(lab.plane.pki, proxy.url, user, ["system:masters"], path)
    try:
        yield proxy, kubeconfig
    finally:
        proxy.stop()


def flaky_network(
    lab: Lab, trials: int, seconds: float = 12.0, ops: int = 30, seed: int = 9
) -> Row:
    """The operator reaches kube-apiserver through a proxy that, for ``seconds`` per trial
    while Workloads are created and changed, cuts every live connection every 1-3 s (requests
    mid-flight, watches mid-stream, the Lease renew) and, between those, cuts each connection
    as a request's bytes arrive on it (forwarded or not: the write may land with its answer
    lost). The operator must stay up (no exit: a Deployment would restart it, and count it),
    and once the cuts stop everything is decided, the safety invariants having held at every
    observation (the monitor reads the API directly, not through the proxy).

    Proven per trial: connections cut in both ways, and the operator saw it: its log shows a
    watch broken and a Lease renew or a status write that got no answer."""
    row = Row("flaky-network", wanted=trials)
    rng = random.Random(seed)
    known: set[str] = set()
    seen: dict[str, tuple[str | re.Pattern[str], ...]] = {
        "watches broken": (WATCH_BROKE,),
        "Lease renews failed": (ELECTION_ERROR,),
        "status writes failed": (WRITE_FAILED,),
    }

    def noticed(ops: list[OperatorProcess]) -> dict[str, int]:
        return {what: sum(_log_count(op, *lines) for op in ops) for what, lines in seen.items()}

    with (
        _proxied(lab, "orca-flaky") as (proxy, kubeconfig),
        lab.scoped("flaky") as ns,
        lab.monitor(ns, row) as monitor,
    ):
        stream = Stream(lab, ns, "flaky", rng, resizes=True)
        stream.add_nodes(8)
        stream.populate(10)
        ops_ = [lab.operator(ns, kubeconfig=kubeconfig)]
        if _leader_of(ops_) is None:
            row.violation("no-leader", ns, _last_error(ops_[-1]))
            return row
        _converged(row, *monitor.converge(), known, timed=False)
        restarts = 0
        for _ in range(trials):
            row.trials += 1
            cuts_before = dict(proxy.cuts)
            noticed_before = noticed(ops_)
            changes = stream.in_background(ops)
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                proxy.cut_all()
                proxy.cut_requests(True, forward=0.5)
                time.sleep(rng.uniform(1.0, 3.0))
                proxy.cut_requests(False)
                if not _alive(row, ops_[-1]):  # a Deployment would restart it: so do we
                    restarts += 1
                    ops_.append(lab.operator(ns, kubeconfig=kubeconfig))
            proxy.cut_requests(False)
            stream.joined(changes)
            calm = time.monotonic()
            if not _alive(row, ops_[-1]):
                restarts += 1
                ops_.append(lab.operator(ns, kubeconfig=kubeconfig))
            _converged(row, *monitor.converge(since=calm, known=known), known)
            cut = {k: n - cuts_before.get(k, 0) for k, n in proxy.cuts.items()}
            all_cut = sum(n for k, n in cut.items() if k.startswith("all"))
            request_cut = sum(n for k, n in cut.items() if k.startswith("request"))
            saw = {k: n - noticed_before[k] for k, n in noticed(ops_).items()}
            answered_nothing = saw["Lease renews failed"] + saw["status writes failed"]
            if all_cut and request_cut and saw["watches broken"] and answered_nothing:
                row.proven += 1
            else:
                row.unproven.append(
                    f"trial {row.trials}: cut {all_cut} live, {request_cut} on a request; "
                    f"the operator logged {saw}"
                )
        for reason, n in sorted(proxy.cuts.items()):
            if reason != "stop":
                row.count(f"connections cut ({reason})", n)
        row.count("operator restarts", restarts)
        for what, n in noticed(ops_).items():
            row.count(what, n)
        for op in ops_:
            op.stop()
    row.notes.append(f"{stream.done} changes ({stream.replaced} nodes replaced)")
    _dump_history(lab, row, stream)
    return row
