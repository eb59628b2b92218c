"""Small builders for tests: Nodes and Workloads as the API server returns them, Workloads as
users write them."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import numpy as np

from controller.api.models import Workload
from controller.scheduler.framework import CycleState, Verdict
from controller.scheduler.ledger import Ledger
from controller.scheduler.nodes import NodeInfo, NodeTable, node_info_from_node
from controller.scheduler.scheduler import Scheduler

if TYPE_CHECKING:
    from controller.operator.state import ClusterState

GiB = 1 << 30


#: The clock the unit tests decide at (seconds since the epoch: 2026-12-01T10:00:00Z), so a
#: case's times (a taint's ``timeAdded``, a condition's ``lastTransitionTime``) read relative
#: to it.
NOW = 1_796_119_200.0


def node_object(
    name: str,
    cpu: str = "4",
    memory: str = "8Gi",
    runtimes: tuple[str, ...] = ("docker",),
    tags: tuple[str, ...] = (),
    labels: dict[str, str] | None = None,
    kind: str | None = None,
    ready: bool | str = True,
    cordoned: bool = False,
    taints: list[dict[str, str]] | None = None,
    since: str | None = None,
    allocatable: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A Node object as ``kubectl get node -o json`` would show it. ``ready``: the Ready
    condition's status (True/False or "Unknown"), ``since`` its ``lastTransitionTime``;
    ``allocatable``: resources beside cpu and memory (``pods``, ``nvidia.com/gpu``...)."""
    state = ready if isinstance(ready, str) else ("True" if ready else "False")
    condition = {"type": "Ready", "status": state}
    if since is not None:
        condition["lastTransitionTime"] = since
    all_labels = dict(labels or {})
    all_labels.update({f"runtime.orca.cloudinit.dev/{r}": "true" for r in runtimes})
    all_labels.update({f"tag.orca.cloudinit.dev/{t}": "" for t in tags})
    if kind:
        all_labels["orca.cloudinit.dev/kind"] = kind
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": all_labels},
        "spec": {
            **({"unschedulable": True} if cordoned else {}),
            **({"taints": taints} if taints else {}),
        },
        "status": {
            "allocatable": {"cpu": cpu, "memory": memory, **(allocatable or {})},
            "conditions": [condition],
        },
    }


def node(name: str, **kwargs: Any) -> NodeInfo:
    return node_info_from_node(node_object(name, **kwargs))


def workload(
    name: str = "web",
    namespace: str = "shop",
    status: dict[str, Any] | None = None,
    generation: int = 1,
    **spec: Any,
) -> Workload:
    obj: dict[str, Any] = {
        "apiVersion": "orca.cloudinit.dev/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace, "generation": generation},
        "spec": spec,
    }
    if status is not None:
        obj["status"] = status
    return Workload.model_validate(obj)


def ledger_for(*nodes: NodeInfo) -> Ledger:
    return Ledger(NodeTable(nodes))


def cycle_for(w: Workload, ledger: Ledger) -> CycleState:
    """A prepared scheduling cycle (pre-filters run), as the Scheduler makes one."""
    scheduler = Scheduler()
    cycle = scheduler.snapshot(w, ledger, NOW)
    errors = scheduler.framework.pre_filter(cycle)
    assert not errors, errors
    return cycle


def table_columns(table: NodeTable) -> dict[str, Any]:
    """Everything a node table holds that the scheduler reads, as plain values (to compare
    a table kept up to date with one built anew)."""
    return {
        "nodes": table.nodes,
        "hostnames": table.hostnames,
        "index": table.index,
        "tainted": table.tainted,
        **{
            name: getattr(table, name).tolist()
            for name in (
                "cpu",
                "memory",
                "ready",
                "cordoned",
                "readable",
                "eligible",
                "cpu_divisor",
                "memory_divisor",
            )
        },
    }


