"""``orca plan --from-cluster`` against a real API server: objects the API server stores but
orca's models refuse still count.

The API server's own validation is looser than orca's in places (a quantity of ``8Ei`` is a
valid Kubernetes quantity; orca bounds them to 2^53 so its int64 arithmetic stays exact), so
these shapes reach a live cluster and the dry run must read them the way the operator does.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from controller.devcluster.controlplane import ControlPlane, KubectlRunner
from tests.support.factories import node_object, workload_obj
from tests.support.harness import REPO_ROOT, Cluster

pytestmark = pytest.mark.controlplane


@pytest.fixture(scope="module")
def installed(kubectl: KubectlRunner) -> None:
    """Only the CRD: the dry run needs no operator (overrides conftest's full install; the
    shared ``cluster`` and ``namespace`` fixtures use this one here)."""
    kubectl("apply", "-k", str(REPO_ROOT / "crds"), check=True)
    kubectl("wait", "--for=condition=established", "crd/workloads.orca.cloudinit.dev", check=True)


def test_unreadable_nodes_and_unparseable_workloads_keep_their_capacity_taken(
    cluster: Cluster, namespace: str, control_plane: ControlPlane, tmp_path: Path
) -> None:
    cluster.apply(node_object("a", cpu="2"), node_object("huge", cpu="8Ei"))
    # Stored by the API server (the CRD's quantity pattern allows 8Ei), refused by the models.
    cluster.apply(
        workload_obj("odd", namespace, kind="Job", resources={"cpu": "1500m", "memory": "8Ei"})
    )
    status = {"placements": [{"node": "a", "allocId": f"{namespace}/odd-0", "score": 1}]}
    cluster.run(
        "patch", "workload", "odd", "-n", namespace, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": status}),
    )  # fmt: skip
    request = tmp_path / "w.yaml"
    request.write_text(
        yaml.safe_dump_all(
            [
                workload_obj("wide", namespace, kind="Job", resources={"cpu": "600m"}),
                workload_obj("narrow", namespace, kind="Job", resources={"cpu": "500m"}),
            ]
        )
    )
    result = subprocess.run(
        [
            sys.executable, "-m", "controller.cli", "plan", "--from-cluster",
            f"--kubeconfig={control_plane.kubeconfig_path}", f"--workloads={request}", "-o", "json",
        ],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=120,
        check=False,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr  # "wide" does not fit
    wide, narrow = json.loads(result.stdout)["results"]
    # a has 2 cpu, 1500m of them booked by odd: 600m does not fit, 500m does; huge takes nothing.
    assert wide["phase"] == "Unschedulable"
    assert narrow["phase"] == "Scheduled"
    assert [p["node"] for p in narrow["placements"]] == ["a"]
    warnings = result.stderr.splitlines()
    assert any(
        line.startswith("warning: Node huge: status.allocatable.cpu") and "not ready" in line
        for line in warnings
    ), result.stderr
    assert any(
        line.startswith(f"warning: Workload {namespace}/odd: spec.resources[memory]")
        and "placements stay booked" in line
        for line in warnings
    ), result.stderr


def test_dry_run_reads_the_clusters_priority_classes_and_plans_preemption(
    cluster: Cluster, namespace: str, control_plane: ControlPlane, tmp_path: Path
) -> None:
    urgent = f"urgent-{namespace}"
    cluster.apply(node_object("a", cpu="2"))
    cluster.apply(workload_obj("low", namespace, kind="Job", resources={"cpu": "2"}))
    status = {
        "placements": [{"node": "a", "allocId": f"{namespace}/low-0", "score": 1}],
        "resources": {"cpu": "2"},
        "priority": 0,
    }
    cluster.run(
        "patch", "workload", "low", "-n", namespace, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": status}),
    )  # fmt: skip
    cluster.apply(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": urgent},
            "value": 100,
        }
    )
    request = tmp_path / "w.yaml"
    request.write_text(
        yaml.safe_dump(
            workload_obj(
                "urgent", namespace, kind="Job", resources={"cpu": "1"}, priorityClassName=urgent
            )
        )
    )
    try:
        result = subprocess.run(
            [
                sys.executable, "-m", "controller.cli", "plan", "--from-cluster",
                f"--kubeconfig={control_plane.kubeconfig_path}", f"--workloads={request}",
                "-o", "json",
            ],
            capture_output=True,
            text=True,
            cwd=REPO_ROOT,
            timeout=120,
            check=False,
        )  # fmt: skip
    finally:
        cluster.run("delete", "priorityclass", urgent)
    assert result.returncode == 0, result.stderr
    (planned,) = json.loads(result.stdout)["results"]
    assert (planned["priority"], [p["node"] for p in planned["placements"]]) == (100, ["a"])
    assert planned["victims"] == [
        {
            "workload": f"{namespace}/low",
            "allocId": f"{namespace}/low-0",
            "node": "a",
            "priority": 0,
        }
    ]
