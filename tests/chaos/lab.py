"""The chaos suite's bench: one control plane, API clients, operators, and the convergence
wait every scenario ends with (``Lab.converge``).

The control plane is the real one (``controller.devcluster``), started with durable etcd (a
SIGKILLed etcd must come back with what it acknowledged) and an audit log of every write to
Workload status and Events (who wrote what, when: the split-brain scenario's ground truth).
"""

from __future__ import annotations

import json
import random
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from controller.api.models import GROUP, PLURAL, VERSION
from controller.devcluster.controlplane import ControlPlane
from tests.chaos.invariants import Snapshot, Violation, check
from tests.integration.harness import INSTALL, OperatorProcess

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

AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    verbs: [create, update, patch]
    resources:
      - group: orca.cloudinit.dev
        resources: [workloads/status]
      - group: ""
        resources: [events]
  - level: None
"""


def chaos_control_plane(directory: Path) -> ControlPlane:
    """A control plane for fault injection: durable etcd, audited writes."""
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
    )


@dataclass
class Row:
    """One line of figures."""

    scenario: str
    trials: int = 0
    faults: int = 0
    violations: list[Violation] = field(default_factory=list)
    converge: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def line(self) -> str:
        times = sorted(self.converge)
        conv = f"median {statistics.median(times):.1f}s max {times[-1]:.1f}s" if times else "n/a"
        kinds: dict[str, int] = {}
        for v in self.violations:
            kinds[v.kind] = kinds.get(v.kind, 0) + 1
        detail = f" ({', '.join(f'{k}={n}' for k, n in sorted(kinds.items()))})" if kinds else ""
        notes = f"; {'; '.join(self.notes)}" if self.notes else ""
        return (
            f"{self.scenario:<16} trials={self.trials:<3} faults={self.faults:<3} "
            f"violations={len(self.violations)}{detail} converge={conv}{notes}"
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
        # The operators here run with -n, which also needs namespaces (README, RBAC): granted
        # to the shipped ServiceAccount beside the shipped ClusterRole, for the token scenario.
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

    def converge(
        self,
        namespace: str,
        before: Snapshot | None = None,
        timeout: float = 120.0,
        interval: float = 0.5,
        known: set[str] | None = None,
    ) -> tuple[float | None, list[Violation]]:
        """Poll until no invariant is violated (but those in ``known``, already reported);
        return the seconds it took (None: not within ``timeout``) and the violations left."""
        started = time.monotonic()
        while True:
            violations = self.check(namespace, before)
            if all(str(v) in (known or set()) for v in violations):
                return time.monotonic() - started, violations
            if time.monotonic() - started > timeout:
                return None, violations
            time.sleep(interval)

    # -- writing -------------------------------------------------------------------------------

    def namespace(self, prefix: str) -> str:
        name = f"{prefix}-{self.rng.randrange(16**6):06x}"
        retry(lambda: self.core.create_namespace({"metadata": {"name": name}}))
        return name

    def create_nodes(self, objects: Sequence[dict[str, Any]]) -> None:
        for obj in objects:
            retry(lambda obj=obj: self.core.create_node(obj))  # type: ignore[misc]

    def delete_nodes(self, prefix: str) -> None:
        for node in self.nodes():
            name = node["metadata"]["name"]
            if name.startswith(prefix):
                try:
                    retry(lambda name=name: self.core.delete_node(name))  # type: ignore[misc]
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
        retry(
            lambda: self.custom.create_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, body
            )
        )

    def patch_workload(self, namespace: str, name: str, spec: dict[str, Any]) -> None:
        retry(
            lambda: self.custom.patch_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name, {"spec": spec}
            )
        )

    def delete_workload(self, namespace: str, name: str) -> None:
        retry(
            lambda: self.custom.delete_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name
            )
        )

    def delete_workloads(self, namespace: str) -> None:
        for w in self.workloads(namespace):
            try:
                self.delete_workload(namespace, w["metadata"]["name"])
            except ApiException as exc:
                if exc.status != 404:
                    raise

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
    name: str, cpu: str = "4", memory: str = "8Gi", tags: Sequence[str] = ()
) -> dict[str, Any]:
    labels = {"runtime.orca.cloudinit.dev/docker": "true"}
    labels.update({f"tag.orca.cloudinit.dev/{t}": "" for t in tags})
    if "wasm" in tags:
        labels["runtime.orca.cloudinit.dev/wasmtime"] = "true"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {
            "allocatable": {"cpu": cpu, "memory": memory},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
