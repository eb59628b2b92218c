"""The Workload CRD on a real API server: schema validation, pruning, status subresource.

The CRD in ``crds/`` is generated from the pydantic models; these tests check that what the
API server makes of it matches docs/design.md section 2: ``kubectl apply`` rejects bad objects at
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
    """A Workload that satisfies every static rule of docs/design.md section 2."""
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
    out = kubectl("get", CRD_NAME, name, "-n", namespace, "-o", "json", check=True)
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
    missing = kubectl("get", CRD_NAME, name, "-n", namespace)
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
    assert stored["spec"]["resources"] == {"cpu": "500m", "memory": "256Mi"}


def test_resources_are_a_map_of_names_the_api_server_checks(
    kubectl: KubectlRunner, namespace: str
) -> None:
    """spec.resources takes any resource by name (not pruned: a map), and refuses, even with
    --validate=warn, a name that is no resource a replica can ask for and a fraction of an
    extended resource, naming the resource."""
    obj = _workload("gpus", namespace)
    obj["spec"]["resources"] = {"cpu": "1", "nvidia.com/gpu": 2, "ephemeral-storage": "10Gi"}
    assert _apply(kubectl, obj).returncode == 0
    assert _get(kubectl, namespace, "gpus")["spec"]["resources"] == obj["spec"]["resources"]
    for name, value, said in (
        ("gpu", "1", "resource 'gpu' is not a resource a replica can ask for"),
        ("nvidia.com/gpu", "500m", "resource 'nvidia.com/gpu' must be a whole number"),
    ):
        bad = _workload(f"bad-{uuid.uuid4().hex[:6]}", namespace)
        bad["spec"]["resources"][name] = value
        refused = _apply(kubectl, bad, "--validate=warn")
        assert refused.returncode != 0
        assert "spec.resources" in refused.stderr and said in refused.stderr, refused.stderr


def test_status_is_written_only_through_the_status_subresource(
    kubectl: KubectlRunner, namespace: str
) -> None:
    obj = _workload("status-probe", namespace)
    assert _apply(kubectl, obj).returncode == 0
    status = {"status": {"phase": "Scheduled", "desired": 3, "placed": 3}}
    patch = json.dumps(status)

    main = kubectl("patch", "orcawl", "status-probe", "-n", namespace, "--type=merge", "-p", patch)
    assert main.returncode == 0, main.stderr
    # Only the CRD's default status: never decided (generation 0, kstatus: InProgress).
    assert _get(kubectl, namespace, "status-probe")["status"] == {"observedGeneration": 0}

    sub = kubectl(
        "patch",
        "orcawl",
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


def test_a_workload_nobody_decided_reads_observed_generation_0(
    kubectl: KubectlRunner, namespace: str
) -> None:
    """The CRD's status default: behind metadata.generation from the start, so kstatus and
    Argo CD say InProgress/Progressing until orca decides (tests/integration/
    test_gitops_health.py asks them); a status sent with the create is dropped."""
    obj = _workload("undecided", namespace)
    obj["status"] = {"observedGeneration": 1, "phase": "Scheduled"}
    assert _apply(kubectl, obj).returncode == 0
    stored = _get(kubectl, namespace, "undecided")
    assert stored["metadata"]["generation"] == 1
    assert stored["status"] == {"observedGeneration": 0}


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("every-node", "'every-node' is now spelled 'EveryNode'"),
        ("matching", "'matching' is now spelled 'Matching'"),
        ("mandatory", "'mandatory' is now spelled 'Mandatory'"),
        ("All", "must be one of EveryNode, Matching, Mandatory"),
    ],
)
def test_a_schedule_mode_of_the_old_spelling_is_refused_naming_the_new_one(
    kubectl: KubectlRunner, namespace: str, mode: str, message: str
) -> None:
    """The rule's message, not an enum's "Unsupported value" (which the API server reports
    instead of running any rule)."""
    name = f"ds-{uuid.uuid4().hex[:6]}"

    def daemonset(mode: str) -> dict[str, Any]:
        return {
            "apiVersion": API_VERSION,
            "kind": "Workload",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"kind": "DaemonSet", "schedule": {"mode": mode}},
        }

    result = _apply(kubectl, daemonset(mode))
    assert result.returncode != 0
    assert f'spec.schedule.mode: Invalid value: "{mode}": {message}' in result.stderr, result.stderr
    accepted = _apply(kubectl, daemonset("Mandatory"))
    assert accepted.returncode == 0, accepted.stderr
    assert _get(kubectl, namespace, name)["spec"]["schedule"] == {"mode": "Mandatory"}


def test_status_phase_is_a_selectable_field(kubectl: KubectlRunner, namespace: str) -> None:
    """``kubectl get orcawl -A --field-selector status.phase=Unschedulable``: the runbooks'
    way to name the Workloads that are stuck, filtered by the API server."""
    phases = {"sel-a": "Unschedulable", "sel-b": "Scheduled", "sel-c": "Unschedulable"}
    for name, value in phases.items():
        assert _apply(kubectl, _workload(name, namespace)).returncode == 0
        patch = json.dumps({"status": {"phase": value}})
        args = ("patch", "orcawl", name, "-n", namespace, "--subresource=status", "--type=merge")
        kubectl(*args, "-p", patch, check=True)
    for scope in (("-A",), ("-n", namespace)):
        out = kubectl(
            "get", "orcawl", *scope, "--field-selector", "status.phase=Unschedulable", "-o",
            "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {end}", check=True,
        )  # fmt: skip
        mine = sorted(k for k in out.stdout.split() if k.startswith(f"{namespace}/sel-"))
        assert mine == [f"{namespace}/sel-a", f"{namespace}/sel-c"]
    # Fields not declared selectable are refused (so the test above did select by phase).
    bad = kubectl("get", "orcawl", "-A", "--field-selector", "spec.kind=Job")
    assert bad.returncode != 0 and "field label not supported: spec.kind" in bad.stderr


def _published(schema: dict[str, Any], path: str = "") -> list[tuple[str, bool]]:
    """(property path, has a description) over an OpenAPI v3 schema the server publishes."""
    out = []
    for name, sub in (schema.get("properties") or {}).items():
        out.append((f"{path}.{name}", bool((sub.get("description") or "").strip())))
        out += _published(sub, f"{path}.{name}")
    items = schema.get("items")
    if isinstance(items, dict):
        out += _published(items, f"{path}[]")
    return out


def test_the_api_explains_itself(kubectl: KubectlRunner, workload_crd: str) -> None:
    """What ``kubectl explain`` reads, the server's OpenAPI v3 document, describes every
    field of spec and status; and the recursive explanation of spec lists them."""
    raw = kubectl("get", "--raw", "/openapi/v3/apis/orca.cloudinit.dev/v1alpha1", check=True)
    schemas = json.loads(raw.stdout)["components"]["schemas"]
    workload = schemas["dev.cloudinit.orca.v1alpha1.Workload"]
    paths = _published(workload["properties"]["spec"], ".spec")
    paths += _published(workload["properties"]["status"], ".status")
    assert len(paths) > 40
    assert [p for p, described in paths if not described] == []
    out = kubectl("explain", f"{workload_crd}.spec", "--recursive", check=True).stdout
    for field in ("affinity", "constraints", "schedule", "mode", "tolerations", "strategy"):
        assert f"  {field}\t<" in out or f"  {field}\t" in out, out
    mode = kubectl("explain", "orcawl.spec.schedule.mode", check=True).stdout
    assert "EveryNode (default)" in mode and "Mandatory" in mode, mode
