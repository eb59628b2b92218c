"""``/scale`` on Workloads, on the real API server with the operator running (issue 29).

The scale subresource maps ``spec.count`` (replicas wanted), ``status.placed`` (replicas
placed) and ``status.selector`` (the replicas' label selector, written by the operator).
``kubectl scale`` on a Service Workload changes its count and the operator places the new
replicas; on a Job or a DaemonSet, which have no count, the CRD's rule refuses it with one
line. A HorizontalPodAutoscaler can target a Service Workload: the API server accepts it and
kube-controller-manager's HPA controller reads its scale (``AbleToScale``); with no metrics
API in this cluster it can go no further, and says so (``ScalingActive`` False).
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.support.factories import node_object, workload_obj
from tests.support.harness import Cluster, OperatorProcess, observed, phase

pytestmark = pytest.mark.controlplane

RESOURCE = "workloads.orca.cloudinit.dev"


def scale_of(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    out = cluster.run("get", RESOURCE, name, "-n", namespace, "--subresource=scale", "-o", "json")
    result: dict[str, Any] = json.loads(out)
    return result


def test_kubectl_scale_a_service_and_the_operator_places_the_replicas(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    cluster.apply(*(node_object(f"s-{i}", cpu="4", memory="8Gi") for i in range(3)))
    # A Service without a count (1 by default) scales too: kubectl patches /scale, which
    # sets spec.count.
    cluster.apply(workload_obj("one", namespace, kind="Service"))
    cluster.run("scale", RESOURCE, "one", "-n", namespace, "--replicas=2")
    assert cluster.workload(namespace, "one")["spec"]["count"] == 2
    cluster.apply(workload_obj("web", namespace, kind="Service", count=2))
    cluster.wait_for(namespace, "web", lambda w: observed(w) and w["status"].get("placed") == 2)
    scale = scale_of(cluster, namespace, "web")
    assert scale["kind"] == "Scale" and scale["spec"]["replicas"] == 2
    assert scale["status"] == {"replicas": 2, "selector": "orca.cloudinit.dev/workload=web"}
    out = cluster.run("scale", RESOURCE, "web", "-n", namespace, "--replicas=5")
    assert "scaled" in out
    wl = cluster.wait_for(
        namespace, "web", lambda w: observed(w) and w["status"].get("placed") == 5
    )
    assert wl["spec"]["count"] == 5 and phase(wl) == "Scheduled"
    assert scale_of(cluster, namespace, "web")["status"]["replicas"] == 5
    # Down again: the highest indexes go.
    cluster.run("scale", RESOURCE, "web", "-n", namespace, "--replicas=1")
    wl = cluster.wait_for(
        namespace, "web", lambda w: observed(w) and w["status"].get("placed") == 1
    )
    assert [p["allocId"] for p in wl["status"]["placements"]] == [f"{namespace}/web-0"]


@pytest.mark.parametrize("kind", ["Job", "DaemonSet"])
def test_scaling_a_job_or_a_daemonset_is_refused_with_one_line(
    cluster: Cluster, namespace: str, kind: str
) -> None:
    name = kind.lower()
    cluster.apply(workload_obj(name, namespace, kind=kind))
    # No count, no scale: the API server answers a read of /scale with its own error
    # (apiextensions-apiserver pkg/registry/customresource/etcd.go, ScaleREST.Get), so an
    # HPA aimed at a Job reports FailedGetScale.
    read = cluster.kubectl("get", RESOURCE, name, "-n", namespace, "--subresource=scale")
    assert read.returncode != 0
    assert 'the spec replicas field ".spec.count" does not exist' in read.stderr
    result = cluster.kubectl("scale", RESOURCE, name, "-n", namespace, "--replicas=3")
    assert result.returncode != 0
    print(f"kubectl scale on a {kind}: {result.stderr.strip()}")
    assert "count is only allowed when kind is Service" in result.stderr
    lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    stored = json.loads(cluster.run("get", RESOURCE, name, "-n", namespace, "-o", "json"))
    assert "count" not in stored["spec"]


def test_scaling_a_gang_below_its_min_count_is_refused_with_one_line(
    cluster: Cluster, namespace: str
) -> None:
    """A gang (all or nothing, at least minCount) scales down to its minCount and no further:
    the API server checks the scaled Workload with the CRD's rules, so an HPA or a ``kubectl
    scale`` cannot leave a gang that could never be placed."""
    cluster.apply(workload_obj("train", namespace, kind="Service", count=4, gang={"minCount": 3}))
    result = cluster.kubectl("scale", RESOURCE, "train", "-n", namespace, "--replicas=2")
    assert result.returncode != 0
    print(f"kubectl scale below minCount: {result.stderr.strip()}")
    assert "gang.minCount must not be more than count" in result.stderr
    lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert cluster.workload(namespace, "train")["spec"]["count"] == 4
    cluster.run("scale", RESOURCE, "train", "-n", namespace, "--replicas=3")
    assert cluster.workload(namespace, "train")["spec"]["count"] == 3


def test_a_horizontal_pod_autoscaler_can_target_a_service_workload(
    cluster: Cluster, namespace: str, operator: OperatorProcess
) -> None:
    cluster.apply(node_object("h-0", cpu="4", memory="8Gi"))
    cluster.apply(workload_obj("api", namespace, kind="Service", count=1))
    cluster.wait_for(namespace, "api", lambda w: observed(w) and bool(w["status"].get("selector")))
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "api", "namespace": namespace},
        "spec": {
            "scaleTargetRef": {
                "apiVersion": "orca.cloudinit.dev/v1alpha1",
                "kind": "Workload",
                "name": "api",
            },
            "minReplicas": 1,
            "maxReplicas": 4,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": 50},
                    },
                }
            ],
        },
    }
    cluster.apply(hpa)  # the API server accepts it
    deadline = time.monotonic() + 90  # the HPA controller syncs every 15 s
    conditions: dict[str, dict[str, Any]] = {}
    while time.monotonic() < deadline:
        got = json.loads(cluster.run("get", "hpa", "api", "-n", namespace, "-o", "json"))
        conditions = {c["type"]: c for c in got.get("status", {}).get("conditions", [])}
        if "AbleToScale" in conditions and "ScalingActive" in conditions:
            break
        time.sleep(1)
    for kind, c in conditions.items():
        print(f"HPA {kind}: {c['status']} {c['reason']}: {c['message']}")
    assert conditions["AbleToScale"]["status"] == "True", conditions
    assert conditions["AbleToScale"]["reason"] == "SucceededGetScale"
    # It read the scale and its selector, then asked for Pod metrics nobody serves here.
    assert conditions["ScalingActive"]["status"] == "False"
    assert conditions["ScalingActive"]["reason"] == "FailedGetResourceMetric"
