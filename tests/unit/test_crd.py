"""The CRD is generated from the models, structural, and checked in without drift."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from controller.api.crd import CRD_NAME, workload_crd, workload_crd_yaml

CHECKED_IN = Path(__file__).resolve().parents[2] / "crds" / f"{CRD_NAME}.yaml"


def test_checked_in_crd_matches_the_models() -> None:
    assert CHECKED_IN.read_text() == workload_crd_yaml(), (
        "crds/ drifted from controller/api/models.py: run `orca crd > " + str(CHECKED_IN) + "`"
    )


def _walk(schema: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    out = [(path, schema)]
    for name, sub in schema.get("properties", {}).items():
        out += _walk(sub, f"{path}.{name}")
    if "items" in schema:
        out += _walk(schema["items"], f"{path}[]")
    return out


def test_schema_is_structural() -> None:
    version = workload_crd()["spec"]["versions"][0]
    root = version["schema"]["openAPIV3Schema"]
    for path, node in _walk(root):
        assert "$ref" not in node and "title" not in node, path
        assert "type" in node or node.get("x-kubernetes-int-or-string"), path
        assert node.get("default", "") is not None, path


def test_api_surface() -> None:
    crd = workload_crd()
    spec = crd["spec"]
    assert (spec["group"], spec["scope"]) == ("orca.cloudinit.dev", "Namespaced")
    assert spec["names"]["shortNames"] == ["wl"]
    version = spec["versions"][0]
    assert version["name"] == "v1alpha1"
    assert version["subresources"] == {"status": {}}
    columns = {c["name"]: c.get("priority", 0) for c in version["additionalPrinterColumns"]}
    assert columns == {
        "Kind": 0,
        "Desired": 0,
        "Placed": 0,
        "Phase": 0,
        "Age": 0,
        "Nodes": 1,
        "Message": 1,
    }
    workload_spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    rules = [v["rule"] for v in workload_spec["x-kubernetes-validations"]]
    assert "self.kind == 'Service' || !has(self.count)" in rules
    assert "self.kind == 'DaemonSet' || !has(self.schedule)" in rules
    assert workload_spec["properties"]["kind"]["enum"] == ["Job", "Service", "DaemonSet"]
    weight = workload_spec["properties"]["affinity"]["items"]["properties"]["weight"]
    assert (weight["minimum"], weight["maximum"]) == (-100, 100)
    assert workload_spec["properties"]["constraints"]["maxItems"] == 16
    assert workload_spec["properties"]["constraints"]["items"]["maxLength"] == 1024


def test_yaml_round_trips() -> None:
    text = workload_crd_yaml()
    assert yaml.safe_load(text) == workload_crd()
