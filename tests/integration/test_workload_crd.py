"""The Workload CRD on a real API server: schema validation, pruning, status subresource.

The CRD in ``crds/`` is generated from the pydantic models; these tests check that what the
API server makes of it matches DESIGN.md section 2: ``kubectl apply`` rejects bad objects at
once, naming the field, unknown fields never reach storage, and only the ``/status``
subresource can write status (so users cannot fake placement results).
"""

from __future__ import annotations

import copy
import json
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.devcluster.controlplane import KubectlRunner

pytestmark = pytest.mark.controlplane

REPO_ROOT = Path(__file__).resolve().parents[2]

CRD_PATH = REPO_ROOT / "crds" / "workloads.orca.cloudinit.dev.yaml"
CRD_NAME = "workloads.orca.cloudinit.dev"
API_VERSION = "orca.cloudinit.dev/v1alpha1"


def _workload(name: str, namespace: str) -> dict[str, Any]:
    """A Workload that satisfies every static rule of DESIGN.md section 2."""
    return {
        "apiVersion": API_VERSION,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "kind": "Service",
            "count": 3,
            "runtime": {"oneOf": ["wasm"]},
            "resources": {"cpu": "500m", "memory": "256Mi"},
            "constraints": ['"ssd" in node.tags'],
            "affinity": [
                {"target": 'node.kind == "linux"', "weight": 50},
                {"target": "redis", "weight": 100},
            ],
            "strategy": "Spread",
        },
    }


def _apply(
    kubectl: KubectlRunner, obj: dict[str, Any], *extra: str
) -> subprocess.CompletedProcess[str]:
    return kubectl("apply", *extra, "-f", "-", input=yaml.safe_dump(obj))


def _get(kubectl: KubectlRunner, namespace: str, name: str) -> dict[str, Any]:
    out = kubectl("get", "workloads", name, "-n", namespace, "-o", "json", check=True)
    stored: dict[str, Any] = json.loads(out.stdout)
    return stored


@pytest.fixture(scope="module")
def workload_crd(kubectl: KubectlRunner) -> str:
    """Install the checked-in CRD the way a user would and wait until it is Established."""
    if not CRD_PATH.is_file():
        pytest.fail(f"{CRD_PATH} is missing (it is generated from the pydantic models)")
    kubectl("apply", "-f", str(CRD_PATH), check=True)
    kubectl("wait", "--for=condition=Established", f"crd/{CRD_NAME}", "--timeout=60s", check=True)
    return CRD_NAME


@pytest.fixture(scope="module")
def namespace(kubectl: KubectlRunner, workload_crd: str) -> Iterator[str]:
    name = f"wl-{uuid.uuid4().hex[:8]}"
    kubectl("create", "namespace", name, check=True)
    yield name
    # No namespace controller runs, so deletion never completes; do not wait for it.
    kubectl("delete", "namespace", name, "--wait=false")


def test_crd_is_established_with_the_designed_names(
    kubectl: KubectlRunner, workload_crd: str
) -> None:
    crd = json.loads(kubectl("get", "crd", workload_crd, "-o", "json", check=True).stdout)
    spec = crd["spec"]
    assert spec["group"] == "orca.cloudinit.dev"
    assert spec["scope"] == "Namespaced"
    assert spec["names"]["kind"] == "Workload"
    assert spec["names"]["plural"] == "workloads"
    versions = {v["name"]: v for v in spec["versions"]}
    assert versions["v1alpha1"]["served"] and versions["v1alpha1"]["storage"]
    assert "status" in versions["v1alpha1"].get("subresources", {})
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions.get("Established") == "True"


