"""Drive the operator as a user runs it (``orca run`` in a subprocess) and look at the
cluster as a user does (kubectl). Shared by the operator tests and the end-to-end benchmark."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from controller.api.models import quantity_to_int
from controller.devcluster.controlplane import SILENT_LABEL, ControlPlane, KubectlRunner

REPO_ROOT = Path(__file__).resolve().parents[2]
#: The kustomize base a user installs with ``kubectl apply -k`` (CRD, RBAC, Deployment...).
INSTALL = REPO_ROOT / "manifests" / "default"
#: The ServiceAccount, Roles and bindings alone (``manifests/rbac``), in ``orca-system``.
RBAC = REPO_ROOT / "manifests" / "rbac"
#: Runs ``orca`` with the in-cluster ServiceAccount directory (token, ca.crt) moved to a path
#: given on the command line: a Pod has it at /var/run/secrets/kubernetes.io/serviceaccount.
IN_CLUSTER = (
    "import sys, pathlib, controller.operator.kube.credentials as c;"
    "c.SERVICE_ACCOUNT_DIR = pathlib.Path(sys.argv.pop(1));"
    "from controller.cli import main; sys.exit(main(sys.argv[1:]))"
)


def as_a_pod(
    plane: ControlPlane, directory: Path, token: str
) -> tuple[tuple[str, ...], dict[str, str]]:
    """The command (``IN_CLUSTER``) and environment that run ``orca`` as the Deployment's Pod
    sees the cluster: the service host and port variables, no kubeconfig, and a ServiceAccount
    directory in ``directory`` holding ``token`` and the cluster's CA."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "token").write_text(token)
    (directory / "ca.crt").write_bytes(plane.pki.ca_cert.read_bytes())
    (directory / "namespace").write_text("orca-system")
    host, port = plane.server_url.removeprefix("https://").rsplit(":", 1)
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env.update(KUBERNETES_SERVICE_HOST=host, KUBERNETES_SERVICE_PORT=port)
    return (sys.executable, "-c", IN_CLUSTER, str(directory)), env