def rejected(verdict: Verdict) -> dict[str, list[int]]:
    """reason -> indexes of the nodes a filter rejects for it."""
    return {r.reason: np.flatnonzero(~r.passed).tolist() for r in verdict.rejections}


def stored_workload(
    name: str,
    version: str = "1",
    spec: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
    *,
    uid: str | None = None,
) -> dict[str, Any]:
    """A Workload object as the API server returns it (namespace ``ns``, uid, resourceVersion),
    for tests that feed the operator's state or scheduling loop directly."""
    obj: dict[str, Any] = {
        "apiVersion": "orca.cloudinit.dev/v1alpha1",
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": uid if uid is not None else f"uid-{name}",
            "resourceVersion": version,
            "generation": 1,
        },
        "spec": spec if spec is not None else {"kind": "Job"},
    }
    if status is not None:
        obj["status"] = status
    return obj


def job(
    name: str = "web",
    cpu: str | None = None,
    node: str | None = None,
    *,
    version: str | int = "1",
    uid: str | None = None,
    observed: int | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A Job as the API server returns it (``stored_workload``), asking ``cpu`` when given;
    with ``node``, its one replica placed there as the operator writes it (``observed``: the
    status's ``observedGeneration``, absent unless given). ``spec`` adds to the Workload's
    spec, ``kind`` included."""
    status = None
    if node is not None:
        status = {
            **({"observedGeneration": observed} if observed is not None else {}),
            "phase": "Scheduled",
            "placements": [{"node": node, "allocId": f"ns/{name}-0", "score": 0}],
            "resources": {"cpu": cpu},
        }
    resources = {"resources": {"cpu": cpu}} if cpu is not None else {}
    return stored_workload(
        name, str(version), {"kind": "Job", **resources, **spec}, status, uid=uid
    )


def service(
    name: str,
    count: int,
    cpu: str = "1",
    memory: str = "1Gi",
    *,
    version: str = "1",
    rebalance: str | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A Service of ``count`` replicas of ``cpu``/``memory`` as the API server returns it
    (``stored_workload``), unplaced; ``rebalance`` absent unless given."""
    fields: dict[str, Any] = {
        "kind": "Service",
        "count": count,
        "resources": {"cpu": cpu, "memory": memory},
        **({"rebalance": rebalance} if rebalance is not None else {}),
        **spec,
    }
    return stored_workload(name, version, fields)


def workload_obj(
    name: str,
    namespace: str = "shop",
    placed: dict[int, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A Workload as a user writes it (``kubectl apply``, ``orca plan --workloads``);
    ``placed`` (replica index -> node) becomes its status, as ``kubectl get orcawl -o yaml``
    shows a placed one."""
    obj: dict[str, Any] = {
        "apiVersion": "orca.cloudinit.dev/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
    if placed:
        obj["status"] = {
            "placements": [
                {"node": node, "allocId": f"{namespace}/{name}-{i}", "score": 0}
                for i, node in sorted(placed.items())
            ],
            "resources": spec.get("resources", {}),
        }
    return obj


def free_cpu(state: ClusterState) -> dict[str, int]:
    """Free millicores per node, as the operator's ledger books them now."""
    state.table()
    free = state.ledger.free()[0]
    return {name: int(free[i]) for name, i in state.ledger.table.index.items()}


def admission_review(
    obj: dict[str, Any] | None, api_version: str = "admission.k8s.io/v1", **request: Any
) -> bytes:
    """The body the API server POSTs to the webhook for a CREATE of ``obj`` by alice:
    an AdmissionReview of ``api_version``, ``request`` adding to or replacing its fields."""
    payload = {
        "apiVersion": api_version,
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "kind": {"group": "orca.cloudinit.dev", "version": "v1alpha1", "kind": "Workload"},
            "resource": {
                "group": "orca.cloudinit.dev",
                "version": "v1alpha1",
                "resource": "workloads",
            },
            "operation": "CREATE",
            "userInfo": {"username": "alice"},
            "object": obj,
            **request,
        },
    }
    return json.dumps(payload).encode()