@pytest.mark.parametrize(
    ("case", "mutate", "field", "value"),
    [
        ("unknown kind", lambda s: s.update(kind="Pod"), "spec.kind", '"Pod"'),
        ("negative count", lambda s: s.update(count=-1), "spec.count", "-1"),
        (
            "weight out of range",
            lambda s: s["affinity"][0].update(weight=500),
            "spec.affinity[0].weight",
            "500",
        ),
        (
            "constraint over 1024 characters",
            lambda s: s.update(constraints=['"' + "x" * 1024 + '" != ""']),
            "spec.constraints[0]",
            "1024",
        ),
        (
            "affinity target over 1024 characters",
            lambda s: s["affinity"][0].update(target='"' + "x" * 1024 + '" != ""'),
            "spec.affinity[0].target",
            "1024",
        ),
    ],
)
def test_schema_violations_are_rejected_naming_the_field(
    kubectl: KubectlRunner,
    namespace: str,
    case: str,
    mutate: Callable[[dict[str, Any]], None],
    field: str,
    value: str,
) -> None:
    name = f"bad-{uuid.uuid4().hex[:6]}"
    obj = _workload(name, namespace)
    mutate(obj["spec"])
    result = _apply(kubectl, obj)
    assert result.returncode != 0, f"{case}: accepted:\n{result.stdout}"
    assert "is invalid" in result.stderr, result.stderr
    assert field in result.stderr, result.stderr
    assert value in result.stderr, result.stderr
    missing = kubectl("get", "workloads", name, "-n", namespace)
    assert missing.returncode != 0
    assert "NotFound" in missing.stderr


def test_valid_workload_is_stored_as_sent(kubectl: KubectlRunner, namespace: str) -> None:
    obj = _workload("web", namespace)
    result = _apply(kubectl, obj)
    assert result.returncode == 0, result.stderr
    stored = _get(kubectl, namespace, "web")
    for key, value in obj["spec"].items():
        assert stored["spec"][key] == value, key


def test_unknown_fields_are_refused_by_strict_kubectl_and_pruned_otherwise(
    kubectl: KubectlRunner, namespace: str
) -> None:
    obj = _workload("pruned", namespace)
    obj["spec"]["bogus"] = "x"
    obj["spec"]["resources"]["gpu"] = "1"

    # kubectl defaults to --validate=strict: the server refuses and names the fields.
    strict = _apply(kubectl, obj)
    assert strict.returncode != 0
    assert 'unknown field "spec.bogus"' in strict.stderr, strict.stderr

    # Clients that do not ask for strict validation get the object stored, pruned.
    lenient = _apply(kubectl, obj, "--validate=warn")
    assert lenient.returncode == 0, lenient.stderr
    assert "spec.bogus" in lenient.stderr  # the warning still tells the user
    stored = _get(kubectl, namespace, "pruned")
    assert "bogus" not in stored["spec"]
    assert "gpu" not in stored["spec"]["resources"]
    assert stored["spec"]["resources"] == {"cpu": "500m", "memory": "256Mi"}


def test_status_is_written_only_through_the_status_subresource(
    kubectl: KubectlRunner, namespace: str
) -> None:
    obj = _workload("status-probe", namespace)
    assert _apply(kubectl, obj).returncode == 0
    status = {"status": {"phase": "Scheduled", "desired": 3, "placed": 3}}
    patch = json.dumps(status)

    main = kubectl(
        "patch", "workload", "status-probe", "-n", namespace, "--type=merge", "-p", patch
    )
    assert main.returncode == 0, main.stderr
    assert "phase" not in _get(kubectl, namespace, "status-probe").get("status", {})

    sub = kubectl(
        "patch",
        "workload",
        "status-probe",
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        patch,
    )
    assert sub.returncode == 0, sub.stderr
    stored = _get(kubectl, namespace, "status-probe")
    assert {k: stored["status"].get(k) for k in status["status"]} == status["status"]

    # And a later spec write through the main resource keeps that status.
    changed = copy.deepcopy(obj)
    changed["spec"]["count"] = 4
    assert _apply(kubectl, changed).returncode == 0
    after = _get(kubectl, namespace, "status-probe")
    assert after["spec"]["count"] == 4
    assert after["status"]["phase"] == "Scheduled"