def wait_serving(
    process: subprocess.Popen[bytes],
    url: str,
    what: str,
    log: Callable[[], str],
    timeout: float = 60.0,
) -> None:
    """Poll ``url`` until it answers 200; fail at once (with the log) if ``process`` exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"{what} exited with {process.returncode}:\n{log()}")
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{what} not serving {url} after {timeout}s:\n{log()}")


#: Ports the kernel never hands out on its own (below Linux's default ephemeral range,
#: 32768-60999): no outgoing connection and no ``bind(0)`` of another process can take one
#: between ``free_port`` and the operator's own bind.
_OWN_PORTS: Sequence[int] = range(20000, 32768)
_handed_out: set[int] = set()
_handing_out = threading.Lock()


def free_port() -> int:
    """A port to give a child process to listen on, not given out before in this run.

    ``bind(0)`` then close is racy: under a dozen operators in parallel, one of their
    outgoing connections took a port between the test's close and the operator's bind
    ("metrics port ...: Address already in use"). Ports from below the ephemeral range are
    only taken by an explicit bind, and this run hands each one out once."""
    with _handing_out:
        for port in random.sample(_OWN_PORTS, len(_OWN_PORTS)):
            if port in _handed_out:
                continue
            _handed_out.add(port)
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:  # someone else's listener
                    continue
            return port
    raise AssertionError(f"no free port in {_OWN_PORTS}")


class OperatorProcess:
    """``orca run`` in a subprocess, with its own metrics/liveness ports and log file."""

    def __init__(
        self,
        kubeconfig: Path | None,
        log_path: Path,
        namespaces: Sequence[str] = (),
        lease_namespace: str = "default",
        lease_name: str = "orca-test",
        extra: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        command: Sequence[str] = (sys.executable, "-m", "controller.cli"),
        metrics_insecure: bool = True,
    ) -> None:
        """``kubeconfig`` None: credentials from ``env`` (in-cluster variables); ``command``
        replaces ``python -m controller.cli`` (e.g. a wrapper that relocates token files).
        ``metrics_insecure``: plain-HTTP ``/metrics`` for ``metrics()`` (the tests' own
        reading of the operator's counters); False: HTTPS with delegated authorization, as
        ``orca run`` serves it by default."""
        self.metrics_port = free_port()
        self.liveness_port = free_port()
        self.log_path = log_path
        args = [
            *command,
            "run",
            *([f"--kubeconfig={kubeconfig}"] if kubeconfig else []),
            f"--metrics-port={self.metrics_port}",
            "--metrics-bind-address=127.0.0.1",  # as the demo: reachable from this machine only
            f"--liveness=http://127.0.0.1:{self.liveness_port}/healthz",
            f"--lease-namespace={lease_namespace}",
            f"--lease-name={lease_name}",
            *[f"--namespace={ns}" for ns in namespaces],
            *(["--metrics-insecure"] if metrics_insecure else []),
            *extra,
        ]
        self._log = open(log_path, "ab")  # noqa: SIM115 (closed in stop/kill)
        self.process = subprocess.Popen(
            args,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=REPO_ROOT,
            env=dict(env) if env is not None else os.environ.copy(),
        )

    def wait_live(self, timeout: float = 60.0) -> None:
        url = f"http://127.0.0.1:{self.liveness_port}/healthz"
        wait_serving(self.process, url, "operator", self.log, timeout)

    def metrics(self) -> dict[str, float]:
        """The ``orca_*`` samples, by full sample name with labels."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics") as r:
            text = r.read().decode()
        samples: dict[str, float] = {}
        for line in text.splitlines():
            if line.startswith("orca_"):
                name, value = line.rsplit(" ", 1)
                samples[name] = float(value)
        return samples

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")[-6000:]

    def stop(self, timeout: float = 20.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        return self.process.returncode

    def kill(self) -> None:
        """SIGKILL: no cleanup, no Lease release, writes in flight are lost mid-air."""
        self.process.kill()
        self.process.wait()
        self._log.close()

    def freeze(self) -> None:
        """SIGSTOP: the process stops mid-step, its sockets stay open (a long GC pause, a
        stalled VM); ``thaw`` resumes it where it was."""
        self.process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        self.process.send_signal(signal.SIGCONT)

    def written(self) -> float:
        """Status writes this process has completed (its own counter)."""
        return self.metrics().get('orca_status_writes_total{outcome="written"}', 0.0)


class Cluster:
    """Nodes and Workloads through kubectl, as an operator of the cluster would do it."""

    def __init__(self, kubectl: KubectlRunner) -> None:
        self.kubectl = kubectl

    def run(self, *args: str, input: str | None = None) -> str:
        return self.kubectl(*args, input=input, check=True).stdout

    def apply(self, *objects: dict[str, Any]) -> None:
        self.run("apply", "-f", "-", input=yaml.safe_dump_all(objects))

    def create(self, *objects: dict[str, Any]) -> None:
        self.run("create", "-f", "-", input=yaml.safe_dump_all(objects))

    def delete_all_nodes(self) -> None:
        self.run("delete", "nodes", "--all", "--wait=false")

    def silence(self, name: str) -> None:
        """Stop kwok's heartbeats for Node ``name`` (``ControlPlane.silence_node``, through
        kubectl): the controller manager marks it Unknown after its grace period."""
        self.run("label", "node", name, f"{SILENT_LABEL}=true", "--overwrite")

    def revive(self, name: str) -> None:
        """Resume kwok's heartbeats for Node ``name``; kwok reports it Ready again."""
        self.run("label", "node", name, f"{SILENT_LABEL}-")

    def set_ready(self, name: str, ready: bool) -> None:
        """Patch Node ``name``'s Ready condition, as a kubelet reports it. ``False`` silences
        the Node first, or kwok (whose Stage initialises any Node that is not Ready) would
        report it Ready again at once; ``True`` resumes its heartbeats afterwards."""
        if not ready:
            self.silence(name)
        status = {"status": {"conditions": [{"type": "Ready", "status": str(ready)}]}}
        self.run(
            "patch", "node", name, "--subresource=status", "--type=merge", "-p", json.dumps(status)
        )
        if ready:
            self.revive(name)

    def workload(self, namespace: str, name: str) -> dict[str, Any]:
        out = self.run("get", "workloads.orca.cloudinit.dev", "-n", namespace, name, "-o", "json")
        result: dict[str, Any] = json.loads(out)
        return result

    def workloads(self, namespace: str) -> list[dict[str, Any]]:
        out = self.run("get", "workloads.orca.cloudinit.dev", "-n", namespace, "-o", "json")
        items: list[dict[str, Any]] = json.loads(out)["items"]
        return items

    def events(self, namespace: str) -> list[dict[str, Any]]:
        out = self.run("get", "events", "-n", namespace, "-o", "json")
        items: list[dict[str, Any]] = json.loads(out)["items"]
        return items

    def nodes(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = json.loads(self.run("get", "nodes", "-o", "json"))["items"]
        return items

    def wait_for_node(
        self,
        name: str,
        predicate: Callable[[dict[str, Any]], bool],
        what: str,
        timeout: float = 60.0,
    ) -> dict[str, Any]:
        """Poll Node ``name`` until ``predicate(node)`` holds; fail with its last taints and
        conditions. Controllers act on their own period (the node lifecycle controller's
        monitor period is 5 s), so a test waits for them rather than expecting them done."""
        held, last = _poll(
            lambda: json.loads(self.run("get", "node", name, "-o", "json")), predicate, timeout
        )
        if not held:
            raise AssertionError(
                f"node {name}: {what} not reached in {timeout}s; taints "
                + json.dumps(last.get("spec", {}).get("taints"))
                + ", conditions "
                + json.dumps(last.get("status", {}).get("conditions"))
            )
        return last

    def wait_for(
        self,
        namespace: str,
        name: str,
        predicate: Callable[[dict[str, Any]], bool],
        timeout: float = 30.0,
        what: str = "condition",
    ) -> dict[str, Any]:
        """Poll until ``predicate(workload)`` holds; fail with the last status seen."""
        held, last = _poll(lambda: self.workload(namespace, name), predicate, timeout)
        if not held:
            raise AssertionError(
                f"{namespace}/{name}: {what} not reached in {timeout}s; status: "
                + json.dumps(last.get("status"), indent=1)
            )
        return last


def _poll(
    read: Callable[[], dict[str, Any]],
    predicate: Callable[[dict[str, Any]], bool],
    timeout: float,
) -> tuple[bool, dict[str, Any]]:
    """``read()`` every 0.25 s until ``predicate`` holds of it or ``timeout`` seconds pass:
    whether it held, and the last object read (for the caller's failure message)."""
    deadline = time.monotonic() + timeout
    last: dict[str, Any] = {}
    while time.monotonic() < deadline:
        last = read()
        if predicate(last):
            return True, last
        time.sleep(0.25)
    return False, last


def placements(obj: dict[str, Any]) -> list[tuple[str, str]]:
    """(allocId, node) of a Workload's status, in order."""
    return [(p["allocId"], p["node"]) for p in (obj.get("status") or {}).get("placements", [])]


def phase(obj: dict[str, Any]) -> str | None:
    return (obj.get("status") or {}).get("phase")


def observed(obj: dict[str, Any]) -> bool:
    """The status describes the current spec."""
    status = obj.get("status") or {}
    return bool(status.get("observedGeneration") == obj["metadata"].get("generation"))


def usage_per_node(workloads: Sequence[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """(millicores, bytes) booked per node by every placement in these Workloads' status, at
    the size the status says its placements hold (else the spec's)."""
    used: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for w in workloads:
        status = w.get("status") or {}
        resources = status.get("resources", w["spec"].get("resources")) or {}
        cpu = quantity_to_int(resources.get("cpu", 0), 1000)
        memory = quantity_to_int(resources.get("memory", 0))
        for p in (w.get("status") or {}).get("placements", []):
            used[p["node"]][0] += cpu
            used[p["node"]][1] += memory
    return {node: (c, m) for node, (c, m) in used.items()}


def reasons(cluster: Cluster, ns: str, name: str) -> list[str]:
    """Reasons of the Events on one Workload, in no particular order."""
    return [e["reason"] for e in cluster.events(ns) if e["involvedObject"]["name"] == name]


def placed(cluster: Cluster, ns: str, name: str, count: int, timeout: float = 30) -> dict[str, Any]:
    return cluster.wait_for(
        ns,
        name,
        lambda w: observed(w) and len(placements(w)) == count and phase(w) is not None,
        timeout,
        what=f"{count} placements",
    )


def orca_explain(plane: ControlPlane, *args: str) -> subprocess.CompletedProcess[str]:
    """``kubectl orca explain`` is the ``kubectl-orca`` console script: the same entry point."""
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", "explain", *args],
        env={**os.environ, "KUBECONFIG": str(plane.kubeconfig_path)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def plain_http(port: int) -> str:
    """What a plain-HTTP request to a TLS port gets: ``closed`` (nothing, or a TLS alert
    record, then the connection closed) or the bytes of an HTTP answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        got = b""
        while chunk := s.recv(4096):
            got += chunk
    if got.startswith(b"HTTP/"):
        return got.decode(errors="replace")
    assert got == b"" or got[0] == 0x15, got[:20]  # 0x15: a TLS alert record
    return "closed"
