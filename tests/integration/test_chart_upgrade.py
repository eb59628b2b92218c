"""The chart's CRD upgrades with the release, on a control plane of its own (the dev cluster's:
etcd, kube-apiserver, kube-controller-manager, kwok): ``helm install`` at today's CRD, a Workload
written with a field that CRD does not have loses it (the API server prunes unknown fields),
``helm upgrade`` to the same chart whose CRD has that new optional field, the Workload written
again keeps it, and ``helm uninstall`` leaves the CRD and the Workloads (``crds.keep``).
Private: Helm must own the CRD, which the session's control plane has from kubectl."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.devcluster.binaries import BinariesNotFound
from controller.devcluster.controlplane import ControlPlane, ControlPlaneError
from tests.packaging.test_chart import CHART, helm

pytestmark = [pytest.mark.controlplane, pytest.mark.timeout(900)]

CRD_NAME = "workloads.orca.cloudinit.dev"
CRD_FILE = "files/workloads.orca.cloudinit.dev.yaml"
NAMESPACE = "orca-system"
#: main before the CRD moved into the chart's templates (its crds/ directory).
OLD_CHART_COMMIT = "24746f774df766e81cc263acd5b4063aebecec1b"
#: The new optional field the next release's CRD has.
NOTE = {"type": "string", "maxLength": 64, "description": "A note (a field added in 0.1.1)."}


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    plane = ControlPlane(tmp_path_factory.mktemp("chart-upgrade"), stop_timeout=10.0)
    problem = None
    try:
        plane.start()
    except (BinariesNotFound, ControlPlaneError) as e:
        problem = str(e)
    if problem is not None:
        pytest.fail(f"cannot start a control plane: {problem}")
    try:
        yield plane
    finally:
        plane.stop()


def next_release(tmp_path: Path) -> Path:
    """The chart as the next release ships it: version 0.1.1, its CRD with ``spec.note``."""
    chart = tmp_path / "orca-controller"
    shutil.copytree(CHART, chart)
    crd = yaml.safe_load((chart / CRD_FILE).read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert "note" not in spec["properties"]
    spec["properties"]["note"] = NOTE
    (chart / CRD_FILE).write_text(yaml.safe_dump(crd, sort_keys=False))
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    meta["version"] = "0.1.1"
    (chart / "Chart.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    return chart


def workload(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "orca.cloudinit.dev/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"kind": "Job", "resources": {"cpu": "1"}, "note": "keep me"},
    }


def test_helm_upgrade_brings_the_new_crd_and_uninstall_keeps_it(
    plane: ControlPlane, tmp_path: Path
) -> None:
    def helm_(*args: str) -> str:
        done = subprocess.run(
            [helm(), *args, "--kubeconfig", str(plane.kubeconfig_path), "-n", NAMESPACE],
            capture_output=True, text=True, check=False, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        print(f"$ helm {' '.join(args)}\n{done.stdout}")
        return done.stdout

    def kubectl(*args: str, input: str | None = None) -> str:
        out = plane.kubectl(*args, input=input, check=True).stdout
        print(f"$ kubectl {' '.join(args)}\n{out}")
        return out

    def schema_has_note() -> bool:
        crd = json.loads(kubectl("get", "crd", CRD_NAME, "-o", "json"))
        spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        return "note" in spec["properties"]

    notes = helm_("install", "orca", str(CHART), "--create-namespace")
    assert "kubectl -n orca-system rollout status deployment/orca-controller" in notes
    assert "the Workload CRD (workloads.orca.cloudinit.dev, short name orcawl)" in notes
    kubectl("wait", "--for=condition=established", f"crd/{CRD_NAME}")
    crd = json.loads(kubectl("get", "crd", CRD_NAME, "-o", "json"))
    assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert crd["metadata"]["annotations"]["meta.helm.sh/release-name"] == "orca"
    assert not schema_has_note()

    # Today's CRD: the API server drops the field it does not know.
    kubectl("create", "--validate=false", "-f", "-", input=json.dumps(workload("before")))
    before = json.loads(kubectl("get", "workload", "before", "-n", "default", "-o", "json"))
    assert "note" not in before["spec"]

    helm_("upgrade", "orca", str(next_release(tmp_path)))
    kubectl("wait", "--for=condition=established", f"crd/{CRD_NAME}")
    assert schema_has_note()
    kubectl("create", "-f", "-", input=json.dumps(workload("after")))
    after = json.loads(kubectl("get", "workload", "after", "-n", "default", "-o", "json"))
    assert after["spec"]["note"] == "keep me"
    assert after["spec"]["kind"] == "Job"

    helm_("uninstall", "orca")
    crd = json.loads(kubectl("get", "crd", CRD_NAME, "-o", "json"))
    assert crd["metadata"]["name"] == CRD_NAME
    names = kubectl("get", "workloads", "-n", "default", "-o", "name").split()
    assert sorted(names) == [
        "workload.orca.cloudinit.dev/after",
        "workload.orca.cloudinit.dev/before",
    ]
    # the operator's objects went with the release
    assert "orca-controller" not in kubectl("get", "deployments", "-n", NAMESPACE, "-o", "name")


def test_a_release_installed_with_crds_dir_upgrades_after_the_documented_adoption(
    plane: ControlPlane, tmp_path: Path
) -> None:
    """docs/upgrading.md: the chart of main before this change (its CRD in ``crds/``, which
    Helm installs without recording it) upgrades to this one once the CRD is marked as the
    release's; without that, Helm refuses the CRD it does not own."""
    plane.kubectl("delete", "crd", CRD_NAME, "--ignore-not-found", "--wait=true", check=True)
    old = tmp_path / "old"
    old.mkdir()
    archive = subprocess.run(
        ["git", "archive", OLD_CHART_COMMIT, "charts/orca-controller"],
        cwd=CHART.parents[1], capture_output=True, check=True,
    ).stdout  # fmt: skip
    subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
    old_chart = old / "charts" / "orca-controller"
    assert (old_chart / "crds" / "workloads.orca.cloudinit.dev.yaml").is_file()

    def helm_(*args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [helm(), *args, "--kubeconfig", str(plane.kubeconfig_path), "-n", "legacy"],
            capture_output=True, text=True, check=False, timeout=300,
        )  # fmt: skip
        assert (done.returncode == 0) == ok, done.stdout + done.stderr
        return done

    helm_("install", "legacy", str(old_chart), "--create-namespace")
    refused = helm_("upgrade", "legacy", str(CHART), ok=False)
    assert "invalid ownership metadata" in refused.stderr, refused.stderr
    kubectl = plane.kubectl
    kubectl("annotate", "crd", CRD_NAME, "meta.helm.sh/release-name=legacy",
            "meta.helm.sh/release-namespace=legacy", check=True)  # fmt: skip
    kubectl("label", "crd", CRD_NAME, "app.kubernetes.io/managed-by=Helm", check=True)
    helm_("upgrade", "legacy", str(CHART))
    crd = json.loads(kubectl("get", "crd", CRD_NAME, "-o", "json", check=True).stdout)
    assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    helm_("uninstall", "legacy")
    kubectl("get", "crd", CRD_NAME, check=True)  # kept
