"""The Helm chart (charts/orca-controller) renders the objects the kustomize tree renders.

Both are rendered the way users render them (``helm template``, ``kubectl kustomize``, the
binaries hack/helm/build.sh and hack/testcp/build.sh build) and compared object by object,
whole: the only difference allowed is Helm's own labels (chart, managed-by, instance, version).
When manifests/ changes (a new object, a flag, a port), this fails until the chart follows.
``helm install`` on a real Node is in tests/integration/test_real_node.py.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.devcluster.binaries import find_bin_dir
from tests.packaging.dockerfile import REPO_ROOT

CHART = REPO_ROOT / "charts" / "orca-controller"
HELM_LABELS = (
    "helm.sh/chart",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
)
MONITORING = (
    "monitoring.serviceMonitor.enabled=true",
    "monitoring.prometheusRule.enabled=true",
    "monitoring.dashboard.enabled=true",
)


def helm() -> str:
    done = subprocess.run(
        ["bash", str(REPO_ROOT / "hack" / "helm" / "build.sh"), "--print-path"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail("helm is not built: bash hack/helm/build.sh")
    return done.stdout.strip().splitlines()[-1]


def run(*args: str) -> str:
    done = subprocess.run(args, capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def objects(text: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    out = {}
    for doc in yaml.safe_load_all(text):
        if not doc:
            continue
        meta = doc["metadata"]
        for label in HELM_LABELS:
            (meta.get("labels") or {}).pop(label, None)
        key = (doc["kind"], meta.get("namespace", ""), meta["name"])
        assert key not in out, f"{key} rendered twice"
        out[key] = doc
    return out


def kustomize(directory: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    kubectl = find_bin_dir() / "kubectl"
    return objects(run(str(kubectl), "kustomize", str(REPO_ROOT / "manifests" / directory)))


def template(*values: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    sets = [arg for value in values for arg in ("--set", value)]
    command = [helm(), "template", "orca", str(CHART), "--namespace", "orca-system"]
    return objects(run(*command, "--include-crds", "--set", "namespace.create=true", *sets))


@pytest.mark.parametrize(
    ("directory", "values"),
    [
        pytest.param("default", (), id="default"),
        pytest.param("with-monitoring", MONITORING, id="with-monitoring"),
    ],
)
def test_the_chart_renders_exactly_what_kustomize_renders(
    directory: str, values: tuple[str, ...]
) -> None:
    want, got = kustomize(directory), template(*values)
    assert sorted(got) == sorted(want)
    for key, obj in want.items():
        assert got[key] == obj, key


def test_the_chart_crd_is_the_generated_one() -> None:
    assert (CHART / "crds" / "workloads.orca.cloudinit.dev.yaml").read_bytes() == (
        REPO_ROOT / "crds" / "workloads.orca.cloudinit.dev.yaml"
    ).read_bytes(), "copy crds/workloads.orca.cloudinit.dev.yaml into the chart's crds/"


def _deployment(*values: str) -> dict[str, Any]:
    return template(*values)[("Deployment", "orca-system", "orca-controller")]


def test_values_reach_the_operator() -> None:
    d = _deployment(
        "image.repository=registry.example/orca",
        "image.digest=sha256:" + "a" * 64,
        "image.pullPolicy=IfNotPresent",
        "replicaCount=3",
        "watchNamespaces={shop,ml}",
        "extraArgs={--rebalance-interval=5m}",
        "resources.limits.memory=1Gi",
    )
    container = d["spec"]["template"]["spec"]["containers"][0]
    assert d["spec"]["replicas"] == 3
    assert container["image"] == "registry.example/orca@sha256:" + "a" * 64
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert container["args"] == [
        "run", "--log-format=json", "--namespace=shop", "--namespace=ml",
        "--rebalance-interval=5m",
    ]  # fmt: skip
    assert container["resources"]["limits"]["memory"] == "1Gi"


def test_leader_election_values_change_the_flag_and_the_role_together() -> None:
    off = template("leaderElection.enabled=false")
    assert ("Role", "orca-system", "orca-controller-leader-election") not in off
    args = off[("Deployment", "orca-system", "orca-controller")]["spec"]["template"]["spec"][
        "containers"
    ][0]["args"]
    assert "--no-leader-elect" in args
    renamed = template("leaderElection.leaseName=orca-b")
    role = renamed[("Role", "orca-system", "orca-controller-leader-election")]
    assert role["rules"][1]["resourceNames"] == ["orca-b"]
    deployment = renamed[("Deployment", "orca-system", "orca-controller")]
    assert "--lease-name=orca-b" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]


def test_monitoring_labels_for_kube_prometheus_stack() -> None:
    got = template(*MONITORING, "monitoring.serviceMonitor.labels.release=kps")
    monitor = got[("ServiceMonitor", "orca-system", "orca-controller")]
    assert monitor["metadata"]["labels"]["release"] == "kps"


def test_helm_lint_is_clean(tmp_path: Path) -> None:
    done = subprocess.run(
        [helm(), "lint", "--strict", str(CHART)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[WARNING]" not in done.stdout and "[ERROR]" not in done.stdout, done.stdout
