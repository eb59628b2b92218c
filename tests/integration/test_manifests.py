"""The install manifests on the real API server (issue 10): what ``kubectl apply -k
manifests/default`` sends is accepted object by object (server-side dry run: admission, schema
and Pod Security included), the CRD is the generated one, and the monitoring overlay fits the
base."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.api.crd import workload_crd
from controller.devcluster.controlplane import KubectlRunner
from tests.support.harness import INSTALL, REPO_ROOT

pytestmark = pytest.mark.controlplane

BASE = INSTALL
MANIFESTS = REPO_ROOT / "manifests"
PROMETHEUS_CRDS = Path(__file__).parent / "fixtures" / "prometheus-operator-crds.yaml"


def render(kubectl: KubectlRunner, path: Path) -> list[dict[str, Any]]:
    out = kubectl("kustomize", str(path), check=True).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def reference(obj: dict[str, Any]) -> str:
    """How kubectl names an object in its output: ``deployment.apps/orca-controller``."""
    group = obj["apiVersion"].rpartition("/")[0]
    return f"{obj['kind'].lower()}{'.' + group if group else ''}/{obj['metadata']['name']}"


def dry_run(kubectl: KubectlRunner, objects: list[dict[str, Any]], path: Path) -> str:
    """``kubectl apply -k path --dry-run=server``; every object accepted, no warning; stdout."""
    # Namespaced objects need their namespace to exist for the dry run: create it for real.
    namespaces = [o for o in objects if o["kind"] == "Namespace"]
    kubectl("apply", "-f", "-", input=yaml.safe_dump_all(namespaces), check=True)
    result = kubectl("apply", "-k", str(path), "--dry-run=server")
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == "", f"warnings from the API server:\n{result.stderr}"
    accepted = {
        line.split()[0] for line in result.stdout.splitlines() if "(server dry run)" in line
    }
    assert {reference(o) for o in objects} <= accepted, result.stdout
    return result.stdout


def test_the_base_installs_the_generated_crd(kubectl: KubectlRunner) -> None:
    crds = [o for o in render(kubectl, BASE) if o["kind"] == "CustomResourceDefinition"]
    assert crds == [workload_crd()]


def test_the_api_server_accepts_every_object_of_the_base(kubectl: KubectlRunner) -> None:
    objects = render(kubectl, BASE)
    assert {o["kind"] for o in objects} == {
        "CustomResourceDefinition",
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Deployment",
        "PodDisruptionBudget",
        "NetworkPolicy",
        "Service",
        "ValidatingWebhookConfiguration",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
    dry_run(kubectl, objects, BASE)


def test_pod_security_restricted_would_flag_a_weaker_pod(
    kubectl: KubectlRunner, tmp_path: Path
) -> None:
    """The dry run's "no warning" means something: the namespace's Pod Security labels do
    warn about a Deployment that escalates privileges (so the shipped one does not)."""
    objects = render(kubectl, BASE)
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["securityContext"]["allowPrivilegeEscalation"] = True
    weaker = tmp_path / "deployment.yaml"
    weaker.write_text(yaml.safe_dump(deployment))
    kubectl(
        "apply",
        "-f",
        "-",
        input=yaml.safe_dump_all([o for o in objects if o["kind"] == "Namespace"]),
        check=True,
    )
    result = kubectl("apply", "-f", str(weaker), "--dry-run=server", check=True)
    assert "would violate PodSecurity" in result.stderr and "allowPrivilegeEscalation" in (
        result.stderr
    )


@pytest.mark.parametrize("overlay", ["with-monitoring", "kube-prometheus-stack"])
def test_the_monitoring_overlay_fits_the_base(kubectl: KubectlRunner, overlay: str) -> None:
    kubectl("apply", "-f", str(PROMETHEUS_CRDS), check=True)
    kubectl(
        "wait",
        "--for=condition=established",
        "crd/servicemonitors.monitoring.coreos.com",
        "crd/prometheusrules.monitoring.coreos.com",
        check=True,
    )
    path = MANIFESTS / overlay
    objects = render(kubectl, path)
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for o in objects:
        by_kind.setdefault(o["kind"], []).append(o)
    # The base is all there, and the ServiceMonitor scrapes the base's metrics Service.
    assert {reference(o) for o in render(kubectl, BASE)} <= {reference(o) for o in objects}
    (monitor,) = by_kind["ServiceMonitor"]
    assert by_kind["PrometheusRule"]
    selector = monitor["spec"]["selector"]["matchLabels"]
    # Exactly the metrics Service (not the webhook's, which carries the app's name too).
    (service,) = [
        s for s in by_kind["Service"] if selector.items() <= s["metadata"]["labels"].items()
    ]
    ports = {p["name"] for p in service["spec"]["ports"]}
    assert {e["port"] for e in monitor["spec"]["endpoints"]} <= ports
    dry_run(kubectl, objects, path)
